"""MCP Apps over the real endpoint, both protocol versions: the io.modelcontextprotocol/ui extension, the UI
resource ui://charming/app, and open_app (its contract, its result, the app's page HTML it carries, access)."""

from __future__ import annotations

import re

import httpx2
import mcp_types as types
import pytest

from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from mcp_tools.ui import APP_UI_MIME_TYPE, APP_UI_URI, EXT_APPS_VERSION, HTML_META_KEY, UI_EXTENSION
from tests.apps_registry.route_helpers import example
from tests.apps_registry.route_helpers import run as run_route
from tests.mcp_tools.conftest import MODERN, MODES, call_tool_error, call_tool_ok, mcp_client, run, text_of

CSP = {"connectDomains": [], "resourceDomains": []}


@pytest.fixture
def budget(alice):
    app = app_definition_save(actor=alice.user, definition=example("budget"))
    run_route(alice.user, app, "set_budget", {"limit": 300})
    for amount, category, note in ((12.5, "food", "lunch"), (40, "travel", "train"), (7.25, "food", "<b>bold</b>")):
        run_route(alice.user, app, "add_expense", {"amount": amount, "category": category, "note": note})
    return app


async def _discovered_capabilities(live, agent) -> dict:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {
        "Authorization": f"Bearer {agent.token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "server/discover",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    async with httpx2.AsyncClient() as http:
        response = await http.post(live.mcp_url, json=body, headers=headers)
    return response.json()["result"]["capabilities"]


async def _ui_surface(live, agent, mode):
    async with mcp_client(live, agent.token, mode) as client:
        capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
        if mode == MODERN:  # the SDK client adopts 2026-07-28 without asking: read server/discover off the wire
            capabilities = await _discovered_capabilities(live, agent)
        resources = await client.list_resources()
        read = await client.read_resource(APP_UI_URI)
        tools = await client.list_tools()
        return capabilities, resources, read, tools


@pytest.mark.parametrize("mode", MODES)
def test_the_ui_extension_resource_and_open_app_are_declared(live, alice, mode):
    capabilities, resources, read, tools = run(_ui_surface(live, alice, mode))

    # 2026-07-28 declares extensions as such; 2025-11-25's capabilities have no `extensions`: `experimental` then.
    declared = capabilities["extensions"] if mode == MODERN else capabilities["experimental"]
    assert declared == {UI_EXTENSION: {}}
    listed = {str(r.uri): r for r in resources.resources}
    assert listed[APP_UI_URI].mime_type == APP_UI_MIME_TYPE == "text/html;profile=mcp-app"
    assert listed[APP_UI_URI].meta == {"ui": {"csp": CSP, "prefersBorder": True}}
    (content,) = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert (str(content.uri), content.mime_type) == (APP_UI_URI, APP_UI_MIME_TYPE)
    assert content.meta == {"ui": {"csp": CSP, "prefersBorder": True}}
    (open_app,) = [t for t in tools.tools if t.name == "open_app"]
    assert open_app.meta == {"ui": {"resourceUri": APP_UI_URI}}
    assert open_app.annotations is not None and open_app.annotations.read_only_hint is True


@pytest.mark.parametrize("mode", MODES)
def test_the_ui_document_is_self_contained_and_reaches_no_server(live, alice, mode):
    _, _, read, _ = run(_ui_surface(live, alice, mode))
    html = read.contents[0].text

    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html).group(1)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["connect-src"] == "'none'" and directives["form-action"] == "'none'"
    # Scripts run by hash only: the ext-apps bundle and Charming's App script, nothing injected later.
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/=]+' 'sha256-[A-Za-z0-9+/=]+'", directives["script-src"])
    assert html.count("<script>") == 2 and "<script src" not in html
    assert "McpExtApps" in html and "callServerTool" in html
    # Nothing to load from anywhere: no link, no src, no URL of this server.
    assert live.base_url not in html and "/static/" not in html and "<link" not in html


