"""The tool result budget over MCP: get_app's routes and a route's paged find are cut at an item
boundary (valid JSON, valid against the schemas that govern them) with a cursor that continues."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from apps_registry.services.definitions import app_definition_save
from mcp_tools.registry import TOOLS
from tests.apps_registry.test_find_cursor import ADD, CURSOR, PAGE_INPUT, PAGE_OUTPUT
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, text_of

OUTPUT = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS}


def valid(tool, result):
    assert list(OUTPUT[tool].iter_errors(result.structured_content)) == []
    return result.structured_content


def many_routes_app(owner, n: int):
    route = {
        "kind": "query",
        "description": "r" * 200,
        "output": {"type": "object", "description": "o" * 200},
        "steps": [{"return": "{}"}],
    }
    return app_definition_save(
        actor=owner, definition={"name": "Many", "routes": {f"r{i:02}": route for i in range(n)}}
    )


@pytest.mark.parametrize("mode", MODES)
def test_get_app_cuts_its_routes_at_the_budget_and_continues_by_cursor(live, alice, mode, settings):
    app = many_routes_app(alice.user, 12)
    settings.CHARMING_TOOL_RESULT_BYTES = 2000
    names, cursor, pages = [], None, 0
    while True:
        args = {"app_id": str(app.id)} | ({} if cursor is None else {"cursor": cursor})
        result = call_tool_ok(live, alice, mode, "get_app", args)
        got = valid("get_app", result)
        json.loads(json.dumps(got))
        names += [route["name"] for route in got["value"]["routes"]]
        pages += 1
        cursor = got.get("next_cursor")
        if cursor is None:
            assert "truncated" not in got
            break
        assert got["truncated"] is True and "call get_app with cursor" in text_of(result)
        assert len(json.dumps(got["value"]["routes"], separators=(",", ":"))) <= 2000
    assert names == [f"r{i:02}" for i in range(12)] and pages > 2
    settings.CHARMING_TOOL_RESULT_BYTES = 60000
    whole = valid("get_app", call_tool_ok(live, alice, mode, "get_app", {"app_id": str(app.id)}))
    assert len(whole["value"]["routes"]) == 12 and "next_cursor" not in whole


@pytest.mark.parametrize("mode", MODES)
def test_get_app_refuses_a_cursor_of_another_app(live, alice, mode, settings):
    first, second = many_routes_app(alice.user, 4), many_routes_app(alice.user, 4)
    settings.CHARMING_TOOL_RESULT_BYTES = 1000
    cursor = call_tool_ok(live, alice, mode, "get_app", {"app_id": str(first.id)}).structured_content["next_cursor"]
    result = call_tool_error(live, alice, mode, "get_app", {"app_id": str(second.id), "cursor": cursor})
    error = valid("get_app", result)["error"]
    assert error["kind"] == "invalid_input" and error["message"].startswith("The cursor given to get_app is not valid")


@pytest.mark.parametrize("mode", MODES)
def test_query_app_pages_a_find_cut_by_the_budget_inside_the_routes_own_output(live, alice, mode, settings):
    definition = {
        "name": "Notes",
        "collections": {"items": {}},
        "routes": {
            "r": {
                "kind": "query",
                "input": PAGE_INPUT,
                "output": PAGE_OUTPUT,
                "steps": [
                    {
                        "find": {"collection": "items", "order_by": "n", "limit": "params.size", "cursor": CURSOR},
                        "as": "p",
                    },
                    {"return": "{'items': p.items, 'next_cursor': p.next_cursor, 'truncated': p.truncated}"},
                ],
            },
            "add": ADD,
        },
    }
    app = app_definition_save(actor=alice.user, definition=definition)
    for n in range(20):
        call_tool_ok(
            live,
            alice,
            mode,
            "mutate_app",
            {"app_id": str(app.id), "op": "add", "params": {"id": f"n{n:02}", "value": {"n": n, "t": "x" * 150}}},
        )
    settings.CHARMING_TOOL_RESULT_BYTES = 1200
    route_output = Draft202012Validator(PAGE_OUTPUT)
    seen, cursor = [], None
    while True:
        params = {"size": 50} | ({} if cursor is None else {"cursor": cursor})
        result = call_tool_ok(live, alice, mode, "query_app", {"app_id": str(app.id), "op": "r", "params": params})
        value = valid("query_app", result)["value"]
        assert list(route_output.iter_errors(value)) == []
        shown, _end = json.JSONDecoder().raw_decode(text_of(result).split("\n", 1)[1])
        assert shown == value  # the text carries the same whole JSON (advisories follow it)
        seen += [item["id"] for item in value["items"]]
        cursor = value["next_cursor"]
        if cursor is None:
            assert value["truncated"] is False
            break
        assert value["truncated"] is True and len(json.dumps(value["items"], separators=(",", ":"))) <= 1200
    assert seen == [f"n{n:02}" for n in range(20)]


@pytest.mark.parametrize("mode", MODES)
def test_a_route_value_over_the_budget_comes_whole_with_a_note_saying_so(live, alice, mode, settings):
    definition = {
        "name": "Big",
        "routes": {
            "r": {
                "kind": "query",
                "output": {"type": "object", "required": ["text"]},
                "steps": [{"return": "{'text': params.text}"}],
            }
        },
    }
    app = app_definition_save(actor=alice.user, definition=definition)
    settings.CHARMING_TOOL_RESULT_BYTES = 1000
    args = {"app_id": str(app.id), "op": "r", "params": {"text": "x" * 3000}}
    result = call_tool_ok(live, alice, mode, "query_app", args)
    assert valid("query_app", result)["value"] == {"text": "x" * 3000}  # the author's output is never cut
    assert "Note: this result is 3011 bytes of JSON, over this server's result budget of 1000 bytes" in text_of(result)
    settings.CHARMING_TOOL_RESULT_BYTES = 60000
    assert "Note:" not in text_of(call_tool_ok(live, alice, mode, "query_app", args))
