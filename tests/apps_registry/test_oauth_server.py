"""The authorization server: metadata, authorization code + PKCE, rotated refresh tokens, resources."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.shortcuts import resolve_url
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, RefreshToken

from tests.oauth_helpers import (
    REDIRECT_URI,
    authorize,
    basic_auth,
    consent_page,
    exchange,
    mcp_resource,
    refresh,
    register_ok,
    tokens_for,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


@pytest.fixture
def client_id() -> str:
    return register_ok(Client())["client_id"]


def test_authorization_server_metadata_describes_the_flow_clients_must_use(client):
    response = client.get("/.well-known/oauth-authorization-server")

    assert response.status_code == 200
    metadata = response.json()
    base = "http://127.0.0.1:8000"
    assert metadata["issuer"] == base
    assert metadata["authorization_endpoint"] == f"{base}/oauth/authorize/"
    assert metadata["token_endpoint"] == f"{base}/oauth/token/"
    assert metadata["registration_endpoint"] == f"{base}/oauth/register/"
    assert metadata["revocation_endpoint"] == f"{base}/oauth/revoke/"
    assert metadata["scopes_supported"] == ["apps:delete", "apps:read", "apps:write"]
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["client_id_metadata_document_supported"] is True


def test_issuer_follows_the_public_url_not_the_host_header(client, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": "https://charming.example.com"}

    metadata = client.get("/.well-known/oauth-authorization-server", HTTP_HOST="localhost").json()

    assert metadata["issuer"] == "https://charming.example.com"
    assert metadata["token_endpoint"] == "https://charming.example.com/oauth/token/"


def test_protected_resource_metadata_names_this_server_and_the_scopes(client):
    metadata = client.get("/.well-known/oauth-protected-resource/mcp").json()

    assert metadata["resource"] == "http://127.0.0.1:8000/mcp"
    assert metadata["authorization_servers"] == ["http://127.0.0.1:8000"]
    assert metadata["scopes_supported"] == ["apps:read", "apps:write", "apps:delete"]
    assert metadata["bearer_methods_supported"] == ["header"]


def test_the_consent_page_names_the_client_its_redirect_and_each_scope_in_plain_words(browser, client_id):
    page = consent_page(browser, client_id)

    html = page.content.decode()
    assert page.status_code == 200
    assert "Test host" in html
    assert REDIRECT_URI in html
    assert "See your apps and read the data stored in them" in html
    assert "Add, change and remove data in your apps" in html
    assert "Delete your apps" not in html


def test_the_consent_page_says_plainly_when_it_grants_deletion(browser, client_id):
    without = consent_page(browser, client_id).content.decode()
    page = consent_page(browser, client_id, scope="apps:read apps:write apps:delete").content.decode()
    stepped_up = " ".join(page.split())

    assert 'id="grants-deletion"' not in without
    assert "Delete your apps" in stepped_up
    assert "This grants deletion:" in stepped_up
    assert "Test host will be able to delete your apps permanently, with the data stored in them." in stepped_up
    assert "A deleted app cannot be restored." in stepped_up


def test_the_consent_page_lets_its_form_redirect_to_the_clients_registered_origin_only(browser, client_id):
    page = consent_page(browser, client_id)
    refused = browser.get("/oauth/authorize/", {"client_id": client_id, "redirect_uri": "http://127.0.0.1:9/elsewhere"})

    redirect = urlsplit(REDIRECT_URI)
    policy = page["Content-Security-Policy"]
    assert f"form-action 'self' {redirect.scheme}://{redirect.netloc}" in policy
    assert "form-action 'self';" in refused["Content-Security-Policy"] + ";"
    assert "127.0.0.1:9" not in refused["Content-Security-Policy"]
    assert "form-action 'self';" in browser.get("/connect/")["Content-Security-Policy"] + ";"


def test_approving_redirects_with_a_code_the_state_and_the_issuer(browser, client_id):
    authorization = authorize(browser, client_id)

    assert authorization.redirect.startswith(REDIRECT_URI + "?")
    assert authorization.code
    assert authorization.iss == "http://127.0.0.1:8000"


def test_denying_redirects_with_access_denied_and_no_code(browser, client_id):
    authorization = authorize(browser, client_id, allow=False)

    query = parse_qs(urlsplit(authorization.redirect).query)
    assert query["error"] == ["access_denied"]
    assert "code" not in query
    assert query["iss"] == ["http://127.0.0.1:8000"]


def test_an_unknown_scope_redirects_with_invalid_scope_and_the_issuer_once(browser, client_id):
    query = _redirected_error(consent_page(browser, client_id, scope="apps:everything"))

    assert query["error"] == ["invalid_scope"]
    assert query["iss"] == ["http://127.0.0.1:8000"]


def test_the_code_exchanges_for_tokens_bound_to_the_requested_resource(browser, client_id, user):
    tokens = tokens_for(browser, client_id)

    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "apps:read apps:write"
    assert tokens["expires_in"] == 3600
    token = AccessToken.objects.get(user=user)
    assert token.resource == [mcp_resource()]
    assert token.token == ""  # stored only as a checksum


def _redirected_error(response) -> dict[str, list[str]]:
    assert response.status_code == 302, response.content
    assert response["Location"].startswith(REDIRECT_URI + "?")
    return parse_qs(urlsplit(response["Location"]).query)


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_a_confidential_client_exchanges_its_code_with_its_secret_and_not_without(browser, method):
    registered = register_ok(Client(), token_endpoint_auth_method=method)
    client_id, secret = registered["client_id"], registered["client_secret"]

    def with_secret(value: str) -> dict:
        if method == "client_secret_basic":
            return {"headers": basic_auth(client_id, value)}
        return {"client_secret": value}

    refused = [
        exchange(Client(), client_id, authorize(browser, client_id)),
        exchange(Client(), client_id, authorize(browser, client_id), **with_secret(secret + "x")),
    ]
    accepted = exchange(Client(), client_id, authorize(browser, client_id), **with_secret(secret))

    for response in refused:
        assert response.status_code == 401, response.content
        assert response.json()["error"] == "invalid_client"
        assert secret not in response.content.decode()
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["scope"] == "apps:read apps:write"
    assert secret not in accepted.content.decode()


def test_pkce_is_required(browser, client_id):
    query = _redirected_error(consent_page(browser, client_id, code_challenge=None, code_challenge_method=None))

    assert "code" not in query
    assert query["error"] == ["invalid_request"]
    assert "code challenge required" in query["error_description"][0].lower()
    assert query["iss"] == ["http://127.0.0.1:8000"]  # RFC 9207: error responses name the issuer too


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
        ({"code_challenge": "a" * 50, "code_challenge_method": "plain"}, "invalid_request"),
        ({"scope": "apps:everything"}, "invalid_scope"),
        ({"response_type": "token"}, "unauthorized_client"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
    ],
)
def test_every_error_redirect_of_the_authorization_endpoint_names_the_issuer_once(browser, client_id, overrides, error):
    """RFC 9207 section 2: iss on every authorization response, errors included."""
    query = _redirected_error(consent_page(browser, client_id, **overrides))

    assert query["error"] == [error]
    assert query["iss"] == ["http://127.0.0.1:8000"]
    assert query["state"] == ["st-1"]


def test_a_person_not_signed_in_asked_with_prompt_none_is_redirected_with_login_required_and_the_issuer(client_id):
    query = _redirected_error(consent_page(Client(), client_id, prompt="none"))

    assert query["error"] == ["login_required"]
    assert query["iss"] == ["http://127.0.0.1:8000"]


def test_plain_pkce_is_refused(browser, client_id):
    query = _redirected_error(consent_page(browser, client_id, code_challenge="a" * 50, code_challenge_method="plain"))

    assert "code" not in query
    assert query["error"] == ["invalid_request"]


def test_a_wrong_pkce_verifier_is_refused(browser, client_id):
    authorization = authorize(browser, client_id)
    authorization.verifier = "x" * 64

    response = exchange(Client(), client_id, authorization)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_a_reused_authorization_code_is_refused(browser, client_id):
    authorization = authorize(browser, client_id)
    assert exchange(Client(), client_id, authorization).status_code == 200

    response = exchange(Client(), client_id, authorization)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_replaying_a_code_revokes_the_tokens_its_first_exchange_bought(browser, client_id, user):
    authorization = authorize(browser, client_id)
    first = exchange(Client(), client_id, authorization).json()

    assert exchange(Client(), client_id, authorization).status_code == 400

    assert not AccessToken.objects.filter(user=user).exists()
    assert refresh(Client(), client_id, first["refresh_token"]).json()["error"] == "invalid_grant"


def test_replaying_a_code_leaves_the_users_other_grants_alone(browser, client_id, user):
    kept = tokens_for(browser, client_id)
    authorization = authorize(browser, client_id)
    assert exchange(Client(), client_id, authorization).status_code == 200

    exchange(Client(), client_id, authorization)

    assert refresh(Client(), client_id, kept["refresh_token"]).status_code == 200


def test_a_redirect_uri_that_was_not_registered_is_refused_without_redirecting(browser, client_id):
    page = consent_page(browser, client_id, redirect_uri="http://127.0.0.1:9999/elsewhere")

    assert page.status_code == 400
    assert "Location" not in page
    assert "redirect" in page.content.decode().lower()


def test_a_code_exchanged_with_another_redirect_uri_is_refused(browser, client_id):
    authorization = authorize(browser, client_id)

    response = exchange(Client(), client_id, authorization, redirect_uri="http://127.0.0.1:33418/other")

    assert response.status_code == 400
    assert response.json()["error"] in {"invalid_grant", "invalid_request"}


def test_a_resource_this_server_does_not_serve_is_refused_before_consent_by_redirect(browser, client_id):
    # RFC 8707 section 2: invalid_target, answered to the client (its redirect URI is registered) so it learns why.
    query = _redirected_error(consent_page(browser, client_id, resource="https://other.example/mcp"))

    assert query["error"] == ["invalid_target"]
    assert "The resource 'https://other.example/mcp' is not served here" in query["error_description"][0]
    assert query["state"] == ["st-1"]
    assert query["iss"] == ["http://127.0.0.1:8000"]
    assert "code" not in query


def test_a_foreign_resource_with_an_unregistered_redirect_uri_is_refused_without_redirecting(browser, client_id):
    page = consent_page(
        browser, client_id, resource="https://other.example/mcp", redirect_uri="http://127.0.0.1:9999/elsewhere"
    )

    assert page.status_code == 400
    assert "Location" not in page


def test_a_resource_smuggled_into_the_consent_form_is_refused(browser, client_id):
    page = consent_page(browser, client_id)
    data = {name: value for name, value in page.context["form"].initial.items() if value is not None}

    response = browser.post("/oauth/authorize/", {**data, "resource": "https://other.example/mcp", "allow": "on"})

    assert response.status_code == 400
    assert "invalid_target" in response.content.decode()


def test_a_token_request_for_a_foreign_resource_is_refused_even_without_one_in_the_grant(browser, client_id):
    authorization = authorize(browser, client_id, resource=None)

    response = exchange(Client(), client_id, authorization, resource="https://other.example/mcp")

    assert response.status_code == 400
    assert json.loads(response.content)["error"] == "invalid_target"
    assert "is not served here" in json.loads(response.content)["error_description"]


def test_a_token_request_cannot_widen_the_granted_resource(browser, client_id):
    authorization = authorize(browser, client_id)

    response = exchange(Client(), client_id, authorization, resource="http://127.0.0.1:8000/api/")

    assert response.status_code == 400
    assert json.loads(response.content)["error"] == "invalid_target"  # DOT labels this error text/html


def test_asking_for_no_scope_grants_read_only(browser, client_id):
    assert tokens_for(browser, client_id, scope=None)["scope"] == "apps:read"


def test_the_token_and_registration_endpoints_answer_browser_preflights(client):
    for path in ("/oauth/token/", "/oauth/register/", "/oauth/revoke/"):
        response = client.options(path, HTTP_ORIGIN="http://localhost:6274")
        assert response.status_code == 204
        assert response["Access-Control-Allow-Origin"] == "*"


def test_refreshing_rotates_the_refresh_token_and_keeps_the_resource(browser, client_id, user):
    first = tokens_for(browser, client_id)

    response = refresh(Client(), client_id, first["refresh_token"])

    assert response.status_code == 200, response.content
    second = response.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    assert AccessToken.objects.get(user=user).resource == [mcp_resource()]


def test_reusing_a_rotated_refresh_token_revokes_the_whole_grant(browser, client_id, user):
    first = tokens_for(browser, client_id)
    second = refresh(Client(), client_id, first["refresh_token"]).json()

    replay = refresh(Client(), client_id, first["refresh_token"])

    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert not AccessToken.objects.filter(user=user).exists()
    assert not RefreshToken.objects.filter(user=user, revoked__isnull=True).exists()
    assert refresh(Client(), client_id, second["refresh_token"]).status_code == 400


def test_the_refresh_token_dies_after_its_lifetime(browser, client_id, user, settings):
    tokens = tokens_for(browser, client_id)
    AccessToken.objects.filter(user=user).update(
        expires=timezone.now() - timedelta(seconds=settings.CHARMING_OAUTH_REFRESH_TOKEN_SECONDS + 1)
    )

    assert refresh(Client(), client_id, tokens["refresh_token"]).status_code == 400


def test_revoking_a_refresh_token_at_the_revocation_endpoint_ends_the_grant(browser, client_id, user):
    tokens = tokens_for(browser, client_id)

    response = Client().post(
        "/oauth/revoke/", {"token": tokens["refresh_token"], "token_type_hint": "refresh_token", "client_id": client_id}
    )

    assert response.status_code == 200
    assert not AccessToken.objects.filter(user=user).exists()


def test_the_token_endpoint_refuses_an_unknown_client(browser, client_id):
    authorization = authorize(browser, client_id)

    response = exchange(Client(), "not-a-client", authorization)

    assert response.status_code == 401
    assert json.loads(response.content)["error"] == "invalid_client"


def test_a_person_who_is_not_signed_in_is_sent_to_sign_in_first(client, client_id, settings):
    response = consent_page(client, client_id)

    assert response.status_code == 302
    assert response["Location"].startswith(resolve_url(settings.LOGIN_URL) + "?next=/oauth/authorize/")
