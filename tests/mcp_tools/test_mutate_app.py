from __future__ import annotations

import json
import uuid

import pytest
from jsonschema import Draft202012Validator

from apps_registry.access import membership_set
from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from mcp_tools.registry import TOOLS
from tests.mcp_tools.conftest import MODES, call_tool, call_tool_error, call_tool_ok, text_of
from tests.messages import app_not_found

CONTRACTS = {tool.name: tool.contract for tool in TOOLS}
MUTATE_OUTPUT = Draft202012Validator(CONTRACTS["mutate_app"]["outputSchema"])
QUERY_OUTPUT = Draft202012Validator(CONTRACTS["query_app"]["outputSchema"])

DEFINITION = {
    "format": 1,
    "name": "Budget",
    "description": "Monthly spending",
    "collections": {"expenses": {}},
    "routes": {
        "add_expense": {
            "kind": "mutation",
            "description": "Record one expense.",
            "input": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "category": {"type": "string"}},
                "required": ["amount", "category"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "steps": [
                {
                    "fail": {
                        "when": "params.amount <= 0.0",
                        "message": "'amount must be positive'",
                        "details": "{'field': 'amount'}",
                    }
                },
                {
                    "insert": {
                        "collection": "expenses",
                        "value": "{'amount': params.amount, 'category': params.category}",
                    },
                    "as": "expense",
                },
                {"return": "{'id': expense.id}"},
            ],
        },
        "rename_expense": {
            "kind": "mutation",
            "description": "Change an expense's category.",
            "input": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "category": {"type": "string"}},
                "required": ["id", "category"],
            },
            "output": {"type": "object"},
            "steps": [
                {"update": {"collection": "expenses", "id": "params.id", "value": "{'category': params.category}"}},
                {"return": "{}"},
            ],
        },
        "broken": {
            "kind": "mutation",
            "description": "Breaks its own output contract.",
            "input": {"type": "object"},
            "output": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "steps": [
                {"insert": {"collection": "expenses", "value": "{'amount': 1.0, 'category': 'x'}"}},
                {"return": "{'nope': 1}"},
            ],
        },
        "count_expenses": {
            "kind": "query",
            "description": "How many expenses there are.",
            "input": {"type": "object"},
            "output": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "steps": [{"count": {"collection": "expenses"}, "as": "n"}, {"return": "{'n': n}"}],
        },
    },
    # A test per route, so saving this app raises no authoring advisory: the advisories a result here carries are
    # the ones a test made.
    "tests": [
        {
            "route": "add_expense",
            "params": {"amount": 12.5, "category": "food"},
            "expect": {"value": {}},
            "records_after": {"expenses": [{"amount": 12.5, "category": "food"}]},
        },
        {
            "route": "rename_expense",
            "params": {"id": "e1", "category": "tea"},
            "records": {"expenses": [{"id": "e1", "amount": 1.0, "category": "food"}]},
            "expect": {"value": {}},
            "records_after": {"expenses": [{"id": "e1", "category": "tea"}]},
        },
        {"route": "broken", "expect": {"error": "invalid_output"}},
        {"route": "count_expenses", "records": {"expenses": [{"amount": 1.0}]}, "expect": {"value": {"n": 1}}},
    ],
}


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


def mutate(budget, op, params=None):
    args = {"app_id": str(budget.id), "op": op}
    if params is not None:
        args["params"] = params
    return args


def assert_envelope(result, validator=MUTATE_OUTPUT):
    """Every result, success or error, carries an envelope valid against the output schema."""
    assert list(validator.iter_errors(result.structured_content)) == []
    assert result.is_error is (result.structured_content["ok"] is False)
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
def test_mutate_app_runs_the_route_and_returns_its_value(live, alice, budget, mode):
    result = call_tool_ok(
        live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 12.5, "category": "food"})
    )

    envelope = assert_envelope(result)
    record = Record.objects.get(storage__app=budget, collection="expenses")
    assert envelope == {"ok": True, "value": {"id": record.record_id}}
    assert record.data == {"amount": 12.5, "category": "food"}
    assert json.dumps({"id": record.record_id}, separators=(",", ":")) in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_query_app_reads_with_the_same_envelope(live, alice, budget, mode):
    call_tool_ok(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 1, "category": "a"}))

    result = call_tool_ok(live, alice, mode, "query_app", mutate(budget, "count_expenses"))

    assert assert_envelope(result, QUERY_OUTPUT) == {"ok": True, "value": {"n": 1}}


