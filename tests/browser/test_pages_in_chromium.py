"""People's pages in Debian's Chromium: sign up, log in and out, connect an agent with a personal token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from django.conf import settings
from playwright.sync_api import expect

from apps_registry.models import ApiToken
from apps_registry.services.accounts import account_create
from apps_registry.services.tokens import token_create
from tests.browser.conftest import ARTIFACTS, confirm_email
from tests.factories import make_app

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
PHONE = {"width": 390, "height": 844}


def sign_in(page, username: str, password: str = PASSWORD) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]:has-text('Log in')")


def api_status(base_url: str, token: str) -> int:
    request = urllib.request.Request(f"{base_url}/api/apps/", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            json.load(response)
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_person_signs_up_logs_out_and_logs_back_in(page):
    page.goto("/")
    expect(page.locator("h1")).to_contain_text("Small apps of your own")
    page.click("main >> text=Sign up")
    page.fill("#id_username", "dana")
    page.fill("#id_email", "dana@example.com")
    page.fill("#id_password1", "password")
    page.fill("#id_password2", "password")
    page.click("button[type=submit]")
    expect(page.locator(".field-errors")).to_contain_text("This password is too common.")

    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator(".message.success")).to_contain_text("Welcome, dana!")
    expect(page.locator("h1")).to_have_text("My apps")
    expect(page.locator("main")).to_contain_text("You have no apps yet.")
    # Until the mailed link is opened, every page says what to do.
    expect(page.locator("#email-unconfirmed")).to_contain_text("Check your e-mail: confirm dana@example.com")
    page.click("#email-unconfirmed a")
    expect(page.locator("#email-pending")).to_contain_text("We sent a link to dana@example.com")
    confirm_email(page, "dana@example.com")
    expect(page.locator(".message.success")).to_contain_text("dana@example.com is confirmed for your account dana")
    expect(page.locator("#email-unconfirmed")).to_have_count(0)

    page.click("button:has-text('Log out')")
    expect(page.locator("h1")).to_contain_text("Small apps of your own")
    expect(page.locator("nav")).not_to_contain_text("dana")

    sign_in(page, "dana", "not the password")
    expect(page.locator(".errors")).to_contain_text("Please enter a correct username and password.")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]:has-text('Log in')")
    expect(page.locator("h1")).to_have_text("My apps")
    expect(page.locator("nav")).to_contain_text("dana")


def confirmed_person(username: str):
    """A person who signed up and opened the link mailed to them."""
    from apps_registry.services.email_confirmation import email_confirm, email_confirmation_token

    user = account_create(username=username, email=f"{username}@example.com", password=PASSWORD)
    email_confirm(token=email_confirmation_token(user=user))
    return user


def test_a_person_creates_a_token_sees_it_once_uses_it_and_revokes_it(page, live_server):
    carol = confirmed_person("carol")
    make_app(owner=carol, name="Budget")
    page.goto("/connect/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/connect/")
    page.fill("#id_username", "carol")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]:has-text('Log in')")
    expect(page.locator("h1")).to_have_text("Connect an agent")
    expect(page.locator("#mcp-url")).to_have_text(f"{settings.CHARMING_PUBLIC_URL}/mcp")
    expect(page.locator("main")).to_contain_text("claude mcp add --transport http charming")

    page.fill("#id_name", "laptop – Claude Code")
    page.fill("#id_expires_days", "30")
    expect(page.locator("#new-token")).to_contain_text("Delete your apps (apps:delete)")
    page.uncheck("input[name='scopes'][value='apps:delete']")  # an agent that must never delete
    page.click("button:has-text('Create token')")
    expect(page.locator("h1")).to_have_text("Your new token")
    secret = page.locator("#token-secret").inner_text()
    assert secret.startswith("chm_")
    expect(page.locator("main")).to_contain_text(f'--header "Authorization: Bearer {secret}"')
    assert api_status(live_server.url, secret) == 200

    page.reload()
    expect(page.locator("h1")).to_have_text("Connect an agent")
    expect(page.locator(".message")).to_contain_text("shown only once")
    assert secret not in page.content()
    row = page.locator("tr.token", has_text="laptop – Claude Code")
    expect(row).to_contain_text(secret[: len("chm_") + 8] + "…")
    expect(row.locator("td[data-label='May']")).to_have_text("apps:read apps:write")
    expect(row.locator("td[data-label='Expires']")).not_to_have_text("never")
    expect(row.locator("td[data-label='Last used']")).not_to_have_text("never")

    row.locator("button:has-text('Revoke')").click()
    expect(page.locator(".message.success")).to_contain_text("is revoked")
    expect(page.locator("tr.token.revoked")).to_contain_text("revoked")
    assert api_status(live_server.url, secret) == 401
    assert ApiToken.objects.get(user=carol).revoked


def test_home_and_connect_read_well_on_a_phone(browser, live_server):
    carol = confirmed_person("carol")
    make_app(owner=carol, name="Holiday budget", description="Spending for the summer trip")
    make_app(owner=carol, name="Groceries")
    token_create(user=carol, name="laptop – Claude Code", expires_days=90)
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True, device_scale_factor=2)
    page = context.new_page()
    try:
        sign_in(page, "carol")
        expect(page.locator("h1")).to_have_text("My apps")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "phone-home.png"), full_page=True)
        # Nothing wider than the screen: no sideways scrolling on a phone.
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.goto("/connect/")
        page.screenshot(path=str(ARTIFACTS / "phone-connect.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        context.close()
