"""The app inline in a chat (MCP Apps), in Debian's Chromium: a test host built on the ext-apps AppBridge reads
ui://charming/app from the live server over MCP, puts it in a sandboxed iframe with open_app's result, and proxies
the iframe's tools/call to /mcp with the user's token. A person adds an expense with the inline form and completes
a to-do with a row's button; both land in the app's records, and the iframe never makes a request of its own.
Screenshots: test-artifacts/mcp-app-*.png."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from mcp_tools.ui import APP_UI_URI
from tests.apps_registry.route_helpers import example
from tests.apps_registry.route_helpers import run as run_route
from tests.browser.conftest import ARTIFACTS
from tests.mcp_tools import conftest as mcp
from tests.mcp_tools.conftest import MODERN, make_agent, mcp_client, run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

live_server_mcp = mcp.live_server_mcp  # the uvicorn server (the ASGI app with /mcp) on the same test database

HOST_FILES = Path(__file__).resolve().parent / "mcp_host"
HOST = "https://chat-host.test"  # the host's own origin: served by the test, not by Charming
CONTEXT = {
    "theme": "dark",
    "displayMode": "inline",
    "availableDisplayModes": ["inline"],
    "containerDimensions": {"maxWidth": 760},
    "platform": "web",
    "locale": "en-GB",
}


def in_thread(coro: Any) -> Any:
    # Playwright's sync API keeps its own event loop in this thread: the SDK client runs in another one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run, coro).result()


def mcp_read_ui(server, token: str) -> str:
    async def read():
        async with mcp_client(server, token, MODERN) as client:
            return (await client.read_resource(APP_UI_URI)).contents[0].text

    return in_thread(read())


def mcp_call(server, token: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tools/call over MCP, as the host's backend makes it; the result as JSON, as the bridge carries it."""

    async def call():
        async with mcp_client(server, token, MODERN) as client:
            return await client.call_tool(name, args)

    result = in_thread(call())
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def open_in_host(browser, server, agent, arguments: dict[str, Any], *, viewport: dict[str, int]):
    host_context = {**CONTEXT, "containerDimensions": {"maxWidth": min(760, viewport["width"])}}
    """The host page with the app's view in its iframe; returns (context, page, the iframe's frame locator, the
    requests seen from the iframe, the requests any page made to Charming)."""
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()

    def serve_host(route):
        name = route.request.url.removeprefix(HOST + "/") or "host.html"
        path = HOST_FILES / name
        if path.parent != HOST_FILES or not path.is_file():
            route.fulfill(status=404, body="not found")
            return
        kind = "text/html" if name.endswith(".html") else "text/javascript"
        route.fulfill(status=200, body=path.read_bytes(), content_type=f"{kind}; charset=utf-8")

    page.route(f"{HOST}/**", serve_host)
    from_iframe: list[str] = []
    to_charming: list[str] = []

    def seen(request):
        if request.url.startswith(server.base_url):
            to_charming.append(request.url)
        if request.frame != page.main_frame:
            from_iframe.append(request.url)

    page.on("request", seen)

    def refuse(route):  # intercepted, and refused: a request to Charming from the browser fails the test below
        to_charming.append(route.request.url)
        route.abort()

    context.route(f"{server.base_url}/**", refuse)
    page.expose_function("mcpCallTool", lambda name, args: mcp_call(server, agent.token, name, args))
    page.goto(f"{HOST}/host.html")
    html = mcp_read_ui(server, agent.token)
    result = mcp_call(server, agent.token, "open_app", arguments)
    page.evaluate(
        "([html, args, result, ctx]) => window.charmingHost(html, args, result, ctx)",
        [html, arguments, result, host_context],
    )
    page.wait_for_function("window.hostReady === true")
    return context, page, page.frame_locator("#app"), from_iframe, to_charming


def shot(page, name: str) -> None:
    """The host page with the iframe as the chat shows it (sized by the View's size-changed notifications); the
    viewport is stretched for the shot, as Chromium paints no frame content outside it."""
    ARTIFACTS.mkdir(exist_ok=True)
    viewport = page.viewport_size
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": viewport["width"], "height": max(viewport["height"], height)})
    page.wait_for_timeout(200)
    page.screenshot(path=str(ARTIFACTS / f"mcp-app-{name}.png"))
    page.set_viewport_size(viewport)


@pytest.fixture
def rosa(live_server_mcp, transactional_db):
    return make_agent("rosa")