@pytest.mark.parametrize("mode", MODES)
def test_invalid_params_are_invalid_input_with_paths(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": "lots"}))

    error = assert_envelope(result)["error"]
    assert error["kind"] == "invalid_input"
    assert error["message"].startswith("params do not match the input schema of route 'add_expense': ")
    assert '$.amount: "lots" is not of type "number"' in error["message"]
    paths = {problem["path"] for problem in error["errors"]}
    assert "$.amount" in paths
    assert text_of(result).startswith("Error (invalid_input): ")
    assert not Record.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_fail_step_is_a_handler_error_with_its_details(live, alice, budget, mode):
    result = call_tool_error(
        live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": -1, "category": "x"})
    )

    error = assert_envelope(result)["error"]
    assert error == {"kind": "handler_error", "message": "amount must be positive", "details": {"field": "amount"}}
    assert 'Details: {"field": "amount"}' in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_a_broken_output_contract_is_invalid_output_and_rolls_back(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "mutate_app", mutate(budget, "broken", {}))

    error = assert_envelope(result)["error"]
    assert error["kind"] == "invalid_output"
    assert error["message"].startswith(
        "Route 'broken' returned a value that does not match its output schema (the app's author must fix the route)"
    )
    assert error["errors"] == [{"path": "$", "message": '"id" is a required property'}]
    assert not Record.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_updating_a_missing_record_is_operation_failed(live, alice, budget, mode):
    args = mutate(budget, "rename_expense", {"id": "nope", "category": "x"})

    result = call_tool_error(live, alice, mode, "mutate_app", args)

    assert assert_envelope(result)["error"] == {
        "kind": "operation_failed",
        "message": "Cannot update expenses/nope: no record with id 'nope' in collection 'expenses'.",
        "details": {"collection": "expenses", "id": "nope"},
    }


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_op_lists_the_apps_routes(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "mutate_app", mutate(budget, "add_expenses", {}))

    error = assert_envelope(result)["error"]
    assert error["kind"] == "unknown_op"
    assert error["message"].startswith("App 'Budget' has no route 'add_expenses'. Its routes: add_expense (mutation)")


@pytest.mark.parametrize("mode", MODES)
def test_a_query_route_through_mutate_app_points_at_query_app(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "mutate_app", mutate(budget, "count_expenses"))

    assert assert_envelope(result)["error"] == {
        "kind": "unknown_op",
        "message": "'count_expenses' is a query route: call it with query_app, not mutate_app.",
    }


@pytest.mark.parametrize("mode", MODES)
def test_a_mutation_through_query_app_points_at_mutate_app(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "query_app", mutate(budget, "add_expense", {}))

    error = assert_envelope(result, QUERY_OUTPUT)["error"]
    assert error["message"] == "'add_expense' is a mutation route: call it with mutate_app, not query_app."
    assert not Record.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_viewers_mutation_is_forbidden_but_they_may_query(live, alice, bob, budget, mode):
    membership_set(actor=alice.user, app=budget, user=bob.user, role="viewer")

    refused = call_tool_error(
        live, bob, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 1, "category": "x"})
    )
    allowed = call_tool_ok(live, bob, mode, "query_app", mutate(budget, "count_expenses"))

    error = assert_envelope(refused)["error"]
    assert error["kind"] == "forbidden"
    assert error["message"].startswith("You are a viewer of app 'Budget'; viewers may only query (query_app).")
    assert allowed.structured_content["value"] == {"n": 0}
    assert not Record.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_an_editor_may_mutate(live, alice, bob, budget, mode):
    membership_set(actor=alice.user, app=budget, user=bob.user, role="editor")

    result = call_tool_ok(live, bob, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 1, "category": "x"}))

    assert result.structured_content["ok"] is True


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", ["mutate_app", "query_app"])
def test_someone_elses_app_and_a_missing_app_are_reported_alike(live, alice, bob, budget, mode, tool):
    missing = uuid.uuid4()

    invisible = call_tool_error(live, bob, mode, tool, mutate(budget, "count_expenses"))
    absent = call_tool_error(live, bob, mode, tool, {"app_id": str(missing), "op": "count_expenses"})

    invisible_error = assert_envelope(invisible)["error"]
    absent_error = assert_envelope(absent)["error"]
    assert invisible_error["kind"] == absent_error["kind"] == "not_found"
    assert invisible_error["message"] == absent_error["message"].replace(str(missing), str(budget.id))
    assert absent_error["message"].startswith(app_not_found(missing))
    assert "advisories" not in invisible.structured_content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"app_id": "not-a-uuid", "op": "add_expense"}, "$.app_id must be an app's UUID as list_apps returns it"),
        ({"app_id": "00000000-0000-0000-0000-000000000000"}, "$.op is required"),
        ({"op": "add_expense"}, "$.app_id is required"),
        ({"app_id": "00000000-0000-0000-0000-000000000000", "op": 7}, "$.op must be of type string, got integer"),
        (
            {"app_id": "00000000-0000-0000-0000-000000000000", "op": "x", "params": [1]},
            "$.params must be of type object",
        ),
    ],
)
def test_arguments_breaking_the_tools_schema_get_a_clear_error(live, alice, mode, arguments, message):
    result = call_tool_error(live, alice, mode, "mutate_app", arguments)

    error = assert_envelope(result)["error"]
    assert error["kind"] == "invalid_input"
    assert error["message"].startswith("Invalid arguments for mutate_app: ")
    assert message in error["message"]


@pytest.mark.parametrize("mode", MODES)
def test_an_unexpected_failure_is_a_generic_internal_error_without_internals(live, alice, budget, mode, monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("secret detail: password=hunter2")

    monkeypatch.setattr("mcp_tools.tools.run_route.route_run", explode)

    result = call_tool(live, alice, mode, "mutate_app", mutate(budget, "add_expense", {}))

    error = assert_envelope(result)["error"]
    assert error == {
        "kind": "internal_error",
        "message": "Internal error: the server failed to handle this call; it has been logged. Try again later.",
    }
    assert "hunter2" not in text_of(result) and "RuntimeError" not in text_of(result)
