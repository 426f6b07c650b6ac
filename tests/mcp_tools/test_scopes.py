"""A token's scopes on /mcp: tools/list shows only the tools they allow, and a tools/call of any other tool is
refused by the server with HTTP 403 insufficient_scope (so a host can step up), in both protocol versions."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from apps_registry.access import SCOPES
from apps_registry.models import App
from apps_registry.services.tokens import token_create
from mcp_tools.registry import TOOLS
from tests.factories import UserFactory, make_app
from tests.mcp_tools.conftest import LEGACY, MODERN, MODES, mcp_client, run
from tests.mcp_tools.test_endpoint import ACCEPT, INIT_2025, META

EXPECTED_SCOPES = {
    "list_apps": "apps:read",
    "get_app": "apps:read",
    "open_app": "apps:read",
    "query_app": "apps:read",
    "mutate_app": "apps:write",
    "send_feedback": "apps:write",
    "delete_app": "apps:delete",
    "create_app": "apps:write",
    "update_app": "apps:write",
    "get_app_source": "apps:write",
    "check_app": "apps:write",
    "list_changes": "apps:read",
    "revert_change": "apps:write",
    "list_schedules": "apps:read",
    "create_schedule": "apps:write",
    "update_schedule": "apps:write",
    "delete_schedule": "apps:write",
    "list_hooks": "apps:write",
    "create_hook": "apps:write",
    "rotate_hook_secret": "apps:write",
    "delete_hook": "apps:write",
    "search_templates": "apps:read",
    "remix_app": "apps:write",
    "export_app": "apps:write",
}
TOKEN_SCOPES = [
    pytest.param(("apps:read",), id="read"),
    pytest.param(("apps:write",), id="write"),
    pytest.param(("apps:delete",), id="delete"),
    pytest.param(("apps:read", "apps:write"), id="read+write"),
    pytest.param(("apps:read", "apps:write", "apps:delete"), id="all"),
]
RESOURCE_METADATA = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"


def message_for(scope: str) -> str:
    return (
        f"This token does not carry the {scope} scope ({SCOPES[scope].lower()}), which this needs. "
        f"Connect again granting {scope}, or use a token that has it."
    )


def token_with(*scopes: str) -> tuple[object, str]:
    user = UserFactory()
    return user, token_create(user=user, name="scoped", scopes=scopes).plaintext


def arguments_for(name: str, app_id: str) -> dict:
    return {
        "list_apps": {},
        "get_app": {"app_id": app_id},
        "open_app": {"app_id": app_id},
        "query_app": {"app_id": app_id, "op": "list", "params": {}},
        "mutate_app": {"app_id": app_id, "op": "add", "params": {}},
        "send_feedback": {"app_id": app_id, "body": "hello"},
        "delete_app": {"app_id": app_id, "confirm": True},
        "create_app": {"definition": {"name": "Scoped", "routes": {}}},
        "update_app": {"app_id": app_id, "expected_version": 0, "definition": {"name": "Scoped", "routes": {}}},
        "get_app_source": {"app_id": app_id},
        "check_app": {"definition": {"name": "Scoped", "routes": {}}},
        "list_changes": {"app_id": app_id},
        "revert_change": {"change_id": "1"},
        "list_schedules": {"app_id": app_id},
        "create_schedule": {"app_id": app_id, "route": "add", "cron": "daily"},
        "update_schedule": {"schedule_id": app_id, "active": False},
        "delete_schedule": {"schedule_id": app_id},
        "list_hooks": {"app_id": app_id},
        "create_hook": {"app_id": app_id, "route": "add"},
        "rotate_hook_secret": {"hook_id": app_id},
        "delete_hook": {"hook_id": app_id},
        "search_templates": {"query": "budget"},
        "remix_app": {"template_id": app_id},
        "export_app": {"app_id": app_id},
    }[name]


def test_every_tool_declares_the_scope_of_its_need():
    assert {tool.name: tool.scope for tool in TOOLS} == EXPECTED_SCOPES


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scopes", TOKEN_SCOPES)
def test_tools_list_shows_only_the_tools_the_tokens_scopes_allow(live, mode, scopes):
    _user, token = token_with(*scopes)

    async def listed() -> list[str]:
        async with mcp_client(live, token, mode) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert run(listed()) == [tool.name for tool in TOOLS if EXPECTED_SCOPES[tool.name] in scopes]


def _raw_call_2026(live, token: str, name: str, arguments: dict) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META},
    }
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.post(live.mcp_url, json=body, headers=headers)

    return run(go())


def _raw_call_2025(live, token: str, name: str, arguments: dict) -> httpx2.Response:
    """Within a session: initialize, initialized, then the tools/call POST (which carries Mcp-Session-Id)."""
    auth = {**ACCEPT, "Authorization": f"Bearer {token}"}

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=10) as http:
            opened = await http.post(live.mcp_url, json=INIT_2025, headers=auth)
            assert opened.status_code == 200, opened.text
            session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(live.mcp_url, json=initialized, headers=session)).status_code == 202
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
            return await http.post(live.mcp_url, json=call, headers=session)

    return run(go())


RAW_CALLS = [pytest.param(_raw_call_2025, id="2025-11-25"), pytest.param(_raw_call_2026, id="2026-07-28")]


@pytest.mark.parametrize("raw_call", RAW_CALLS)
@pytest.mark.parametrize("scopes", TOKEN_SCOPES)
@pytest.mark.parametrize("tool", [tool.name for tool in TOOLS])
def test_calling_a_tool_outside_the_tokens_scopes_is_refused_with_403_naming_the_scope(live, raw_call, scopes, tool):
    user, token = token_with(*scopes)
    app = make_app(owner=user, name="Budget")
    needed = EXPECTED_SCOPES[tool]

    response = raw_call(live, token, tool, arguments_for(tool, str(app.id)))

    if needed in scopes:
        assert response.status_code == 200, response.text  # the SDK answered; the tool ran (or said why not)
        assert "insufficient_scope" not in response.text
        return
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="{needed}", resource_metadata="{RESOURCE_METADATA}"'
    )
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32600,
            "message": message_for(needed),
            "data": {"error": "insufficient_scope", "scope": needed},
        },
    }
    assert App.objects.filter(pk=app.pk).exists() and not app.feedback.exists()  # nothing happened


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_surfaces_the_refusal_and_the_session_goes_on(live, mode):
    user, token = token_with("apps:read")
    app = make_app(owner=user, name="Budget")

    async def scenario() -> tuple[str, list[str]]:
        async with mcp_client(live, token, mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("mutate_app", arguments_for("mutate_app", str(app.id)))
            listed = await client.call_tool("list_apps", {})
            return refused.value.error.message, [a["name"] for a in listed.structured_content["value"]]

    message, names = run(scenario())
    assert message == message_for("apps:write")
    assert names == ["Budget"]


def test_a_delete_without_apps_delete_changes_nothing(live):
    user, token = token_with("apps:read", "apps:write")
    app = make_app(owner=user, name="Budget")

    response = _raw_call_2026(live, token, "delete_app", {"app_id": str(app.id), "confirm": True})

    assert response.status_code == 403
    assert App.objects.filter(pk=app.pk).exists()


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_a_read_only_token_still_reads_and_queries(live, mode):
    user, token = token_with("apps:read")
    make_app(owner=user, name="Budget")

    async def listed() -> list[str]:
        async with mcp_client(live, token, mode) as client:
            result = await client.call_tool("list_apps", {})
            return [a["name"] for a in result.structured_content["value"]]

    assert run(listed()) == ["Budget"]


@pytest.mark.django_db
def test_the_tools_call_handler_refuses_out_of_scope_calls_too_as_a_tool_error():
    """The backstop behind the ASGI 403 (e.g. a server mounted without it): the tool never runs."""
    import asyncio

    import mcp_types as types

    from mcp_tools.auth import Caller, current_caller
    from mcp_tools.server import call_tool

    user = UserFactory()
    app = make_app(owner=user, name="Budget")
    reset = current_caller.set(Caller(user=user, token_id=None, scopes=frozenset({"apps:read"})))
    try:
        params = types.CallToolRequestParams(name="delete_app", arguments={"app_id": str(app.id), "confirm": True})
        result = asyncio.run(call_tool(None, params))  # type: ignore[arg-type]
    finally:
        current_caller.reset(reset)

    assert result.is_error is True
    assert message_for("apps:delete") in result.content[0].text
    assert App.objects.filter(pk=app.pk).exists()


@pytest.mark.parametrize("depth", [990, 5000])
@pytest.mark.parametrize("tool", ["get_app", "mutate_app"])
def test_arguments_nested_deeper_than_the_parser_goes_are_refused_without_a_server_error(live, tool, depth):
    _user, token = token_with("apps:read")
    nested = "[" * depth + "]" * depth
    body = (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "' + tool + '", '
        '"arguments": {"app_id": ' + nested + '}, "_meta": ' + json.dumps(META) + "}}"
    )
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }

    async def go() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.post(live.mcp_url, content=body.encode(), headers=headers)

    response = run(go())
    assert response.status_code in (200, 400, 403), response.text
    assert "Traceback" not in response.text and "internal_error" not in response.text
    if response.status_code == 400:  # the SDK's parse error: nothing ran
        assert response.json()["error"] == {"code": -32700, "message": "Parse error"}
    elif tool == "mutate_app":  # outside a read-only token's scopes however it is parsed
        assert response.status_code == 403
