"""An agent builds an app from nothing over MCP, in both protocol versions, with no shell: the issue's "done when"."""

from __future__ import annotations

import copy

import pytest
from jsonschema import Draft202012Validator

from apps_registry.models import Record
from mcp_tools.guide import GUIDE_URI
from mcp_tools.registry import TOOLS
from tests.mcp_tools.conftest import MODES, mcp_client, run, text_of

OUTPUT = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS}

HABITS: dict = {
    "name": "Habits",
    "description": "Daily habits: log one when done, see the log.",
    "collections": {"logs": {}},
    "routes": {
        "log_habit": {
            "kind": "mutation",
            "description": "Log a habit done on a day.",
            "input": {
                "type": "object",
                "properties": {
                    "habit": {"type": "string", "minLength": 1},
                    "day": {"type": "string", "format": "date"},
                },
                "required": ["habit", "day"],
                "additionalProperties": False,
            },
            "output": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "habit": {"type": "string"}, "day": {"type": "string"}},
                "required": ["id", "habit", "day"],
            },
            "steps": [
                {"fail": {"when": "params.habit == 'nothing'", "message": "'Doing nothing is not a habit.'"}},
                {"insert": {"collection": "logs", "value": "{'habit': params.habit, 'day': params.day}"}, "as": "log"},
                {"return": "log"},
            ],
        },
        "list_logs": {
            "kind": "query",
            "description": "Every log, oldest first.",
            "output": {"type": "array"},
            "steps": [{"find": {"collection": "logs", "limit": "100"}, "as": "logs"}, {"return": "logs"}],
        },
    },
    "tests": [
        {
            "name": "logs a habit",
            "route": "log_habit",
            "params": {"habit": "read", "day": "2026-12-01"},
            "expect": {"value": {"habit": "read", "day": "2026-12-01"}},
            "records_after": {"logs": [{"habit": "read", "day": "2026-12-01"}]},
        },
        {
            "name": "refuses nothing",
            "route": "log_habit",
            "params": {"habit": "nothing", "day": "2026-12-01"},
            "expect": {"error": "handler_error", "message": "not a habit"},
            "records_after": {"logs": []},
        },
        {
            "name": "lists the logs",
            "route": "list_logs",
            "records": {"logs": [{"id": "a", "habit": "run", "day": "2026-11-30"}]},
            "expect": {"value": [{"id": "a", "habit": "run"}]},
        },
    ],
}


def with_three_mistakes() -> dict:
    broken = copy.deepcopy(HABITS)
    broken["routes"]["log_habit"]["kind"] = "mutate"
    broken["routes"]["list_logs"]["steps"][1] = {"return": "logz"}
    broken["tests"][2]["route"] = "list_log"
    return broken


def checked(tool, result):
    """The result's structuredContent, valid against the tool's output schema, with isError matching ok."""
    structured = result.structured_content
    assert list(OUTPUT[tool].iter_errors(structured)) == [], structured
    assert (result.is_error is True) == (structured["ok"] is False), text_of(result)
    return structured


