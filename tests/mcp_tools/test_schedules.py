"""list_schedules, create_schedule, update_schedule and delete_schedule over /mcp with the SDK client."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from apps_registry.access import membership_set
from apps_registry.models import Schedule
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.schedules import schedule_run_due
from mcp_tools.registry import TOOLS
from tests.apps_registry.test_schedules import CHORES
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, make_agent, text_of

NAMES = ("list_schedules", "create_schedule", "update_schedule", "delete_schedule")
OUTPUT = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS if tool.name in NAMES}


@pytest.fixture
def chores(alice):
    return app_definition_save(actor=alice.user, definition=CHORES)


def checked(name, result):
    assert list(OUTPUT[name].iter_errors(result.structured_content)) == []
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_schedules_a_route_sees_its_runs_pauses_and_deletes_it(live, alice, chores, mode):
    created = checked(
        "create_schedule",
        call_tool_ok(
            live,
            alice,
            mode,
            "create_schedule",
            {
                "app_id": str(chores.id),
                "route": "tick",
                "cron": "30 7 * * 1-5",
                "timezone": "Europe/Berlin",
                "params": {"by": 2},
            },
        ),
    )
    schedule = created["value"]
    assert (schedule["route"], schedule["cron"], schedule["timezone"], schedule["active"]) == (
        "tick",
        "30 7 * * 1-5",
        "Europe/Berlin",
        True,
    )
    assert schedule["created_by"] == "alice" and schedule["runs"] == []
    assert [t[10:] for t in schedule["next_runs"]] == ["T07:30:00+01:00"] * 3  # weekday mornings, Berlin winter time
    row = Schedule.objects.get(pk=schedule["id"])
    schedule_run_due(schedule_id=str(row.id), due_at=row.next_run_at.isoformat(), now=row.next_run_at)

    listed = checked("list_schedules", call_tool_ok(live, alice, mode, "list_schedules", {"app_id": str(chores.id)}))
    [shown] = listed["value"]
    assert [run["outcome"] for run in shown["runs"]] == ["failed"]  # CHORES has no counter until 'start' runs
    assert (
        shown["runs"][0]["error"]
        == "Cannot increment counters/ticks: no record with id 'ticks' in collection 'counters'."
    )
    assert f"schedule {schedule['id']}: route tick at '30 7 * * 1-5' (Europe/Berlin)" in text_of(
        call_tool_ok(live, alice, mode, "list_schedules", {"app_id": str(chores.id)})
    )

    paused = checked(
        "update_schedule",
        call_tool_ok(live, alice, mode, "update_schedule", {"schedule_id": schedule["id"], "active": False}),
    )["value"]
    assert (paused["active"], paused["next_run_at"], paused["paused_reason"]) == (False, None, "Paused by alice.")

    deleted = checked(
        "delete_schedule", call_tool_ok(live, alice, mode, "delete_schedule", {"schedule_id": schedule["id"]})
    )
    assert deleted["value"] == {"id": schedule["id"], "app_id": str(chores.id), "route": "tick"}
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_schedule_that_could_not_run_is_refused_with_each_problem(live, alice, chores, mode):
    refused = call_tool_error(
        live,
        alice,
        mode,
        "create_schedule",
        {"app_id": str(chores.id), "route": "tick", "cron": "daily", "params": {"by": "two"}},
    )
    envelope = checked("create_schedule", refused)
    assert envelope["ok"] is False and envelope["error"]["kind"] == "invalid_input"
    assert [e["path"] for e in envelope["error"]["errors"]] == ["$.params.by"]
    assert 'accepted by route \'tick\': $.params.by: "two" is not of type "integer"' in text_of(refused)
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_viewer_and_a_stranger_cannot_touch_an_apps_schedules(live, alice, chores, mode):
    viewer, stranger = make_agent("vic"), make_agent("mallory")
    membership_set(actor=alice.user, app=chores, user=viewer.user, role="viewer")
    args = {"app_id": str(chores.id), "route": "tick", "cron": "daily", "params": {"by": 1}}
    mine = call_tool_ok(live, alice, mode, "create_schedule", args).structured_content["value"]
    as_viewer = call_tool_error(live, viewer, mode, "create_schedule", args).structured_content
    assert as_viewer["error"]["kind"] == "forbidden"
    assert "manage the schedules of app 'Chores'; you are a viewer" in as_viewer["error"]["message"]
    seen = call_tool_ok(live, viewer, mode, "list_schedules", {"app_id": str(chores.id)}).structured_content
    assert [s["id"] for s in seen["value"]] == [mine["id"]]
    for name, arguments in (
        ("list_schedules", {"app_id": str(chores.id)}),
        ("update_schedule", {"schedule_id": mine["id"], "active": False}),
        ("delete_schedule", {"schedule_id": mine["id"]}),
    ):
        answer = call_tool_error(live, stranger, mode, name, arguments).structured_content
        assert answer["error"]["kind"] == "not_found", (name, answer)
    assert Schedule.objects.get(pk=mine["id"]).active
