"""The route engine on its own: compiled routes run against an in-memory Store, with no database
(no django_db mark, so any query would fail the test)."""

from __future__ import annotations

from typing import Any

import pytest

from apps_registry.exceptions import HandlerError, InvalidInput, InvalidOutput, OperationFailed
from apps_registry.routes.compiler import CompiledRoute, Problem, check_route, compile_parts
from apps_registry.routes.limits import Limits
from apps_registry.routes.runtime import run_route
from apps_registry.routes.steps import STEP_KINDS, NoticeDraft
from tests.apps_registry.memory_store import MemoryStore

LIMITS = Limits()


def compiled(steps: list[Any], *, kind: str = "mutation", output: Any = None, limits: Limits = LIMITS, **raw: Any):
    route: dict[str, Any] = {"kind": kind, "steps": steps, **raw}
    if output is not None:
        route["output"] = output
    problems: list[Problem] = []
    parts = check_route("r", route, limits, problems, prefix="routes.r")
    assert parts is not None and not problems, [p.as_dict() for p in problems]
    return compile_parts(parts)


def run(route: CompiledRoute, store: MemoryStore, params: Any = None, limits: Limits = LIMITS) -> Any:
    return run_route(
        route,
        params={} if params is None else params,
        caller={"id": "u1", "role": "owner"},
        app_id="app-1",
        store=store,
        limits=limits,
    )


def budget_store() -> MemoryStore:
    return MemoryStore(records={"budgets": {"current": {"limit": 100.0, "spent": 10.0}}})


# --- each step kind ---------------------------------------------------------------------------


def test_every_step_kind_is_covered_here():
    assert list(STEP_KINDS) == [
        "get",
        "find",
        "count",
        "sum",
        "aggregate",
        "let",
        "insert",
        "update",
        "upsert",
        "delete",
        "increment",
        "fail",
        "notify",
        "return",
        "for_each",
    ]


def test_notify_hands_its_notice_to_the_caller_and_only_when_asked():
    route = compiled(
        [
            {"get": {"collection": "budgets", "id": "'current'"}, "as": "b"},
            {
                "notify": {
                    "to": ["owner", "viewers"],
                    "subject": "'Over  budget   now'",
                    "text": "'Spent ' + string(b.spent)",
                }
            },
            {"return": "1"},
        ]
    )
    notices: list = []

    run_route(
        route,
        params={},
        caller={"id": "u1", "role": "owner"},
        app_id="app-1",
        store=budget_store(),
        limits=LIMITS,
        notices=notices,
    )

    assert notices == [NoticeDraft(roles=("owner", "viewers"), subject="Over budget now", text="Spent 10")]
    assert run(route, budget_store()) == 1  # without a list to hand them to: checked, then dropped


def test_get_returns_the_record_with_its_id():
    route = compiled([{"get": {"collection": "budgets", "id": "'current'"}, "as": "b"}, {"return": "b"}])
    assert run(route, budget_store()) == {"limit": 100.0, "spent": 10.0, "id": "current"}


def test_get_of_a_missing_record_uses_its_default_or_fails():
    with_default = compiled(
        [{"get": {"collection": "budgets", "id": "'nope'", "default": "{'limit': 0.0}"}, "as": "b"}, {"return": "b"}]
    )
    assert run(with_default, budget_store()) == {"limit": 0.0}
    without = compiled([{"get": {"collection": "budgets", "id": "'nope'"}, "as": "b"}, {"return": "b"}])
    with pytest.raises(OperationFailed) as exc:
        run(without, budget_store())
    assert exc.value.message == "Route 'r' steps[0] (get): no record with id 'nope' in collection 'budgets'."
    assert exc.value.details == {"collection": "budgets", "id": "nope"}


def test_find_filters_orders_and_limits():
    store = MemoryStore(
        records={
            "expenses": {
                "a": {"amount": 5.0, "category": "food"},
                "b": {"amount": 9.0, "category": "food"},
                "c": {"amount": 7.0, "category": "rent"},
                "d": {"amount": 1.0, "category": "food"},
            }
        }
    )
    route = compiled(
        [
            {
                "find": {
                    "collection": "expenses",
                    "where": {"category": "params.category", "amount": {"gte": "2.0"}},
                    "order_by": "-amount",
                    "limit": "5",
                },
                "as": "found",
            },
            {"return": "found.map(e, e.id)"},
        ]
    )
    assert run(route, store, {"category": "food"}) == ["b", "a"]