async def session(live, alice, mode):
    async with mcp_client(live, alice.token, mode) as agent:

        async def call(tool, args):
            return checked(tool, await agent.call_tool(tool, args))

        # Three mistakes: all three come back, each with its path, and nothing is created.
        refused = await call("create_app", {"definition": with_three_mistakes()})
        assert refused["error"]["kind"] == "invalid_definition"
        paths = [e["path"] for e in refused["error"]["errors"]]
        assert paths == ["routes.log_habit.kind", "routes.list_logs.steps[1].return", "tests[2].route"]
        assert refused["error"]["message"].startswith("The app definition has 3 problem(s); nothing was saved.")

        # Fixed: check_app first (nothing saved), then create_app with passing tests.
        check = (await call("check_app", {"definition": HABITS}))["value"]
        assert check["valid"] and check["passed"]
        assert [t["passed"] for t in check["tests"]] == [True, True, True]
        created = (await call("create_app", {"definition": HABITS}))["value"]
        assert created["version"] == 1
        assert created["routes"] == [
            {"name": "list_logs", "kind": "query", "version": 1},
            {"name": "log_habit", "kind": "mutation", "version": 1},
        ]
        assert all(t["passed"] for t in created["tests"])
        app_id = created["id"]

        # Used: a mutation, a query, and a date that is not a date.
        logged = await call(
            "mutate_app", {"app_id": app_id, "op": "log_habit", "params": {"habit": "read", "day": "2026-12-01"}}
        )
        assert logged["value"]["habit"] == "read"
        not_a_date = await call(
            "mutate_app", {"app_id": app_id, "op": "log_habit", "params": {"habit": "run", "day": "yesterday"}}
        )
        assert not_a_date["error"]["kind"] == "invalid_input"
        assert not_a_date["error"]["errors"] == [{"path": "$.day", "message": '"yesterday" is not a "date"'}]
        listed = await call("query_app", {"app_id": app_id, "op": "list_logs"})
        assert [log["habit"] for log in listed["value"]] == ["read"]

        # Updated from the source it read; a second client with the same stale version gets a conflict.
        source = (await call("get_app_source", {"app_id": app_id}))["value"]
        assert source["version"] == source["current_version"] == 1 and source["definition"] == HABITS
        edited = copy.deepcopy(source["definition"])
        edited["routes"]["log_habit"]["description"] = "Log a habit done on a day (one call per habit)."
        edited["routes"]["count_logs"] = {
            "kind": "query",
            "output": {"type": "integer"},
            "steps": [{"count": {"collection": "logs"}, "as": "n"}, {"return": "n"}],
        }
        updated = (await call("update_app", {"app_id": app_id, "expected_version": 1, "definition": edited}))["value"]
        assert updated["version"] == 2
        assert updated["changes"] == {
            "added": ["count_logs"],
            "changed": ["log_habit"],
            "removed": [],
            "unchanged": ["list_logs"],
            "other": [],
        }
        async with mcp_client(live, alice.token, mode) as second:
            stale = checked(
                "update_app",
                await second.call_tool("update_app", {"app_id": app_id, "expected_version": 1, "definition": HABITS}),
            )
        assert stale["error"]["kind"] == "conflict"
        assert stale["error"]["details"] == {"expected_version": 1, "current_version": 2}
        assert stale["error"]["message"].startswith(
            "expected_version 1 is stale: app 'Habits' is at version 2 (saved since you read it); nothing was saved. "
            "Re-read it with get_app_source and apply your change to version 2,"
        )

        # A broken test is refused, with expected vs got; nothing is saved.
        broken = copy.deepcopy(edited)
        broken["routes"]["log_habit"]["steps"][1]["insert"]["value"] = (
            "{'habit': params.habit + '!', 'day': params.day}"
        )
        failed = await call("update_app", {"app_id": app_id, "expected_version": 2, "definition": broken})
        assert failed["error"]["kind"] == "tests_failed"
        assert failed["error"]["errors"][0]["path"] == "tests[0]"
        assert 'expected the value {"day": "2026-12-01", "habit": "read"}' in failed["error"]["errors"][0]["message"]
        first = failed["error"]["details"]["tests"][0]
        assert first["passed"] is False and first["got"]["value"]["habit"] == "read!"

        # The previous version restored (as version 3); the records were never touched.
        restored = (await call("update_app", {"app_id": app_id, "expected_version": 2, "restore_version": 1}))["value"]
        assert restored["version"] == 3 and restored["restored_from"] == 1
        assert restored["changes"]["removed"] == ["count_logs"]
        assert restored["summary"].startswith("Restored version 1: ")
        history = (await call("get_app_source", {"app_id": app_id}))["value"]["history"]
        assert [(h["version"], h.get("restored_from")) for h in history] == [(3, 1), (2, None), (1, None)]
        again = await call("query_app", {"app_id": app_id, "op": "list_logs"})
        assert [log["habit"] for log in again["value"]] == ["read"]
        described = (await call("get_app", {"app_id": app_id}))["value"]
        assert described["version"] == 3 and described["authoring_guide"] == GUIDE_URI

        # The guide, as a resource.
        resources = await agent.list_resources()
        assert [(str(r.uri), r.mime_type) for r in resources.resources] == [
            (GUIDE_URI, "text/markdown"),
            ("ui://charming/app", "text/html;profile=mcp-app"),
        ]
        guide = await agent.read_resource(GUIDE_URI)
        assert guide.contents[0].mime_type == "text/markdown"
        assert "# Writing a Charming app" in guide.contents[0].text
        return app_id


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_builds_uses_updates_breaks_and_restores_an_app_from_nothing(live, alice, mode):
    app_id = run(session(live, alice, mode))
    assert Record.objects.filter(storage__app_id=app_id).count() == 1
