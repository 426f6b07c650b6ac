from __future__ import annotations

import http.client
import json
import logging

import httpx2
import pytest
from django.test import override_settings
from mcp.shared.exceptions import MCPError

from apps_registry.services.tokens import token_revoke
from tests.mcp_tools.conftest import LEGACY, MODERN, mcp_client, run

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
LIST_2026 = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
HEADERS_2026 = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
INIT_2025 = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def post(url: str, body: dict, headers: dict) -> httpx2.Response:
    async def go():
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.post(url, json=body, headers=headers)

    return run(go())


@pytest.mark.parametrize(
    ("authorization", "error", "description"),
    [
        (None, "unauthorized", "Missing token: send the header 'Authorization: Bearer <token>'."),
        ("Bearer chm_nope_nope", "invalid_token", "Unknown token: no such API token exists."),
        ("Basic Zm9vOmJhcg==", "invalid_token", "Malformed Authorization header: expected 'Bearer <token>'."),
    ],
)
def test_requests_without_a_valid_token_get_401_pointing_at_resource_metadata(live, authorization, error, description):
    headers = dict(HEADERS_2026)
    if authorization:
        headers["Authorization"] = authorization

    response = post(live.mcp_url, LIST_2026, headers)

    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith(
        'Bearer resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp", '
        'scope="apps:read apps:write"'  # least privilege by default: a host steps up to apps:delete when refused
    )
    assert response.json()["error"] == error
    assert response.json()["error_description"].startswith(description)
    assert "chm_nope_nope" not in response.text


def test_a_revoked_token_is_refused_with_the_reason(live, alice):
    token_revoke(token=alice.user.api_tokens.get())

    response = post(live.mcp_url, LIST_2026, {**HEADERS_2026, "Authorization": f"Bearer {alice.token}"})

    assert response.status_code == 401
    assert "Revoked token" in response.json()["error_description"]
    assert alice.token not in response.text


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
def test_protected_resource_metadata_names_the_mcp_resource(client, path):
    with override_settings(CHARMING_PUBLIC_URL="https://charming.example.com"):
        response = client.get(path)

    assert response.status_code == 200
    assert response.json()["resource"] == "https://charming.example.com/mcp"
    assert response.json()["bearer_methods_supported"] == ["header"]


def test_a_foreign_origin_gets_403_even_with_a_valid_token(live, alice):
    headers = {**HEADERS_2026, "Authorization": f"Bearer {alice.token}", "Origin": "https://evil.example"}

    response = post(live.mcp_url, LIST_2026, headers)

    assert (response.status_code, response.text) == (403, "Invalid Origin header")


def test_a_foreign_origin_gets_403_without_a_token_too(live):
    response = post(live.mcp_url, LIST_2026, {**HEADERS_2026, "Origin": "https://evil.example"})

    assert (response.status_code, response.text) == (403, "Invalid Origin header")


def test_the_servers_own_origin_is_accepted(live, alice):
    headers = {**HEADERS_2026, "Authorization": f"Bearer {alice.token}", "Origin": "http://127.0.0.1:8000"}

    response = post(live.mcp_url, LIST_2026, headers)

    assert response.status_code == 200
    assert "list_apps" in {tool["name"] for tool in response.json()["result"]["tools"]}


def test_a_foreign_host_header_is_refused(live, alice):
    headers = {**HEADERS_2026, "Authorization": f"Bearer {alice.token}", "Host": "evil.example"}

    response = post(live.mcp_url, LIST_2026, headers)

    assert (response.status_code, response.text) == (421, "Invalid Host header")


