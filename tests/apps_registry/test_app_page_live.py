"""Live app pages: the changes counter every write of an app's records moves, the poll an open page makes (one
read, an empty 204 when nothing changed), and the page fetch a poll triggers (it leaves a one-time result)."""

from __future__ import annotations

import re

import pytest
from django.core import signing
from django.urls import reverse

from apps_registry.exceptions import OperationFailed
from apps_registry.models import Record
from apps_registry.pages.live import LIVE_TOKEN_SALT
from apps_registry.selectors import records_changes_of
from apps_registry.services.apps import app_delete
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example, run

pytestmark = pytest.mark.django_db


@pytest.fixture
def todo(user):
    app = app_definition_save(actor=user, definition=example("todo"))
    run(user, app, "add_todo", {"title": "Buy milk"})
    return app


def changes(app) -> int:
    value = records_changes_of(app_id=app.id)
    assert value is not None
    return value


def todo_id(title: str) -> str:
    return Record.objects.get(collection="todos", data__title=title).record_id


def live_url(client, app) -> tuple[str, int]:
    html = client.get(reverse("app_page", args=[app.id])).content.decode()
    found = re.search(r'data-live-url="([^"]+)" data-live-changes="(\d+)"', html)
    assert found is not None, "the app page names no live URL"
    return found.group(1).replace("&amp;", "&"), int(found.group(2))


def test_every_mutation_that_writes_moves_the_counter_once_and_queries_do_not(user, todo):
    start = changes(todo)
    run(user, todo, "complete_todo", {"id": todo_id("Buy milk")})  # an update: no record added or deleted
    assert changes(todo) == start + 1
    run(user, todo, "add_todo", {"title": "Call mum"})
    run(user, todo, "delete_todo", {"id": todo_id("Call mum")})
    assert changes(todo) == start + 3
    run(user, todo, "open_todos", {}, kind="query")
    run(user, todo, "progress", {}, kind="query")
    assert changes(todo) == start + 3


def test_a_mutation_that_fails_leaves_the_counter_as_it_was(user, todo):
    start = changes(todo)
    with pytest.raises(OperationFailed):
        run(user, todo, "complete_todo", {"id": "no-such-todo"})
    assert changes(todo) == start


def test_a_poll_with_nothing_changed_is_an_empty_204_from_one_read(client, user, todo, django_assert_num_queries):
    client.force_login(user)
    url, drawn = live_url(client, todo)
    client.logout()  # the signed token is the poll's whole authority: no session or user lookup
    with django_assert_num_queries(1):
        response = client.get(f"{url}&since={drawn}")
    assert response.status_code == 204
    assert response.content == b""
    assert "no-store" in response["Cache-Control"]


def test_a_poll_after_a_write_from_elsewhere_answers_the_new_counter(client, user, todo):
    client.force_login(user)
    url, drawn = live_url(client, todo)
    run(user, todo, "add_todo", {"title": "Water plants"})  # as an agent over MCP or a REST client would
    response = client.get(f"{url}&since={drawn}")
    assert response.status_code == 200
    assert response.json() == {"changes": drawn + 1}
    assert client.get(f"{url}&since={drawn + 1}").status_code == 204


def test_a_poll_is_refused_with_what_to_do_for_a_bad_token_another_apps_token_or_a_bad_counter(client, user, todo):
    other = app_definition_save(actor=user, definition=example("chores"))
    path = reverse("app_changes", args=[todo.id])
    forged = client.get(path, {"t": "abc", "since": 0})
    assert forged.status_code == 403
    assert forged.json() == {"error": "This link to follow an app's changes is not valid: reload the app's page."}
    foreign = signing.dumps({"a": str(other.id), "u": str(user.pk)}, salt=LIVE_TOKEN_SALT)
    response = client.get(path, {"t": foreign, "since": 0})
    assert response.status_code == 403
    assert "another app" in response.json()["error"]
    token = signing.dumps({"a": str(todo.id), "u": str(user.pk)}, salt=LIVE_TOKEN_SALT)
    for since in ("", "-1", "1.5", "9" * 20):
        response = client.get(path, {"t": token, "since": since})
        assert response.status_code == 400, since
        assert response.json()["error"].startswith("since must be the changes counter")


