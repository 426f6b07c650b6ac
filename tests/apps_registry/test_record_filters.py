"""Equality filters (eq, ne, in) on data fields: type-exact and the same on SQLite and PostgreSQL (the in-memory
store is the reference), and written so the indexes serve them."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.utils import timezone

from apps_registry.models import Record, Storage
from apps_registry.routes.storage import SqlStore
from tests.apps_registry.memory_store import MemoryStore

pytestmark = pytest.mark.django_db

STORED = {
    "int": 1,
    "float": 1.0,
    "other_int": 2,
    "zero": 0,
    "text": "1",
    "text_true": "true",
    "text_null": "null",
    "true": True,
    "false": False,
    "null": None,
    "list": [1],
    "object": {"a": 1},
    "big": 2**62 + 1,
}
WANTED = [1, 1.0, 2, 0, "1", "true", "null", True, False, None, 2**62 + 1, 2**62, "", 0.5]


def _stores(indexed: bool = False) -> tuple[SqlStore, MemoryStore]:
    """The SQL store (with `indexed`, knowing of declared indexes on k and meta.k: on PostgreSQL, equality on them
    is then written without the GIN containment) and the reference, holding the same records."""
    storage = Storage.objects.create(app=None, app_uuid=uuid.uuid4(), app_name="t", detached_at=timezone.now())
    indexes = {"c": ((("k",),), (("meta", "k"),))} if indexed else None
    sql, memory = SqlStore(storage_id=storage.id, max_bytes=65536, indexes=indexes), MemoryStore()
    for name, value in STORED.items():
        for store in (sql, memory):
            store.insert("c", name, {"k": value, "meta": {"k": value}})
    for store in (sql, memory):
        store.insert("c", "missing", {"other": 1, "meta": {}})
        store.insert("c", "meta_list", {"meta": [{"k": 1}]})
    return sql, memory


def _ids(store, where) -> list[str]:
    return sorted(r["id"] for r in store.find("c", where, [], None))


@pytest.mark.parametrize("indexed", [False, True])
@pytest.mark.parametrize("path", [("k",), ("meta", "k")])
def test_equality_is_type_exact_and_the_same_on_both_databases(path, indexed):
    sql, memory = _stores(indexed)
    for wanted in WANTED:
        for op in ("eq", "ne"):
            where = [(path, op, wanted)]
            assert _ids(sql, where) == _ids(memory, where), (op, wanted)
            assert sql.count("c", where) == len(_ids(memory, where)), (op, wanted)
    assert _ids(sql, [(path, "eq", 1)]) == ["float", "int"]
    assert _ids(sql, [(path, "eq", True)]) == ["true"]
    assert _ids(sql, [(path, "eq", None)]) == ["null"]
    assert _ids(sql, [(path, "eq", "1")]) == ["text"]
    assert "missing" not in _ids(sql, [(path, "ne", 1)])  # a record without the field matches neither
    assert "null" in _ids(sql, [(path, "ne", 1)])


MANY = [f"s{i}" for i in range(1500)] + list(range(1500)) + [0.5, True, False, None, "1", "true"]


@pytest.mark.parametrize(
    "values", [[1, "1"], [True, None], ["true", "null", 0], [], [2**62 + 1, 2.0], [None], ["nope"], MANY]
)
@pytest.mark.parametrize("indexed", [False, True])
def test_in_matches_what_eq_matches_for_any_of_its_values(values, indexed):
    sql, memory = _stores(indexed)
    where = [(("k",), "in", values)]
    assert _ids(sql, where) == _ids(memory, where)
    expected = sorted({i for v in values for i in _ids(memory, [(("k",), "eq", v)])})
    assert _ids(sql, where) == expected


def test_equality_combines_with_other_filters_and_sums():
    sql, memory = _stores()
    for store in (sql, memory):
        store.insert("c", "x1", {"k": "x", "n": 5})
        store.insert("c", "x2", {"k": "x", "n": 7})
        store.insert("c", "x3", {"k": "y", "n": 7})
    where = [(("k",), "eq", "x"), (("n",), "gte", 6)]
    assert _ids(sql, where) == _ids(memory, where) == ["x2"]
    assert sql.sum("c", ("n",), [(("k",), "eq", "x")]) == 12.0
    assert sql.sum("c", ("n",), [(("k",), "in", ["x", "y"]), (("k",), "ne", "y")]) == 12.0


def _plan(sql_text: str, params) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql_text, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _store_of_3000_records() -> SqlStore:
    storage = Storage.objects.create(app=None, app_uuid=uuid.uuid4(), app_name="t", detached_at=timezone.now())
    Record.objects.bulk_create(
        Record(storage=storage, collection="c", record_id=str(i), data={"k": f"v{i}"}) for i in range(3000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE apps_registry_record")
    return SqlStore(storage_id=storage.id, max_bytes=65536)


@pytest.mark.postgres
def test_an_eq_filter_on_postgresql_is_served_by_the_gin_index():
    qs = _store_of_3000_records()._filtered("c", [(("k",), "eq", "v7")])
    assert [r.record_id for r in qs] == ["7"]
    plan = _plan(*qs.query.sql_with_params())
    assert "apps_registry_record_data_gin" in plan, plan


@pytest.mark.postgres
def test_an_in_filter_on_postgresql_is_one_statement_shape_served_by_the_gin_index():
    store = _store_of_3000_records()
    few = store._filtered("c", [(("k",), "in", ["v7", "v9"])])
    many = store._filtered("c", [(("k",), "in", [f"v{i}" for i in range(0, 3000, 30)])])
    assert sorted(r.record_id for r in few) == ["7", "9"]
    assert len(list(many)) == 100
    # Each list is one array parameter: the same SQL (prepared once) whatever its length.
    assert few.query.sql_with_params()[0] == many.query.sql_with_params()[0]
    plan = _plan(*few.query.sql_with_params())
    assert "apps_registry_record_data_gin" in plan, plan


@pytest.mark.postgres
def test_a_route_writes_equality_on_a_declared_field_without_the_gin_containment_on_postgresql(user):
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    find = {"collection": "c", "where": {"k": "'v7'", "other": "'x'"}, "limit": "5"}
    routes = {"r": {"kind": "query", "steps": [{"find": find, "as": "found"}, {"return": "size(found)"}]}}
    finds: dict[str, str] = {}
    for indexes in ([["k"]], None):
        collections = {"c": {"indexes": indexes} if indexes else {}}
        app = app_definition_save(actor=user, definition={"name": "A", "collections": collections, "routes": routes})
        executed: list[str] = []

        def capture(execute, sql, params, many, context, executed=executed):
            executed.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(capture):
            route_run(actor=user, app_id=app.id, op="r", params={}, kind="query")
        (finds["indexed" if indexes else "plain"],) = [sql for sql in executed if "apps_registry_record" in sql]
    assert finds["indexed"].count("@>") == 1  # `other` only: the App row of the route lookup told the store
    assert finds["plain"].count("@>") == 2
