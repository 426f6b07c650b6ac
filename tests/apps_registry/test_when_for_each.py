"""`when` on any step and the `for_each` step: what runs, what is bound, what is refused when saved, and that a
mutation's passes are all in its one transaction."""

from __future__ import annotations

from typing import Any

import pytest

from apps_registry.exceptions import HandlerError, InvalidDefinition, OperationFailed
from apps_registry.routes.compiler import Problem, check_route
from apps_registry.routes.limits import Limits
from tests.apps_registry.memory_store import MemoryStore
from tests.apps_registry.route_helpers import one_route_app, records, run
from tests.apps_registry.test_engine_in_memory import compiled
from tests.apps_registry.test_engine_in_memory import run as run_memory


def problems_of(steps: list[Any], kind: str = "mutation") -> list[dict[str, Any]]:
    problems: list[Problem] = []
    check_route("r", {"kind": kind, "steps": steps}, Limits(), problems, prefix="routes.r")
    return [p.as_dict() for p in problems]


# --- when -------------------------------------------------------------------------------------


def test_a_step_whose_when_is_false_does_nothing_and_binds_null():
    route = compiled(
        [
            {"insert": {"collection": "log", "value": "{'n': params.n}"}, "when": "params.n > 0", "as": "saved"},
            {"return": "{'saved': saved}"},
        ]
    )
    store = MemoryStore()
    assert run_memory(route, store, {"n": 0}) == {"saved": None}
    assert store.collection("log") == {}
    saved = run_memory(route, store, {"n": 2})["saved"]
    assert saved["n"] == 2 and list(store.collection("log").values()) == [{"n": 2}]


def test_a_return_with_when_lets_later_steps_run():
    route = compiled([{"return": "'early'", "when": "params.early"}, {"return": "'late'"}], kind="query")
    assert run_memory(route, MemoryStore(), {"early": True}) == "early"
    assert run_memory(route, MemoryStore(), {"early": False}) == "late"


def test_a_when_that_is_not_a_bool_fails_the_call():
    route = compiled([{"let": "1", "as": "x", "when": "params.n"}, {"return": "x"}], kind="query")
    with pytest.raises(HandlerError) as caught:
        run_memory(route, MemoryStore(), {"n": 1})
    assert caught.value.message == (
        "Route 'r' failed at steps[0].when: the expression must evaluate to a boolean, got integer 1"
    )


def test_when_is_checked_when_saved():
    assert problems_of([{"let": "1", "as": "x", "when": "later"}, {"let": "2", "as": "later"}]) == [
        {
            "path": "routes.r.steps[0].when",
            "message": "unknown name(s) later; names available here: app, caller, now, params",
        }
    ]


# --- for_each ---------------------------------------------------------------------------------

TAGGED = [
    {"insert": {"collection": "books", "value": "{'title': params.title}"}, "as": "book"},
    {
        "for_each": {
            "in": "params.tags",
            "as": "tag",
            "steps": [
                {"insert": {"collection": "book_tags", "value": "{'book': book.id, 'tag': tag}"}, "as": "link"},
                {"return": "link.tag"},
            ],
        },
        "as": "tags",
    },
    {"return": "{'id': book.id, 'tags': tags}"},
]


def test_for_each_runs_its_steps_once_per_item_and_binds_each_pass_return():
    store = MemoryStore()
    result = run_memory(compiled(TAGGED), store, {"title": "Dune", "tags": ["sf", "classic"]})
    assert result["tags"] == ["sf", "classic"]
    links = sorted(store.collection("book_tags").values(), key=lambda link: link["tag"])
    assert links == [{"book": result["id"], "tag": "classic"}, {"book": result["id"], "tag": "sf"}]


def test_a_pass_without_return_gives_null_and_an_empty_list_runs_nothing():
    route = compiled(
        [
            {"for_each": {"in": "params.xs", "as": "x", "steps": [{"let": "x * 2", "as": "y"}]}, "as": "out"},
            {"return": "out"},
        ],
        kind="query",
    )
    assert run_memory(route, MemoryStore(), {"xs": [1, 2]}) == [None, None]
    assert run_memory(route, MemoryStore(), {"xs": []}) == []


def test_for_each_with_when_inside_skips_items():
    route = compiled(
        [
            {
                "for_each": {
                    "in": "params.xs",
                    "as": "x",
                    "steps": [{"insert": {"collection": "c", "value": "{'x': x}"}, "when": "x % 2 == 0"}],
                }
            },
            {"return": "true"},
        ]
    )
    store = MemoryStore()
    run_memory(route, store, {"xs": [1, 2, 3, 4]})
    assert sorted(r["x"] for r in store.collection("c").values()) == [2, 4]