def test_a_paged_find_continues_after_its_cursor_even_when_records_are_inserted_between_pages():
    store = MemoryStore(records={"items": {k: {"n": n % 3} for n, k in enumerate("abcdefg")}})
    route = compiled(
        [
            {
                "find": {"collection": "items", "order_by": "-n", "limit": "2", "cursor": "params.cursor"},
                "as": "page",
            },
            {"return": "page"},
        ],
        kind="query",
    )
    expected = [
        r["id"]
        for r in run(
            compiled([{"find": {"collection": "items", "order_by": "-n"}, "as": "f"}, {"return": "f"}], kind="query"),
            store,
        )
    ]
    seen, cursor = [], None
    while True:
        got = run(route, store, {"cursor": cursor})
        seen += [r["id"] for r in got["items"]]
        store.insert("items", f"new{len(seen)}", {"n": 1})
        cursor = got["next_cursor"]
        if cursor is None:
            break
    # Ties of a descending order come newest first (insertion order follows the last order key).
    assert [i for i in seen if not i.startswith("new")] == expected == ["f", "c", "e", "b", "g", "d", "a"]
    assert len(seen) == len(set(seen))


def test_find_with_a_negative_limit_fails_naming_the_step():
    route = compiled([{"find": {"collection": "c", "limit": "-1"}, "as": "f"}, {"return": "f"}])
    with pytest.raises(HandlerError) as exc:
        run(route, MemoryStore())
    assert exc.value.message == (
        "Route 'r' failed at steps[0].find.limit: the expression must evaluate to a non-negative integer, "
        "got integer -1"
    )


def test_count_and_sum_aggregate_matching_records():
    store = MemoryStore(records={"e": {"a": {"n": 2.5, "k": "x"}, "b": {"n": 4.0, "k": "x"}, "c": {"n": 1.0}}})
    route = compiled(
        [
            {"count": {"collection": "e", "where": {"k": "'x'"}}, "as": "how_many"},
            {"sum": {"collection": "e", "field": "n"}, "as": "total"},
            {"return": "{'count': how_many, 'total': total}"},
        ],
        kind="query",
    )
    assert run(route, store) == {"count": 2, "total": 7.5}


def test_let_binds_a_computed_value():
    route = compiled([{"let": "params.a * 2", "as": "twice"}, {"return": "twice + 1"}])
    assert run(route, MemoryStore(), {"a": 20}) == 41


def test_insert_takes_its_id_from_the_value_or_the_id_key():
    store = MemoryStore()
    route = compiled(
        [
            {"insert": {"collection": "e", "value": "{'id': 7, 'n': 1}"}, "as": "first"},
            {"insert": {"collection": "e", "value": "{'n': 2}", "id": "'second'"}, "as": "second"},
            {"return": "[first, second]"},
        ]
    )
    assert run(route, store) == [{"n": 1, "id": "7"}, {"n": 2, "id": "second"}]
    assert store.collection("e") == {"7": {"n": 1}, "second": {"n": 2}}


def test_update_merges_and_fails_on_a_missing_record():
    store = budget_store()
    route = compiled(
        [{"update": {"collection": "budgets", "id": "params.id", "value": "{'limit': 50.0, 'id': 'x'}"}, "as": "b"}]
    )
    assert run(route, store, {"id": "current"}) is None
    assert store.collection("budgets") == {"current": {"limit": 50.0, "spent": 10.0}}
    with pytest.raises(OperationFailed) as exc:
        run(route, store, {"id": "gone"})
    assert exc.value.message == "Cannot update budgets/gone: no record with id 'gone' in collection 'budgets'."


def test_upsert_creates_then_merges():
    store = MemoryStore()
    route = compiled(
        [{"upsert": {"collection": "s", "id": "'me'", "value": "params"}, "as": "s"}, {"return": "s"}],
    )
    assert run(route, store, {"theme": "dark"}) == {"theme": "dark", "id": "me"}
    assert run(route, store, {"lang": "fr"}) == {"theme": "dark", "lang": "fr", "id": "me"}


def test_delete_returns_the_deleted_record():
    store = budget_store()
    route = compiled([{"delete": {"collection": "budgets", "id": "'current'"}, "as": "gone"}, {"return": "gone.id"}])
    assert run(route, store) == "current"
    assert store.collection("budgets") == {}


def test_increment_adds_and_rereads_only_when_bound():
    store = budget_store()
    bound = compiled(
        [
            {"increment": {"collection": "budgets", "id": "'current'", "field": "spent", "by": "2.5"}, "as": "b"},
            {"return": "b.spent"},
        ]
    )
    assert run(bound, store) == 12.5
    unbound = compiled([{"increment": {"collection": "budgets", "id": "'current'", "field": "count"}}])
    assert run(unbound, store) is None
    assert store.collection("budgets")["current"] == {"limit": 100.0, "spent": 12.5, "count": 1}


