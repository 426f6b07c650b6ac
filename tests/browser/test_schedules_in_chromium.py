"""A person adds, reads, pauses and deletes an app's schedules from its page, in Debian's Chromium, at desktop and
phone sizes (screenshots in test-artifacts/schedules-<size>.png)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps_registry.models import Schedule
from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from apps_registry.services.schedules import schedule_run_due
from tests.apps_registry.test_schedules import CHORES
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_app_views_in_chromium import SIZES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"


@pytest.mark.parametrize("size", list(SIZES))
def test_a_person_schedules_an_action_sees_its_runs_and_pauses_it(browser, live_server, size):
    person = account_create(username="rosa", email="rosa@example.com", password=PASSWORD)
    app = app_definition_save(actor=person, definition=CHORES)
    route_run(actor=person, app_id=app.id, op="start", params={}, kind="mutation")
    phone = size == "phone"
    context = browser.new_context(base_url=live_server.url, viewport=SIZES[size], is_mobile=phone, has_touch=phone)
    page = context.new_page()
    try:
        page.goto("/accounts/login/")
        page.fill("#id_username", "rosa")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]:has-text('Log in')")
        page.goto(f"/apps/{app.id}/")
        page.get_by_role("link", name="Schedules").click()
        expect(page.locator("h1")).to_have_text("Schedules")
        expect(page.locator("main")).to_contain_text("No schedules yet.")

        # A mistake first: the params do not fit the action; nothing is saved and the form keeps what was typed.
        page.select_option("#id_route", "tick")
        page.fill("#id_cron", "30 7 * * 1-5")
        page.fill("#id_timezone", "Europe/Berlin")
        page.fill("#id_params", '{"by": 0}')
        page.get_by_role("button", name="Add schedule").click()
        expect(page.locator("#schedule-error")).to_contain_text("not accepted by route 'tick'")
        expect(page.locator("#id_cron")).to_have_value("30 7 * * 1-5")
        assert not Schedule.objects.exists()

        page.fill("#id_params", '{"by": 2}')
        page.get_by_role("button", name="Add schedule").click()
        expect(page.locator(".messages")).to_contain_text("Schedule added: tick at '30 7 * * 1-5'.")
        schedule = Schedule.objects.get()
        card = page.locator(f"#schedule-{schedule.id}")
        expect(card).to_contain_text('tick at 30 7 * * 1-5 (Europe/Berlin), with {"by": 2}, as rosa.')
        expect(card).to_contain_text("Next run:")
        expect(card).to_contain_text("No runs yet.")

        schedule_run_due(
            schedule_id=str(schedule.id), due_at=schedule.next_run_at.isoformat(), now=schedule.next_run_at
        )
        page.reload()
        expect(card.locator("td[data-label=Outcome]")).to_have_text("ran")
        card.get_by_role("link", name="change").click()
        expect(page.locator("ol.timeline > li").first).to_contain_text("tick by rosa through a schedule")
        page.go_back()

        page.screenshot(path=str(ARTIFACTS / f"schedules-{size}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[size]["width"]

        card.get_by_role("button", name="Pause tick").click()
        expect(card).to_contain_text("Paused by rosa.")
        assert not Schedule.objects.get().active
        card.get_by_role("button", name="Resume tick").click()
        expect(card).to_contain_text("Next run:")
        card.get_by_role("button", name="Delete schedule of tick").click()
        expect(page.locator(".messages")).to_contain_text("Schedule of tick at '30 7 * * 1-5' deleted.")
        assert not Schedule.objects.exists()
    finally:
        context.close()
