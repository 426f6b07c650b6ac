"""A find's order as the databases serve it: the order of the in-memory reference store (ties by insertion
order, in the direction of the last order key), with each field written as its declared index's expression; and a
declared index (its fields, then created_at, record_id) serving filter, order and limit whole, with no sort, for a
find, a paged find's first page and a later one, on both databases."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps_registry.models import Record, Storage
from apps_registry.routes.storage import SqlStore, declared_index_paths
from apps_registry.services.collection_indexes import collection_indexes_sync, index_name
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from tests.apps_registry.memory_store import MemoryStore

# --- the same order as the reference ----------------------------------------------------------------------------


def _small_record(i: int) -> dict[str, Any]:
    data: dict[str, Any] = {"n": [3, 1, 2, 1.5][i % 4], "s": "xyz"[i % 3], "meta": {"rank": i % 5}}
    if i % 7 == 0:
        del data["n"]  # missing: the largest value on PostgreSQL, the smallest on SQLite
    if i % 5 == 0:
        data["meta"] = {}
    return data


ORDERS = [
    [],
    [(("n",), False)],
    [(("n",), True)],
    [(("s",), False), (("n",), True)],
    [(("s",), True), (("n",), False)],
    [(("meta", "rank"), True), (("id",), False)],
    [(("id",), True)],
    [(("s",), True)],
]
WHERES = [[], [(("s",), "eq", "x")], [(("s",), "eq", "y"), (("n",), "in", [1, 2])]]


def _stores() -> tuple[SqlStore, MemoryStore]:
    storage = Storage.objects.create(app=None, app_uuid=uuid.uuid4(), app_name="t", detached_at=timezone.now())
    # A declared index on s, n: on PostgreSQL equality on them is then written without the GIN containment.
    sql = SqlStore(storage_id=storage.id, max_bytes=65536, indexes={"c": ((("s",), ("n",)),)})
    memory = MemoryStore(missing_smallest=connection.vendor == "sqlite")
    for i in range(40):
        for store in (sql, memory):
            store.insert("c", f"r{i:02}", _small_record(i))  # ids in insertion order: one tie-break on both
    return sql, memory


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


def _pages(store: Any, collection: str, where: list[Any], order: list[Any], size: int) -> list[str]:
    ids: list[str] = []
    after = None
    while True:
        rows, positions, more = store.find_page(collection, where, order, size, after)
        ids += _ids(rows)
        if not more:
            return ids
        after = positions[-1]


@pytest.mark.django_db
@pytest.mark.parametrize("where", WHERES)
@pytest.mark.parametrize("order", ORDERS)
def test_find_and_its_pages_follow_the_reference_order(order, where):
    sql, memory = _stores()
    expected = _ids(memory.find("c", where, order, None))
    assert _ids(sql.find("c", where, order, None)) == expected
    assert _ids(sql.find("c", where, order, 5)) == expected[:5]
    for size in (1, 3, 7):
        assert _pages(sql, "c", where, order, size) == expected == _pages(memory, "c", where, order, size)


@pytest.mark.django_db
def test_ties_of_a_descending_order_come_newest_first():
    sql, _memory = _stores()
    xs = [f"r{i:02}" for i in range(40) if i % 3 == 0]
    assert _ids(sql.find("c", [(("s",), "eq", "x")], [(("s",), True)], None)) == xs[::-1]
    assert _ids(sql.find("c", [(("s",), "eq", "x")], [(("s",), False)], None)) == xs


# --- a declared index serves the find whole ---------------------------------------------------------------------

INDEXED = {"checkins": {"indexes": [["habit_id", "date"], ["habit_id", "date", "n"]]}}
FIND = {"collection": "checkins", "order_by": "-date", "limit": "20"}
# Enough records that PostgreSQL, which estimates an equality on a declared field at 0.5% of the app's records,
# expects more matches than a page holds, even beyond a later page's position.
RECORDS = 30_000


def _checkin(i: int) -> dict[str, Any]:
    """Habit `few` holds 1% of the records, `many` 30%; four records share a day; a quarter of `few` has no date."""
    slot = i % 100
    data: dict[str, Any] = {"habit_id": "few" if slot == 0 else "many" if slot <= 30 else f"h{i % 1000}", "n": i % 3}
    if i % 400:
        data["date"] = f"{2000 + i // 1460:04}-{1 + i // 120 % 12:02}-{1 + i // 4 % 30:02}"
    return data


def _analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE apps_registry_record")


def _indexed_app(user, *, analyze: bool = True) -> tuple[Any, SqlStore, MemoryStore]:
    """An app declaring [habit_id, date], its index built, then RECORDS check-ins (and ANALYZE); its SQL store, and
    the reference store holding the habits `few` and `many`."""
    definition = {
        "name": "Habits",
        "collections": INDEXED,
        "routes": {"r": {"kind": "query", "steps": [{"return": "1"}]}},
    }
    app = app_definition_save(actor=user, definition=definition)
    collection_indexes_sync(storage_id=app.storage.id)
    records = [
        Record(storage=app.storage, collection="checkins", record_id=f"c{i:05}", data=_checkin(i))
        for i in range(RECORDS)
    ]
    Record.objects.bulk_create(records, batch_size=5000)
    if analyze:
        _analyze()
    ordered = Record.objects.filter(storage=app.storage, data__habit_id__in=["few", "many"]).order_by(
        "created_at", "record_id"
    )
    memory = MemoryStore(
        records={"checkins": {r.record_id: r.data for r in ordered}}, missing_smallest=connection.vendor == "sqlite"
    )
    store = SqlStore(storage_id=app.storage.id, max_bytes=65536, indexes=declared_index_paths(INDEXED))
    return app, store, memory


def _plans(call: Any) -> tuple[Any, list[str]]:
    """What `call` returns, and the plan of each statement it ran, as the store sent it (with its parameters)."""
    executed: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):
        executed.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        result = call()
    explain = "EXPLAIN " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    plans = []
    for sql, params in executed:
        if "apps_registry_record" not in sql:
            continue
        with connection.cursor() as cursor:
            cursor.execute(explain + sql, params)
            plans.append("\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall()))
    return result, plans


def _served_whole(plan: str, name: str) -> bool:
    """The plan reads the declared index in its order: no sort (PostgreSQL's Sort or Incremental Sort, SQLite's
    TEMP B-TREE)."""
    return name in plan and "Sort" not in plan and "TEMP B-TREE" not in plan


def _bounded_by_position(plan: str) -> bool:
    """The index scan starts at the page's position (a range on the order's field, or among the records missing
    it, on created_at), not at the habit's first record."""
    if connection.vendor == "postgresql":
        conditions = [line for line in plan.splitlines() if "Index Cond" in line]
        return any("'date'" in line and ("<" in line or ">" in line) for line in conditions)
    return any(bound in plan for bound in ("<expr><?", "<expr>>?", "created_at<?", "created_at>?"))


