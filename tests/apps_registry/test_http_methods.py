"""Every method on every URL: an unsupported one is 405 with an Allow header, never a 500 (issue 22).

The URL patterns are read from the URLconf itself, so an endpoint added later is walked too."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.apps_registry.route_helpers import one_route_app

pytestmark = pytest.mark.django_db

# Django's test client sends any method; PROPFIND stands for one no view knows.
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"]
# A route parameter's value in the walked URLs, by name (any other parameter gets "1").
PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


def url_patterns(patterns=None, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    """(route, pattern) for every pattern of the URLconf, includes flattened."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from url_patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def filled(route: str, values: dict[str, str]) -> str:
    return "/" + PARAMETER.sub(lambda m: values.get(m.group(1), "1"), route)


@pytest.fixture
def values(user):
    app = one_route_app(user, [{"return": "1"}], kind="query")
    return {"app_id": str(app.id), "op": "r", "username": user.username, "collection": "items"}


def api_endpoints(values: dict[str, str]) -> list[tuple[str, type]]:
    found = [(filled(route, values), p.callback.cls) for route, p in url_patterns() if route.startswith("api/")]
    assert len(found) >= 12, found  # the walk reached the API's patterns
    return found


def handles(view_class: type, method: str) -> bool:
    name = method.lower()
    if name == "head":
        name = "get"  # Django serves HEAD with the view's get
    return name in view_class.http_method_names and hasattr(view_class, name)


def test_every_api_endpoint_answers_every_unsupported_method_405_with_allow_and_the_envelope(api, values, caplog):
    walked = 0
    with caplog.at_level(logging.ERROR):
        for url, view_class in api_endpoints(values):
            # In Django's order of methods, as DRF lists them in Allow.
            allowed = [name.upper() for name in view_class.http_method_names if handles(view_class, name)]
            for method in METHODS:
                response = api.generic(method, url, data="{}", content_type="application/json")
                assert response.status_code < 500, (method, url, response.content[:300])
                if method in allowed:
                    continue
                walked += 1
                assert response.status_code == 405, (method, url, response.status_code)
                assert response["Allow"] == ", ".join(allowed), (method, url)
                if method == "HEAD":
                    continue  # a HEAD response has no body
                assert response.json() == {
                    "ok": False,
                    "error": {
                        "kind": "method_not_allowed",
                        "message": f"{method} is not allowed on this endpoint; it takes {', '.join(allowed)}.",
                    },
                }
    assert walked >= 40
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_patch_on_the_invitations_list_is_405_not_an_internal_error(api):
    response = api.patch("/api/invitations/", {}, format="json")

    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD, OPTIONS"
    assert response.json()["error"] == {
        "kind": "method_not_allowed",
        "message": "PATCH is not allowed on this endpoint; it takes GET, HEAD, OPTIONS.",
    }


def test_an_unsupported_method_without_a_credential_is_still_refused_cleanly(values):
    for url, _view_class in api_endpoints(values):
        response = Client().generic("PATCH", url)
        assert response.status_code in (401, 405), (url, response.status_code)
        assert response.json()["ok"] is False


def test_every_api_view_declares_a_need_for_each_method_it_handles(values):
    for url, view_class in api_endpoints(values):
        if hasattr(view_class, "need_for"):
            continue
        needs = view_class.scope_needs
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if handles(view_class, method):
                assert method in needs, f"{view_class.__name__} handles {method} but declares no need ({url})"


@pytest.mark.parametrize("signed_in", [True, False], ids=["signed-in", "anonymous"])
def test_no_page_answers_any_method_with_a_500(client, user, staff, values, signed_in, caplog):
    """Every non-API URL (pages, OAuth, the staff console) with every method: 4xx at worst, and a 405 names what
    is allowed. Signed-in runs as staff, so the console's views are reached, not only its log-in redirect."""
    routes = [(route, p) for route, p in url_patterns() if not route.startswith("api/")]
    assert len(routes) > 30
    with caplog.at_level(logging.ERROR):
        for route, _pattern in routes:
            if "logout" in route or "delete" in route:
                continue  # would end the session or the account the walk signs in with
            url = filled(route, values)
            for method in METHODS:
                # Signing in is a session write of its own: only when the session is not the account this URL is
                # walked as (the first, a switch between staff and user, or a request that ended the session).
                account = staff if route.startswith("admin/") else user
                if signed_in and client.session.get("_auth_user_id") != str(account.pk):
                    client.force_login(account)
                response = client.generic(method, url)
                assert response.status_code < 500, (method, url, response.status_code)
                if response.status_code == 405:
                    assert response.has_header("Allow"), (method, url)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("url", ["/", "/connect/token/"])
@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "TRACE", "PROPFIND"])
def test_the_pages_that_took_any_method_refuse_the_ones_they_do_not_serve(client, user, url, method):
    client.force_login(user)

    response = client.generic(method, url)

    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
