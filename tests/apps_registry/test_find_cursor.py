"""Paged finds: an opaque cursor that continues a find (keyset, stable under inserts), refused when
altered or made for another query, and pages cut at a record boundary by the tool result budget."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from apps_registry.exceptions import InvalidDefinition, InvalidInput
from apps_registry.routes.schemas import SchemaValidator
from tests.apps_registry.route_helpers import one_route_app, run

CURSOR = "has(params.cursor) ? params.cursor : null"
PAGE_INPUT = {
    "type": "object",
    "properties": {"cursor": {"type": ["string", "null"]}, "size": {"type": "integer"}},
    "additionalProperties": False,
}
PAGE_OUTPUT = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "object", "required": ["id"]}},
        "next_cursor": {"type": ["string", "null"]},
        "truncated": {"type": "boolean"},
    },
    "required": ["items", "next_cursor", "truncated"],
    "additionalProperties": False,
}
ADD = {
    "kind": "mutation",
    "input": {"type": "object"},
    "steps": [{"insert": {"collection": "items", "value": "params.value", "id": "params.id"}, "as": "it"}],
}


def paged_app(owner, order_by: Any = None, where: dict[str, Any] | None = None, **extra: Any):
    find: dict[str, Any] = {"collection": "items", "limit": "has(params.size) ? params.size : 3", "cursor": CURSOR}
    if order_by is not None:
        find["order_by"] = order_by
    if where is not None:
        find["where"] = where
    return one_route_app(
        owner,
        [
            {"find": find, "as": "page"},
            {"return": "{'items': page.items, 'next_cursor': page.next_cursor, 'truncated': page.truncated}"},
        ],
        kind="query",
        input_schema=PAGE_INPUT,
        output=PAGE_OUTPUT,
        add=ADD,
        **extra,
    )


def add(user, app, record_id: str, value: dict[str, Any]) -> None:
    run(user, app, "add", {"id": record_id, "value": value})


def page(user, app, cursor: str | None = None, size: int = 3) -> dict[str, Any]:
    params: dict[str, Any] = {"size": size}
    if cursor is not None:
        params["cursor"] = cursor
    return run(user, app, params=params, kind="query")


def every_page(user, app, size: int = 3, between=None) -> list[str]:
    seen: list[str] = []
    cursor = None
    for n in range(1000):
        got = page(user, app, cursor, size)
        seen += [item["id"] for item in got["items"]]
        cursor = got["next_cursor"]
        if cursor is None:
            return seen
        if between is not None:
            between(n)
    raise AssertionError("paging did not end")


# Values of one field across records: ties, numbers of both kinds, strings, null, missing, bools.
MIXED: dict[str, dict[str, Any]] = {
    "a": {"score": 3, "group": "x", "meta": {"rank": 2}},
    "b": {"score": 1, "group": "y"},
    "c": {"score": 3, "group": "x", "meta": {"rank": 1}},
    "d": {"group": "y", "meta": {"rank": 2}},
    "e": {"score": 2.5, "group": "x"},
    "f": {"score": None, "group": "z", "meta": {"rank": 3}},
    "g": {"score": 1, "group": "x"},
    "h": {"score": "b", "group": "y", "meta": {}},
    "i": {"score": "a", "group": "z"},
    "j": {"score": True},
    "k": {"score": 3, "group": "x", "meta": {"rank": 1}},
    "l": {},
}
ORDERS = [None, "score", "-score", ["group", "-score"], ["-meta.rank", "id"], "-id", ["score", "-group"]]


def seed_mixed(user, app) -> list[str]:
    for record_id, value in MIXED.items():
        add(user, app, record_id, value)
    return every_page(user, app, size=100)


@pytest.mark.parametrize("order_by", ORDERS)
def test_pages_return_every_record_once_in_the_order_of_one_big_find(user, order_by):
    app = paged_app(user, order_by)
    expected = seed_mixed(user, app)
    assert sorted(expected) == sorted(MIXED)
    for size in (1, 2, 5):
        assert every_page(user, app, size=size) == expected


@pytest.mark.parametrize("order_by", ORDERS)
def test_records_inserted_between_pages_never_repeat_or_hide_a_record_that_was_there(user, order_by):
    app = paged_app(user, order_by)
    expected = seed_mixed(user, app)
    # New records with sort values before, between and after the records already paged over.
    fresh = [{"score": 0, "group": "a"}, {"score": 3, "group": "x", "meta": {"rank": 2}}, {"score": "zz"}, {}]

    def insert_some(n: int) -> None:
        if n >= 4:  # records that land after the position are paged over too: stop adding some
            return
        for m, value in enumerate(fresh):
            add(user, app, f"new{n}_{m}", value)

    seen = every_page(user, app, size=2, between=insert_some)
    assert len(seen) == len(set(seen)), "a record came twice"
    assert [record_id for record_id in seen if record_id in MIXED] == expected


def test_a_filtered_paged_find_keeps_its_filter_on_every_page(user):
    app = paged_app(user, "-score", where={"group": "'x'"})
    expected = seed_mixed(user, app)
    assert sorted(expected) == ["a", "c", "e", "g", "k"]
    assert every_page(user, app, size=2) == expected


def test_a_page_that_reaches_the_end_has_no_next_cursor(user):
    app = paged_app(user)
    for n in range(3):
        add(user, app, f"r{n}", {"n": n})
    first = page(user, app, size=3)
    assert [i["id"] for i in first["items"]] == ["r0", "r1", "r2"]
    assert first["next_cursor"] is None and first["truncated"] is False
    assert page(user, app, size=2)["next_cursor"] is not None


def test_the_cursor_is_opaque_text(user):
    app = paged_app(user, "-score")
    seed_mixed(user, app)
    cursor = page(user, app, size=2)["next_cursor"]
    assert isinstance(cursor, str) and "score" not in cursor and " " not in cursor


def invalid_cursor(user, app, cursor: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        page(user, app, cursor)
    return caught.value


def test_an_altered_cursor_is_refused_saying_to_start_again(user):
    app = paged_app(user, "-score")
    seed_mixed(user, app)
    cursor = page(user, app, size=2)["next_cursor"]
    for altered in (cursor[:-1] + ("A" if cursor[-1] != "A" else "B"), "X" + cursor, "not a cursor", cursor[:10]):
        error = invalid_cursor(user, app, altered)
        assert error.message == (
            "The cursor given to route 'r' at steps[0].find.cursor is not valid for this query: it was altered, "
            "or made by another query (another app, route, order or caller). Start again without a cursor to get "
            "the first page."
        )
        assert error.errors == [
            {"path": "$.cursor", "message": "not a valid cursor for this query; omit it to start from the first page"}
        ]


def test_a_cursor_of_another_query_is_refused(user, other_user):
    by_score = paged_app(user, "-score")
    seed_mixed(user, by_score)
    cursor = page(user, by_score, size=2)["next_cursor"]
    same_definition_other_app = paged_app(user, "-score")
    seed_mixed(user, same_definition_other_app)
    other_order = paged_app(user, "score")
    seed_mixed(user, other_order)
    # Another route of the same app, same collection and order: a cursor is bound to its route too.
    twin = paged_app(
        user,
        "-score",
        twin={
            "kind": "query",
            "input": PAGE_INPUT,
            "steps": [
                {"find": {"collection": "items", "order_by": "-score", "limit": "3", "cursor": CURSOR}, "as": "p"},
                {"return": "p.items.size()"},
            ],
        },
    )
    seed_mixed(user, twin)
    twin_cursor = page(user, twin, size=2)["next_cursor"]
    for app in (same_definition_other_app, other_order):
        assert invalid_cursor(user, app, cursor).kind == "invalid_input"
    with pytest.raises(InvalidInput):
        run(user, twin, "twin", {"cursor": twin_cursor}, kind="query")
    assert page(user, by_score, cursor)["items"]  # still fine where it came from


def test_a_cursor_that_is_not_a_string_fails_the_route_naming_the_step(user):
    app = one_route_app(
        user,
        [{"find": {"collection": "items", "limit": "2", "cursor": "7"}, "as": "p"}, {"return": "p"}],
        kind="query",
    )
    from apps_registry.exceptions import HandlerError

    with pytest.raises(HandlerError) as caught:
        run(user, app, kind="query")
    assert "steps[0].find.cursor: the expression must evaluate to a string (a next_cursor this find returned) " in (
        caught.value.message
    )


def test_a_paged_find_needs_a_limit(user):
    with pytest.raises(InvalidDefinition) as caught:
        one_route_app(
            user, [{"find": {"collection": "items", "cursor": "null"}, "as": "p"}, {"return": "p"}], kind="query"
        )
    assert {
        "path": "routes.r.steps[0].find.cursor",
        "message": "a paged find (with 'cursor') needs a 'limit': the page size",
    } in caught.value.errors


# --- the tool result budget -------------------------------------------------------------------


def test_a_page_over_the_result_budget_is_cut_at_a_record_boundary_and_continues(user, settings):
    app = paged_app(user, "n")
    for n in range(30):
        add(user, app, f"r{n:02}", {"n": n, "text": "x" * 200})
    settings.CHARMING_TOOL_RESULT_BYTES = 1000
    validator = SchemaValidator(PAGE_OUTPUT)
    got = page(user, app, size=20)
    assert got["truncated"] is True and 1 < len(got["items"]) < 20
    assert len(json.dumps(got["items"], separators=(",", ":")).encode()) <= 1000
    assert validator.errors(got) == []
    seen = every_page(user, app, size=20)
    assert seen == [f"r{n:02}" for n in range(30)]


def test_a_record_larger_than_the_budget_still_comes_alone(user, settings):
    app = paged_app(user)
    add(user, app, "big", {"text": "y" * 3000})
    add(user, app, "small", {"text": "z"})
    settings.CHARMING_TOOL_RESULT_BYTES = 1000
    got = page(user, app, size=5)
    assert [i["id"] for i in got["items"]] == ["big"] and got["truncated"] is True
    assert [i["id"] for i in page(user, app, got["next_cursor"], size=5)["items"]] == ["small"]


@pytest.mark.postgres
def test_postgres_pages_over_jsonb_ordering(user):
    assert connection.vendor == "postgresql"
    app = paged_app(user, ["-meta.rank", "score"])
    expected = seed_mixed(user, app)
    assert every_page(user, app, size=1) == expected


def test_the_paged_route_in_the_authoring_docs_saves_and_pages(user):
    from pathlib import Path

    from apps_registry.services.definitions import app_definition_save

    text = (Path(__file__).resolve().parents[2] / "docs" / "authoring.md").read_text()
    block = text.split("### Paging a find", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    routes = json.loads("{" + block + "}")
    routes["add"] = {**ADD, "steps": [{"insert": {"collection": "expenses", "value": "params.value"}}]}
    app = app_definition_save(
        actor=user, definition={"name": "Budget", "collections": {"expenses": {}}, "routes": routes}
    )
    for n in range(5):
        run(user, app, "add", {"value": {"at": f"2026-12-0{n + 1}", "amount": float(n)}})
    first = run(user, app, "list_expenses_paged", {"size": 3}, kind="query")
    rest = run(user, app, "list_expenses_paged", {"size": 3, "cursor": first["next_cursor"]}, kind="query")
    assert [e["at"] for e in first["items"] + rest["items"]] == [f"2026-12-0{n}" for n in (5, 4, 3, 2, 1)]
    assert rest["next_cursor"] is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("order_by", [None, "-score", ["group", "-score"]])
def test_postgres_paging_while_another_connection_keeps_inserting(user, order_by):
    """Inserts committed by another connection during the walk, not only between pages."""
    import threading

    app = paged_app(user, order_by)
    expected = seed_mixed(user, app)
    stop = threading.Event()
    inserted: list[int] = []

    def keep_inserting() -> None:
        try:
            n = 0
            while not stop.is_set() and n < 300:
                add(user, app, f"bg{n}", {"score": n % 5, "group": "xy"[n % 2]})
                inserted.append(n)
                n += 1
        finally:
            connection.close()

    writer = threading.Thread(target=keep_inserting)
    writer.start()
    try:
        seen = every_page(user, app, size=1)
    finally:
        stop.set()
        writer.join()
    assert inserted, "the writer inserted nothing"
    assert len(seen) == len(set(seen)), "a record came twice"
    assert [record_id for record_id in seen if record_id in MIXED] == expected


def test_a_cursor_minted_before_ties_followed_the_order_is_refused_saying_to_start_again(user):
    from apps_registry.cursors import cursor_make, cursor_read
    from apps_registry.routes.steps import FIND_CURSOR_FORM

    app = paged_app(user, "-score")
    seed_mixed(user, app)
    current = page(user, app, size=2)["next_cursor"]
    binding = f"{app.id}|r|items|-score"
    position = cursor_read(current, binding=f"find{FIND_CURSOR_FORM}|{binding}", length=3, what="r")
    old = cursor_make(position, binding=f"find|{binding}")  # the same position under form 1's binding
    assert "Start again without a cursor" in invalid_cursor(user, app, old).message
    assert page(user, app, current)["items"]
