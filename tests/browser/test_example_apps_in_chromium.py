"""The apps in examples/ (expenses, chores, reading list) as people use them, in Debian's Chromium at desktop and
phone sizes: no raw JSON on their pages, a row's button acts on that row with its result in view, and a picker
wherever a form takes a record's id. Screenshots in test-artifacts/ (example-<size>-<app>.png)."""

from __future__ import annotations

import datetime

import pytest
from playwright.sync_api import expect

from apps_registry.models import Record
from apps_registry.pages.actions import record_params
from apps_registry.selectors import routes_of
from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example, run
from tests.browser.test_app_views_in_chromium import PASSWORD, assert_readable, open_context, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["desktop", "phone"])
def size(request) -> str:
    return request.param


@pytest.fixture
def apps(transactional_db):
    person = account_create(username="rosa", email="rosa@example.com", password=PASSWORD)
    today = datetime.datetime.now(datetime.UTC).date()
    expenses = app_definition_save(actor=person, definition=example("expenses"))
    for amount, category, note in ((12.5, "food", "lunch"), (40, "travel", "train"), (7.25, "food", "coffee")):
        run(person, expenses, "add_expense", {"amount": amount, "category": category, "day": str(today), "note": note})
    run(person, expenses, "set_budget", {"category": "food", "amount": 300, "from_month": str(today)[:7]})
    chores = app_definition_save(actor=person, definition=example("chores"))
    for name, people, every in (("Dishes", ["Ana", "Ben"], 1), ("Laundry", ["Ben"], 7), ("Plants", ["Ana"], 3)):
        run(person, chores, "add_chore", {"name": name, "people": people, "every_days": every})
    books = app_definition_save(actor=person, definition=example("reading_list"))
    for title, author, year, rating, tags in (
        ("Middlemarch", "George Eliot", 2025, 5, ["classic"]),
        ("Piranesi", "Susanna Clarke", 2026, 4, ["fantasy", "short"]),
    ):
        run(
            person,
            books,
            "add_book",
            {"title": title, "author": author, "year_read": year, "rating": rating, "tags": tags},
        )
    return {"expenses": expenses, "chores": chores, "reading_list": books}


def _record_fields(route) -> list[str]:
    """The params of a mutation that take a record's id: found in its steps, or declared with x-charming-record."""
    properties = (route.input_schema_ordered or {}).get("properties") or {}
    declared = [
        name for name, schema in properties.items() if isinstance(schema, dict) and "x-charming-record" in schema
    ]
    return [*record_params(route), *(name for name in declared if name not in record_params(route))]


def test_the_examples_pages_read_without_raw_json_and_pick_records(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        for name, app in apps.items():
            page.goto(f"/apps/{app.id}/")
            assert_readable(page, size)
            shot(page, f"example-{size}-{name}")
            checked = 0
            for route in routes_of(app).filter(kind="mutation"):
                for param in _record_fields(route):
                    field = page.locator(f"#action-{route.name} [name={param}]")
                    expect(field).to_have_count(1)
                    assert field.evaluate("e => e.tagName") == "SELECT", (name, route.name, param)
                    checked += 1
            assert checked, name
        expect(page.locator("#records")).not_to_contain_text("book_tags")  # hidden: a join table
    finally:
        context.close()


def test_a_chores_row_button_marks_that_chore_done_and_its_result_is_in_view(browser, live_server, apps, size):
    context, page = open_context(browser, live_server, size)
    try:
        page.goto(f"/apps/{apps['chores'].id}/")
        row = page.locator("#view-list_chores tbody tr").filter(has_text="Laundry")
        row.locator("button:has-text('Mark done')").click()
        notice = page.locator("#view-list_chores-notice")
        expect(notice).to_contain_text("Mark done: done (“Laundry”).")
        expect(notice).to_be_in_viewport()
        done = {r.data["name"]: r.data.get("last_done") for r in Record.objects.filter(collection="chores")}
        assert done["Laundry"] is not None and done["Dishes"] is None and done["Plants"] is None
        shot(page, f"example-rows-{size}-chores")
    finally:
        context.close()


@pytest.mark.parametrize(
    ("name", "view", "row_text", "collection"),
    [
        ("expenses", "list_expenses", "travel", "expenses"),
        ("reading_list", "list_books", "Piranesi", "books"),
    ],
)
def test_a_rows_delete_asks_then_deletes_that_row(browser, live_server, apps, size, name, view, row_text, collection):
    context, page = open_context(browser, live_server, size)
    try:
        app = apps[name]
        page.goto(f"/apps/{app.id}/")
        rows = page.locator(f"#view-{view} tbody tr")
        before = rows.count()
        row = rows.filter(has_text=row_text)
        row.locator("summary:has-text('Delete')").click()
        expect(row.locator(".confirm-text")).to_contain_text("This cannot be undone.")
        row.locator("button:has-text('Yes, delete')").click()
        expect(page.locator(f"#view-{view}-notice")).to_be_in_viewport()
        expect(rows).to_have_count(before - 1)
        assert not any(row_text in str(r.data) for r in Record.objects.filter(storage__app=app, collection=collection))
    finally:
        context.close()