def test_a_poll_for_a_deleted_app_says_so(client, user, todo):
    token = signing.dumps({"a": str(todo.id), "u": str(user.pk)}, salt=LIVE_TOKEN_SALT)
    app_delete(actor=user, app_id=todo.id, purge_storage=False, confirmed_via="web")
    response = client.get(reverse("app_changes", args=[todo.id]), {"t": token, "since": 0})
    assert response.status_code == 404
    assert response.json() == {"error": "This app no longer exists."}


def test_a_live_refresh_leaves_an_actions_result_to_the_page_it_was_for(client, user, todo):
    client.force_login(user)
    page = reverse("app_page", args=[todo.id])
    client.post(
        reverse("app_route_submit", args=[todo.id, "add_todo"]), {"title": "Post letter", "_place": "action-add_todo"}
    )
    refreshed = client.get(page, headers={"X-Charming-Live": "1"}).content.decode()
    assert "Post letter" in refreshed
    assert "done" not in re.sub(r"<[^>]+>", "", refreshed).split("Add todo", 1)[-1][:200]
    assert "Add todo: done" in client.get(page).content.decode()


def test_the_page_marks_the_parts_a_live_refresh_swaps(client, user, todo):
    client.force_login(user)
    html = client.get(reverse("app_page", args=[todo.id])).content.decode()
    for part in ('id="view-open_todos-result" data-live-part', 'id="recent-live" data-live-part', 'id="records"'):
        assert part in html, part
    assert 'src="/static/charming/live.js"' in html


@pytest.fixture(scope="module")
def live_asgi(django_db_setup, django_db_blocker):
    """The service as charming/asgi.py composes it (polls answered before Django), served by uvicorn."""
    from django.core.asgi import get_asgi_application

    from apps_registry.pages.live import LiveChangesASGI
    from mcp_tools.asgi import application_build
    from mcp_tools.database import db
    from tests.mcp_tools.conftest import live_server_running

    with live_server_running(application_build(LiveChangesASGI(get_asgi_application(), run_db=db))) as server:
        yield server


@pytest.mark.django_db(transaction=True)
def test_under_uvicorn_a_poll_is_answered_before_django_with_the_same_answers(live_asgi, user, todo):
    import http.client
    from urllib.parse import urlsplit

    token = signing.dumps({"a": str(todo.id), "u": str(user.pk)}, salt=LIVE_TOKEN_SALT)
    base = f"/apps/{todo.id}/changes/?t={token}"
    address = urlsplit(live_asgi.base_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)

    def get(path: str) -> tuple[int, bytes, dict[str, str]]:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}

    drawn = changes(todo)
    status, body, headers = get(f"{base}&since={drawn}")
    assert (status, body) == (204, b"")
    assert "no-store" in headers["cache-control"]
    assert "x-frame-options" not in headers  # Django's middleware did not see it
    run(user, todo, "add_todo", {"title": "Water plants"})
    status, body, headers = get(f"{base}&since={drawn}")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body == b'{"changes": %d}' % (drawn + 1)
    status, body, _ = get(f"/apps/{todo.id}/changes/?t=forged&since=0")
    assert status == 403
    assert body == b'{"error": "This link to follow an app\'s changes is not valid: reload the app\'s page."}'
    status, body, _ = get(f"{base}&since=x")
    assert status == 400
    # every other URL still goes to Django
    connection.request("GET", f"/apps/{todo.id}/")
    response = connection.getresponse()
    response.read()
    assert response.status == 302  # to the login page: not signed in
    assert response.getheader("X-Frame-Options") == "DENY"


def test_a_poll_before_django_during_a_database_outage_is_a_503_to_retry(user):
    import asyncio
    import uuid

    from django.db import OperationalError

    from apps_registry.pages.live import LiveChangesASGI

    async def outage(*args, **kwargs):
        raise OperationalError("connection refused")

    async def inner(scope, receive, send):
        raise AssertionError("a poll went to Django")

    app_id = uuid.uuid4()
    token = signing.dumps({"a": str(app_id), "u": str(user.pk)}, salt=LIVE_TOKEN_SALT)
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": f"/apps/{app_id}/changes/",
        "query_string": f"t={token}&since=3".encode(),
    }
    asyncio.run(LiveChangesASGI(inner, run_db=outage)(scope, None, send))
    start, body = sent
    assert start["status"] == 503
    assert (b"retry-after", b"5") in start["headers"]
    assert body["body"] == b'{"error": "The database is unavailable; try again shortly."}'