def test_a_2025_session_cannot_be_used_with_another_users_token(live, alice, bob):
    opened = post(live.mcp_url, INIT_2025, {**ACCEPT, "Authorization": f"Bearer {alice.token}"})
    session_id = opened.headers["mcp-session-id"]
    session = {**ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    hijack = post(live.mcp_url, tools_list, {**session, "Authorization": f"Bearer {bob.token}"})
    own = post(live.mcp_url, tools_list, {**session, "Authorization": f"Bearer {alice.token}"})

    assert hijack.status_code == 404
    assert hijack.json()["error"] == {"code": -32600, "message": "Session not found"}
    assert own.status_code == 200


def test_a_2025_session_ends_with_delete(live, alice):
    auth = {"Authorization": f"Bearer {alice.token}"}
    session_id = post(live.mcp_url, INIT_2025, {**ACCEPT, **auth}).headers["mcp-session-id"]
    session = {**ACCEPT, **auth, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}

    async def delete_then_use():
        async with httpx2.AsyncClient(timeout=10) as http:
            deleted = await http.delete(live.mcp_url, headers=session)
            tools_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            after = await http.post(live.mcp_url, json=tools_list, headers=session)
            return deleted, after

    deleted, after = run(delete_then_use())

    assert deleted.status_code == 200
    assert after.status_code == 404
    assert after.json()["error"] == {"code": -32600, "message": "Session not found"}


def test_the_django_site_is_still_served_beside_mcp(live, alice):
    async def get():
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.get(f"{live.base_url}/api/apps/", headers={"Authorization": f"Bearer {alice.token}"})

    response = run(get())
    assert response.status_code == 200
    assert response.json() == {"ok": True, "value": []}


def test_tokens_never_reach_the_logs(live, alice, caplog):
    caplog.set_level(logging.DEBUG)

    async def session():
        async with mcp_client(live, alice.token, MODERN) as c:
            await c.list_tools()
            await c.call_tool("get_app", {"app_id": "not-a-uuid"})

    run(session())
    post(live.mcp_url, LIST_2026, {**HEADERS_2026, "Authorization": f"Bearer {alice.token}x"})

    assert alice.token not in caplog.text


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_an_unknown_tool_is_a_protocol_error_naming_the_tools(live, alice, mode):
    async def go():
        async with mcp_client(live, alice.token, mode) as c:
            return await c.call_tool("drop_database", {})

    try:
        run(go())
    except BaseException as raised:  # noqa: BLE001 - the client's task group may wrap the error
        error = raised
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        assert isinstance(error, MCPError)
        assert error.error.message.startswith("Unknown tool: 'drop_database'. Available: list_apps, get_app")
    else:
        raise AssertionError("an unknown tool was accepted")


def test_a_2025_session_can_open_its_event_stream_with_get(live, alice):
    auth = {"Authorization": f"Bearer {alice.token}"}
    session_id = post(live.mcp_url, INIT_2025, {**ACCEPT, **auth}).headers["mcp-session-id"]
    headers = {
        **auth,
        "Accept": "text/event-stream",
        "Mcp-Session-Id": session_id,
        "MCP-Protocol-Version": "2025-11-25",
    }

    async def open_stream():
        async with (
            httpx2.AsyncClient(timeout=10) as http,
            http.stream("GET", live.mcp_url, headers=headers) as response,
        ):
            return response.status_code, response.headers["content-type"]

    status, content_type = run(open_stream())
    assert status == 200
    assert content_type.startswith("text/event-stream")


def test_a_get_without_a_session_is_refused(live, alice):
    headers = {"Authorization": f"Bearer {alice.token}", "Accept": "text/event-stream"}

    async def get():
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.get(live.mcp_url, headers=headers)

    response = run(get())
    assert response.status_code == 400
    assert response.json()["error"] == {"code": -32600, "message": "Bad Request: Missing session ID"}


def test_header_values_padded_with_whitespace_are_read_without_it(live, alice):
    """RFC 9110 §5.5: the server hands header values over stripped (uvicorn's stock httptools protocol does not).

    http.client sends the values as given; httpx2 would refuse to send them padded.
    """
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "list_apps", "arguments": {}, "_meta": META},
    }
    host, port = live.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {
        **ACCEPT,
        "MCP-Protocol-Version": "2026-07-28 ",
        "Mcp-Method": "tools/call\t",
        "Mcp-Name": " list_apps \t ",
        "Authorization": f"Bearer {alice.token}  ",
    }
    try:
        connection.request("POST", "/mcp", body=json.dumps(call), headers=headers)
        response = connection.getresponse()
        status, body = response.status, json.loads(response.read())
    finally:
        connection.close()

    assert status == 200, body
    assert body["result"]["isError"] is False
