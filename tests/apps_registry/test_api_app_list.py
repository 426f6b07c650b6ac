"""GET /api/apps/ pages like list_apps: `next_cursor` goes back as `?cursor=`; a bad cursor is a 400."""

from __future__ import annotations

from apps_registry import selectors
from tests.apps_registry.test_api_sharing import client_for
from tests.factories import make_app


def test_the_app_list_pages_with_a_cursor_in_the_query_string(user, monkeypatch):
    monkeypatch.setattr(selectors, "APP_PAGE_SIZE", 2)
    for name in ("c", "a", "e", "b", "d"):
        make_app(owner=user, name=name)
    api = client_for(user)
    names, cursor = [], None
    for _ in range(5):
        body = api.get("/api/apps/", {} if cursor is None else {"cursor": cursor}).json()
        names += [app["name"] for app in body["value"]]
        cursor = body.get("next_cursor")
        if cursor is None:
            break
    assert names == ["a", "b", "c", "d", "e"]


def test_the_app_list_refuses_an_altered_cursor_with_400(user, monkeypatch):
    monkeypatch.setattr(selectors, "APP_PAGE_SIZE", 1)
    make_app(owner=user, name="a")
    make_app(owner=user, name="b")
    api = client_for(user)
    cursor = api.get("/api/apps/").json()["next_cursor"]
    response = api.get("/api/apps/", {"cursor": cursor + "x"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["kind"] == "invalid_input" and error["message"].startswith("The cursor given to list_apps")
