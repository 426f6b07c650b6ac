"""The aggregate step and the contains filter: one GROUP BY in the database, the same on SQLite and PostgreSQL
as the in-memory store (the reference), exact decimal sums, date buckets in a time zone; and the step's
problems when saved and its errors when run."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from apps_registry.exceptions import HandlerError, InvalidDefinition, OperationFailed
from apps_registry.models import Storage
from apps_registry.routes.storage import SqlStore
from apps_registry.routes.store import Group, Measure
from tests.apps_registry.memory_store import MemoryStore
from tests.apps_registry.route_helpers import one_route_app, run

pytestmark = pytest.mark.django_db

EXPENSES: list[dict[str, Any]] = [
    {"category": "food", "amount": 0.1, "day": "2026-11-02", "tags": ["work", "lunch"]},
    {"category": "food", "amount": 0.2, "day": "2026-11-30T23:30:00Z", "tags": ["lunch"]},  # Paris: December 1st
    {"category": "food", "amount": 12, "day": "2026-12-03T08:00:00+01:00", "tags": []},
    {"category": "rent", "amount": 700, "day": "2026-11-01", "tags": ["home"]},
    {"category": "rent", "amount": 700, "day": "2026-12-01", "tags": ["home", 3]},
    {"category": "fun", "amount": 19.99, "day": "2026-12-06", "tags": "work"},  # a string, not a list
    {"category": None, "amount": None, "day": None},
    {"amount": 5, "day": "2026-12-07T10:00:00"},  # no category; a timestamp without offset is UTC
]


def _stores(rows: list[dict[str, Any]]) -> tuple[SqlStore, MemoryStore]:
    storage = Storage.objects.create(app=None, app_uuid=uuid.uuid4(), app_name="t", detached_at=timezone.now())
    sql, memory = SqlStore(storage_id=storage.id, max_bytes=65536), MemoryStore()
    for n, data in enumerate(rows):
        for store in (sql, memory):
            store.insert("expenses", f"e{n}", data)
    return sql, memory


def both(rows: list[dict[str, Any]], *args: Any) -> list[dict[str, Any]]:
    """The aggregate's rows from the SQL store, checked equal (values and JSON types) to the in-memory store's."""
    sql, memory = _stores(rows)
    found, expected = sql.aggregate("expenses", *args), memory.aggregate("expenses", *args)
    assert found == expected
    assert [{k: type(v) for k, v in row.items()} for row in found] == [
        {k: type(v) for k, v in row.items()} for row in expected
    ]
    return found


def test_totals_by_category_and_month_in_a_time_zone():
    rows = both(
        EXPENSES,
        [],
        [Group("category", ("category",)), Group("month", ("day",), "month", "Europe/Paris")],
        [Measure("total", "sum", ("amount",)), Measure("n", "count")],
        [],
        None,
    )
    assert rows == [
        {"category": "food", "month": "2026-11", "total": 0.1, "n": 1},
        {"category": "food", "month": "2026-12", "total": 12.2, "n": 2},
        {"category": "fun", "month": "2026-12", "total": 19.99, "n": 1},
        {"category": "rent", "month": "2026-11", "total": 700, "n": 1},
        {"category": "rent", "month": "2026-12", "total": 700, "n": 1},
        {"category": None, "month": "2026-12", "total": 5, "n": 1},  # missing values group as null, last
        {"category": None, "month": None, "total": 0, "n": 1},
    ]


def test_sums_of_decimals_are_exact_and_ints_stay_ints():
    rows = both(
        [{"a": 0.1}, {"a": 0.2}, {"a": 2.5}, {"a": 0.2}],
        [],
        [],
        [Measure("total", "sum", ("a",)), Measure("avg", "avg", ("a",))],
        [],
        None,
    )
    assert rows == [{"total": 3.0, "avg": 0.75}]
    assert both([{"a": 1}, {"a": 2}], [], [], [Measure("t", "sum", ("a",))], [], None) == [{"t": 3}]
    assert both([{"a": 0.1}, {"a": 0.2}], [], [], [Measure("t", "sum", ("a",))], [], None) == [{"t": 0.3}]


def test_no_group_is_one_row_even_over_no_records():
    rows = both(
        EXPENSES,
        [(("category",), "eq", "nothing")],
        [],
        [Measure("n", "count"), Measure("t", "sum", ("amount",)), Measure("low", "min", ("amount",))],
        [],
        None,
    )
    assert rows == [{"n": 0, "t": 0, "low": None}]


@pytest.mark.parametrize(
    ("bucket", "expected"),
    [
        ("day", ["2026-11-01", "2026-11-02", "2026-12-01", "2026-12-03", "2026-12-06", "2026-12-07", None]),
        ("week", ["2026-10-26", "2026-11-02", "2026-11-30", "2026-12-07", None]),  # ISO weeks start on Monday
        ("year", ["2026", None]),
    ],
)
def test_date_buckets(bucket, expected):
    rows = both(EXPENSES, [], [Group("b", ("day",), bucket, "Europe/Paris")], [Measure("n", "count")], [], None)
    assert [row["b"] for row in rows] == expected


def test_a_timestamp_falls_in_the_day_of_the_time_zone_asked():
    data = [{"at": "2026-11-30T23:30:00Z"}]
    assert both(data, [], [Group("d", ("at",), "day", "UTC")], [], [], None) == [{"d": "2026-11-30"}]
    assert both(data, [], [Group("d", ("at",), "day", "Asia/Tokyo")], [], [], None) == [{"d": "2026-12-01"}]
    assert both(data, [], [Group("d", ("at",), "day", "America/New_York")], [], [], None) == [{"d": "2026-11-30"}]


def test_order_by_a_value_descending_then_limit():
    rows = both(
        EXPENSES,
        [],
        [Group("category", ("category",))],
        [Measure("total", "sum", ("amount",)), Measure("high", "max", ("amount",)), Measure("first", "min", ("day",))],
        [("total", True)],
        2,
    )
    assert rows == [
        {"category": "rent", "total": 1400, "high": 700, "first": "2026-11-01"},
        {"category": "fun", "total": 19.99, "high": 19.99, "first": "2026-12-06"},
    ]


def test_count_of_a_field_counts_its_values():
    rows = both(EXPENSES, [], [], [Measure("n", "count"), Measure("with_category", "count", ("category",))], [], None)
    assert rows == [{"n": 8, "with_category": 6}]


def test_contains_matches_list_fields_holding_the_value():
    sql, memory = _stores(EXPENSES)
    for value, expected in [("lunch", ["e0", "e1"]), ("work", ["e0"]), (3, ["e4"]), ("3", []), ("home", ["e3", "e4"])]:
        where = [(("tags",), "contains", value)]
        assert [r["id"] for r in sql.find("expenses", where, [], None)] == expected
        assert [r["id"] for r in memory.find("expenses", where, [], None)] == expected
        assert sql.count("expenses", where) == len(expected)


def test_sum_of_text_is_refused_with_the_field_named():
    sql, memory = _stores([{"a": 1}, {"a": "two"}])
    for store in (sql, memory):
        with pytest.raises(OperationFailed) as caught:
            store.aggregate("expenses", [], [], [Measure("t", "sum", ("a",))], [], None)
        assert caught.value.message == "Cannot sum a over expenses: some records hold a value that is not a number."


def test_text_shaped_like_a_date_that_is_not_one_is_refused():
    sql, memory = _stores([{"day": "2026-02-30"}])
    for store in (sql, memory):
        with pytest.raises(OperationFailed) as caught:
            store.aggregate("expenses", [], [Group("m", ("day",), "month")], [Measure("n", "count")], [], None)
        assert "not an ISO date or timestamp" in caught.value.message


# --- through a route ----------------------------------------------------------------------------

REPORT = {
    "aggregate": {
        "collection": "items",
        "where": {"day": {"gte": "params.from", "lt": "params.to"}},
        "group_by": {"category": "category", "month": {"bucket": "month", "field": "day", "tz": "params.tz"}},
        "values": {"total": {"sum": "amount"}, "n": {"count": True}},
        "order_by": ["-total"],
        "limit": "100",
    },
    "as": "rows",
}


def _expenses_app(user):
    return one_route_app(
        user,
        [REPORT, {"return": "rows"}],
        kind="query",
        add={
            "kind": "mutation",
            "steps": [
                {
                    "for_each": {
                        "in": "params.items",
                        "as": "e",
                        "steps": [
                            {"insert": {"collection": "items", "value": "e"}, "as": "saved"},
                            {"return": "saved.id"},
                        ],
                    },
                    "as": "ids",
                },
                {"return": "ids"},
            ],
        },
    )


def test_a_report_route_groups_what_a_mutation_wrote(user):
    app = _expenses_app(user)
    items = [
        {"category": "food", "amount": 0.1, "day": "2026-11-03"},
        {"category": "food", "amount": 0.2, "day": "2026-11-04"},
        {"category": "rent", "amount": 700, "day": "2026-11-01"},
        {"category": "rent", "amount": 700, "day": "2026-10-01"},
    ]
    ids = run(user, app, "add", {"items": items})
    assert len(ids) == 4 and len(set(ids)) == 4
    params = {"from": "2026-11-01", "to": "2026-12-01", "tz": "Europe/Paris"}
    assert run(user, app, "r", params, kind="query") == [
        {"category": "rent", "month": "2026-11", "total": 700, "n": 1},
        {"category": "food", "month": "2026-11", "total": 0.3, "n": 2},
    ]


def test_an_unknown_time_zone_fails_the_call_and_says_what_to_send(user):
    app = _expenses_app(user)
    with pytest.raises(HandlerError) as caught:
        run(user, app, "r", {"from": "a", "to": "b", "tz": "Mars/Olympus"}, kind="query")
    assert caught.value.message == (
        "Route 'r' failed at steps[0].aggregate.group_by.month.tz: the expression must evaluate to an IANA time "
        "zone name such as 'Europe/Paris', got string"
    )


def test_groups_count_against_the_records_read(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_READ = 3
    app = one_route_app(
        user,
        [
            {"aggregate": {"collection": "items", "group_by": {"k": "k"}, "values": {"n": {"count": True}}}, "as": "g"},
            {"return": "g"},
        ],
        kind="query",
        fill={
            "kind": "mutation",
            "steps": [
                {
                    "for_each": {
                        "in": "params.ks",
                        "as": "k",
                        "steps": [
                            {"insert": {"collection": "items", "value": "{'k': k}"}},
                        ],
                    }
                }
            ],
        },
    )
    run(user, app, "fill", {"ks": [1, 1, 1, 2, 3]})
    assert run(user, app, "r", {}, kind="query") == [{"k": 1, "n": 3}, {"k": 2, "n": 1}, {"k": 3, "n": 1}]
    run(user, app, "fill", {"ks": [4]})
    with pytest.raises(OperationFailed) as caught:
        run(user, app, "r", {}, kind="query")
    assert caught.value.details["limit"] == "records_read_per_call"


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (
            {"collection": "items"},
            "routes.r.steps[0].aggregate",
            "needs 'group_by' (the keys of each group), 'values' (what to compute per group), or both",
        ),
        (
            {"collection": "items", "group_by": {"m": {"bucket": "quarter", "field": "day"}}},
            "routes.r.steps[0].aggregate.group_by.m.bucket",
            "must be one of day, week, month, year, got 'quarter'",
        ),
        (
            {"collection": "items", "group_by": {"m": {"bucket": "day"}}},
            "routes.r.steps[0].aggregate.group_by.m.field",
            "required: the field holding an ISO date or timestamp, such as 'day'",
        ),
        (
            {"collection": "items", "values": {"t": {"total": "amount"}}},
            "routes.r.steps[0].aggregate.values.t",
            'must be an object mapping each output key to one of {"count": true}, {"count": "field"}, '
            '{"sum": "field"}, {"avg": "field"}, {"min": "field"}, {"max": "field"}',
        ),
        (
            {"collection": "items", "values": {"t": {"sum": True}}},
            "routes.r.steps[0].aggregate.values.t.sum",
            "must be a field name such as 'amount'",
        ),
        (
            {"collection": "items", "group_by": {"c": "category"}, "values": {"c": {"count": True}}},
            "routes.r.steps[0].aggregate.values.c",
            "'c' is also a group key; give the value another name",
        ),
        (
            {"collection": "items", "group_by": {"c": "category"}, "order_by": "-total"},
            "routes.r.steps[0].aggregate.order_by",
            "'total' is not a key of this aggregate's rows; order by one of: c",
        ),
        (
            {"collection": "items", "values": {"n": {"count": True}}, "where": {"id": {"contains": "'x'"}}},
            "routes.r.steps[0].aggregate.where.id.contains",
            "a record's id is a string, not a list; use eq or in",
        ),
        (
            {"collection": "items", "group_by": {"a": {"each": "tags"}, "b": {"each": "kinds"}}},
            "routes.r.steps[0].aggregate.group_by.b.each",
            "an aggregate groups by the items of one list field at most",
        ),
        (
            {"collection": "items", "group_by": {"a": {"each": "tags", "field": "x"}}},
            "routes.r.steps[0].aggregate.group_by.a",
            'a list field\'s items are grouped as {"each": "tags"}, with no other key',
        ),
        (
            {"collection": "items", "group_by": {"m": {"bucket": "day", "field": "day", "tz": "zone"}}},
            "routes.r.steps[0].aggregate.group_by.m.tz",
            "unknown name(s) zone; names available here: app, caller, now, params",
        ),
    ],
)
def test_a_bad_aggregate_is_refused_when_saved_with_its_path(user, body, path, message):
    with pytest.raises(InvalidDefinition) as caught:
        one_route_app(user, [{"aggregate": body, "as": "rows"}, {"return": "rows"}], kind="query")
    assert {"path": path, "message": message} in caught.value.errors


def test_both_databases_compute_the_buckets_themselves():
    # Guard: the PostgreSQL store must not silently fall back to Python for buckets.
    if connection.vendor == "postgresql":
        sql, _memory = _stores([{"day": "2026-11-30T23:30:00Z"}])
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_proc WHERE proname = 'charming_bucket'")
            assert cursor.fetchone()[0] == 0
        assert sql.aggregate("expenses", [], [Group("d", ("day",), "day", "Asia/Tokyo")], [], [], None) == [
            {"d": "2026-12-01"}
        ]


def test_comparisons_match_only_values_of_their_own_type():
    rows = [{"v": 1}, {"v": 2.5}, {"v": "2"}, {"v": True}, {"v": None}, {"v": [3]}, {"v": {"a": 3}}, {}]
    sql, memory = _stores(rows)
    for op, value, expected in [
        ("gt", 0, ["e0", "e1"]),
        ("gte", 2.5, ["e1"]),
        ("lt", "3", ["e2"]),
        ("lte", "", []),
    ]:
        where = [(("v",), op, value)]
        assert [r["id"] for r in sql.find("expenses", where, [], None)] == expected, (op, value)
        assert [r["id"] for r in memory.find("expenses", where, [], None)] == expected, (op, value)


def test_groups_by_the_items_of_a_list_field():
    books = [
        {"title": "Dune", "tags": ["sf", "classic"], "rating": 5},
        {"title": "Emma", "tags": ["classic"], "rating": 4},
        {"title": "Anathem", "tags": ["sf", 3, None], "rating": 3},
        {"title": "Untagged", "rating": 1},
        {"title": "Odd", "tags": "sf", "rating": 2},  # a string, not a list: in no group
    ]
    rows = both(
        books,
        [],
        [Group("tag", ("tags",), each=True)],
        [Measure("n", "count"), Measure("avg", "avg", ("rating",))],
        [("n", True)],
        None,
    )
    assert rows == [
        {"tag": "classic", "n": 2, "avg": 4.5},
        {"tag": "sf", "n": 2, "avg": 4.0},
        {"tag": 3, "n": 1, "avg": 3.0},
        {"tag": None, "n": 1, "avg": 3.0},
    ]


def test_books_by_tag_through_a_route(user):
    app = one_route_app(
        user,
        [
            {
                "aggregate": {
                    "collection": "items",
                    "group_by": {"tag": {"each": "tags"}},
                    "values": {"books": {"count": True}},
                    "order_by": ["-books", "tag"],
                    "limit": "50",
                },
                "as": "rows",
            },
            {"return": "rows"},
        ],
        kind="query",
        add={"kind": "mutation", "steps": [{"insert": {"collection": "items", "value": "params"}}]},
    )
    for tags in (["sf", "classic"], ["classic"], ["sf"], ["poetry"]):
        run(user, app, "add", {"tags": tags})
    assert run(user, app, "r", {}, kind="query") == [
        {"tag": "classic", "books": 2},
        {"tag": "sf", "books": 2},
        {"tag": "poetry", "books": 1},
    ]