def test_names_bound_inside_a_pass_stay_inside_it():
    found = problems_of(
        [
            {"for_each": {"in": "[1]", "as": "x", "steps": [{"let": "x", "as": "inner"}]}},
            {"return": "inner"},
        ]
    )
    assert found == [
        {
            "path": "routes.r.steps[1].return",
            "message": "unknown name(s) inner; names available here: app, caller, now, params",
        }
    ]
    assert problems_of(
        [{"for_each": {"in": "[1]", "as": "x", "steps": [{"let": "x", "as": "y"}]}}, {"return": "x"}]
    ) == [
        {
            "path": "routes.r.steps[1].return",
            "message": "unknown name(s) x; names available here: app, caller, now, params",
        }
    ]


@pytest.mark.parametrize(
    ("steps", "kind", "expected"),
    [
        (
            [{"for_each": {"in": "[1]", "steps": [{"let": "1", "as": "y"}]}}],
            "query",
            [{"path": "routes.r.steps[0].for_each.as", "message": "required"}],
        ),
        (
            [{"for_each": {"in": "[1]", "as": "params", "steps": [{"let": "1", "as": "y"}]}}],
            "query",
            [{"path": "routes.r.steps[0].for_each.as", "message": "'params' is reserved; choose another name"}],
        ),
        (
            [{"let": "1", "as": "x"}, {"for_each": {"in": "[1]", "as": "x", "steps": [{"let": "x", "as": "y"}]}}],
            "query",
            [{"path": "routes.r.steps[1].for_each.as", "message": "'x' is already bound by steps[0]"}],
        ),
        (
            [{"for_each": {"in": "[1]", "as": "x", "steps": []}}],
            "query",
            [{"path": "routes.r.steps[0].for_each.steps", "message": "must be a non-empty array of steps"}],
        ),
        (
            [{"for_each": {"in": "[1]", "as": "x", "steps": [{"insert": {"collection": "c", "value": "{}"}}]}}],
            "query",
            [
                {
                    "path": "routes.r.steps[0].for_each.steps[0].insert",
                    "message": "a query route cannot write; make the route a mutation",
                }
            ],
        ),
        (
            [
                {
                    "for_each": {
                        "in": "[[1]]",
                        "as": "xs",
                        "steps": [{"for_each": {"in": "xs", "as": "x", "steps": [{"let": "x", "as": "y"}]}}],
                    }
                }
            ],
            "query",
            [
                {
                    "path": "routes.r.steps[0].for_each.steps[0]",
                    "message": (
                        "a for_each cannot hold another for_each; loop over a flattened list instead (flatten())"
                    ),
                }
            ],
        ),
        (
            [{"for_each": {"in": "[1]", "as": "x", "steps": [{"let": "x", "as": "y"}], "limit": 3}}],
            "query",
            [{"path": "routes.r.steps[0].for_each.limit", "message": "unknown key; for_each takes in, as, steps"}],
        ),
        (
            [{"for_each": {"in": "[1]", "as": "x", "steps": [{"let": "nope", "as": "y"}]}}],
            "query",
            [
                {
                    "path": "routes.r.steps[0].for_each.steps[0].let",
                    "message": "unknown name(s) nope; names available here: app, caller, now, params, x",
                }
            ],
        ),
    ],
)
def test_a_bad_for_each_is_refused_with_its_path(steps, kind, expected):
    assert problems_of(steps, kind) == expected


def test_an_error_inside_a_pass_names_where_it_happened():
    route = compiled(
        [{"for_each": {"in": "params.xs", "as": "x", "steps": [{"let": "10 / x", "as": "y"}]}}, {"return": "1"}],
        kind="query",
    )
    with pytest.raises(HandlerError) as caught:
        run_memory(route, MemoryStore(), {"xs": [1, 0]})
    assert caught.value.message.startswith("Route 'r' failed at steps[0].for_each.steps[0].let: evaluating `10 / x`")


def test_for_each_over_a_non_list_fails_the_call():
    route = compiled([{"for_each": {"in": "params.x", "as": "x", "steps": [{"let": "x", "as": "y"}]}}], kind="query")
    with pytest.raises(HandlerError) as caught:
        run_memory(route, MemoryStore(), {"x": "abc"})
    assert caught.value.message == (
        "Route 'r' failed at steps[0].for_each.in: the expression must evaluate to an array, got string"
    )


# --- in the database: one transaction, bounded -------------------------------------------------


@pytest.mark.django_db
def test_a_failing_pass_rolls_back_every_pass(user):
    app = one_route_app(
        user,
        [
            {
                "for_each": {
                    "in": "params.items",
                    "as": "item",
                    "steps": [
                        {"fail": {"message": "'amount must be positive'", "when": "item.amount <= 0"}},
                        {"insert": {"collection": "items", "value": "item"}},
                    ],
                }
            },
            {"return": "true"},
        ],
    )
    with pytest.raises(HandlerError) as caught:
        run(user, app, "r", {"items": [{"amount": 1}, {"amount": 2}, {"amount": 0}]})
    assert caught.value.message == "amount must be positive"
    assert records(app, "items") == {}
    run(user, app, "r", {"items": [{"amount": 1}, {"amount": 2}]})
    assert sorted(r["amount"] for r in records(app, "items").values()) == [1, 2]


