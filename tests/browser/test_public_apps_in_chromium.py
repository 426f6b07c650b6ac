"""An owner makes a guest book public from its page, opening "Sign" to visitors; an anonymous visitor signs it and
votes; a second person, signed in, sees the entry as a visitor too; the owner turns the page off and the visitor's
next load is a 404. In Debian's Chromium at desktop and phone sizes (screenshots in test-artifacts/public-*.png)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.public_app_defs import GUEST_BOOK
from tests.apps_registry.route_helpers import records
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_app_views_in_chromium import SIZES
from tests.browser.test_templates_in_chromium import PASSWORD, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("size", list(SIZES))
def test_an_owner_opens_a_public_page_a_visitor_signs_and_the_owner_turns_it_off(browser, live_server, size):
    rosa = account_create(username="rosa", email="rosa@example.com", password=PASSWORD)
    account_create(username="sam", email="sam@example.com", password=PASSWORD)
    app = app_definition_save(actor=rosa, definition=GUEST_BOOK)
    phone = size == "phone"
    options = {"base_url": live_server.url, "viewport": SIZES[size], "is_mobile": phone, "has_touch": phone}
    owner, anonymous, second = (browser.new_context(**options) for _ in range(3))
    try:
        page = owner.new_page()
        log_in(page, "rosa")
        page.goto(f"/apps/{app.id}/")
        card = page.locator("#public")
        card.locator("#id_public_handle").fill("our-wedding")
        card.get_by_label("Sign the guest book").check()
        card.get_by_role("button", name="Make public").click()
        expect(page.locator("#public-url")).to_contain_text("/p/our-wedding/")

        visitor = anonymous.new_page()
        visitor.goto("/p/our-wedding/")
        expect(visitor.locator("h1")).to_contain_text("Guest book")
        expect(visitor.locator("#action-vote")).to_have_count(0)  # not opened
        visitor.fill("#m-sign-name", "Ann")
        visitor.fill("#m-sign-message", "Congratulations, you two!")
        visitor.get_by_role("button", name="Sign the guest book").click()
        expect(visitor.locator("#action-sign")).to_contain_text("Sign the guest book: done.")
        expect(visitor.locator("#view-entries")).to_contain_text("Congratulations, you two!")
        expect(visitor.locator("main")).not_to_contain_text("rosa")
        assert visitor.evaluate("document.scripts.length") == 0
        assert visitor.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]
        visitor.screenshot(path=str(ARTIFACTS / f"public-{size}.png"), full_page=True)
        (entry,) = records(app, "entries").values()
        assert entry["role"] == "visitor" and entry["by"].startswith("visitor-")

        other = second.new_page()
        log_in(other, "sam")
        other.goto("/p/our-wedding/")
        expect(other.locator("#view-entries")).to_contain_text("Ann")
        expect(other.locator("#view-whoami")).to_contain_text("visitor")

        page.goto(f"/apps/{app.id}/")
        page.get_by_role("button", name="Turn the public page off").click()
        expect(page.locator(".messages")).to_contain_text("The public page is off")
        assert visitor.goto("/p/our-wedding/").status == 404
    finally:
        for context in (owner, anonymous, second):
            context.close()
