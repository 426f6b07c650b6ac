from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from jsonschema import Draft202012Validator

from mcp_tools.contracts import CONTRACTS_DIR
from mcp_tools.registry import TOOLS
from tests.mcp_tools.conftest import run

SHARED_SPEC = Path(__file__).resolve().parents[2].parent / "shared" / "spec"
REPO_CONTRACTS = Path(__file__).resolve().parents[2] / "mcp_tools" / "contracts"
TOOL_NAMES = [tool.name for tool in TOOLS]
CONTRACTS = {tool.name: tool.contract for tool in TOOLS}


@pytest.mark.parametrize("name", ["mutate_app", "delete_app"])
def test_promised_contracts_are_byte_for_byte_copies_of_the_shared_spec(name):
    if not SHARED_SPEC.is_dir():
        pytest.skip("../shared/spec is not beside this checkout")
    assert (REPO_CONTRACTS / f"{name}.json").read_bytes() == (SHARED_SPEC / f"{name}.json").read_bytes()


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_contract_has_valid_schemas_and_the_fields_a_tool_needs(name):
    contract = CONTRACTS[name]
    assert contract["name"] == name
    assert {"description", "inputSchema", "outputSchema", "annotations", "execution"} <= contract.keys()
    Draft202012Validator.check_schema(contract["inputSchema"])
    Draft202012Validator.check_schema(contract["outputSchema"])


@pytest.mark.parametrize(
    "name", ["list_apps", "get_app", "open_app", "query_app", "get_app_source", "check_app", "list_changes"]
)
def test_companion_readers_are_annotated_read_only(name):
    annotations = CONTRACTS[name]["annotations"]
    assert annotations["readOnlyHint"] is True and annotations["destructiveHint"] is False


def test_send_feedback_is_annotated_as_a_non_destructive_write():
    assert CONTRACTS["send_feedback"]["annotations"] == {
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
        "readOnlyHint": False,
        "title": "Send Feedback",
    }


def test_companion_contracts_are_formatted_like_the_spec():
    for name in TOOL_NAMES:
        text = (CONTRACTS_DIR / f"{name}.json").read_text()
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n", name


def _sse_json(text: str) -> dict:
    return next(json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip())


async def _tools_list_2025(url: str, token: str) -> list[dict]:
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=init, headers=headers)
        session_id = response.headers["mcp-session-id"]
        session = {**headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        response = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
        await http.delete(url, headers=session)
    return _sse_json(response.text)["result"]["tools"]


async def _tools_list_2026(url: str, token: str) -> list[dict]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["result"]["tools"]


def test_tools_list_on_2025_11_25_serves_the_contracts_verbatim(live, alice):
    tools = {tool["name"]: tool for tool in run(_tools_list_2025(live.mcp_url, alice.token))}
    assert list(tools) == list(TOOL_NAMES)
    for name in TOOL_NAMES:
        assert tools[name] == json.loads((CONTRACTS_DIR / f"{name}.json").read_text())


def test_tools_list_on_2026_07_28_serves_the_contracts_without_execution(live, alice):
    tools = {tool["name"]: tool for tool in run(_tools_list_2026(live.mcp_url, alice.token))}
    assert list(tools) == list(TOOL_NAMES)
    for name in TOOL_NAMES:
        expected = json.loads((CONTRACTS_DIR / f"{name}.json").read_text())
        del expected["execution"]
        assert tools[name] == expected


def test_each_tool_is_one_record_and_only_delete_app_answers_without_the_envelope():
    assert TOOL_NAMES == [
        "list_apps",
        "get_app",
        "open_app",
        "query_app",
        "mutate_app",
        "send_feedback",
        "delete_app",
        "create_app",
        "update_app",
        "get_app_source",
        "check_app",
        "list_changes",
        "revert_change",
        "list_schedules",
        "create_schedule",
        "update_schedule",
        "delete_schedule",
        "list_hooks",
        "create_hook",
        "rotate_hook_secret",
        "delete_hook",
        "search_templates",
        "remix_app",
        "export_app",
    ]
    assert all(tool.contract["name"] == tool.name for tool in TOOLS)
    assert [tool.name for tool in TOOLS if not tool.answers_envelope] == ["delete_app"]


@pytest.mark.parametrize(
    ("name", "read_only", "destructive", "idempotent"),
    [
        ("create_app", False, False, False),  # adds a new app; calling twice adds two
        ("update_app", False, True, False),  # replaces a definition (routes may go away); bumps the version
        ("get_app_source", True, False, True),
        ("check_app", True, False, True),  # its tests run in a transaction that is always rolled back
        ("list_schedules", True, False, True),
        ("create_schedule", False, False, False),  # calling twice makes two schedules
        ("update_schedule", False, False, True),  # the same fields again leave the same schedule
        ("delete_schedule", False, True, True),  # its record of runs goes with it
        ("list_hooks", True, False, True),
        ("create_hook", False, False, False),  # calling twice makes two hooks, each with its secret
        ("rotate_hook_secret", False, False, False),  # each call makes a new secret
        ("delete_hook", False, True, True),  # its URL stops working, its deliveries' record goes
        ("search_templates", True, False, True),
        ("remix_app", False, False, False),  # each call makes another app
        ("export_app", True, False, True),  # a link to read; nothing changes
    ],
)
def test_authoring_tools_are_annotated_for_what_they_do(name, read_only, destructive, idempotent):
    annotations = CONTRACTS[name]["annotations"]
    assert annotations["readOnlyHint"] is read_only
    assert annotations["destructiveHint"] is destructive
    assert annotations["idempotentHint"] is idempotent
    assert annotations["openWorldHint"] is False  # they touch nothing outside Charming


@pytest.mark.parametrize("name", ["create_app", "update_app", "check_app"])
def test_authoring_contracts_name_the_guide_resource(name):
    assert "charming://guide/authoring" in CONTRACTS[name]["description"]


def test_get_app_only_adds_optional_fields_to_its_output_schema():
    value = CONTRACTS["get_app"]["outputSchema"]["properties"]["value"]
    assert value["required"] == ["id", "name", "description", "role", "routes"]
    assert value["properties"]["version"]["type"] == "integer"
    assert value["properties"]["authoring_guide"]["type"] == "string"