@pytest.mark.parametrize(
    "size", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"]
)
def test_an_expense_added_in_the_inline_view_lands_in_the_apps_records(browser, live_server_mcp, rosa, size):
    budget = app_definition_save(actor=rosa.user, definition=example("budget"))
    run_route(rosa.user, budget, "set_budget", {"limit": 300})
    run_route(rosa.user, budget, "add_expense", {"amount": 12.5, "category": "food", "note": "lunch"})
    context, page, app, from_iframe, to_charming = open_in_host(
        browser, live_server_mcp, rosa, {"app_id": str(budget.id)}, viewport=size
    )
    try:
        expect(app.locator("h1")).to_contain_text("Budget")
        # The host's theme is followed: the document takes it (and its colour scheme).
        expect(app.locator("html")).to_have_attribute("data-theme", "dark")
        # And its size: a phone-wide container gets the one-column layout.
        narrow = size["width"] < 640
        assert app.locator("html").evaluate("e => e.classList.contains('narrow')") is narrow
        shot(page, f"budget-{size['width']}")

        card = app.locator("#action-add_expense")
        card.locator("#m-add_expense-amount").fill("23.4")
        card.locator("#m-add_expense-category").fill("books")
        card.locator("#m-add_expense-note").fill("a <b>novel</b>")
        card.get_by_role("button", name="Add expense").click()

        expect(app.locator("#action-add_expense .notice-done")).to_contain_text("Add expense: done.")
        expense = Record.objects.get(storage__app=budget, collection="expenses", data__category="books")
        assert expense.data["amount"] == 23.4 and expense.data["note"] == "a <b>novel</b>"
        # Refreshed by open_app: the new expense is in the view, its note as text (escaped), not as markup.
        expect(app.locator("main")).to_contain_text("a <b>novel</b>")
        assert app.locator("main b").count() == 0
        shot(page, f"budget-added-{size['width']}")

        # The app's own refusal comes back next to the form, in its words, and nothing is written.
        card.locator("#m-add_expense-amount").fill("-5")
        card.locator("#m-add_expense-category").fill("food")
        card.get_by_role("button", name="Add expense").click()
        refused = app.locator("#action-add_expense .notice-error")
        expect(refused).to_contain_text("Add expense did not go through.")
        expect(refused).to_contain_text("amount must be positive")
        assert Record.objects.filter(storage__app=budget, collection="expenses").count() == 2
        # Nothing was written, so nothing is redrawn: the form keeps what the person typed.
        expect(card.locator("#m-add_expense-amount")).to_have_value("-5")
        expect(card.locator("#m-add_expense-category")).to_have_value("food")

        # A view's filter runs through open_app (that view, those params): the food expenses only.
        view = app.locator("#view-list_expenses")
        view.locator("#q-list_expenses-category").fill("food")
        view.get_by_role("button", name="Show").click()
        expect(app.locator("#view-list_expenses tbody tr")).to_have_count(1)
        expect(app.locator("#view-list_expenses tbody tr")).to_contain_text("lunch")
        expect(app.locator("#q-list_expenses-category")).to_have_value("food")

        log = page.evaluate("window.hostLog")
        assert log == ["mutate_app", "open_app", "mutate_app", "open_app"]
    finally:
        context.close()
    assert from_iframe == [] and to_charming == []


def test_a_rows_button_in_the_inline_view_completes_that_todo(browser, live_server_mcp, rosa):
    todo = app_definition_save(actor=rosa.user, definition=example("todo"))
    for title in ("Buy milk", "Call mum"):
        run_route(rosa.user, todo, "add_todo", {"title": title})
    context, page, app, from_iframe, to_charming = open_in_host(
        browser, live_server_mcp, rosa, {"app_id": str(todo.id)}, viewport={"width": 1280, "height": 900}
    )
    try:
        row = app.locator("#view-open_todos tr", has_text="Call mum")
        row.get_by_role("button", name="Tick off").click()

        expect(app.locator("#view-open_todos .notice-done")).to_contain_text("done")
        done = Record.objects.get(storage__app=todo, collection="todos", data__title="Call mum")
        assert done.data["done"] is True
        assert Record.objects.get(storage__app=todo, collection="todos", data__title="Buy milk").data["done"] is False
        expect(app.locator("#view-open_todos tbody tr", has_text="Call mum")).to_have_count(0)
        expect(app.locator("#view-open_todos tbody tr", has_text="Buy milk")).to_have_count(1)
        shot(page, "todo-completed")

        # A row action that deletes asks first, on the row; only "Yes" sends it.
        row = app.locator("#view-open_todos tbody tr", has_text="Buy milk")
        row.locator("details.destructive summary").click()
        expect(row.locator(".confirm-text")).to_contain_text("This cannot be undone.")
        row.locator("details.destructive button.danger").click()
        expect(app.locator("#view-open_todos .notice-done")).to_contain_text("Buy milk")
        assert not Record.objects.filter(storage__app=todo, collection="todos", data__title="Buy milk").exists()
    finally:
        context.close()
    assert from_iframe == [] and to_charming == []


def test_a_paged_views_next_page_link_runs_through_open_app(browser, live_server_mcp, rosa):
    expenses = app_definition_save(actor=rosa.user, definition=example("expenses"))
    month = timezone.now().strftime("%Y-%m")  # list_expenses shows this month unless told
    for n in range(55):  # it pages by 50
        params = {"amount": n + 1, "category": "food", "day": f"{month}-{1 + n % 28:02d}", "note": f"item {n}"}
        run_route(rosa.user, expenses, "add_expense", params)
    arguments = {"app_id": str(expenses.id), "view": "list_expenses"}
    context, page, app, from_iframe, to_charming = open_in_host(
        browser, live_server_mcp, rosa, arguments, viewport={"width": 1280, "height": 900}
    )
    try:
        view = app.locator("#view-list_expenses")
        expect(view.locator("tbody tr")).to_have_count(50)
        view.get_by_role("link", name="Next page").click()

        expect(view.locator("tbody tr")).to_have_count(5)
        expect(view.get_by_role("link", name="First page")).to_be_visible()
        assert page.evaluate("window.hostLog") == ["open_app"]
        shot(page, "expenses-page-2")
    finally:
        context.close()
    assert from_iframe == [] and to_charming == []