def test_increment_by_a_non_number_fails_naming_the_step():
    route = compiled([{"increment": {"collection": "b", "id": "'x'", "field": "n", "by": "'one'"}}])
    with pytest.raises(HandlerError) as exc:
        run(route, MemoryStore(records={"b": {"x": {}}}))
    assert exc.value.message == (
        "Route 'r' failed at steps[0].increment.by: the expression must evaluate to a finite number, got string"
    )


def test_fail_ends_the_call_with_its_message_and_details_only_when_its_condition_holds():
    route = compiled(
        [
            {"fail": {"when": "params.n < 0", "message": "'n must not be negative'", "details": "{'n': params.n}"}},
            {"return": "params.n"},
        ]
    )
    assert run(route, MemoryStore(), {"n": 3}) == 3
    with pytest.raises(HandlerError) as exc:
        run(route, MemoryStore(), {"n": -1})
    assert exc.value.message == "n must not be negative"
    assert exc.value.details == {"n": -1}


def test_return_ends_the_call_and_a_route_without_return_gives_null():
    assert run(compiled([{"return": "{'now_is_set': now != null}"}]), MemoryStore()) == {"now_is_set": True}
    assert run(compiled([{"let": "1", "as": "x"}]), MemoryStore()) is None


def test_the_caller_and_the_app_are_variables():
    route = compiled([{"return": "[caller.id, caller.role, app.id]"}], kind="query")
    assert run(route, MemoryStore()) == ["u1", "owner", "app-1"]


def test_a_legacy_handler_runs_bridged_into_steps():
    problems: list[Problem] = []
    raw = {"kind": "mutation", "handler": {"action": "insert", "collection": "notes"}}
    parts = check_route("r", raw, LIMITS, problems, prefix="routes.r")
    assert parts is not None and not problems
    route = compile_parts(parts)
    store = MemoryStore()
    value = run(route, store, {"text": "hi"})
    assert value["text"] == "hi"
    assert store.collection("notes") == {value["id"]: {"text": "hi"}}


# --- rollback (the engine runs a mutation inside the store's atomic block) ---------------------


def test_a_failing_mutation_writes_nothing():
    store = budget_store()
    route = compiled(
        [
            {"insert": {"collection": "e", "value": "{'n': 1}"}},
            {"increment": {"collection": "budgets", "id": "'current'", "field": "spent"}},
            {"fail": {"message": "'stop'"}},
        ]
    )
    with pytest.raises(HandlerError):
        run(route, store)
    assert store.collection("e") == {}
    assert store.collection("budgets") == {"current": {"limit": 100.0, "spent": 10.0}}


