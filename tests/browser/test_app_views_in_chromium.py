"""The app page as people read and use it, in Debian's Chromium at desktop and phone sizes: every result
readable (no raw JSON), charts, a button on each row, pickers instead of id boxes, and the page staying in
place after an action. Screenshots of every page are kept in test-artifacts/ (view-<size>-<app>.png)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps_registry.models import Record
from apps_registry.pages.actions import record_params
from apps_registry.selectors import routes_of
from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.page_apps import SPENDING, SPENDING_EXPENSES
from tests.apps_registry.route_helpers import example, run
from tests.browser.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
# JSON as a person would see it printed: an object's key, or an object or list opening on a value.
RAW_JSON = re.compile(r'"[\w ]+"\s*:|\{\s*"|\[\s*\{')


@pytest.fixture(params=list(SIZES))
def size(request) -> str:
    return request.param


@pytest.fixture
def person(transactional_db):
    return account_create(username="rosa", email="rosa@example.com", password=PASSWORD)


@pytest.fixture
def apps(person):
    todo = app_definition_save(actor=person, definition=example("todo"))
    for title in ("Buy milk", "Call mum", "Fix bike"):
        run(person, todo, "add_todo", {"title": title})
    budget = app_definition_save(actor=person, definition=example("budget"))
    run(person, budget, "set_budget", {"limit": 300})
    for amount, category in ((12.5, "food"), (40, "travel"), (7.25, "food")):
        run(person, budget, "add_expense", {"amount": amount, "category": category, "note": "lunch"})
    spending = app_definition_save(actor=person, definition=SPENDING)
    for expense in SPENDING_EXPENSES:
        run(person, spending, "add_expense", expense)
    return {"todo": todo, "budget": budget, "spending": spending}


def open_context(browser, live_server, size: str, *, javascript: bool = True):
    phone = size == "phone"
    context = browser.new_context(
        base_url=live_server.url,
        viewport=SIZES[size],
        is_mobile=phone,
        has_touch=phone,
        device_scale_factor=2 if phone else 1,
        java_script_enabled=javascript,
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "rosa")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]:has-text('Log in')")
    expect(page.locator("h1")).to_have_text("My apps")
    return context, page


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def assert_readable(page, size: str) -> None:
    shown = page.locator("main").inner_text()  # what is rendered: a closed "Show JSON" is not
    found = RAW_JSON.search(shown)
    assert found is None, f"raw JSON on the page: …{shown[max(0, found.start() - 80) : found.end() + 80]}…"
    if size == "phone":
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES["phone"]["width"]


def test_no_page_shows_raw_json_and_each_is_kept_as_a_screenshot(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        pages = {
            "home": "/",
            "todo": f"/apps/{apps['todo'].id}/",
            "budget": f"/apps/{apps['budget'].id}/?list_expenses.category=food&big_expenses.min=0",
            "spending": f"/apps/{apps['spending'].id}/",
            "records": f"/apps/{apps['budget'].id}/records/expenses/",
            "not-found": "/no/such/page/",
        }
        for name, url in pages.items():
            page.goto(url)
            assert_readable(page, size)
            shot(page, f"view-{size}-{name}")
        # "Show JSON" is there when asked for, and only then
        page.goto(pages["spending"])
        report = page.locator("#view-month_report")
        report.locator("details.json summary").click()
        expect(report.locator("details.json pre")).to_contain_text('"categories"')
        # the hidden collection is not on the page
        expect(page.locator("#records")).not_to_contain_text("expense_tags")
        expect(page.locator("main")).not_to_contain_text("Expense tags")
    finally:
        context.close()


def test_nested_results_read_as_tables_and_fields_with_money_dates_and_ticks(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        page.goto(f"/apps/{apps['spending'].id}/?month_report.month=2026-11")
        report = page.locator("#view-month_report")
        expect(report.locator("dl.fields .pair:has(dt:text-is('Total')) dd").first).to_have_text("€824.70")
        categories = report.locator(".pair:has(dt:text-is('Categories')) > dd > .table-wrap > table > tbody > tr")
        expect(categories).to_have_count(3)
        expect(categories.first).to_contain_text("rent")
        expect(categories.first).to_contain_text("€700.00")
        expenses = report.locator(".pair:has(dt:text-is('Expenses')) > dd > .table-wrap > table > tbody > tr")
        expect(expenses).to_have_count(4)
        first = expenses.first
        expect(first).to_contain_text("1 Nov 2026")
        expect(first).to_contain_text("home")  # a list of tags, inline
        expect(first.locator(".tick.yes")).to_have_count(1)  # paid: a tick
        first.locator("details.nested summary").click()  # the split: a sub-table the row opens
        expect(first.locator("details.nested table.data")).to_contain_text("me")
        assert not report.locator("th:text-is('Id')").count()  # ids are left out
        shot(page, f"nested-{size}-spending")
    finally:
        context.close()


def test_a_chart_is_an_svg_with_labelled_axes_and_its_numbers_beside_it(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        page.goto(f"/apps/{apps['spending'].id}/")
        view = page.locator("#view-by_month")
        svg = view.locator("figure.chart svg[role=img]")
        expect(svg).to_be_visible()
        expect(svg.locator("rect")).to_have_count(3)
        expect(svg.locator("text.axis-label").first).to_have_text("Month")
        expect(svg.locator("text.tick.x").first).to_have_text("Sep 26")
        caption = view.locator("figcaption")
        expect(caption).to_have_text("Total by month (bar chart)")
        assert svg.get_attribute("aria-labelledby") == caption.get_attribute("id")
        table = view.locator(".chart-table table.data tbody tr")
        expect(table).to_have_count(3)
        expect(table.nth(2)).to_contain_text("€824.70")
        line = page.locator("#view-by_day figure.chart")
        expect(line.locator("polyline")).to_have_count(2)
        expect(line.locator(".legend li")).to_have_count(2)
        assert page.locator("script:not([src])").count() == 0
        view.scroll_into_view_if_needed()
        view.screenshot(path=str(ARTIFACTS / f"chart-{size}.png"))
    finally:
        context.close()


def test_a_rows_button_completes_that_row_and_its_result_is_in_view(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        page.goto(f"/apps/{apps['todo'].id}/")
        rows = page.locator("#view-open_todos tbody tr")
        expect(rows).to_have_count(3)
        row = rows.filter(has_text="Call mum")
        row.locator("button:has-text('Tick off')").click()
        notice = page.locator("#view-open_todos-notice")
        expect(notice).to_contain_text("Tick off: done (“Call mum”).")
        expect(notice).to_be_in_viewport()
        expect(rows).to_have_count(2)
        expect(page.locator("#view-open_todos tbody")).not_to_contain_text("Call mum")
        done = {r.data["title"]: r.data["done"] for r in Record.objects.filter(collection="todos")}
        assert done == {"Buy milk": False, "Call mum": True, "Fix bike": False}
        # a row action with another param asks for it on the row
        fix = rows.filter(has_text="Fix bike")
        fix.locator("summary:has-text('Rename')").click()
        fix.locator("input[name=title]").fill("Fix the bike's brakes")
        fix.locator("button:has-text('Rename')").click()
        expect(page.locator("#view-open_todos tbody")).to_contain_text("Fix the bike's brakes")
        # a mutation that deletes asks first
        milk = rows.filter(has_text="Buy milk")
        milk.locator("summary:has-text('Delete')").click()
        expect(milk.locator(".confirm-text")).to_have_text("Delete “Buy milk”? This cannot be undone.")
        milk.locator("button:has-text('Yes, delete')").click()
        expect(rows).to_have_count(1)
        assert not Record.objects.filter(collection="todos", data__title="Buy milk").exists()
        shot(page, f"rows-{size}-todo")
    finally:
        context.close()


def test_a_picker_replaces_every_record_id_input(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        for app in apps.values():
            page.goto(f"/apps/{app.id}/")
            checked = 0
            for route in routes_of(app).filter(kind="mutation"):
                for param in record_params(route):
                    field = page.locator(f"#action-{route.name} [name={param}]")
                    expect(field).to_have_count(1)
                    assert field.evaluate("e => e.tagName") == "SELECT", (app.name, route.name, param)
                    checked += 1
            assert checked, app.name
            # and no text box anywhere takes a record's id
            assert page.locator("form input[type=text][name=id], form input[type=text][name=expense]").count() == 0
        page.goto(f"/apps/{apps['todo'].id}/")
        picker = page.locator("#action-rename_todo select[name=id]")
        picker.select_option(label="Fix bike")
        page.locator("#action-rename_todo input[name=title]").fill("Fix the bike")
        page.locator("#action-rename_todo button[type=submit]").click()
        expect(page.locator("#action-rename_todo-notice")).to_contain_text("Rename: done.")
        assert Record.objects.filter(collection="todos", data__title="Fix the bike").exists()
        expect(page.locator("#action-complete_todo select[name=id] option")).to_contain_text(
            ["Choose…", "Buy milk", "Call mum", "Fix the bike"]
        )
    finally:
        context.close()


def test_after_an_action_the_page_stays_in_place_with_its_filters(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        page.goto(f"/apps/{apps['budget'].id}/?list_expenses.category=food")
        form = page.locator("#action-add_expense form")
        form.scroll_into_view_if_needed()
        before = page.evaluate("window.scrollY")
        form.locator("[name=amount]").fill("-5")
        form.locator("[name=category]").fill("food")
        form.locator("button[type=submit]").click()
        error = page.locator("#m-add_expense-amount-errors")
        expect(error).to_have_text("amount must be positive")
        expect(error).to_be_in_viewport()
        expect(page.locator("#q-list_expenses-category")).to_have_value("food")  # the filter is kept
        form.locator("[name=amount]").fill("3.5")
        form.locator("button[type=submit]").click()
        notice = page.locator("#action-add_expense-notice")
        expect(notice).to_contain_text("Add expense: done.")
        expect(notice).to_be_in_viewport()
        assert abs(page.evaluate("window.scrollY") - before) < SIZES[size]["height"], "the page jumped"
        expect(page.locator("#q-list_expenses-category")).to_have_value("food")
        expect(page.locator("#view-list_expenses tbody tr")).to_have_count(3)
        # and the new expense is on the page without any filter: the start of the page lists the newest
        page.goto(f"/apps/{apps['budget'].id}/")
        expect(page.locator("#recent-expenses tbody tr").first).to_contain_text("3.50")
        shot(page, f"stay-{size}-budget")
    finally:
        context.close()


def test_without_javascript_an_action_comes_back_to_its_card_with_the_filters(browser, live_server, apps):
    context, page = open_context(browser, live_server, "desktop", javascript=False)
    try:
        page.goto(f"/apps/{apps['budget'].id}/?list_expenses.category=food")
        page.locator("#action-add_expense [name=amount]").fill("9")
        page.locator("#action-add_expense [name=category]").fill("food")
        page.locator("#action-add_expense button[type=submit]").click()
        assert page.url.endswith("?list_expenses.category=food#action-add_expense"), page.url
        expect(page.locator("#action-add_expense-notice")).to_be_in_viewport()
        expect(page.locator("#view-list_expenses tbody tr")).to_have_count(3)
        row = page.locator("#recent-expenses tbody tr").filter(has_text="travel")
        row.locator("summary:has-text('Delete')").click()
        row.locator("button:has-text('Yes, delete')").click()
        assert page.url.endswith("#recent-expenses"), page.url
        expect(page.locator("#recent-expenses-notice")).to_contain_text("Delete: done (“travel”).")
        assert not Record.objects.filter(storage__app=apps["budget"], data__category="travel").exists()
    finally:
        context.close()


def test_a_picker_of_many_records_narrows_as_you_type(browser, live_server, apps, monkeypatch):
    from apps_registry.pages import app_views

    monkeypatch.setattr(app_views, "PICKER_CHOICES", 2)  # the three to-dos are "many"
    context, page = open_context(browser, live_server, "desktop")
    try:
        page.goto(f"/apps/{apps['todo'].id}/")
        action = page.locator("#action-complete_todo")
        expect(action.locator("select[name=id] option")).to_have_count(3)  # "Choose…" and the first two
        action.locator("input.picker-search").fill("mum")
        expect(action.locator("select[name=id] option")).to_have_text(["Choose…", "Call mum"])
        action.locator("select[name=id]").select_option(label="Call mum")
        action.locator("button[type=submit]").click()
        expect(page.locator("#action-complete_todo-notice")).to_contain_text("Tick off: done.")
        assert Record.objects.get(collection="todos", data__title="Call mum").data["done"] is True
    finally:
        context.close()
