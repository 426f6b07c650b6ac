"""/mcp accepts OAuth access tokens for its resource, bound to the token's user, and refuses the rest."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken

from apps_registry.services.tokens import token_create
from mcp_tools.auth import Caller, sdk_user_for
from mcp_tools.registry import TOOLS
from tests.factories import UserFactory, make_app
from tests.mcp_tools.conftest import MODES, mcp_client, run
from tests.mcp_tools.test_endpoint import HEADERS_2026, LIST_2026, post
from tests.oauth_helpers import register_ok, tokens_for


@pytest.fixture
def alice_oauth(live):
    user = UserFactory(username="alice")
    browser = Client()
    browser.force_login(user)
    client_id = register_ok(Client())["client_id"]

    def issue(**kwargs):
        return tokens_for(browser, client_id, **kwargs)

    issue.user = user  # type: ignore[attr-defined]
    issue.client_id = client_id  # type: ignore[attr-defined]
    return issue


def _refusal(live, token: str) -> dict:
    response = post(live.mcp_url, LIST_2026, {**HEADERS_2026, "Authorization": f"Bearer {token}"})
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer resource_metadata="') and 'error="invalid_token"' in challenge
    assert token not in response.text
    return response.json()


@pytest.mark.parametrize("mode", MODES)
def test_an_oauth_token_calls_tools_as_its_user(live, alice_oauth, mode):
    make_app(owner=alice_oauth.user, name="Alice's budget")
    make_app(owner=UserFactory(username="bob"), name="Bob's budget")
    token = alice_oauth()["access_token"]

    async def go():
        async with mcp_client(live, token, mode) as client:
            return await client.call_tool("list_apps", {})

    result = run(go())

    assert result.is_error is not True
    assert [app["name"] for app in result.structured_content["value"]] == ["Alice's budget"]


@pytest.mark.parametrize("mode", MODES)
def test_an_oauth_token_lists_every_tool_but_a_personal_token_keeps_its_chosen_scopes(live, alice_oauth, mode):
    oauth_token = alice_oauth(scope="apps:read apps:write")["access_token"]
    personal_token = token_create(user=alice_oauth.user, name="no deletion", scopes=["apps:read", "apps:write"])

    async def listed(token: str) -> list[str]:
        async with mcp_client(live, token, mode) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert run(listed(oauth_token)) == [tool.name for tool in TOOLS]
    assert run(listed(personal_token.plaintext)) == [tool.name for tool in TOOLS if tool.name != "delete_app"]


def test_a_token_for_another_resource_is_refused(live, alice_oauth):
    token = alice_oauth(resource="http://127.0.0.1:8000/api/")["access_token"]

    body = _refusal(live, token)

    assert body["error"] == "invalid_token"
    assert body["error_description"] == (
        "Token issued for another resource: it is valid for http://127.0.0.1:8000/api/, not "
        "http://127.0.0.1:8000/mcp. Request a token with resource=http://127.0.0.1:8000/mcp."
    )


def test_a_token_for_the_site_root_is_refused_although_mcp_lies_under_it(live, alice_oauth):
    token = alice_oauth(resource="http://127.0.0.1:8000")["access_token"]

    assert _refusal(live, token)["error_description"] == (
        "Token issued for another resource: it is valid for http://127.0.0.1:8000, not "
        "http://127.0.0.1:8000/mcp. Request a token with resource=http://127.0.0.1:8000/mcp."
    )


def test_a_client_naming_no_resource_gets_a_token_for_mcp(live, alice_oauth):
    token = alice_oauth(resource=None)["access_token"]

    response = post(live.mcp_url, LIST_2026, {**HEADERS_2026, "Authorization": f"Bearer {token}"})

    assert response.status_code == 200, response.text
    assert AccessToken.objects.get(user=alice_oauth.user).resource == ["http://127.0.0.1:8000/mcp"]


def test_a_token_with_no_audience_is_refused(live, alice_oauth):
    token = alice_oauth()["access_token"]
    AccessToken.objects.filter(user=alice_oauth.user).update(resource=[])  # issued before audiences were set

    assert _refusal(live, token)["error_description"] == (
        "Token issued for another resource: it is valid for no resource in particular, not "
        "http://127.0.0.1:8000/mcp. Request a token with resource=http://127.0.0.1:8000/mcp."
    )


def test_an_expired_token_is_refused(live, alice_oauth):
    token = alice_oauth()["access_token"]
    AccessToken.objects.filter(user=alice_oauth.user).update(expires=timezone.now() - timedelta(seconds=1))

    assert _refusal(live, token)["error_description"].startswith("Expired token: this access token expired at ")


def test_a_revoked_token_is_refused(live, alice_oauth):
    tokens = alice_oauth()
    Client().post(
        "/oauth/revoke/",
        {"token": tokens["access_token"], "client_id": alice_oauth.client_id},
    )

    assert _refusal(live, tokens["access_token"])["error_description"].startswith("Unknown token: no such access token")


def test_a_registration_access_token_grants_nothing(live):
    registered = register_ok(Client())

    body = _refusal(live, registered["registration_access_token"])

    assert body["error_description"] == (
        "Not a user's access token: it acts for no user (e.g. a client registration token), so it grants no access."
    )


def test_the_callers_scopes_and_client_reach_the_sdk_identity():
    caller = Caller(
        user=type("U", (), {"pk": 7})(), token_id=3, scopes=frozenset({"apps:read"}), client_id="c1", kind="oauth"
    )

    access = sdk_user_for(caller).access_token

    assert (access.client_id, access.scopes, access.subject, access.token) == ("c1", ["apps:read"], "7", "oauth:3")
