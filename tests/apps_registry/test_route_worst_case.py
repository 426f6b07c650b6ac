"""Limits that show before data does: a route whose call would fail once its finds return enough records gets the
over-limit-route advisory when saved (or checked), naming the step, the limit and the size; a bounded one does
not."""

from __future__ import annotations

from typing import Any

import pytest

from apps_registry.models import Advisory
from apps_registry.routes.advisories import limit_advisories
from apps_registry.routes.compiler import Problem, check_route
from apps_registry.routes.limits import Limits
from apps_registry.routes.worstcase import limit_bound
from tests.apps_registry.route_helpers import one_route_app

BOOKS = [{"find": {"collection": "books", "limit": "1000"}, "as": "books"}]
# Books per year the slow way: a filter over all books inside a map over all books (n² work).
PER_YEAR = [*BOOKS, {"let": "books.map(b, books.filter(c, c.year == b.year).size())", "as": "x"}, {"return": "x"}]


def risks(steps: list[Any], kind: str = "query", input_schema: dict[str, Any] | None = None, **limits: int):
    route: dict[str, Any] = {"kind": kind, "steps": steps}
    if input_schema is not None:
        route["input"] = input_schema
    problems: list[Problem] = []
    parts = check_route("r", route, Limits(**limits), problems, prefix="routes.r")
    assert parts is not None and not problems, problems
    return [a.data for a in limit_advisories("r", parts.steps, Limits(**limits), parts.input_schema)]


def test_a_comprehension_over_found_records_is_reported_with_the_size_it_fails_at():
    (found,) = risks(PER_YEAR)
    assert found["limit"] == "cel_work" and found["step"] == "steps[1].let"
    assert 50 < found["records"] < 200  # the reading list failed at 98 books
    (smaller,) = risks(PER_YEAR, cel_work=5_000_000)
    assert smaller["records"] < found["records"]  # it follows the limit in force


def test_a_bounded_route_gets_no_advisory():
    assert risks([{"find": {"collection": "books", "limit": "20"}, "as": "books"}, {"return": "books"}]) == []
    assert risks([{"count": {"collection": "books"}, "as": "n"}, {"return": "n"}]) == []
    by_year = {"aggregate": {"collection": "books", "group_by": {"year": "year"}, "values": {"n": {"count": True}}}}
    assert risks([{**by_year, "as": "rows"}, {"return": "rows"}]) == [
        {"route": "r", "step": "steps[0]", "limit": "records_read_per_call", "records": 1001, "collections": ["books"]}
    ]  # without a limit, each group counts as a record read
    limited = {"aggregate": {**by_year["aggregate"], "limit": "100"}}
    assert risks([{**limited, "as": "rows"}, {"return": "rows"}]) == []


def test_a_limit_from_params_is_bounded_by_the_input_schema():
    steps = [{"find": {"collection": "b", "limit": "has(params.n) ? params.n : 20"}, "as": "bs"}, {"return": "bs"}]
    bounded = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 100}}}
    assert risks(steps, input_schema=bounded) == []
    unbounded = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert risks(steps, input_schema=unbounded)[0]["limit"] == "value_items"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("20", 20),
        ("has(params.limit) ? params.limit : 50", 100),
        ("params.other", None),
        ("size(books)", None),
        ("min(params.limit, 10)", 100),
    ],
)
def test_limit_bound(source, expected):
    schema = {"properties": {"limit": {"type": "integer", "maximum": 100}, "other": {"type": "integer"}}}
    assert limit_bound(source, schema) == expected


def test_a_for_each_over_found_records_fails_past_its_bound():
    steps = [
        *BOOKS,
        {
            "for_each": {
                "in": "books",
                "as": "b",
                "steps": [{"update": {"collection": "books", "id": "b.id", "value": "{'x': 1}"}}],
            }
        },
    ]
    (found,) = risks(steps, kind="mutation")
    assert found == {
        "route": "r",
        "step": "steps[1].for_each.in",
        "limit": "for_each_items",
        "records": 101,
        "collections": ["books"],
    }


@pytest.mark.django_db
def test_the_save_carries_the_advisory_in_words(user):
    app = one_route_app(user, PER_YEAR, kind="query")
    advisory = Advisory.objects.get(app=app, kind="over-limit-route")
    assert advisory.severity == "warn"
    assert advisory.summary.startswith("Route 'r' steps[1].let: once its finds (or groups) reach about ")
    assert advisory.user_summary == ""  # an estimate for the author: the app's page does not alarm people with it
    assert "records of 'books', a call passes the limit cel_work (20000000, CHARMING_ROUTES_MAX_CEL_WORK)" in (
        advisory.summary
    )
    assert "compute totals with an aggregate step" in advisory.summary


def test_an_aggregate_without_groups_is_one_row():
    total = {"aggregate": {"collection": "books", "values": {"n": {"count": True}}}, "as": "t"}
    assert risks([total, {"return": "t"}]) == []


@pytest.mark.django_db
def test_a_passing_test_at_the_estimated_size_settles_the_advisory(user):
    from apps_registry.services.definitions import definition_dry_run

    definition = {
        "name": "Shelf",
        "collections": {"books": {}},
        "routes": {"r": {"kind": "query", "steps": PER_YEAR}},
        "tests": [{"route": "r", "records": {"books": [{"year": 2020}]}, "expect": {"value": [1]}}],
    }
    small = definition_dry_run(actor=user, definition=definition)
    (advisory,) = [a for a in small.advisories if a.kind == "over-limit-route"]
    size = advisory.data["records"]
    definition["tests"].append(
        {
            "route": "r",
            "records": {"books": {"generate": size, "like": {"year": "2000 + i % 3"}}},
            "expect": {"value": [size // 3 + (1 if i % 3 < size % 3 else 0) for i in range(size)]},
        }
    )
    at_size = definition_dry_run(actor=user, definition=definition)
    assert [r.passed for r in at_size.tests] == [True, True]
    assert [a.kind for a in at_size.advisories if a.kind == "over-limit-route"] == []
