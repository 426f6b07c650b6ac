"""The authoring tools' error paths, each answer valid against the tool's output schema; the guide and the prompt."""

from __future__ import annotations

import copy

import pytest
from mcp.shared.exceptions import MCPError

from apps_registry.access import membership_set
from apps_registry.models import Advisory, App, Role
from apps_registry.services.definitions import definition_save
from mcp_tools.guide import GUIDE_URI
from tests.mcp_tools.conftest import MODES, call_tool, mcp_client, run, text_of
from tests.mcp_tools.test_authoring_session import HABITS, checked
from tests.messages import app_not_found


def call(live, agent, mode, tool, args):
    return checked(tool, call_tool(live, agent, mode, tool, args))


@pytest.fixture
def habits(alice):
    return definition_save(actor=alice.user, definition=HABITS).app


@pytest.mark.parametrize("mode", MODES)
def test_create_app_with_malformed_arguments_is_invalid_input(live, alice, mode):
    result = call(live, alice, mode, "create_app", {"definition": "not an object"})
    assert result["error"]["kind"] == "invalid_input"
    assert result["error"]["errors"] == [{"path": "$.definition", "message": "must be of type object, got string"}]


@pytest.mark.parametrize("mode", MODES)
def test_create_app_with_failing_tests_is_refused_unless_allowed(live, alice, mode):
    definition = copy.deepcopy(HABITS)
    definition["tests"][0]["expect"] = {"value": {"habit": "write"}}
    refused = call(live, alice, mode, "create_app", {"definition": definition})
    assert refused["error"]["kind"] == "tests_failed"
    assert refused["error"]["message"].startswith("1 of 3 test(s) of the definition fail; nothing was saved.")
    assert [t["passed"] for t in refused["error"]["details"]["tests"]] == [False, True, True]
    assert not App.objects.exists()

    result = call_tool(live, alice, mode, "create_app", {"definition": definition, "allow_failing_tests": True})
    created = checked("create_app", result)
    assert [a["kind"] for a in created["advisories"]] == ["failing-tests"]
    assert created["advisories"][0]["severity"] == "warn"
    assert "Tests: 2 of 3 passed.\n- FAILED 'logs a habit' (log_habit): expected the value" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_update_app_of_an_invisible_app_is_not_found_and_a_viewer_is_forbidden(live, alice, bob, habits, mode):
    hidden = call(
        live, bob, mode, "update_app", {"app_id": str(habits.id), "expected_version": 1, "definition": HABITS}
    )
    assert hidden["error"]["kind"] == "not_found"
    assert hidden["error"]["message"].startswith(app_not_found(habits.id))
    membership_set(actor=alice.user, app=habits, user=bob.user, role=Role.VIEWER)
    refused = call(
        live, bob, mode, "update_app", {"app_id": str(habits.id), "expected_version": 1, "definition": HABITS}
    )
    assert refused["error"] == {
        "kind": "forbidden",
        "message": (
            "Only the app's owner and editors can read or change the definition of app 'Habits'; you are a viewer."
        ),
    }
    source = call(live, bob, mode, "get_app_source", {"app_id": str(habits.id)})
    assert source["error"]["kind"] == "forbidden"


@pytest.mark.parametrize("mode", MODES)
def test_update_app_of_an_app_that_does_not_exist_is_not_found_and_creates_nothing(live, alice, mode):
    missing = "123e4567-e89b-42d3-a456-426614174000"
    result = call(live, alice, mode, "update_app", {"app_id": missing, "expected_version": 0, "definition": HABITS})
    assert result["error"]["kind"] == "not_found"
    assert result["error"]["message"].startswith(app_not_found(missing))
    assert not App.objects.exists()
    source = call(live, alice, mode, "get_app_source", {"app_id": missing})
    assert source["error"]["kind"] == "not_found"


