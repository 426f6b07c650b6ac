"""list_changes and revert_change over /mcp with the SDK client: an agent undoes its own wrong mutation."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from apps_registry.access import membership_set
from apps_registry.models import Change, ChangeVia
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from mcp_tools.registry import TOOLS
from tests.apps_registry.route_helpers import records
from tests.mcp_tools.conftest import MODES, call_tool, call_tool_error, call_tool_ok, make_agent, text_of
from tests.mcp_tools.test_mutate_app import DEFINITION, mutate

CONTRACTS = {tool.name: tool.contract for tool in TOOLS}
OUTPUT = {name: Draft202012Validator(CONTRACTS[name]["outputSchema"]) for name in ("list_changes", "revert_change")}
CHANGE_ID = "io.charming/change-id"


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


def checked(name, result):
    assert list(OUTPUT[name].iter_errors(result.structured_content)) == []
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_reverts_its_wrong_mutation_by_the_change_id_in_meta(live, alice, budget, mode):
    added = call_tool_ok(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 5, "category": "f"}))
    expense = added.structured_content["value"]["id"]
    wrong = call_tool_ok(
        live, alice, mode, "mutate_app", mutate(budget, "rename_expense", {"id": expense, "category": "oops"})
    )
    change_id = wrong.meta[CHANGE_ID]
    assert change_id == str(Change.objects.latest("id").pk)
    assert f"Recorded as change {change_id}" in text_of(wrong)
    assert set(wrong.structured_content) == {"ok", "value"}  # the seed contract's output, unchanged

    listed = checked("list_changes", call_tool_ok(live, alice, mode, "list_changes", {"app_id": str(budget.id)}))
    newest = listed["value"][0]
    assert (newest["id"], newest["route"], newest["via"], newest["by"]) == (change_id, "rename_expense", "mcp", "alice")
    assert newest["entries"] == [
        {
            "collection": "expenses",
            "id": expense,
            "before": {"amount": 5, "category": "f"},
            "after": {"amount": 5, "category": "oops"},
        }
    ]

    reverted_call = call_tool_ok(live, alice, mode, "revert_change", {"change_id": change_id})
    reverted = checked("revert_change", reverted_call)
    assert reverted["value"]["reverted"] == change_id
    assert reverted["value"]["records"] == [{"collection": "expenses", "id": expense, "action": "restored"}]
    assert records(budget, "expenses") == {expense: {"amount": 5, "category": "f"}}
    history = call_tool_ok(
        live, alice, mode, "list_changes", {"app_id": str(budget.id), "collection": "expenses", "record_id": expense}
    )
    ids = [c["id"] for c in checked("list_changes", history)["value"]]
    assert ids == [reverted["value"]["change_id"], change_id, added.meta[CHANGE_ID]]
    assert "(1 record put back;" in text_of(reverted_call)

    again = checked("revert_change", call_tool_error(live, alice, mode, "revert_change", {"change_id": change_id}))
    assert again["error"]["message"] == (
        f"Change {change_id} was already reverted, by change {reverted['value']['change_id']}: its records are as "
        f"they were before it. Nothing was changed. To redo change {change_id}, call revert_change with change_id "
        f"'{reverted['value']['change_id']}' (do not force this one: that would undo the revert)."
    )


def test_a_conflicting_revert_is_refused_naming_the_record_and_force_overwrites(live, alice, budget):
    mode = MODES[1].values[0]
    added = call_tool_ok(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 5, "category": "f"}))
    expense = added.structured_content["value"]["id"]
    later = call_tool_ok(
        live, alice, mode, "mutate_app", mutate(budget, "rename_expense", {"id": expense, "category": "g"})
    )
    refused = call_tool_error(live, alice, mode, "revert_change", {"change_id": added.meta[CHANGE_ID]})
    error = checked("revert_change", refused)["error"]
    assert error["kind"] == "conflict"
    assert f"expenses/{expense} (by change {later.meta[CHANGE_ID]})" in error["message"]
    assert "force=true" in error["message"] and "Nothing was changed" in error["message"]
    assert error["details"]["conflicts"] == [
        {"collection": "expenses", "id": expense, "change_id": later.meta[CHANGE_ID]}
    ]
    assert expense in records(budget, "expenses")
    forced = call_tool_ok(live, alice, mode, "revert_change", {"change_id": added.meta[CHANGE_ID], "force": True})
    assert checked("revert_change", forced)["value"]["records"] == [
        {"collection": "expenses", "id": expense, "action": "deleted"}
    ]
    assert records(budget, "expenses") == {}


def test_another_users_token_cannot_list_or_revert_and_a_viewer_cannot_revert(live, alice, budget):
    mode = MODES[1].values[0]
    added = call_tool_ok(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 5, "category": "f"}))
    mallory = make_agent("mallory")
    listed = checked("list_changes", call_tool_error(live, mallory, mode, "list_changes", {"app_id": str(budget.id)}))
    assert listed["error"]["kind"] == "not_found"
    refused = call_tool_error(live, mallory, mode, "revert_change", {"change_id": added.meta[CHANGE_ID]})
    assert checked("revert_change", refused)["error"]["kind"] == "not_found"
    assert f"No change {added.meta[CHANGE_ID]} in any app you can see" in refused.structured_content["error"]["message"]
    membership_set(actor=alice.user, app=budget, user=mallory.user, role="viewer")
    viewer = call_tool_error(live, mallory, mode, "revert_change", {"change_id": added.meta[CHANGE_ID]})
    assert checked("revert_change", viewer)["error"]["kind"] == "forbidden"
    assert len(records(budget, "expenses")) == 1


def test_a_failed_mutation_carries_no_change_id_and_records_nothing(live, alice, budget):
    mode = MODES[1].values[0]
    failed = call_tool(live, alice, mode, "mutate_app", mutate(budget, "broken", {}))
    assert failed.is_error is True and not (failed.meta or {}).get(CHANGE_ID)
    assert Change.objects.count() == 0


def test_a_bad_change_id_is_invalid_input_saying_where_ids_come_from(live, alice):
    mode = MODES[1].values[0]
    refused = call_tool_error(live, alice, mode, "revert_change", {"change_id": "abc"})
    assert "must be a change id (digits)" in text_of(refused)


def test_a_retry_with_the_idempotency_key_answers_the_first_calls_change_id(live, alice, budget):
    from tests.mcp_tools.conftest import mcp_client, run

    mode = MODES[1].values[0]
    args = mutate(budget, "add_expense", {"amount": 5, "category": "f"})

    async def twice():
        async with mcp_client(live, alice.token, mode) as client:
            meta = {"io.charming/idempotency-key": "retry-1"}
            return [await client.call_tool("mutate_app", args, meta=meta) for _ in range(2)]

    first, retry = run(twice())
    assert first.meta[CHANGE_ID] == retry.meta[CHANGE_ID]
    assert "already ran with this idempotency key" in text_of(retry)
    assert Change.objects.count() == 1


@pytest.mark.parametrize("via", ["schedule", "hook", "public"])
def test_changes_a_schedule_a_webhook_or_a_public_page_made_are_listed_within_the_contract(live, alice, budget, via):
    """The SDK client checks a result against the tool's output schema: a `via` outside its enum made the whole
    list_changes call fail for any app one of its schedules, webhooks or public page had written."""
    mode = MODES[1].values[0]
    route_run(
        actor=alice.user,
        app_id=budget.id,
        op="add_expense",
        params={"amount": 5, "category": "f"},
        kind="mutation",
        via=via,
    )
    listed = call_tool_ok(live, alice, mode, "list_changes", {"app_id": str(budget.id)})
    assert checked("list_changes", listed)["value"][0]["via"] == via
    assert f"by alice via {via}, route add_expense" in text_of(listed)


def test_the_contracts_ways_a_change_was_made_are_the_change_logs():
    via = CONTRACTS["list_changes"]["outputSchema"]["properties"]["value"]["items"]["properties"]["via"]
    assert via["enum"] == list(ChangeVia.values)
    assert all(f"{value} (" in via["description"] for value in ChangeVia.values)


def test_an_agents_migration_is_listed_as_one_change_and_revert_change_refuses_it(live, alice, budget):
    mode = MODES[1].values[0]
    added = call_tool_ok(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 5, "category": "F"}))
    expense = added.structured_content["value"]["id"]
    saved = call_tool_ok(
        live,
        alice,
        mode,
        "update_app",
        {
            "app_id": str(budget.id),
            "expected_version": budget.version,
            "definition": DEFINITION,
            "migrate": {"expenses": "{'amount': record.amount, 'category': record.category.lowerAscii()}"},
        },
    )
    assert saved.structured_content["ok"] is True
    logged = saved.structured_content["value"]["migration"]["change_id"]
    assert f"(change {logged} in list_changes)" in text_of(saved)
    listed = call_tool_ok(live, alice, mode, "list_changes", {"app_id": str(budget.id)})
    newest = checked("list_changes", listed)["value"][0]
    assert (newest["via"], newest["route"], newest["by"], newest["records"]) == ("migration", "", "alice", 1)
    assert newest["id"] == logged
    assert newest["entries"] == [
        {
            "collection": "expenses",
            "id": expense,
            "before": {"amount": 5, "category": "F"},
            "after": {"amount": 5, "category": "f"},
        }
    ]
    assert f"change {newest['id']} at" in text_of(listed) and "via migration, record migration" in text_of(listed)
    refused = call_tool_error(live, alice, mode, "revert_change", {"change_id": newest["id"]})
    assert checked("revert_change", refused)["error"]["kind"] == "operation_failed"
    assert "is a record migration" in refused.structured_content["error"]["message"]
    assert refused.structured_content["error"]["details"] == {"change_id": logged, "migration": True}
    earlier = call_tool_error(live, alice, mode, "revert_change", {"change_id": added.meta[CHANGE_ID], "force": True})
    assert checked("revert_change", earlier)["error"]["kind"] == "operation_failed"
    assert f"a record migration since (change {newest['id']}) reshaped the records" in text_of(earlier)
    assert records(budget, "expenses") == {expense: {"amount": 5, "category": "f"}}


@pytest.mark.parametrize("mode", MODES)
def test_since_and_until_bound_the_listed_changes_and_a_bad_bound_says_what_to_send(live, alice, budget, mode):
    old, new = (
        call_tool_ok(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": n, "category": "f"}))
        for n in (1, 2)
    )
    Change.objects.filter(pk=old.meta[CHANGE_ID]).update(created_at="2026-01-10T12:00:00Z")
    since = {"app_id": str(budget.id), "since": "2026-02-01"}
    recent = call_tool_ok(live, alice, mode, "list_changes", since)
    assert [c["id"] for c in checked("list_changes", recent)["value"]] == [new.meta[CHANGE_ID]]
    until = {"app_id": str(budget.id), "until": "2026-02-01T00:00:00Z"}
    earlier = checked("list_changes", call_tool_ok(live, alice, mode, "list_changes", until))
    assert [c["id"] for c in earlier["value"]] == [old.meta[CHANGE_ID]]
    bad = call_tool_error(live, alice, mode, "list_changes", {"app_id": str(budget.id), "since": "last week"})
    assert checked("list_changes", bad)["error"]["kind"] == "invalid_input"
    assert "'since' must be an ISO 8601 date-time such as '2026-12-03T09:00:00Z'" in text_of(bad)