def _assert_served_whole(store: SqlStore, memory: MemoryStore, name: str, fields: tuple[str, ...]) -> None:
    """A find by habit ordered by `fields` (both directions), and its pages, read the index `name` in its order."""
    for habit in ("few", "many"):
        where = [(("habit_id",), "eq", habit)]
        for descending in (True, False):
            order = [((field,), descending) for field in fields]
            found, plans = _plans(lambda: store.find("checkins", where, order, 20))  # noqa: B023
            assert _ids(found) == _ids(memory.find("checkins", where, order, 20))
            # On SQLite a find ordered by a data field reads its present values, then (ascending: first) its missing
            # ones, each a statement of its own (routes/storage.py _from_start); PostgreSQL needs one.
            assert len(plans) <= (1 if connection.vendor == "postgresql" else 2), plans
            assert all(_served_whole(plan, name) for plan in plans), plans

            expected = _ids(memory.find("checkins", where, order, None))
            seen: list[str] = []
            after = None
            for page in range(16):  # past the records of `few` with a date, into those without (on one side)
                (rows, positions, more), plans = _plans(
                    lambda: store.find_page("checkins", where, order, 20, after)  # noqa: B023
                )
                assert all(_served_whole(plan, name) for plan in plans), (habit, descending, page, plans)
                if page > 0:
                    assert _bounded_by_position(plans[0]), plans
                seen += _ids(rows)
                after = positions[-1]
                if not more:
                    break
            assert seen == expected[: len(seen)]