@pytest.mark.parametrize("mode", MODES)
def test_an_editor_reads_the_source_and_updates_the_app(live, alice, bob, habits, mode):
    membership_set(actor=alice.user, app=habits, user=bob.user, role=Role.EDITOR)
    source = call(live, bob, mode, "get_app_source", {"app_id": str(habits.id)})["value"]
    assert (source["role"], source["version"], source["author"]) == ("editor", 1, "alice")
    edited = copy.deepcopy(source["definition"])
    edited["description"] = "Edited by bob."
    updated = call(
        live, bob, mode, "update_app", {"app_id": str(habits.id), "expected_version": 1, "definition": edited}
    )
    assert updated["value"]["changes"]["other"] == ["description"]
    assert updated["value"]["summary"] == "Changed description."
    history = call(live, alice, mode, "get_app_source", {"app_id": str(habits.id)})["value"]["history"]
    assert [(h["version"], h["author"]) for h in history] == [(2, "bob"), (1, "alice")]


@pytest.mark.parametrize("mode", MODES)
def test_update_app_needs_exactly_one_of_definition_and_restore_version(live, alice, habits, mode):
    for args in ({}, {"definition": HABITS, "restore_version": 1}):
        result = call(live, alice, mode, "update_app", {"app_id": str(habits.id), "expected_version": 1, **args})
        assert result["error"]["kind"] == "invalid_input"
        assert [e["path"] for e in result["error"]["errors"]] == ["$.definition", "$.restore_version"]
    missing = call(live, alice, mode, "update_app", {"app_id": str(habits.id), "definition": HABITS})
    assert missing["error"]["errors"] == [{"path": "$.expected_version", "message": "is required"}]


@pytest.mark.parametrize("mode", MODES)
def test_restoring_or_reading_a_version_that_does_not_exist_is_not_found(live, alice, habits, mode):
    restore = call(
        live, alice, mode, "update_app", {"app_id": str(habits.id), "expected_version": 1, "restore_version": 7}
    )
    assert restore["error"] == {
        "kind": "not_found",
        "message": "App 'Habits' has no version 7; its versions are 1 to 1.",
    }
    read = call(live, alice, mode, "get_app_source", {"app_id": str(habits.id), "version": 7})
    assert read["error"]["kind"] == "not_found"


@pytest.mark.parametrize("mode", MODES)
def test_a_stale_restore_is_a_conflict_and_an_old_version_can_be_read(live, alice, habits, mode):
    edited = copy.deepcopy(HABITS)
    edited["name"] = "Habit log"
    definition_save(actor=alice.user, definition=edited, app_id=habits.id, expected_version=1)
    stale = call(
        live, alice, mode, "update_app", {"app_id": str(habits.id), "expected_version": 1, "restore_version": 1}
    )
    assert stale["error"]["kind"] == "conflict"
    assert stale["error"]["message"] == (
        "expected_version 1 is stale: app 'Habit log' is at version 2 (saved since you read it); nothing was saved. "
        "Re-read it with get_app_source and apply your change to version 2, then call update_app with "
        "expected_version 2."
    )
    assert stale["error"]["details"] == {"expected_version": 1, "current_version": 2}
    old = call(live, alice, mode, "get_app_source", {"app_id": str(habits.id), "version": 1})["value"]
    assert (old["version"], old["current_version"], old["definition"]["name"]) == (1, 2, "Habits")


@pytest.mark.parametrize("mode", MODES)
def test_check_app_lists_problems_and_test_results_and_saves_nothing(live, alice, mode):
    broken = copy.deepcopy(HABITS)
    broken["routes"]["list_logs"]["kind"] = "report"
    problems = call(live, alice, mode, "check_app", {"definition": broken})["value"]
    assert (problems["valid"], problems["passed"], problems["tests"]) == (False, False, [])
    assert problems["problems"] == [
        {"path": "routes.list_logs.kind", "message": "must be 'query' or 'mutation', got 'report'"}
    ]
    fine = copy.deepcopy(HABITS)
    del fine["routes"]["list_logs"]["output"]
    checked_ok = call(live, alice, mode, "check_app", {"definition": fine})["value"]
    assert (checked_ok["valid"], checked_ok["passed"]) == (True, True)
    assert [a["kind"] for a in checked_ok["advisories"]] == ["missing-output-schema"]
    assert not App.objects.exists() and not Advisory.objects.exists()
    malformed = call(live, alice, mode, "check_app", {})
    assert malformed["error"]["errors"] == [{"path": "$.definition", "message": "is required"}]


