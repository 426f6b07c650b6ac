"""A find's order as the databases serve it: the order of the in-memory reference store (ties by insertion
order, in the direction of the last order key), with each field written as its declared index's expression."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from apps_registry.models import Storage
from apps_registry.routes.storage import SqlStore
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