@pytest.mark.django_db(transaction=True)  # PostgreSQL builds the index concurrently: outside a transaction
def test_a_declared_index_serves_find_and_its_pages_whole_with_no_sort(user):
    # SQLite's plans do not depend on statistics: checked with the table's as they are (none for this index), then
    # after ANALYZE. PostgreSQL's need the table's own (autovacuum's; a never analyzed table looks empty to it),
    # and it keeps none for a partial index's expressions: ANALYZE first.
    sqlite = connection.vendor == "sqlite"
    app, store, memory = _indexed_app(user, analyze=not sqlite)
    for fields in (("date",), ("date", "n")):  # each served by the index whose fields end with them
        name = index_name(app.storage.id, "checkins", ("habit_id", *fields))
        _assert_served_whole(store, memory, name, fields)
        if sqlite:
            _analyze()
            _assert_served_whole(store, memory, name, fields)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_equality_a_declared_index_serves_carries_no_gin_containment_on_postgresql(user):
    """The containment (served by the GIN index on data) made PostgreSQL estimate one match where there were
    thousands, and pick the GIN index and a sort of every match over the declared index."""
    app, store, _memory = _indexed_app(user)
    name = index_name(app.storage.id, "checkins", ("habit_id", "date"))
    where = [(("habit_id",), "eq", "many"), (("note",), "eq", "x")]
    sql, params = store._filtered("checkins", where).query.sql_with_params()
    assert sql.count("@>") == 1 and '{"note": "x"}' in params  # the undeclared field keeps its containment
    assert """(("apps_registry_record"."data" -> 'habit_id') = %s::jsonb)""" in sql

    # Through the route service: the store knows the app's declared indexes from the route lookup's App row.
    steps = [{"find": {**FIND, "where": {"habit_id": "'few'"}}, "as": "found"}, {"return": "found.map(r, r.id)"}]
    definition = {"name": "Habits", "collections": INDEXED, "routes": {"recent": {"kind": "query", "steps": steps}}}
    app_definition_save(actor=user, definition=definition, app_id=app.id)
    result, plans = _plans(lambda: route_run(actor=user, app_id=app.id, op="recent", params={}, kind="query"))
    assert len(result.value) == 20
    (plan,) = plans  # the find: the route's one statement on the records
    assert _served_whole(plan, name) and "apps_registry_record_data_gin" not in plan, plan


@pytest.mark.django_db
def test_on_sqlite_a_find_ordered_by_a_declared_field_is_served_whatever_the_statistics_say(user):
    """SQLite's statistics after ANALYZE, for an app of 200,000 records in a table of 222,300 (three apps): its
    declared index [date] holds 200,000 entries; storage and collection select 37,050 records. With them, SQLite
    read the app by `record_collection_recent` and sorted it whole for a find ordered by date with no filter (2.2
    million VM instructions, 245 ms, in benchmarks/scaling.py); the store's range on the field keeps the index."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's statistics (PostgreSQL's plans are the test above)")
    definition = {
        "name": "Dated",
        "collections": {"checkins": {"indexes": [["date"]]}},
        "routes": {"r": {"kind": "query", "steps": [{"return": "1"}]}},
    }
    app = app_definition_save(actor=user, definition=definition)
    collection_indexes_sync(storage_id=app.storage.id)
    Record.objects.bulk_create(
        Record(storage=app.storage, collection="checkins", record_id=f"c{i:05}", data=_checkin(i)) for i in range(2000)
    )
    name = index_name(app.storage.id, "checkins", ("date",))
    _analyze()
    with connection.cursor() as cursor:
        cursor.execute(  # the table's own two indexes (storage, collection, ...)
            "UPDATE sqlite_stat1 SET stat = '222300 74100 37050 1' "
            "WHERE tbl = 'apps_registry_record' AND idx NOT LIKE 'rix%'"
        )
        cursor.execute("UPDATE sqlite_stat1 SET stat = '200000 238 1 1' WHERE idx = %s", [name])
        cursor.execute("ANALYZE sqlite_schema")  # reload the statistics
        naive, params = (
            Record.objects.filter(storage=app.storage, collection="checkins")
            .order_by(RawSQL("""json_extract("apps_registry_record"."data", '$."date"')""", ()).desc())
            .values_list("record_id")[:20]
            .query.sql_with_params()
        )
        cursor.execute("EXPLAIN QUERY PLAN " + naive, params)
        assert "TEMP B-TREE" in " ".join(str(row) for row in cursor.fetchall())  # the statistics mislead it

    ordered = Record.objects.filter(storage=app.storage).order_by("created_at", "record_id")
    memory = MemoryStore(records={"checkins": {r.record_id: r.data for r in ordered}}, missing_smallest=True)
    store = SqlStore(
        storage_id=app.storage.id, max_bytes=65536, indexes=declared_index_paths(definition["collections"])
    )
    for descending in (True, False):
        order = [(("date",), descending)]
        found, plans = _plans(lambda: store.find("checkins", [], order, 20))  # noqa: B023
        assert _ids(found) == _ids(memory.find("checkins", [], order, 20))
        assert plans and all(_served_whole(plan, name) for plan in plans), plans
        (rows, _positions, _more), plans = _plans(lambda: store.find_page("checkins", [], order, 20, None))  # noqa: B023
        assert _ids(rows) == _ids(found)
        assert all(_served_whole(plan, name) for plan in plans), plans