@pytest.mark.django_db
def test_for_each_is_bounded_by_its_limit_and_the_write_limit(user, settings):
    app = one_route_app(
        user,
        [
            {
                "for_each": {
                    "in": "params.xs",
                    "as": "x",
                    "steps": [{"insert": {"collection": "items", "value": "{'x': x}"}}],
                }
            }
        ],
    )
    settings.CHARMING_ROUTES_MAX_FOR_EACH_ITEMS = 3
    with pytest.raises(OperationFailed) as caught:
        run(user, app, "r", {"xs": [1, 2, 3, 4]})
    assert caught.value.message == (
        "Route 'r' failed at steps[0].for_each.in: the list holds 4 items; the limit is 3 per for_each. "
        "Send fewer items per call, or split the work into several calls."
    )
    assert caught.value.details["limit"] == "for_each_items"
    settings.CHARMING_ROUTES_MAX_FOR_EACH_ITEMS = 100
    settings.CHARMING_ROUTES_MAX_RECORDS_WRITTEN = 5
    with pytest.raises(OperationFailed) as caught:
        run(user, app, "r", {"xs": list(range(6))})
    assert caught.value.details["limit"] == "records_written_per_call"
    assert records(app, "items") == {}


@pytest.mark.django_db
def test_an_invalid_for_each_is_an_invalid_definition_through_the_service(user):
    with pytest.raises(InvalidDefinition) as caught:
        one_route_app(user, [{"for_each": {"in": "params.xs", "as": "x", "steps": "insert"}}])
    assert {"path": "routes.r.steps[0].for_each.steps", "message": "must be a non-empty array of steps"} in (
        caught.value.errors
    )


def test_a_when_or_an_in_of_the_wrong_type_is_refused_when_saved():
    assert problems_of([{"let": "1", "as": "x", "when": "params.flag"}, {"return": "x"}]) == []  # dyn: checked when run
    assert problems_of([{"let": "1", "as": "x", "when": "size('abc')"}, {"return": "x"}]) == [
        {"path": "routes.r.steps[0].when", "message": "must be a condition (a boolean), but it gives int"}
    ]
    assert problems_of([{"for_each": {"in": "'abc'", "as": "c", "steps": [{"let": "c", "as": "y"}]}}]) == [
        {"path": "routes.r.steps[0].for_each.in", "message": "must be a list to loop over, but it gives string"}
    ]


# --- when on a where condition: an optional filter --------------------------------------------

OPTIONAL = [
    {
        "find": {
            "collection": "expenses",
            "where": {
                "category": {"eq": "params.category", "when": "has(params.category)"},
                "amount": {"gte": "params.min", "lt": "1000.0", "when": "has(params.min)"},
            },
            "limit": "10",
        },
        "as": "found",
    },
    {"return": "found.map(e, e.id)"},
]


def _expenses() -> MemoryStore:
    return MemoryStore(
        records={
            "expenses": {
                "a": {"category": "food", "amount": 5.0},
                "b": {"category": "rent", "amount": 700.0},
                "c": {"category": "food", "amount": 50.0},
            }
        }
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["a", "b", "c"]),
        ({"category": "food"}, ["a", "c"]),
        ({"min": 10.0}, ["b", "c"]),
        ({"category": "food", "min": 10.0}, ["c"]),
    ],
)
def test_a_where_condition_with_when_applies_only_when_it_is_true(params, expected):
    route = compiled(OPTIONAL, kind="query")
    assert run_memory(route, _expenses(), params) == expected


@pytest.mark.django_db
def test_an_optional_filter_in_the_database(user):
    app = one_route_app(user, OPTIONAL, kind="query")
    from apps_registry.models import Record

    for record_id, data in _expenses().collection("expenses").items():
        Record.objects.create(storage=app.storage, collection="expenses", record_id=record_id, data=data)
    assert sorted(run(user, app, "r", {"category": "food"}, kind="query")) == ["a", "c"]
    assert sorted(run(user, app, "r", {}, kind="query")) == ["a", "b", "c"]


def test_a_where_when_is_checked_when_saved():
    bad = [{"count": {"collection": "c", "where": {"k": {"eq": "1", "when": "'yes'"}}}, "as": "n"}, {"return": "n"}]
    assert problems_of(bad, "query") == [
        {
            "path": "routes.r.steps[0].count.where.k.when",
            "message": "must be a condition (a boolean), but it gives string",
        }
    ]
    alone = [{"count": {"collection": "c", "where": {"k": {"when": "true"}}}, "as": "n"}, {"return": "n"}]
    assert problems_of(alone, "query") == [
        {"path": "routes.r.steps[0].count.where.k", "message": "a 'when' needs a comparison beside it, such as eq"}
    ]
