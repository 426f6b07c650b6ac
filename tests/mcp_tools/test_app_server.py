"""/mcp/apps/<app id>: one app's routes as typed tools, with /mcp's auth, scopes, roles and envelope, in both
protocol versions; 2025-11-25 sessions hear notifications/tools/list_changed when the definition changes."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx2
import mcp_types as types
import pytest
from django.test import Client as DjangoClient
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from apps_registry.access import membership_set
from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
from tests.factories import UserFactory
from tests.mcp_tools.conftest import LEGACY, MODERN, MODES, make_agent, run
from tests.mcp_tools.test_mutate_app import DEFINITION
from tests.oauth_helpers import register_ok, tokens_for

RESOURCE_METADATA = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"


def app_url(live, app) -> str:
    return f"{live.base_url}/mcp/apps/{app.id}"


def app_client(live, app, token: str, mode: str, **kwargs: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(app_url(live, app), http_client=http), mode=mode, **kwargs)


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


def tools_of(live, app, token: str, mode: str) -> dict[str, types.Tool]:
    async def go() -> dict[str, types.Tool]:
        async with app_client(live, app, token, mode) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    return run(go())


def call(live, app, token: str, mode: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    async def go() -> types.CallToolResult:
        async with app_client(live, app, token, mode) as client:
            return await client.call_tool(name, arguments)

    return run(go())


@pytest.mark.parametrize("mode", MODES)
def test_the_apps_routes_are_listed_as_typed_tools(live, alice, budget, mode):
    tools = tools_of(live, budget, alice.token, mode)

    assert sorted(tools) == ["add_expense", "broken", "count_expenses", "rename_expense"]
    add = tools["add_expense"]
    assert add.description == "Record one expense."
    assert add.input_schema == DEFINITION["routes"]["add_expense"]["input"]
    value_schema = add.output_schema["properties"]["value"]
    assert value_schema["properties"] == {"id": {"type": "string"}} and value_schema["required"] == ["id"]
    assert add.output_schema["required"] == ["ok"] and "error" in add.output_schema["properties"]
    hints = {name: tool.annotations for name, tool in tools.items()}
    assert (hints["count_expenses"].read_only_hint, hints["count_expenses"].idempotent_hint) == (True, True)
    assert hints["count_expenses"].destructive_hint is False
    # add_expense inserts: neither destructive nor idempotent; rename_expense overwrites a field: both.
    assert (hints["add_expense"].read_only_hint, hints["add_expense"].destructive_hint) == (False, False)
    assert hints["add_expense"].idempotent_hint is False
    assert (hints["rename_expense"].destructive_hint, hints["rename_expense"].idempotent_hint) == (True, True)
    assert all(tool.annotations.open_world_hint is False for tool in tools.values())


@pytest.mark.parametrize("mode", MODES)
def test_a_query_and_a_mutation_answer_the_query_app_envelope(live, alice, budget, mode):
    tools = tools_of(live, budget, alice.token, mode)

    added = call(live, budget, alice.token, mode, "add_expense", {"amount": 12.5, "category": "food"})
    counted = call(live, budget, alice.token, mode, "count_expenses", {})
    refused = call(live, budget, alice.token, mode, "add_expense", {"amount": -1.0, "category": "food"})

    record = Record.objects.get(storage__app=budget, collection="expenses")
    assert added.is_error is not True
    assert added.structured_content == {"ok": True, "value": {"id": record.record_id}}
    assert counted.structured_content == {"ok": True, "value": {"n": 1}}
    assert refused.is_error is True
    assert refused.structured_content["ok"] is False
    assert refused.structured_content["error"]["kind"] == "handler_error"
    assert refused.structured_content["error"]["message"] == "amount must be positive"
    for name, result in (("add_expense", added), ("count_expenses", counted), ("add_expense", refused)):
        assert list(Draft202012Validator(tools[name].output_schema).iter_errors(result.structured_content)) == []


@pytest.mark.parametrize("mode", MODES)
def test_bad_params_are_refused_with_the_routes_schema_error(live, alice, budget, mode):
    result = call(live, budget, alice.token, mode, "add_expense", {"amount": "twelve"})

    assert result.is_error is True
    assert result.structured_content["error"]["kind"] == "invalid_input"
    assert not Record.objects.filter(storage__app=budget).exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_viewers_token_cannot_call_a_mutation_tool(live, alice, budget, mode):
    bob = make_agent("bob")
    membership_set(actor=alice.user, app=budget, user=bob.user, role="viewer")

    listed = tools_of(live, budget, bob.token, mode)
    mutation = call(live, budget, bob.token, mode, "add_expense", {"amount": 1.0, "category": "tea"})
    query = call(live, budget, bob.token, mode, "count_expenses", {})

    assert "add_expense" in listed
    assert mutation.is_error is True
    assert mutation.structured_content["error"]["kind"] == "forbidden"
    assert mutation.structured_content["error"]["message"] == (
        "You are a viewer of app 'Budget'; viewers may only call its read-only tools (count_expenses). "
        "Ask the owner for editor access to change its data."
    )
    assert query.structured_content == {"ok": True, "value": {"n": 0}}
    assert not Record.objects.filter(storage__app=budget).exists()


@pytest.mark.parametrize("mode", MODES)
def test_another_users_token_sees_nothing_of_the_app(live, alice, budget, mode):
    bob = make_agent("bob")

    async def go() -> Exception:
        try:
            async with app_client(live, budget, bob.token, mode) as client:
                await client.list_tools()
        except BaseException as raised:  # noqa: BLE001 - the client's task group may wrap it
            return raised
        raise AssertionError("another user's token connected")

    run(go())
    response = httpx2.post(
        app_url(live, budget),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {bob.token}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 404
    assert response.json() == {
        "error": "not_found",
        "error_description": f"No app with id {budget.id} exists or is visible to you.",
    }
    assert "Budget" not in response.text and "add_expense" not in response.text


def test_an_unknown_or_malformed_app_id_is_the_same_404(live, alice):
    for app_id in ("00000000-0000-4000-8000-000000000000", "budget"):
        response = httpx2.post(
            f"{live.base_url}/mcp/apps/{app_id}",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {alice.token}", "Accept": "application/json, text/event-stream"},
        )
        assert response.status_code == 404
        assert response.json()["error_description"] == f"No app with id {app_id} exists or is visible to you."


def test_without_a_token_the_401_points_at_the_mcp_resource(live, budget):
    response = httpx2.post(app_url(live, budget), json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{RESOURCE_METADATA}"')


@pytest.mark.parametrize("mode", MODES)
def test_a_read_only_personal_token_lists_only_the_query_tools(live, alice, budget, mode):
    token = token_create(user=alice.user, name="read only", scopes=["apps:read"]).plaintext

    assert sorted(tools_of(live, budget, token, mode)) == ["count_expenses"]


def test_a_read_only_oauth_token_lists_every_route_and_is_refused_a_mutation_with_the_step_up(live, alice, budget):
    browser = DjangoClient()
    browser.force_login(alice.user)
    client_id = register_ok(DjangoClient())["client_id"]
    token = tokens_for(browser, client_id, scope="apps:read")["access_token"]

    listed = tools_of(live, budget, token, MODERN)
    refused = httpx2.post(
        app_url(live, budget),
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add_expense", "arguments": {}}},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
    )

    assert sorted(listed) == ["add_expense", "broken", "count_expenses", "rename_expense"]
    assert refused.status_code == 403
    assert refused.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="apps:write", resource_metadata="{RESOURCE_METADATA}"'
    )
    assert refused.json()["id"] == 7


@pytest.mark.parametrize("mode", MODES)
def test_a_read_only_token_is_refused_a_mutation_tool_with_the_403_step_up_challenge(live, alice, budget, mode):
    token = token_create(user=alice.user, name="read only", scopes=["apps:read"]).plaintext

    async def go() -> BaseException:
        try:
            async with app_client(live, budget, token, mode) as client:
                await client.call_tool("add_expense", {"amount": 1.0, "category": "tea"})
        except BaseException as raised:  # noqa: BLE001
            return raised
        raise AssertionError("the mutation was not refused")

    raised = run(go())
    while isinstance(raised, BaseExceptionGroup) and len(raised.exceptions) == 1:
        raised = raised.exceptions[0]
    assert isinstance(raised, MCPError)
    assert raised.error.data == {"error": "insufficient_scope", "scope": "apps:write"}
    assert not Record.objects.filter(storage__app=budget).exists()
    assert call(live, budget, token, mode, "count_expenses", {}).structured_content["ok"] is True


def test_an_unknown_tool_names_the_routes_there_are(live, alice, budget):
    async def go() -> BaseException:
        try:
            async with app_client(live, budget, alice.token, MODERN) as client:
                await client.call_tool("drop_everything", {})
        except BaseException as raised:  # noqa: BLE001
            return raised
        raise AssertionError("an unknown tool was called")

    raised = run(go())
    while isinstance(raised, BaseExceptionGroup) and len(raised.exceptions) == 1:
        raised = raised.exceptions[0]
    assert isinstance(raised, MCPError)
    assert raised.error.message == (
        "Unknown tool: 'drop_everything'. Available: add_expense, broken, count_expenses, rename_expense."
    )


def test_a_session_is_told_when_the_apps_routes_change_and_lists_the_new_ones(live, alice, budget):
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    definition = copy.deepcopy(DEFINITION)
    definition["routes"]["sum_expenses"] = {
        "kind": "query",
        "description": "The total spent.",
        "input": {"type": "object"},
        "output": {"type": "object", "properties": {"total": {"type": "number"}}},
        "steps": [{"sum": {"collection": "expenses", "field": "amount"}, "as": "t"}, {"return": "{'total': t}"}],
    }
    definition["tests"].append({"route": "sum_expenses", "expect": {"value": {"total": 0}}})

    async def go() -> tuple[list[str], bool, list[str]]:
        async with app_client(live, budget, alice.token, LEGACY, message_handler=on_message) as client:
            before = [tool.name for tool in (await client.list_tools()).tools]
            await asyncio.to_thread(
                app_definition_save,
                actor=alice.user,
                definition=definition,
                app_id=budget.id,
                allow_failing_tests=True,
            )
            await client.call_tool("count_expenses", {})
            await asyncio.wait_for(changed.wait(), timeout=10)
            after = [tool.name for tool in (await client.list_tools()).tools]
            return before, changed.is_set(), after

    before, told, after = run(go())

    assert "sum_expenses" not in before
    assert told
    assert "sum_expenses" in after


def test_a_session_opened_on_one_app_is_unknown_on_another(live, alice, budget):
    other = app_definition_save(actor=alice.user, definition={**DEFINITION, "name": "Other"})
    headers = {"Authorization": f"Bearer {alice.token}", "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    opened = httpx2.post(app_url(live, budget), json=initialize, headers=headers)
    session = opened.headers["mcp-session-id"]

    elsewhere = httpx2.post(
        app_url(live, other),
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
    )

    assert opened.status_code == 200
    assert elsewhere.status_code == 404
    assert elsewhere.json()["error_description"] == "Session not found."


def test_a_user_without_apps_gets_404_not_a_server_error(live, budget):
    stranger = UserFactory(username="carol")
    token = token_create(user=stranger, name="t").plaintext
    response = httpx2.get(app_url(live, budget), headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 404


def _definition_with_a_new_route() -> dict:
    definition = copy.deepcopy(DEFINITION)
    definition["routes"]["sum_expenses"] = {
        "kind": "query",
        "description": "The total spent.",
        "input": {"type": "object"},
        "output": {"type": "object", "properties": {"total": {"type": "number"}}},
        "steps": [{"sum": {"collection": "expenses", "field": "amount"}, "as": "t"}, {"return": "{'total': t}"}],
    }
    return definition


def test_a_2026_listen_stream_hears_when_the_apps_routes_change(live, alice, budget, settings):
    settings.CHARMING_MCP_APP_LISTEN_POLL_SECONDS = 0.2

    async def go() -> tuple[Any, list[str]]:
        async with app_client(live, budget, alice.token, MODERN) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await asyncio.to_thread(
                    app_definition_save,
                    actor=alice.user,
                    definition=_definition_with_a_new_route(),
                    app_id=budget.id,
                    allow_failing_tests=True,
                )
                event = await asyncio.wait_for(subscription.__anext__(), timeout=10)
            return event, [tool.name for tool in (await client.list_tools()).tools]

    event, after = run(go())

    assert type(event).__name__ == "ToolsListChanged"
    assert "sum_expenses" in after


def test_a_user_keeps_only_so_many_listen_streams_open(live, alice, budget, settings):
    settings.CHARMING_MCP_APP_LISTENS_PER_USER = 1

    async def go() -> BaseException:
        async with (
            app_client(live, budget, alice.token, MODERN) as first,
            app_client(live, budget, alice.token, MODERN) as second,
            first.listen(tools_list_changed=True),
        ):
            try:
                async with second.listen(tools_list_changed=True):
                    pass
            except BaseException as raised:  # noqa: BLE001
                return raised
        raise AssertionError("a second stream was opened")

    raised = run(go())
    while isinstance(raised, BaseExceptionGroup) and len(raised.exceptions) == 1:
        raised = raised.exceptions[0]
    assert isinstance(raised, MCPError)
    assert raised.error.message == (
        "You already have 1 listen streams open on app servers (CHARMING_MCP_APP_LISTENS_PER_USER); close one "
        "before opening another."
    )


MONEY_STEP = {
    "format": 1,
    "name": "Till",
    "collections": {"sales": {}},
    "routes": {
        "total": {
            "kind": "query",
            "input": {"type": "object", "properties": {"amount": {"type": "number"}}},
            "output": {
                "type": "object",
                "properties": {
                    "total": {"type": "number", "multipleOf": 0.01},
                    "count": {"type": "integer", "multipleOf": 1},
                    "lines": {"type": "array", "items": {"type": "number", "multipleOf": 0.05}},
                    "note": {"const": {"multipleOf": 0.5}},
                },
                "required": ["total", "count", "lines", "note"],
            },
            "steps": [
                {"return": "{'total': params.amount, 'count': 2, 'lines': [1.15, 0.35], 'note': {'multipleOf': 0.5}}"}
            ],
        }
    },
}


@pytest.mark.parametrize("mode", MODES)
def test_a_route_with_a_money_step_answers_amounts_the_sdk_client_accepts(live, alice, mode):
    """The SDK client checks each result against the tool's output schema by float division (19.99 / 0.01 is not
    whole there): a fractional multipleOf is left to the server's own check, so ordinary amounts get through."""
    till = app_definition_save(actor=alice.user, definition=MONEY_STEP)
    output = tools_of(live, till, alice.token, mode)["total"].output_schema["properties"]["value"]
    assert "multipleOf" not in output["properties"]["total"] and output["properties"]["count"]["multipleOf"] == 1
    assert "multipleOf" not in output["properties"]["lines"]["items"]
    assert output["properties"]["note"] == {"const": {"multipleOf": 0.5}}  # data, kept as written
    answered = call(live, till, alice.token, mode, "total", {"amount": 19.99})
    assert answered.is_error is not True
    assert answered.structured_content["value"]["total"] == 19.99
    refused = call(live, till, alice.token, mode, "total", {"amount": 19.995})  # the server's check still holds
    assert refused.is_error is True and refused.structured_content["error"]["kind"] == "invalid_output"
    assert refused.structured_content["error"]["errors"] == [
        {"path": "$.total", "message": "19.995 is not a multiple of 0.01"}
    ]