@pytest.mark.parametrize("mode", MODES)
def test_check_app_with_failing_tests_says_what_a_save_would_do_and_never_that_it_saved(live, alice, mode):
    definition = copy.deepcopy(HABITS)
    definition["tests"][0]["expect"] = {"value": {"habit": "write"}}
    result = call_tool(live, alice, mode, "check_app", {"definition": definition})
    value = checked("check_app", result)["value"]
    assert (value["valid"], value["passed"]) == (True, False)
    text = text_of(result)
    assert text.startswith(
        "The definition is valid, but 1 of 3 test(s) fail: create_app and update_app refuse it until they pass "
        "(or take it with allow_failing_tests).\n- FAILED 'logs a habit' (log_habit): expected the value "
    )
    assert "saved" not in text
    assert [a["kind"] for a in value["advisories"]] == ["failing-tests"]
    assert not App.objects.exists() and not Advisory.objects.exists()
    passing = text_of(call_tool(live, alice, mode, "check_app", {"definition": HABITS}))
    assert passing.startswith("The definition is valid and every test passed.")
    assert "saved" not in passing


async def _guide_and_prompt(live, alice, mode):
    async with mcp_client(live, alice.token, mode) as client:
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("build_app", {"idea": "track my reading"})
        with pytest.raises(MCPError) as unknown_resource:
            await client.read_resource("charming://guide/nope")
        with pytest.raises(MCPError) as unknown_prompt:
            await client.get_prompt("nope")
        return prompts, prompt, unknown_resource.value, unknown_prompt.value


@pytest.mark.parametrize("mode", MODES)
def test_the_build_app_prompt_walks_through_check_and_create(live, alice, mode):
    prompts, prompt, unknown_resource, unknown_prompt = run(_guide_and_prompt(live, alice, mode))
    assert [p.name for p in prompts.prompts] == ["build_app"]
    text = prompt.messages[0].content.text
    assert text.startswith("The user wants: track my reading")
    assert GUIDE_URI in text and "check_app" in text and "create_app" in text
    assert unknown_resource.error.code == -32002
    assert unknown_prompt.error.message == "Unknown prompt: 'nope'. Available: build_app."


@pytest.mark.parametrize("mode", MODES)
def test_update_app_migrates_the_records_with_the_save(live, alice, habits, mode):
    from apps_registry.models import Record

    storage = habits.storage
    Record.objects.create(storage=storage, collection="logs", record_id="h1", data={"name": "Run"})
    source = call(live, alice, mode, "get_app_source", {"app_id": str(habits.id)})["value"]
    migrate = {"logs": "{'name': record.name, 'archived': false}"}
    updated = call(
        live,
        alice,
        mode,
        "update_app",
        {"app_id": str(habits.id), "expected_version": 1, "definition": source["definition"], "migrate": migrate},
    )
    from apps_registry.models import Change

    assert updated["value"]["migration"] == {
        "collections": ["logs"],
        "records": 1,
        "status": "done",
        "migrated": 1,
        "deleted": 0,
        "change_id": str(Change.objects.get(app=habits, via="migration").pk),
    }
    assert Record.objects.get(storage=storage, record_id="h1").data == {"name": "Run", "archived": False}
    refused = call(
        live,
        alice,
        mode,
        "update_app",
        {
            "app_id": str(habits.id),
            "expected_version": 2,
            "definition": source["definition"],
            "migrate": {"logs": "x"},
        },
    )
    assert refused["error"]["kind"] == "invalid_definition"
    assert refused["error"]["errors"] == [
        {"path": "migrate.logs", "message": "unknown name(s) x; names available here: app, now, record"}
    ]