@pytest.mark.parametrize("mode", MODES)
def test_open_app_shows_the_start_view_with_routes_hints_data_and_a_summary(live, alice, budget, mode):
    result = call_tool_ok(live, alice, mode, "open_app", {"app_id": str(budget.id)})

    value = result.structured_content["value"]
    assert value["app"] == {
        "id": str(budget.id),
        "name": budget.name,
        "description": budget.description,
        "role": "owner",
        "version": budget.version,
    }
    routes = {r["name"]: r for r in value["routes"]}
    assert set(routes) == {
        "set_budget",
        "add_expense",
        "delete_expense",
        "recategorize_expense",
        "list_expenses",
        "big_expenses",
        "summary",
    }
    assert routes["add_expense"]["kind"] == "mutation" and routes["add_expense"]["title"] == "Add expense"
    assert routes["add_expense"]["input"]["required"] == ["amount", "category"]
    # The start view: the query its author marked "start".
    assert value["view"] == "summary" and value["params"] == {}
    queried = call_tool_ok(live, alice, mode, "query_app", {"app_id": str(budget.id), "op": "summary"})
    assert value["data"] == queried.structured_content["value"]
    text = text_of(result)
    assert text.startswith(f"Opened app '{budget.name}' (id {budget.id}) for the user; you are owner.")
    assert "\nViews: Big expenses, List expenses, This month.\n" in text
    assert "\nActions: Add expense, Delete, Move, Set budget.\n" in text
    assert "\nThis month (summary) returned: {" in text

    html = result.meta[HTML_META_KEY]
    assert 'data-op="add_expense"' in html and 'name="amount"' in html  # the page's own form
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html  # record values escaped as on the page
    assert "<script" not in html and "csrfmiddlewaretoken" not in html


@pytest.mark.parametrize("mode", MODES)
def test_open_app_shows_the_view_named_with_its_params(live, alice, budget, mode):
    args = {"app_id": str(budget.id), "view": "list_expenses", "params": {"category": "food"}}
    result = call_tool_ok(live, alice, mode, "open_app", args)

    value = result.structured_content["value"]
    assert value["view"] == "list_expenses" and value["params"] == {"category": "food"}
    assert sorted(e["amount"] for e in value["data"]) == [7.25, 12.5]
    html = result.meta[HTML_META_KEY]
    assert 'name="list_expenses.category" value="food"' in html  # the filter as the page would show it


@pytest.mark.parametrize("mode", MODES)
def test_open_app_reports_a_view_refusing_its_params_and_still_shows_the_app(live, alice, budget, mode):
    args = {"app_id": str(budget.id), "view": "list_expenses", "params": {"category": "food", "limit": 0}}
    result = call_tool_ok(live, alice, mode, "open_app", args)

    value = result.structured_content["value"]
    assert value["data"] is None and value["view_error"]["kind"] == "invalid_input"
    assert "The view list_expenses did not run:" in text_of(result)
    assert 'data-op="add_expense"' in result.meta[HTML_META_KEY]


@pytest.mark.parametrize("mode", MODES)
def test_open_app_refuses_an_unknown_view_naming_the_views(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "open_app", {"app_id": str(budget.id), "view": "nope"})

    error = result.structured_content["error"]
    assert error["kind"] == "unknown_op"
    assert error["message"] == (
        "This app has no view (query route) named 'nope'. Its views: big_expenses, list_expenses, summary."
    )


@pytest.mark.parametrize("mode", MODES)
def test_open_app_refuses_another_users_app_as_query_app_does(live, alice, bob, budget, mode):
    opened = call_tool_error(live, bob, mode, "open_app", {"app_id": str(budget.id)})
    queried = call_tool_error(live, bob, mode, "query_app", {"app_id": str(budget.id), "op": "summary"})

    assert opened.structured_content["error"] == queried.structured_content["error"]
    assert opened.structured_content["error"]["kind"] == "not_found"
    assert opened.meta is None or HTML_META_KEY not in opened.meta
    assert budget.name not in text_of(opened)


@pytest.mark.parametrize("mode", MODES)
def test_open_app_changes_nothing(live, alice, budget, mode):
    before = Record.objects.filter(storage__app=budget).count()
    call_tool_ok(live, alice, mode, "open_app", {"app_id": str(budget.id)})
    assert Record.objects.filter(storage__app=budget).count() == before


def test_the_vendored_ext_apps_bundle_records_its_version_and_licence():
    from django.conf import settings

    static = settings.BASE_DIR / "apps_registry" / "static" / "charming"
    head = (static / "ext-apps-app.min.js").read_text(encoding="utf-8")[:600]
    assert head.startswith(f"/*! @modelcontextprotocol/ext-apps {EXT_APPS_VERSION}, the App (View) side")
    assert "Licence: MIT" in head and "ext-apps.LICENSE.txt" in head
    assert "MIT License" in (static / "ext-apps.LICENSE.txt").read_text(encoding="utf-8")
