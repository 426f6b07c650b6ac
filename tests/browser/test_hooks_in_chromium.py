"""A person adds a webhook on an app's page, copies its secret (shown once), a sender uses it, and the person sees
the delivery and deletes the webhook, in Debian's Chromium at desktop and phone sizes (screenshots in
test-artifacts/hooks-<size>.png)."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from apps_registry.models import Hook
from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import signature_make
from tests.apps_registry.route_helpers import records
from tests.apps_registry.test_hooks import BUDGET
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_app_views_in_chromium import SIZES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"


def send(base_url: str, path: str, secret: str, params: dict) -> int:
    body = json.dumps(params).encode()
    request = urllib.request.Request(
        base_url + path,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Charming-Signature": signature_make(secret=secret, timestamp=int(time.time()), body=body),
        },
    )
    with urllib.request.urlopen(request, timeout=20) as answer:
        return answer.status


@pytest.mark.parametrize("size", list(SIZES))
def test_a_person_adds_a_webhook_a_sender_uses_it_and_the_person_sees_the_delivery(browser, live_server, size):
    person = account_create(username="rosa", email="rosa@example.com", password=PASSWORD)
    app = app_definition_save(actor=person, definition=BUDGET)
    phone = size == "phone"
    context = browser.new_context(base_url=live_server.url, viewport=SIZES[size], is_mobile=phone, has_touch=phone)
    page = context.new_page()
    try:
        page.goto("/accounts/login/")
        page.fill("#id_username", "rosa")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]:has-text('Log in')")
        page.goto(f"/apps/{app.id}/")
        page.get_by_role("link", name="Webhooks").click()
        expect(page.locator("h1")).to_have_text("Webhooks")
        expect(page.locator("main")).to_contain_text("No webhooks yet.")

        page.select_option("#id_route", "add_expense")
        page.fill("#id_description", "bank export")
        page.get_by_role("button", name="Add webhook").click()
        secret = page.locator("#hook-secret").inner_text()
        url = page.locator("#hook-url").inner_text()
        assert secret.startswith("whsec_") and url.endswith(f"/hooks/{Hook.objects.get().id}/")
        expect(page.locator("#new-secret")).to_contain_text("it is shown only this once")
        page.screenshot(path=str(ARTIFACTS / f"hooks-new-{size}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]

        assert send(live_server.url, "/hooks/" + url.split("/hooks/", 1)[1], secret, {"amount": 42}) == 200
        assert [r["amount"] for r in records(app, "expenses").values()] == [42]

        page.goto(f"/apps/{app.id}/hooks/")
        expect(page.locator("#hook-secret")).to_have_count(0)
        assert secret not in page.content()
        card = page.locator(f"#hook-{Hook.objects.get().id}")
        expect(card).to_contain_text("add_expense (bank export), run as rosa.")
        expect(card.locator("td[data-label=Outcome]")).to_have_text("ran (200)")
        card.get_by_role("link", name="change").click()
        expect(page.locator("ol.timeline > li").first).to_contain_text("add_expense by rosa through a webhook")
        page.go_back()
        page.screenshot(path=str(ARTIFACTS / f"hooks-{size}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]

        card.get_by_role("button", name="Delete webhook of add_expense").click()
        expect(page.locator(".messages")).to_contain_text("Webhook of add_expense deleted")
        assert not Hook.objects.exists()
    finally:
        context.close()
