"""Dynamic Client Registration (RFC 7591) for anonymous public clients, and Client ID Metadata Documents."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from django.core.cache import cache
from django.test import Client
from oauth2_provider import cimd
from oauth2_provider.models import Application

from apps_registry.oauth.cimd import PolicyMetadataFetcher
from apps_registry.oauth.policy import redirect_uri_problem
from tests.oauth_helpers import REDIRECT_URI, consent_page, register, register_ok

pytestmark = pytest.mark.django_db

CIMD_URL = "https://client.example/oauth/metadata.json"


def test_a_public_client_registers_anonymously_and_gets_no_secret(client):
    registered = register_ok(client)

    assert registered["token_endpoint_auth_method"] == "none"
    assert registered["redirect_uris"] == [REDIRECT_URI]
    assert registered["client_name"] == "Test host"
    assert "client_secret" not in registered
    application = Application.objects.get(client_id=registered["client_id"])
    assert application.client_type == "public"
    assert application.user is None


def _advertised_auth_methods() -> list[str]:
    return Client().get("/.well-known/oauth-authorization-server").json()["token_endpoint_auth_methods_supported"]


@pytest.mark.parametrize("method", ["none", "client_secret_basic", "client_secret_post"])
def test_every_advertised_auth_method_registers_with_a_complete_answer(client, method):
    assert method in _advertised_auth_methods()

    registered = register_ok(client, token_endpoint_auth_method=method, scope="apps:read apps:write")

    application = Application.objects.get(client_id=registered["client_id"])
    assert registered["token_endpoint_auth_method"] == method
    assert registered["response_types"] == ["code"]
    assert registered["grant_types"] == ["authorization_code", "refresh_token"]
    assert registered["scope"] == "apps:read apps:write apps:delete"
    assert registered["redirect_uris"] == [REDIRECT_URI]
    assert registered["client_name"] == "Test host"
    assert registered["client_id_issued_at"] == int(application.charming_registration.created_at.timestamp())
    assert registered["registration_client_uri"].endswith(f"/oauth/register/{registered['client_id']}/")
    if method == "none":
        assert application.client_type == "public"
        assert "client_secret" not in registered and "client_secret_expires_at" not in registered
    else:
        assert application.client_type == "confidential"
        assert registered["client_secret_expires_at"] == 0
        assert len(registered["client_secret"]) >= 32
        # Stored hashed: the registration response is the only place the secret is ever seen.
        assert registered["client_secret"] not in application.client_secret


def test_a_registration_naming_no_auth_method_is_a_confidential_client_using_client_secret_basic(client):
    """RFC 7591 section 2: token_endpoint_auth_method defaults to client_secret_basic."""
    registered = register_ok(client, token_endpoint_auth_method=None)

    assert registered["token_endpoint_auth_method"] == "client_secret_basic"
    assert registered["client_secret"]
    assert Application.objects.get(client_id=registered["client_id"]).client_type == "confidential"


def test_an_auth_method_the_metadata_does_not_advertise_is_refused_naming_those_it_does(client):
    response = register(client, token_endpoint_auth_method="private_key_jwt")

    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "token_endpoint_auth_method 'private_key_jwt' is not supported; use one of none, "
        'client_secret_basic, client_secret_post ("none" for a public client, which PKCE protects; a secret '
        "method for a confidential one).",
    }
    assert not Application.objects.exists()


def test_a_scope_that_is_not_a_string_is_refused(client):
    response = register(client, scope=["apps:read"])

    assert response.status_code == 400
    assert response.json()["error_description"] == (
        'scope must be a space-separated string, e.g. "apps:read apps:write".'
    )


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_the_client_secret_is_never_shown_again_after_registration(client, method):
    registered = register_ok(client, token_endpoint_auth_method=method)
    management = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}
    url = f"/oauth/register/{registered['client_id']}/"

    read = client.get(url, **management)
    updated = client.put(
        url, data=json.dumps({"redirect_uris": [REDIRECT_URI]}), content_type="application/json", **management
    )

    assert read.status_code == 200 and updated.status_code == 200, updated.content
    for answer in (read, updated):
        assert registered["client_secret"] not in answer.content.decode()
        assert "client_secret" not in answer.json()
        assert answer.json()["token_endpoint_auth_method"] == method
        assert answer.json()["response_types"] == ["code"]
    assert Application.objects.get(client_id=registered["client_id"]).client_type == "confidential"


def test_an_update_keeps_the_registered_auth_method_and_refuses_to_change_it(client):
    registered = register_ok(client)
    management = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}
    url = f"/oauth/register/{registered['client_id']}/"

    kept = client.put(
        url, data=json.dumps({"redirect_uris": [REDIRECT_URI]}), content_type="application/json", **management
    )
    changed = client.put(
        url,
        data=json.dumps({"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "client_secret_post"}),
        content_type="application/json",
        **management,
    )

    assert kept.status_code == 200 and kept.json()["token_endpoint_auth_method"] == "none"
    assert changed.status_code == 400
    assert changed.json()["error_description"] == (
        "token_endpoint_auth_method cannot change from 'none' to 'client_secret_post' after registration: "
        "register a new client instead."
    )
    assert Application.objects.get(client_id=registered["client_id"]).client_type == "public"


def test_an_implicit_or_password_grant_is_refused(client):
    response = register(client, grant_types=["implicit"])

    assert response.status_code == 400
    assert "grant_types ['implicit'] are not supported" in response.json()["error_description"]


def test_registration_with_a_non_loopback_http_redirect_is_refused(client):
    response = register(client, redirect_uris=["http://attacker.example/callback"])

    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_redirect_uri",
        "error_description": "redirect URI 'http://attacker.example/callback' uses plain http on a non-loopback "
        "host; use https, or http on 127.0.0.1, [::1] or localhost for a native app.",
    }
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "http://127.0.0.1:33418/callback",
        "http://[::1]:6274/oauth/callback",
        "http://localhost:6274/oauth/callback/debug",
    ],
)
def test_https_and_loopback_http_redirects_are_accepted(uri):
    assert redirect_uri_problem(uri) is None


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("http://192.168.1.5/cb", "plain http on a non-loopback host"),
        ("http://127.0.0.1.attacker.example/cb", "plain http on a non-loopback host"),
        ("javascript:alert(1)", "has scheme 'javascript'"),
        ("com.example.app:/cb", "has scheme 'com.example.app'"),
        ("https://client.example/cb#frag", "must not contain a fragment"),
        ("https://user@client.example/cb", "must not contain user information"),
    ],
)
def test_other_redirects_are_refused_with_the_reason(uri, problem):
    assert problem in (redirect_uri_problem(uri) or "")


def test_no_redirect_uri_is_refused(client):
    response = register(client, redirect_uris=[])

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"


def test_registrations_are_limited_per_client_address(settings):
    settings.CHARMING_OAUTH_REGISTRATIONS_PER_HOUR = 2
    first, second = Client(REMOTE_ADDR="203.0.113.7"), Client(REMOTE_ADDR="203.0.113.8")
    register_ok(first)
    register_ok(first)

    refused = register(first)

    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert "Too many client registrations from this address" in refused.json()["error_description"]
    assert refused["Retry-After"] == "3600"
    register_ok(second)


def test_an_update_through_the_management_endpoint_meets_the_same_policy(client):
    registered = register_ok(client)

    response = client.put(
        f"/oauth/register/{registered['client_id']}/",
        data='{"redirect_uris": ["http://attacker.example/cb"], "token_endpoint_auth_method": "none"}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {registered['registration_access_token']}",
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    assert Application.objects.get(client_id=registered["client_id"]).redirect_uris == REDIRECT_URI


class StubFetcher(PolicyMetadataFetcher):
    """The document a client publishes at CIMD_URL, without the network."""

    document: ClassVar[dict[str, Any]] = {}

    def document_fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        return dict(self.document), 300


@pytest.fixture
def cimd_document(settings):
    cache.clear()  # DOT backs off a URL that failed, in the cache
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_FETCHER": "tests.apps_registry.test_oauth_registration.StubFetcher",
    }
    StubFetcher.document = {
        "client_id": CIMD_URL,
        "client_name": "Metadata client",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }
    yield StubFetcher.document
    cache.clear()


@pytest.fixture
def browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_a_client_id_metadata_document_registers_its_client_on_first_use(browser, cimd_document):
    page = consent_page(browser, CIMD_URL)

    assert page.status_code == 200, page.content
    assert "Metadata client" in page.content.decode()
    assert CIMD_URL in page.content.decode()
    application = Application.objects.get(client_id=CIMD_URL)
    assert application.registration_source == "cimd"
    assert application.client_type == "public"


def test_a_metadata_document_naming_a_non_loopback_http_redirect_is_refused(browser, cimd_document):
    cimd_document["redirect_uris"] = ["http://attacker.example/callback"]

    page = consent_page(browser, CIMD_URL, redirect_uri="http://attacker.example/callback")

    assert page.status_code == 400
    assert "Location" not in page
    assert not Application.objects.filter(client_id=CIMD_URL).exists()


def test_a_metadata_document_claiming_another_client_id_is_refused(browser, cimd_document):
    cimd_document["client_id"] = "https://other.example/metadata.json"

    page = consent_page(browser, CIMD_URL)

    assert page.status_code == 400
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    ("client_id", "reason"),
    [
        ("https://127.0.0.1/metadata.json", "non-public address"),
        ("https://10.0.0.8/metadata.json", "non-public address"),
        ("http://client.example/metadata.json", "must use the https scheme"),
    ],
)
def test_metadata_documents_are_never_fetched_from_private_addresses_or_over_http(client_id, reason):
    with pytest.raises(cimd.CIMDError, match=reason):
        PolicyMetadataFetcher().fetch(client_id)
