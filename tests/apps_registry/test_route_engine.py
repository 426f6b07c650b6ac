"""route_run: access, every step, every error kind, rollback on every failure path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps_registry.access import membership_set
from apps_registry.exceptions import (
    Forbidden,
    HandlerError,
    InvalidInput,
    InvalidOutput,
    NotFound,
    OperationFailed,
    UnknownOp,
)
from apps_registry.models import Record, Role
from apps_registry.routes import cache
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example, one_route_app, records, run
from tests.factories import RecordFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def budget(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 100})
    return app


def seed(app, collection: str, rows: dict[str, dict]) -> None:
    for record_id, data in rows.items():
        RecordFactory(storage=app.storage, collection=collection, record_id=record_id, data=data)


# --- the examples, end to end ---------------------------------------------------------------


def test_budget_example_records_expenses_and_reports_what_is_left(user, budget):
    first = run(user, budget, "add_expense", {"amount": 12, "category": "food"})
    run(user, budget, "add_expense", {"amount": 30.5, "category": "rent", "note": "march"})
    assert first["remaining"] == 88.0
    assert records(budget, "budgets")["current"] == {"limit": 100.0, "spent": 42.5}
    assert records(budget, "expenses")[first["id"]]["amount"] == 12.0
    listed = run(user, budget, "list_expenses", {"category": "food"}, kind="query")
    assert [e["id"] for e in listed] == [first["id"]]
    big = run(user, budget, "big_expenses", {"min": 20}, kind="query")
    assert [e["amount"] for e in big] == [30.5]
    summary = run(user, budget, "summary", {"category": "food"}, kind="query")
    assert summary == {"limit": 100.0, "spent": 42.5, "remaining": 57.5, "expenses": 2, "category_total": 12.0}
    moved = run(user, budget, "recategorize_expense", {"id": first["id"], "category": "treats"})
    assert moved == {"id": first["id"], "category": "treats", "amount": 12.0}
    deleted = run(user, budget, "delete_expense", {"id": first["id"]})
    assert deleted == {"deleted": first["id"], "remaining": 69.5}
    assert first["id"] not in records(budget, "expenses")


def test_budget_example_fails_clearly_before_a_budget_is_set(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    with pytest.raises(HandlerError) as exc:
        run(user, app, "add_expense", {"amount": 5, "category": "food"})
    assert exc.value.message == "No budget is set yet: call set_budget first."
    assert exc.value.details == {"route": "set_budget"}
    assert records(app) == {}


def test_todo_example_adds_completes_and_counts_items(user):
    app = app_definition_save(actor=user, definition=example("todo"))
    milk = run(user, app, "add_todo", {"title": "milk"})
    urgent = run(user, app, "add_todo", {"title": "taxes", "priority": 1})
    assert milk["done"] is False and milk["priority"] == 2
    assert run(user, app, "complete_todo", {"id": milk["id"]}) == {"id": milk["id"], "done": True}
    run(user, app, "add_todo", {"title": "bread", "priority": 3})
    open_items = run(user, app, "open_todos", {}, kind="query")
    assert [t["title"] for t in open_items] == ["taxes", "bread"]
    assert run(user, app, "rename_todo", {"id": urgent["id"], "title": "file taxes"})["title"] == "file taxes"
    assert run(user, app, "progress", None, kind="query") == {"done": 1, "open": 2, "percent_done": 33}
    assert run(user, app, "delete_todo", {"id": urgent["id"]}) == {"deleted": urgent["id"]}


# --- access and dispatch --------------------------------------------------------------------


def test_unknown_op_lists_the_apps_routes(user, budget):
    with pytest.raises(UnknownOp) as exc:
        run(user, budget, "add_expenses", {})
    assert "has no route 'add_expenses'" in exc.value.message
    assert "add_expense (mutation)" in exc.value.message and "list_expenses (query)" in exc.value.message


def test_running_a_route_as_the_wrong_kind_names_its_kind(user, budget):
    with pytest.raises(UnknownOp) as exc:
        run(user, budget, "list_expenses", {"category": "x"}, kind="mutation")
    assert exc.value.message == "'list_expenses' is a query route; run it as a query, not as a mutation."
    with pytest.raises(UnknownOp) as exc:
        run(user, budget, "add_expense", {"amount": 1, "category": "x"}, kind="query")
    assert exc.value.message == "'add_expense' is a mutation route; run it as a mutation, not as a query."


def test_viewers_may_query_but_not_mutate(user, other_user, budget):
    membership_set(actor=user, app=budget, user=other_user, role=Role.VIEWER)
    assert run(other_user, budget, "summary", {}, kind="query")["limit"] == 100.0
    with pytest.raises(Forbidden) as exc:
        run(other_user, budget, "add_expense", {"amount": 1, "category": "x"})
    assert exc.value.message == (
        "You are a viewer of app 'Budget'; viewers may only query and read it. "
        "Ask the owner for editor access to change its data."
    )


def test_editors_may_mutate(user, other_user, budget):
    membership_set(actor=user, app=budget, user=other_user, role=Role.EDITOR)
    assert run(other_user, budget, "add_expense", {"amount": 1, "category": "x"})["remaining"] == 99.0


def test_an_app_the_caller_cannot_see_is_reported_as_not_found(other_user, budget):
    with pytest.raises(NotFound) as exc:
        run(other_user, budget, "summary", {}, kind="query")
    assert f"No app with id {budget.id} exists or is visible to you" in exc.value.message


# --- input and output -----------------------------------------------------------------------


def test_invalid_input_lists_every_violation_with_its_path(user, budget):
    with pytest.raises(InvalidInput) as exc:
        run(user, budget, "add_expense", {"amount": "ten", "category": "", "colour": "red"})
    paths = sorted(e["path"] for e in exc.value.errors)
    assert paths == ["$", "$.amount", "$.category"]
    messages = " ".join(e["message"] for e in exc.value.errors)
    assert "'colour' was unexpected" in messages and 'is not of type "number"' in messages
    assert exc.value.message.startswith("params do not match the input schema of route 'add_expense'")


def test_params_that_are_not_an_object_are_invalid_input(user, budget):
    with pytest.raises(InvalidInput) as exc:
        run(user, budget, "add_expense", ["x"])
    assert exc.value.errors == [{"path": "$", "message": "must be of type object, got array"}]


def test_an_integer_sent_for_a_number_reaches_cel_as_a_double(user):
    app = one_route_app(
        user,
        [{"return": "params.amount + 0.5"}],
        input_schema={"type": "object", "properties": {"amount": {"type": "number"}}},
    )
    assert run(user, app, params={"amount": 2}) == 2.5


def test_output_that_breaks_the_schema_is_invalid_output_and_rolls_back(user):
    app = one_route_app(
        user,
        [{"insert": {"collection": "items", "value": "{'n': 1}"}, "as": "item"}, {"return": "{'n': 'one'}"}],
        output={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n", "id"]},
    )
    with pytest.raises(InvalidOutput) as exc:
        run(user, app)
    assert sorted(e["path"] for e in exc.value.errors) == ["$", "$.n"]
    assert "does not match its output schema" in exc.value.message
    assert records(app) == {}


def test_a_catastrophic_pattern_does_not_hang_validation(user):
    app = one_route_app(
        user,
        [{"return": "params.s"}],
        input_schema={"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}},
    )
    with pytest.raises(InvalidInput) as exc:
        run(user, app, params={"s": "a" * 50_000 + "!"})
    assert exc.value.errors[0]["path"] == "$.s"
    assert exc.value.errors[0]["message"].endswith('does not match "^(a+)+$"')
    assert len(exc.value.errors[0]["message"]) < 400


# --- steps ----------------------------------------------------------------------------------


def test_get_returns_the_record_with_its_id(user):
    app = one_route_app(user, [{"get": {"collection": "items", "id": "params.id"}, "as": "it"}, {"return": "it"}])
    seed(app, "items", {"a": {"n": 1}})
    assert run(user, app, params={"id": "a"}) == {"n": 1, "id": "a"}


def test_get_of_a_missing_record_fails_unless_it_has_a_default(user):
    app = one_route_app(user, [{"get": {"collection": "items", "id": "'nope'"}, "as": "it"}, {"return": "it"}])
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert "no record with id 'nope' in collection 'items'" in exc.value.message
    assert exc.value.details == {"collection": "items", "id": "nope"}
    with_default = one_route_app(
        user, [{"get": {"collection": "items", "id": "'nope'", "default": "{'n': 0}"}, "as": "it"}, {"return": "it"}]
    )
    assert run(user, with_default) == {"n": 0}


def test_find_filters_orders_and_limits_in_the_database(user):
    app = one_route_app(
        user,
        [
            {
                "find": {
                    "collection": "items",
                    "where": {"kind": "params.kind", "n": {"gte": "params.min", "lt": "100"}},
                    "order_by": "-n",
                    "limit": "2",
                },
                "as": "found",
            },
            {"return": "found.map(r, r.id)"},
        ],
        kind="query",
    )
    seed(app, "items", {f"r{i}": {"kind": "a" if i % 2 else "b", "n": i * 10} for i in range(12)})
    seed(app, "other", {"x": {"kind": "a", "n": 50}})
    with CaptureQueriesContext(connection) as queries:
        assert run(user, app, params={"kind": "a", "min": 30}, kind="query") == ["r9", "r7"]
    find_sql = queries.captured_queries[-1]["sql"]
    assert "LIMIT 2" in find_sql and "ORDER BY" in find_sql


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"n": {"ne": "2"}}, ["a", "c"]),
        ({"n": {"gt": "1", "lte": "3"}}, ["b", "c"]),
        ({"tag": {"in": "['x', 'z']"}}, ["a", "c"]),
        ({"id": {"in": "['a', 'b']"}}, ["a", "b"]),
        ({"id": "'c'"}, ["c"]),
        ({"meta.colour": "'red'"}, ["b"]),
        ({"flag": "true"}, ["a"]),
    ],
)
def test_find_comparisons(user, where, expected):
    app = one_route_app(
        user,
        [
            {"find": {"collection": "items", "where": where, "order_by": "id", "limit": "10"}, "as": "f"},
            {"return": "f"},
        ],
        kind="query",
    )
    seed(
        app,
        "items",
        {
            "a": {"n": 1, "tag": "x", "flag": True},
            "b": {"n": 2, "tag": "y", "meta": {"colour": "red"}, "flag": False},
            "c": {"n": 3, "tag": "z"},
        },
    )
    assert [r["id"] for r in run(user, app, kind="query")] == expected


def test_count_and_sum_are_database_aggregates(user):
    app = one_route_app(
        user,
        [
            {"count": {"collection": "items", "where": {"tag": "'x'"}}, "as": "n"},
            {"sum": {"collection": "items", "field": "amount", "where": {"tag": "'x'"}}, "as": "total"},
            {"sum": {"collection": "items", "field": "amount", "where": {"tag": "'none'"}}, "as": "empty"},
            {"return": "{'n': n, 'total': total, 'empty': empty}"},
        ],
        kind="query",
    )
    seed(app, "items", {"a": {"tag": "x", "amount": 1.5}, "b": {"tag": "x", "amount": 2}, "c": {"tag": "y"}})
    with CaptureQueriesContext(connection) as queries:
        assert run(user, app, kind="query") == {"n": 2, "total": 3.5, "empty": 0.0}
    assert any("COUNT(" in q["sql"] for q in queries.captured_queries)
    assert any("SUM(" in q["sql"] for q in queries.captured_queries)


def test_let_binds_a_value_for_later_steps(user):
    app = one_route_app(user, [{"let": "params.n * 2", "as": "twice"}, {"return": "twice + 1"}])
    assert run(user, app, params={"n": 4}) == 9


def test_insert_generates_an_id_unless_one_is_given(user):
    app = one_route_app(
        user,
        [
            {"insert": {"collection": "items", "value": "{'n': 1}"}, "as": "a"},
            {"insert": {"collection": "items", "value": "{'n': 2}", "id": "'fixed'"}, "as": "b"},
            {"insert": {"collection": "items", "value": "{'id': 'from-value', 'n': 3}"}, "as": "c"},
            {"return": "[a.id, b.id, c.id]"},
        ],
    )
    generated, fixed, from_value = run(user, app)
    assert len(generated) == 36 and fixed == "fixed" and from_value == "from-value"
    assert records(app, "items") == {generated: {"n": 1}, "fixed": {"n": 2}, "from-value": {"n": 3}}


def test_inserting_a_duplicate_id_fails_and_rolls_back_the_call(user):
    app = one_route_app(
        user,
        [
            {"insert": {"collection": "items", "value": "{'n': 1}", "id": "'new'"}},
            {"insert": {"collection": "items", "value": "{'n': 2}", "id": "'dup'"}},
        ],
    )
    seed(app, "items", {"dup": {"n": 0}})
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.message == "A record items/dup already exists; use update or upsert to change it."
    assert exc.value.details == {"collection": "items", "id": "dup"}
    assert records(app, "items") == {"dup": {"n": 0}}


def test_update_merges_and_fails_on_a_missing_record(user):
    app = one_route_app(
        user, [{"update": {"collection": "items", "id": "params.id", "value": "{'b': 2}"}, "as": "r"}, {"return": "r"}]
    )
    seed(app, "items", {"a": {"a": 1, "b": 1}})
    assert run(user, app, params={"id": "a"}) == {"a": 1, "b": 2, "id": "a"}
    assert Record.objects.get(record_id="a").version == 2
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"id": "zz"})
    assert "no record with id 'zz' in collection 'items'" in exc.value.message
    assert exc.value.details == {"collection": "items", "id": "zz"}


def test_upsert_creates_then_merges(user):
    app = one_route_app(
        user, [{"upsert": {"collection": "items", "id": "'k'", "value": "params"}, "as": "r"}, {"return": "r"}]
    )
    assert run(user, app, params={"a": 1}) == {"a": 1, "id": "k"}
    assert run(user, app, params={"b": 2}) == {"a": 1, "b": 2, "id": "k"}


def test_delete_returns_the_deleted_record_and_fails_on_a_missing_one(user):
    app = one_route_app(user, [{"delete": {"collection": "items", "id": "params.id"}, "as": "r"}, {"return": "r"}])
    seed(app, "items", {"a": {"n": 1}})
    assert run(user, app, params={"id": "a"}) == {"n": 1, "id": "a"}
    assert records(app) == {}
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"id": "a"})
    assert "Cannot delete items/a" in exc.value.message


def test_increment_is_computed_by_the_database(user):
    app = one_route_app(
        user,
        [
            {"increment": {"collection": "counters", "id": "'c'", "field": "n", "by": "params.by"}, "as": "c"},
            {"return": "c"},
        ],
        input_schema={"type": "object", "properties": {"by": {"type": "number"}}},
    )
    seed(app, "counters", {"c": {"label": "x"}})
    with CaptureQueriesContext(connection) as queries:
        assert run(user, app, params={"by": 2.5}) == {"label": "x", "n": 2.5, "id": "c"}
    # (on PostgreSQL the UPDATE reads the record before for the change log in the same statement: WITH old AS ...)
    update_sql = next(q["sql"] for q in queries.captured_queries if q["sql"].startswith(("UPDATE", "WITH old")))
    assert "json" in update_sql.lower() and "+" in update_sql
    assert run(user, app, params={"by": 1}) == {"label": "x", "n": 3.5, "id": "c"}
    assert Record.objects.get(record_id="c").version == 3


def test_increment_of_a_missing_record_or_a_non_number_fails(user):
    app = one_route_app(user, [{"increment": {"collection": "counters", "id": "params.id", "field": "n"}}])
    seed(app, "counters", {"text": {"n": "seven"}})
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"id": "none"})
    assert exc.value.details == {"collection": "counters", "id": "none"}
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"id": "text"})
    assert exc.value.message == "Cannot increment counters/text.n: it holds a value that is not a number."
    assert records(app)["text"] == {"n": "seven"}


def test_fail_ends_the_call_with_its_message_and_details_and_rolls_back(user):
    app = one_route_app(
        user,
        [
            {"insert": {"collection": "items", "value": "{'n': 1}"}},
            {
                "fail": {
                    "when": "params.n > 1",
                    "message": "'too big: ' + string(params.n)",
                    "details": "{'n': params.n}",
                }
            },
            {"return": "'ok'"},
        ],
    )
    with pytest.raises(HandlerError) as exc:
        run(user, app, params={"n": 5})
    assert exc.value.message == "too big: 5"
    assert exc.value.details == {"n": 5}
    assert records(app) == {}
    assert run(user, app, params={"n": 1}) == "ok"
    assert len(records(app)) == 1


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("params.missing", "a missing key: no key 'missing'"),
        # (1 + 2.5 is refused when the definition is saved: test_compiler_problems.py)
        ("params.zero + 2.5", "a type mismatch"),
        ("10 / params.zero", "division by zero"),
    ],
)
def test_cel_errors_at_run_time_are_handler_errors_naming_route_step_and_expression(user, expression, reason):
    app = one_route_app(
        user,
        [{"insert": {"collection": "items", "value": "{'n': 1}"}}, {"let": expression, "as": "x"}, {"return": "x"}],
    )
    with pytest.raises(HandlerError) as exc:
        run(user, app, params={"zero": 0})
    message = exc.value.message
    assert message.startswith(f"Route 'r' failed at steps[1].let: evaluating `{expression}` raised {reason}")
    assert "Traceback" not in message
    assert exc.value.details == {"route": "r", "step": "steps[1].let", "expression": expression}
    assert records(app) == {}


def test_a_value_of_the_wrong_type_is_a_handler_error(user):
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "[1, 2]"}}])
    with pytest.raises(HandlerError) as exc:
        run(user, app)
    assert exc.value.message == (
        "Route 'r' failed at steps[0].insert.value: the expression must evaluate to an object, got array"
    )


def test_context_carries_caller_app_and_one_now_per_call(user):
    app = one_route_app(
        user,
        [
            {"let": "now", "as": "first"},
            {"insert": {"collection": "items", "value": "{'at': now}"}, "as": "item"},
            {"return": "{'caller': caller, 'app': app.id, 'same_now': first == now, 'at': item.at}"},
        ],
    )
    value = run(user, app)
    assert value["caller"] == {"id": str(user.pk), "role": "owner"}
    assert value["app"] == str(app.id)
    assert value["same_now"] is True
    assert value["at"].startswith("20")


# --- compile once ---------------------------------------------------------------------------


def test_a_route_is_compiled_once_per_version_and_an_edit_recompiles_only_that_route(user):
    definition = example("todo")
    app = app_definition_save(actor=user, definition=definition)
    before = cache.stats["compiled"]
    for _ in range(3):
        run(user, app, "add_todo", {"title": "a"})
        run(user, app, "progress", {}, kind="query")
    assert cache.stats["compiled"] == before + 2
    definition["routes"]["add_todo"]["description"] = "Add an item (edited)."
    app_definition_save(actor=user, definition=definition, app_id=app.id)
    run(user, app, "add_todo", {"title": "b"})
    run(user, app, "progress", {}, kind="query")
    assert cache.stats["compiled"] == before + 3


def test_a_call_makes_no_per_record_queries(user, budget, settings):
    settings.CHARMING_RATE_APP_BATCH = 1  # the app's budget taken by each call, as here, not from a batch held
    run(user, budget, "add_expense", {"amount": 1, "category": "x"})
    with CaptureQueriesContext(connection) as queries:
        run(user, budget, "add_expense", {"amount": 1, "category": "x"})
    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    # the app's rate budget (one upsert), caller's role + app + route in one query, get budget, insert,
    # the record before the increment (for the change log), increment ... RETURNING, the storage's record counter
    # (one UPDATE whatever the app's size), and the change log: the change and its entries (transaction control not
    # counted). On PostgreSQL the record before comes with the increment (WITH old ... UPDATE) and the change with its
    # entries (WITH c AS (INSERT ...) INSERT ...): one statement each; SQLite has no RETURNING of old rows and no
    # data-modifying CTE, and runs in-process.
    expected = (
        ["INSERT", "SELECT", "SELECT", "INSERT", "WITH", "UPDATE", "WITH"]
        if connection.vendor == "postgresql"
        else ["INSERT", "SELECT", "SELECT", "INSERT", "SELECT", "UPDATE", "UPDATE", "INSERT", "INSERT"]
    )
    assert [s for s in statements if s in ("SELECT", "INSERT", "UPDATE", "WITH")] == expected


@pytest.mark.django_db(transaction=True)
def test_a_mutation_is_one_transaction_with_no_savepoint_and_a_failure_in_it_writes_nothing(user):
    # The engine's steps run in route_run's own transaction, which any error rolls back whole: a savepoint of
    # their own would be two more round trips per call for nothing.
    steps = [
        {"insert": {"collection": "items", "value": "{'n': 1}"}, "as": "a"},
        {"increment": {"collection": "counters", "id": "'c'", "field": "n", "by": "1"}},
        {"fail": {"when": "params.fail", "message": "'failed after two writes'"}},
        {"return": "a.id"},
    ]
    app = one_route_app(user, steps, input_schema={"type": "object", "properties": {"fail": {"type": "boolean"}}})
    seed(app, "counters", {"c": {"n": 0}})
    with CaptureQueriesContext(connection) as queries:
        run(user, app, params={"fail": False})
    assert not [q["sql"] for q in queries.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    before = records(app)
    with pytest.raises(HandlerError, match="failed after two writes"):
        run(user, app, params={"fail": True})
    assert records(app) == before  # neither the insert nor the increment of the failed call is there


def test_other_users_cannot_reach_another_apps_records(user):
    stranger = UserFactory(username="mallory")
    mine = one_route_app(
        user, [{"find": {"collection": "items", "limit": "10"}, "as": "f"}, {"return": "f"}], kind="query"
    )
    theirs = one_route_app(stranger, [{"return": "1"}], kind="query")
    seed(theirs, "items", {"secret": {"n": 1}})
    assert run(user, mine, kind="query") == []


def test_values_json_cannot_hold_are_handler_errors(user):
    app = one_route_app(
        user,
        [{"insert": {"collection": "items", "value": "{'ratio': params.a / params.b}"}}],
        input_schema={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    )
    with pytest.raises(HandlerError) as exc:
        run(user, app, params={"a": 1, "b": 0})
    assert "which JSON cannot represent" in exc.value.message
    assert records(app) == {}
    counter = one_route_app(
        user, [{"increment": {"collection": "counters", "id": "'c'", "field": "n", "by": "1.0 / 0.0"}}]
    )
    seed(counter, "counters", {"c": {"n": 1}})
    with pytest.raises(HandlerError) as exc:
        run(user, counter)
    assert "must evaluate to a finite number, got number" in exc.value.message
    assert records(counter)["c"] == {"n": 1}


@pytest.mark.parametrize(
    ("failing_step", "error"),
    [
        ({"get": {"collection": "items", "id": "'missing'"}, "as": "x"}, OperationFailed),
        ({"update": {"collection": "items", "id": "'missing'", "value": "{'a': 1}"}}, OperationFailed),
        ({"delete": {"collection": "items", "id": "'missing'"}}, OperationFailed),
        ({"increment": {"collection": "items", "id": "'missing'", "field": "n"}}, OperationFailed),
        ({"insert": {"collection": "items", "id": "'first'", "value": "{}"}}, OperationFailed),
        ({"insert": {"collection": "items", "value": "{'big': params.big}"}}, OperationFailed),
        ({"find": {"collection": "items"}, "as": "x"}, OperationFailed),
        ({"fail": {"message": "'stop'"}}, HandlerError),
        ({"let": "params.nope", "as": "x"}, HandlerError),
        ({"return": "{'wrong': true}"}, InvalidOutput),
    ],
)
def test_every_failure_after_a_write_rolls_back_the_whole_call(user, settings, failing_step, error):
    settings.CHARMING_ROUTES_MAX_RECORD_BYTES = 1000
    settings.CHARMING_ROUTES_MAX_RECORDS_READ = 3
    app = one_route_app(
        user,
        [
            {"insert": {"collection": "items", "id": "'first'", "value": "{'n': 1}"}},
            {"upsert": {"collection": "counters", "id": "'c'", "value": "{'n': 1}"}},
            {"increment": {"collection": "counters", "id": "'kept'", "field": "n"}},
            failing_step,
        ],
        output={"type": "null"},
    )
    seed(app, "counters", {"kept": {"n": 10}})
    seed(app, "items", {f"old{i}": {"n": i} for i in range(3)})
    before = records(app)
    with pytest.raises(error):
        run(user, app, params={"big": "x" * 2000})
    assert records(app) == before
