"""A person sees the clients they authorized and disconnects them."""

from __future__ import annotations

import pytest
from django.test import Client
from oauth2_provider.models import AccessToken, RefreshToken

from apps_registry.selectors import oauth_clients_connected_to
from tests.oauth_helpers import refresh, register_ok, tokens_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_page_lists_each_connected_client_with_its_scopes(browser):
    client_id = register_ok(Client(), client_name="Claude")["client_id"]
    tokens_for(browser, client_id)

    html = browser.get("/oauth/connected/").content.decode()

    assert "Claude" in html
    assert "See your apps and read the data stored in them" in html
    assert "Disconnect Claude" in html


def test_a_client_stays_listed_as_connected_since_the_consent_across_refreshes(browser, user):
    client_id = register_ok(Client(), client_name="Claude")["client_id"]
    tokens = tokens_for(browser, client_id)
    consented = RefreshToken.objects.get(user=user).created
    refresh(Client(), client_id, tokens["refresh_token"])

    (client,) = oauth_clients_connected_to(user)

    assert client.connected_at == consented
    assert client.scopes == [
        "See your apps and read the data stored in them",
        "Add, change and remove data in your apps, and create or edit apps",
    ]


def test_disconnecting_revokes_every_token_the_client_holds(browser, user, other_user):
    client_id = register_ok(Client(), client_name="Claude")["client_id"]
    tokens = tokens_for(browser, client_id)
    other_browser = Client()
    other_browser.force_login(other_user)
    tokens_for(other_browser, client_id)
    application_id = AccessToken.objects.filter(user=user).get().application_id

    response = browser.post(f"/oauth/connected/{application_id}/disconnect/")

    assert response.status_code == 302
    assert not AccessToken.objects.filter(user=user).exists()
    assert not RefreshToken.objects.filter(user=user, revoked__isnull=True).exists()
    assert AccessToken.objects.filter(user=other_user).exists()  # only this person's grant
    assert refresh(Client(), client_id, tokens["refresh_token"]).status_code == 400
    assert "No client is connected" in browser.get("/oauth/connected/").content.decode()


def test_the_pages_need_a_signed_in_person(client):
    assert client.get("/oauth/connected/").status_code == 302
    assert client.post("/oauth/connected/1/disconnect/").status_code == 302


def test_the_connect_page_links_to_the_connected_clients_and_keeps_its_title_plain(browser):
    html = browser.get("/connect/").content.decode()

    assert "<title>Connect an agent · Charming</title>" in html
    assert 'href="/oauth/connected/"' in html
