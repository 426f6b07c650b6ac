from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from apps_registry.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def isolated_base_dir(settings, tmp_path):
    (tmp_path / "var").mkdir()
    settings.BASE_DIR = tmp_path


def run_demo_setup(capsys) -> dict[str, str]:
    call_command("demo_setup", "--base-url", "http://127.0.0.1:9999")
    out = capsys.readouterr().out
    lines = dict(line.strip().split(" : ", 1) for line in out.splitlines() if " : " in line)
    return {key.strip(): value for key, value in lines.items()}


def test_demo_setup_prints_working_credentials_and_is_idempotent(capsys):
    first = run_demo_setup(capsys)
    second = run_demo_setup(capsys)
    assert first["MCP endpoint"] == "http://127.0.0.1:9999/mcp"
    assert first["Demo token"] == second["Demo token"]
    assert ApiToken.objects.filter(user__username="demo").count() == 1
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {second['Demo token']}")
    listed = client.get("/api/apps/")
    assert listed.status_code == 200
    assert [app["name"] for app in listed.json()["value"]] == ["Budget"]
    staff_user, password = second["Staff login"].split(" / ")
    assert get_user_model().objects.get(username=staff_user).check_password(password)


def test_demo_setup_prints_a_sign_in_url_and_a_password_that_logs_in_on_the_site(capsys, client):
    first = run_demo_setup(capsys)
    second = run_demo_setup(capsys)
    assert first["Sign in"] == second["Sign in"]
    url, _, credentials = second["Sign in"].partition(" as ")
    assert url == "http://127.0.0.1:9999/accounts/login/"
    username, password = credentials.split(" / ")
    response = client.post("/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302 and response["Location"] == "/"
    assert "Budget" in client.get("/").content.decode()


def test_demo_setup_issues_a_new_token_when_the_saved_one_was_revoked(capsys):
    first = run_demo_setup(capsys)
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    second = run_demo_setup(capsys)
    assert second["Demo token"] != first["Demo token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {first['Demo token']}")
    refused = client.get("/api/apps/")
    assert refused.status_code == 401 and refused.json()["error"]["message"].startswith("Revoked token")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {second['Demo token']}")
    assert client.get("/api/apps/").status_code == 200


def test_demo_setup_loads_the_budget_example_once_and_reuses_it(capsys):
    from apps_registry.models import App, Route
    from apps_registry.services.routes import route_run

    first = run_demo_setup(capsys)
    app = App.objects.get(pk=first["Budget app"])
    assert app.owner.username == "demo" and app.name == "Budget"
    route_run(actor=app.owner, app_id=app.id, op="set_budget", params={"limit": 50}, kind="mutation")
    second = run_demo_setup(capsys)
    assert second["Budget app"] == first["Budget app"]
    assert App.objects.filter(owner__username="demo").count() == 1
    assert Route.objects.filter(app=app, name="add_expense").exists()
    value = route_run(actor=app.owner, app_id=app.id, op="summary", params={}, kind="query").value
    assert value["limit"] == 50.0


def test_demo_setup_never_takes_over_an_existing_account(capsys):
    from django.core.management import CommandError

    real = get_user_model().objects.create_user(username="staff", password="their-own-password")
    with pytest.raises(CommandError, match="A user named 'staff' already exists and was not created by demo_setup"):
        call_command("demo_setup")
    real.refresh_from_db()
    assert real.check_password("their-own-password") and not real.is_staff
    assert not ApiToken.objects.exists()


def test_demo_setup_refuses_to_say_ready_when_the_port_to_listen_on_is_taken(capsys):
    import socket

    from django.core.management.base import CommandError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError) as refused:
            call_command("demo_setup", "--base-url", f"http://127.0.0.1:{port}", "--listen", f"127.0.0.1:{port}")
    assert str(refused.value) == (
        f"Port {port} on 127.0.0.1 is already in use (another server: an earlier `make run`?), so Charming would not "
        f"start. Stop that server, or choose another port: make run PORT={port + 1} "
        "(HOST sets the address to listen on)."
    )
    assert "Charming is ready" not in capsys.readouterr().out
    assert not get_user_model().objects.filter(username="demo").exists()  # nothing set up either
    # once the port is free again, the same command says it is ready
    call_command("demo_setup", "--base-url", f"http://127.0.0.1:{port}", "--listen", f"127.0.0.1:{port}")
    assert "Charming is ready." in capsys.readouterr().out


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        ("8000", "--listen must be HOST:PORT with a port from 1 to 65535, got '8000'."),
        ("127.0.0.1:0", "--listen must be HOST:PORT with a port from 1 to 65535, got '127.0.0.1:0'."),
        ("no-such-host.invalid:8000", "HOST=no-such-host.invalid is not an address this machine can listen on"),
    ],
)
def test_demo_setup_names_what_to_fix_in_a_bad_listen_address(listen, message):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as refused:
        call_command("demo_setup", "--listen", listen)
    assert str(refused.value).startswith(message)