def test_invalid_output_is_reported_and_rolls_the_mutation_back():
    store = MemoryStore()
    route = compiled(
        [{"insert": {"collection": "e", "value": "{'n': 1}"}, "as": "e"}, {"return": "{'id': 5}"}],
        output={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    )
    with pytest.raises(InvalidOutput) as exc:
        run(route, store)
    assert exc.value.message == (
        "Route 'r' returned a value that does not match its output schema (the app's author must fix the route): "
        '$.id: 5 is not of type "string"'
    )
    assert exc.value.errors == [{"path": "$.id", "message": '5 is not of type "string"'}]
    assert store.collection("e") == {}


def test_going_over_the_records_per_app_limit_rolls_the_mutation_back():
    store = MemoryStore(records={"e": {"a": {}, "b": {}}})
    route = compiled([{"insert": {"collection": "e", "value": "{}"}}])
    limits = Limits(records_per_app=2)
    with pytest.raises(OperationFailed) as exc:
        run(route, store, limits=limits)
    assert exc.value.message == "This app would hold more than 2 records; delete some before adding more."
    assert exc.value.details["limit"] == "records_per_app"
    assert store.record_count() == 2


# --- the call's accounting (MeteredStore) ------------------------------------------------------


def test_reading_more_records_than_the_limit_fails_the_call():
    store = MemoryStore(records={"e": {str(i): {"i": i} for i in range(4)}})
    route = compiled([{"find": {"collection": "e"}, "as": "all"}, {"return": "size(all)"}], kind="query")
    assert run(route, store, limits=Limits(records_read_per_call=4)) == 4
    with pytest.raises(OperationFailed) as exc:
        run(route, store, limits=Limits(records_read_per_call=3))
    assert exc.value.message == (
        "This call read more than 3 records; add a tighter 'where' or a 'limit' to its find steps."
    )


def test_writing_more_records_than_the_limit_fails_the_call_and_writes_nothing():
    store = MemoryStore()
    route = compiled([{"insert": {"collection": "e", "value": "{}"}}, {"insert": {"collection": "e", "value": "{}"}}])
    with pytest.raises(OperationFailed) as exc:
        run(route, store, limits=Limits(records_written_per_call=1))
    assert exc.value.message == "This call wrote more than 1 records; split the work into several calls."
    assert store.record_count() == 0


def test_a_record_over_the_size_limit_is_refused():
    route = compiled([{"insert": {"collection": "e", "value": "{'text': params.text}", "id": "'big'"}}])
    with pytest.raises(OperationFailed) as exc:
        run(route, MemoryStore(max_bytes=20), {"text": "x" * 20})
    assert exc.value.message == "Record e/big would be 31 bytes; the limit is 20."


# --- input and output validation ---------------------------------------------------------------


def test_params_that_do_not_match_the_input_schema_are_refused_before_any_step_runs():
    store = MemoryStore()
    route = compiled(
        [{"insert": {"collection": "e", "value": "params"}}],
        input={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    with pytest.raises(InvalidInput) as exc:
        run(route, store, {"n": "one"})
    assert exc.value.errors == [{"path": "$.n", "message": '"one" is not of type "integer"'}]
    assert store.record_count() == 0


def test_a_number_declared_number_reaches_cel_as_a_double():
    route = compiled(
        [{"return": "params.n / 2.0"}],
        kind="query",
        input={"type": "object", "properties": {"n": {"type": "number"}}},
    )
    assert run(route, MemoryStore(), {"n": 3}) == 1.5


def test_output_matching_its_schema_is_returned():
    route = compiled(
        [{"return": "{'id': 'x'}"}],
        output={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    )
    assert run(route, MemoryStore()) == {"id": "x"}


# --- values of the wrong type, reported at the step and key that made them ----------------------

MUST = "the expression must evaluate to"


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        # The id was taken out of the value before the check, so the report says null (as it always has).
        (
            [{"insert": {"collection": "e", "value": "{'id': true}"}}],
            f"steps[0].insert.value.id: {MUST} a string or an integer, got null",
        ),
        ([{"fail": {"when": "1", "message": "'x'"}}], f"steps[0].fail.when: {MUST} a boolean, got integer 1"),
        ([{"fail": {"message": "'x'", "details": "[1]"}}], f"steps[0].fail.details: {MUST} an object, got array"),
        (
            [{"count": {"collection": "e", "where": {"n": {"in": "1"}}}, "as": "n"}],
            f"steps[0].count.where.n.in: {MUST} an array, got integer 1",
        ),
        (
            [{"count": {"collection": "e", "where": {"id": {"in": "[1, true]"}}}, "as": "n"}],
            f"steps[0].count.where.id.in: {MUST} an array of strings or integers (record ids), got boolean",
        ),
        (
            [{"count": {"collection": "e", "where": {"n": {"gt": "true"}}}, "as": "n"}],
            f"steps[0].count.where.n.gt: {MUST} a number or a string to compare with gt, got boolean",
        ),
        (
            [{"count": {"collection": "e", "where": {"n": "[1]"}}, "as": "n"}],
            f"steps[0].count.where.n: {MUST} a string, number, boolean or null, got array",
        ),
        (
            [{"get": {"collection": "e", "id": "true"}, "as": "r"}],
            f"steps[0].get.id: {MUST} a non-empty string (at most 200 characters) or an integer, got boolean",
        ),
        (
            [{"update": {"collection": "e", "id": "'a'", "value": "[1]"}}],
            f"steps[0].update.value: {MUST} an object, got array",
        ),
        (
            [{"return": "1.0 / 0.0"}],
            "steps[0].return: An expression produced inf, which JSON cannot represent; "
            "check for a division of doubles by 0.0.",
        ),
    ],
)
def test_a_value_of_the_wrong_type_fails_the_call_naming_the_step(steps, message):
    store = MemoryStore(records={"e": {"a": {"n": 1}}})
    with pytest.raises(HandlerError) as exc:
        run(compiled(steps), store)
    assert exc.value.message == f"Route 'r' failed at {message}"
    assert exc.value.details == {"route": "r", "step": message.split(":", 1)[0]}
    assert store.collection("e") == {"a": {"n": 1}}
