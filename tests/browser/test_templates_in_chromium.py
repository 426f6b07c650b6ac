"""An owner publishes an app as a template from its page; an anonymous visitor finds it in the gallery; a second
person signs in and remixes it into their own empty app, in Debian's Chromium at desktop and phone sizes
(screenshots in test-artifacts/templates-<size>.png)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps_registry.models import App, Template
from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from tests.apps_registry.route_helpers import example, records
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_app_views_in_chromium import SIZES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"


def log_in(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]:has-text('Log in')")


@pytest.mark.parametrize("size", list(SIZES))
def test_an_app_is_published_found_anonymously_and_remixed_by_someone_else(browser, live_server, size):
    rosa = account_create(username="rosa", email="rosa@example.com", password=PASSWORD)
    sam = account_create(username="sam", email="sam@example.com", password=PASSWORD)
    app = app_definition_save(actor=rosa, definition=example("budget"))
    route_run(actor=rosa, app_id=app.id, op="set_budget", params={"limit": 321}, kind="mutation")
    phone = size == "phone"
    options = {"base_url": live_server.url, "viewport": SIZES[size], "is_mobile": phone, "has_touch": phone}
    owner, visitor = browser.new_context(**options), browser.new_context(**options)
    try:
        page = owner.new_page()
        log_in(page, "rosa")
        page.goto(f"/apps/{app.id}/")
        page.get_by_role("link", name="Publish as a template…").click()
        expect(page.locator("main")).to_contain_text("records are never shared")
        page.fill("#id_title", "Monthly budget")
        page.fill("#id_description", "Spending against a monthly limit.")
        page.fill("#id_starter_prompt", "Set my budget to 400.")
        page.get_by_role("button", name="Publish").click()
        expect(page.locator(".messages")).to_contain_text("Published: “Monthly budget”")
        template = Template.objects.get()

        anonymous = visitor.new_page()
        anonymous.goto("/templates/")
        anonymous.fill("#id_q", "monthly budget")
        anonymous.get_by_role("button", name="Search").click()
        anonymous.get_by_role("link", name="Monthly budget").click()
        expect(anonymous.locator("main")).to_contain_text("Set my budget to 400.")
        expect(anonymous.locator("main")).to_contain_text("add_expense")
        expect(anonymous.locator("main")).not_to_contain_text("321")
        anonymous.screenshot(path=str(ARTIFACTS / f"templates-{size}.png"), full_page=True)
        assert anonymous.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]

        anonymous.get_by_role("main").get_by_role("link", name="Log in").click()
        anonymous.fill("#id_username", "sam")
        anonymous.fill("#id_password", PASSWORD)
        anonymous.click("button[type=submit]:has-text('Log in')")
        expect(anonymous).to_have_url(f"{live_server.url}/templates/{template.id}/")
        anonymous.fill("#id_name", "Sam's budget")
        anonymous.get_by_role("button", name="Remix “Monthly budget”").click()
        expect(anonymous.locator(".messages")).to_contain_text("Your app 'Sam's budget' is ready")
        mine = App.objects.get(owner=sam)
        assert (mine.name, mine.remixed_from_id) == ("Sam's budget", template.id) and records(mine) == {}
        expect(anonymous.locator("h1")).to_contain_text("Sam's budget")
    finally:
        owner.close()
        visitor.close()
