"""The REST API accepts OAuth access tokens beside personal tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken
from rest_framework.test import APIRequestFactory

from apps_registry.authentication import OAuthTokenAuthentication
from tests.factories import make_app
from tests.oauth_helpers import register_ok, tokens_for

pytestmark = pytest.mark.django_db

API_RESOURCE = "http://127.0.0.1:8000/api/"


@pytest.fixture
def oauth_token(user):
    browser = Client()
    browser.force_login(user)
    client_id = register_ok(Client())["client_id"]
    return lambda **kwargs: tokens_for(browser, client_id, **kwargs)["access_token"]


def test_an_oauth_token_for_the_api_lists_the_users_apps(client, user, oauth_token):
    make_app(owner=user, name="Budget")

    response = client.get("/api/apps/", HTTP_AUTHORIZATION=f"Bearer {oauth_token(resource=API_RESOURCE)}")

    assert response.status_code == 200, response.content
    assert [app["name"] for app in response.json()["value"]] == ["Budget"]


def test_an_oauth_token_for_the_mcp_endpoint_is_refused_by_the_api(client, oauth_token):
    response = client.get("/api/apps/", HTTP_AUTHORIZATION=f"Bearer {oauth_token()}")

    assert response.status_code == 401
    assert "Token issued for another resource" in response.json()["error"]["message"]


def test_an_expired_oauth_token_is_refused_by_the_api(client, user, oauth_token):
    token = oauth_token(resource=API_RESOURCE)
    AccessToken.objects.filter(user=user).update(expires=timezone.now() - timedelta(seconds=1))

    response = client.get("/api/apps/", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 401
    assert "Expired token" in response.json()["error"]["message"]


def test_the_oauth_authentication_steps_aside_without_a_bearer_token_or_for_a_personal_one():
    factory = APIRequestFactory()
    authentication = OAuthTokenAuthentication()

    assert authentication.authenticate(factory.get("/api/apps/")) is None
    assert authentication.authenticate(factory.get("/api/apps/", HTTP_AUTHORIZATION="Bearer chm_ab_cd")) is None


def test_the_tokens_scopes_sit_on_the_request(user, oauth_token):
    from rest_framework.request import Request

    request = Request(
        APIRequestFactory().get("/api/apps/", HTTP_AUTHORIZATION=f"Bearer {oauth_token(resource=API_RESOURCE)}")
    )

    authenticated_user, access = OAuthTokenAuthentication().authenticate(request)

    assert authenticated_user == user
    assert request.auth_scopes == frozenset({"apps:read", "apps:write"})
    assert access.scopes == request.auth_scopes


def test_an_oauth_token_is_looked_up_in_one_unordered_query(oauth_token):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps_registry.services.oauth import oauth_token_authenticate

    token = oauth_token(resource=API_RESOURCE)
    with CaptureQueriesContext(connection) as lookup:
        access = oauth_token_authenticate(plaintext=token, resource=API_RESOURCE)
    assert access.user.is_active
    assert len(lookup.captured_queries) == 1
    assert "ORDER BY" not in lookup.captured_queries[0]["sql"]
