"""An app's page in Debian's Chromium as a new user meets it: sign up, open the budget, use it, export, delete."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from apps_registry.access import membership_set
from apps_registry.models import App, Feedback, Record
from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example
from tests.browser.conftest import ARTIFACTS
from tests.factories import AdvisoryFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
PHONE = {"width": 390, "height": 844}


def sign_up(page, username: str) -> None:
    page.goto("/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_email", f"{username}@example.com")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("My apps")


def add_expense(page, amount: str, category: str, note: str = "") -> None:
    """Fill and send the action's form, and wait for its own answer to be swapped in: the live refresh can show the
    last action's records before that action's answer has replaced the form, so a summary's figure is no sign that
    the form is ready for the next one (a form typed into and then replaced loses what was typed)."""
    form = page.locator("#action-add_expense form")
    form.locator("[name=amount]").fill(amount)
    form.locator("[name=category]").fill(category)
    form.locator("[name=note]").fill(note)
    with page.expect_response(lambda response: response.request.method == "POST"):
        form.locator("button[type=submit]").click()
    page.wait_for_function("() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')")


def summary(page, label: str):
    return page.locator(f"#view-summary dl.fields .pair:has(dt:text-is('{label}')) dd")


def test_a_new_user_uses_the_budget_app_from_its_page(page, browser, live_server):
    console_errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
    sign_up(page, "erin")
    erin = get_user_model().objects.get(username="erin")
    app = app_definition_save(actor=erin, definition=example("budget"))
    AdvisoryFactory(app=app, user_summary="Budgets reset on the first of each month.")

    page.goto("/")
    page.click("text=Budget")
    expect(page.locator("h1")).to_contain_text("Budget")
    expect(page.locator(".advisories")).to_contain_text("Budgets reset on the first of each month.")

    page.locator("#action-set_budget [name=limit]").fill("300")
    page.locator("#action-set_budget button[type=submit]").click()
    expect(page.locator("#action-set_budget-notice")).to_contain_text("Set budget: done.")
    expect(summary(page, "Limit")).to_have_text("300")

    add_expense(page, "12.5", "food", "lunch")
    expect(page.locator("#action-add_expense-notice")).to_contain_text("Add expense: done.")
    expect(summary(page, "Expenses")).to_have_text("1")
    add_expense(page, "-5", "travel")
    amount = page.locator("#m-add_expense-amount")
    expect(page.locator("#m-add_expense-amount-errors")).to_have_text("amount must be positive")
    expect(amount).to_have_attribute("aria-invalid", "true")
    assert "m-add_expense-amount-errors" in (amount.get_attribute("aria-describedby") or "")
    expect(page.locator("#m-add_expense-category")).to_have_value("travel")  # what was typed stays
    add_expense(page, "40", "travel")
    expect(summary(page, "Expenses")).to_have_text("2")
    add_expense(page, "7.25", "food")
    expect(summary(page, "Spent")).to_have_text("59.75")
    expect(summary(page, "Remaining")).to_have_text("240.25")
    expect(summary(page, "Expenses")).to_have_text("3")

    page.locator("#view-list_expenses [name='list_expenses.category']").fill("food")
    page.locator("#view-list_expenses button[type=submit]").click()
    rows = page.locator("#view-list_expenses tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first.locator("td.num")).to_have_text("7.25")

    page.fill("#feedback-body", "Could it show a chart?")
    page.click("#feedback button[type=submit]")
    expect(page.locator(".message.success")).to_contain_text("your feedback is with Charming's staff")
    assert Feedback.objects.get(app=app).body == "Could it show a chart?"

    ARTIFACTS.mkdir(exist_ok=True)
    page.goto("/")
    page.screenshot(path=str(ARTIFACTS / "desktop-home-with-app.png"), full_page=True)
    page.goto(f"/apps/{app.id}/?list_expenses.category=food")
    page.screenshot(path=str(ARTIFACTS / "desktop-app-page.png"), full_page=True)

    with page.expect_download() as download_info:
        page.click("text=Export as JSON")
    exported = json.loads(Path(download_info.value.path()).read_text())
    assert sorted(e["amount"] for e in exported["collections"]["expenses"]) == [7.25, 12.5, 40.0]
    with page.expect_download() as download_info:
        page.click("text=Export as CSV")
    assert Path(download_info.value.path()).read_text().startswith("collection,id,")

    page.click("#records a:text-is('expenses')")
    expect(page.locator("table.data tbody tr")).to_have_count(3)
    page.screenshot(path=str(ARTIFACTS / "desktop-records.png"), full_page=True)
    page.go_back()

    page.click("text=Delete “Budget”…")
    expect(page.locator("h1")).to_have_text("Delete “Budget”?")
    expect(page.locator("main")).to_contain_text("4 stored records are kept for")
    page.screenshot(path=str(ARTIFACTS / "desktop-delete.png"), full_page=True)
    page.click("button:has-text('Delete “Budget”')")
    expect(page.locator(".message.success")).to_contain_text("The app “Budget” was deleted")
    assert not App.objects.filter(pk=app.pk).exists()
    assert not [e for e in console_errors if "Content Security Policy" in e], console_errors


def test_a_viewer_sees_the_app_read_only_and_a_forged_post_is_refused(browser, live_server):
    owner = account_create(username="olga", email="olga@example.com", password=PASSWORD)
    viewer = account_create(username="vic", email="vic@example.com", password=PASSWORD)
    app = app_definition_save(actor=owner, definition=example("budget"))
    membership_set(actor=owner, app=app, user=viewer, role="viewer")
    context = browser.new_context(base_url=live_server.url)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", "vic")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]:has-text('Log in')")
        page.click("text=Budget")
        expect(page.locator(".note")).to_contain_text("you can see its data but not change it")
        expect(page.locator("#actions")).to_have_count(0)
        expect(page.locator("#view-summary dl.fields")).to_be_visible()
        token = page.locator("#feedback input[name=csrfmiddlewaretoken]").get_attribute("value")
        response = context.request.post(
            f"/apps/{app.id}/run/add_expense/",
            form={"csrfmiddlewaretoken": token, "amount": "5", "category": "food"},
            headers={"Referer": f"{live_server.url}/apps/{app.id}/"},
        )
        assert response.status == 403
        assert "viewers may only query and read it" in response.text()
        assert not Record.objects.filter(collection="expenses").exists()
    finally:
        context.close()


def test_the_forms_work_without_javascript(browser, live_server):
    owner = account_create(username="nojs", email="nojs@example.com", password=PASSWORD)
    app = app_definition_save(actor=owner, definition=example("budget"))
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", "nojs")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]:has-text('Log in')")
        page.goto(f"/apps/{app.id}/")
        page.locator("#action-set_budget [name=limit]").fill("100")
        page.locator("#action-set_budget button[type=submit]").click()
        expect(summary(page, "Limit")).to_have_text("100")
        add_expense(page, "-1", "food")
        expect(page.locator("#m-add_expense-amount-errors")).to_have_text("amount must be positive")
        add_expense(page, "30", "food")
        expect(summary(page, "Remaining")).to_have_text("70")
    finally:
        context.close()


def test_home_and_app_page_read_well_on_a_phone(browser, live_server):
    owner = account_create(username="pia", email="pia@example.com", password=PASSWORD)
    app = app_definition_save(actor=owner, definition=example("budget"))
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True, device_scale_factor=2)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", "pia")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]:has-text('Log in')")
        ARTIFACTS.mkdir(exist_ok=True)
        page.goto("/")
        page.screenshot(path=str(ARTIFACTS / "phone-home-with-app.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.goto(f"/apps/{app.id}/")
        page.locator("#action-set_budget [name=limit]").fill("250")
        page.locator("#action-set_budget button[type=submit]").click()
        expect(summary(page, "Limit")).to_have_text("250")
        add_expense(page, "19.99", "books", "a long note about a book that has a long title")
        expect(summary(page, "Expenses")).to_have_text("1")
        page.goto(f"/apps/{app.id}/?list_expenses.category=books")
        page.screenshot(path=str(ARTIFACTS / "phone-app-page.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert re.search(r"books", page.locator("#view-list_expenses").inner_text())
    finally:
        context.close()


def test_a_paged_view_walks_its_pages_by_link_in_chromium(page, browser, live_server):
    from tests.apps_registry.route_helpers import run
    from tests.apps_registry.test_app_pages import PAGED

    sign_up(page, "pia")
    pia = get_user_model().objects.get(username="pia")
    add = {
        "kind": "mutation",
        "input": {"type": "object"},
        "steps": [{"insert": {"collection": "expenses", "value": "params"}}],
    }
    app = app_definition_save(
        actor=pia, definition={"name": "Paged", "collections": {"expenses": {}}, "routes": {"list": PAGED, "add": add}}
    )
    for what in ("apples", "bread", "cheese", "dates", "eggs"):
        run(pia, app, "add", {"what": what})

    page.goto(f"/apps/{app.id}/")
    view = page.locator("#view-list")
    expect(view.locator("table.data tbody tr")).to_have_count(2)
    expect(view).to_contain_text("apples")
    assert view.locator("[name='list.cursor']").count() == 0

    view.locator("a[rel=next]").click()
    expect(view.locator("table.data")).to_contain_text("cheese")
    expect(view).not_to_contain_text("apples")
    view.locator("a[rel=next]").click()
    expect(view.locator("table.data tbody tr")).to_have_count(1)
    expect(view).to_contain_text("eggs")
    expect(view.locator("a[rel=next]")).to_have_count(0)
    view.locator("text=First page").click()
    expect(view).to_contain_text("apples")
