"""An in-memory `Store` (apps_registry/routes/store.py) for running the engine with no database."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from apps_registry.exceptions import OperationFailed
from apps_registry.routes.dates import NotADate, bucket_of
from apps_registry.routes.store import (
    Group,
    Measure,
    OrderBy,
    Position,
    RowOrder,
    Where,
    document,
    encoded_record,
    missing,
)

_ABSENT = object()


def _at(data: dict[str, Any], record_id: str, path: tuple[str, ...]) -> Any:
    if path == ("id",):
        return record_id
    value: Any = data
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def same_value(value: Any, wanted: Any) -> bool:
    """The engine's equality: the same JSON type and equal (numbers as numbers: 1 is 1.0; true is not 1)."""
    return value is not _ABSENT and _kind(value) == _kind(wanted) and value == wanted


def _matches(value: Any, op: str, wanted: Any) -> bool:
    if op == "eq":
        return same_value(value, wanted)
    if op == "ne":
        return value is not _ABSENT and not same_value(value, wanted)
    if op == "in":
        return any(same_value(value, w) for w in wanted)
    if op == "contains":
        return isinstance(value, list) and any(same_value(item, wanted) for item in value)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (value, wanted))
    if not numbers and not (isinstance(value, str) and isinstance(wanted, str)):
        return False
    return {"gt": value > wanted, "gte": value >= wanted, "lt": value < wanted, "lte": value <= wanted}[op]


class MemoryStore:
    """Records in a dict, in insertion order; `atomic` undoes every write of a block that raises."""

    def __init__(
        self,
        *,
        max_bytes: int = 64 * 1024,
        records: dict[str, dict[str, dict[str, Any]]] | None = None,
        missing_smallest: bool = False,
    ):
        self.storage_id = uuid.uuid4()
        self.max_bytes = max_bytes
        self.missing_smallest = missing_smallest
        self.records: dict[tuple[str, str], dict[str, Any]] = {}
        self.inserted: dict[tuple[str, str], int] = {}  # insertion sequence: the SQL store's created_at
        for collection, by_id in (records or {}).items():
            for record_id, data in by_id.items():
                self.records[(collection, record_id)] = copy.deepcopy(data)
                self.inserted[(collection, record_id)] = len(self.inserted)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        saved, inserted = copy.deepcopy(self.records), dict(self.inserted)
        try:
            yield
        except BaseException:
            self.records, self.inserted = saved, inserted
            raise

    def collection(self, name: str) -> dict[str, dict[str, Any]]:
        return {record_id: data for (c, record_id), data in self.records.items() if c == name}

    def _selected(self, collection: str, where: Where) -> list[tuple[str, dict[str, Any]]]:
        return [
            (record_id, data)
            for (c, record_id), data in self.records.items()
            if c == collection and all(_matches(_at(data, record_id, path), op, v) for path, op, v in where)
        ]

    def get(self, collection: str, record_id: str) -> dict[str, Any] | None:
        data = self.records.get((collection, record_id))
        return None if data is None else document(record_id, copy.deepcopy(data))

    def _ordered(self, collection: str, where: Where, order_by: OrderBy) -> list[tuple[str, dict[str, Any]]]:
        """find's order: the order keys, then insertion order (the SQL store's created_at, then id) in the direction
        of the last key (newest first after a descending one); a missing field sorts as the largest value
        (PostgreSQL) or, with `missing_smallest`, as the smallest (SQLite)."""
        last = order_by[-1][1] if order_by else False
        rows = self._selected(collection, where)
        rows.sort(key=lambda row: (self.inserted[(collection, row[0])], row[0]), reverse=last)
        for path, descending in reversed(order_by):
            rows.sort(key=lambda row, p=path: self._sort_key(row, p), reverse=descending)  # stable: ties keep order
        return rows

    def _sort_key(self, row: tuple[str, dict[str, Any]], path: tuple[str, ...]) -> tuple[bool, Any]:
        value = _at(row[1], row[0], path)
        return (value is not _ABSENT, value) if self.missing_smallest else (value is _ABSENT, value)

    def find(self, collection: str, where: Where, order_by: OrderBy, limit: int | None) -> list[dict[str, Any]]:
        rows = self._ordered(collection, where, order_by)
        rows = rows if limit is None else rows[:limit]
        return [document(record_id, copy.deepcopy(data)) for record_id, data in rows]

    def find_page(
        self, collection: str, where: Where, order_by: OrderBy, limit: int, after: Position | None
    ) -> tuple[list[dict[str, Any]], list[Position], bool]:
        last = order_by[-1][1] if order_by else False

        def position(row: tuple[str, dict[str, Any]]) -> Position:
            keys = [list(self._sort_key(row, path)) for path, _descending in order_by]
            return [*keys, self.inserted[(collection, row[0])], row[0]]

        def beyond(mine: Position, theirs: Position) -> bool:
            for n, (a, b) in enumerate(zip(mine, theirs, strict=True)):
                if a != b:
                    descending = order_by[n][1] if n < len(order_by) else last
                    return (a < b) if descending else (a > b)
            return False

        rows = self._ordered(collection, where, order_by)
        if after is not None:
            rows = [row for row in rows if beyond(position(row), after)]
        page = rows[:limit]
        return [document(i, copy.deepcopy(d)) for i, d in page], [position(row) for row in page], len(rows) > limit

    def count(self, collection: str, where: Where) -> int:
        return len(self._selected(collection, where))

    def sum(self, collection: str, path: tuple[str, ...], where: Where) -> float:
        total = 0.0
        for record_id, data in self._selected(collection, where):
            value = _at(data, record_id, path)
            if value is _ABSENT or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise OperationFailed(
                    f"Cannot sum {'.'.join(path)} over {collection}: some records hold a value that is not a number.",
                    details={"collection": collection, "field": ".".join(path)},
                )
            total += value
        return total

    def aggregate(
        self,
        collection: str,
        where: Where,
        groups: list[Group],
        measures: list[Measure],
        order: RowOrder,
        limit: int | None,
    ) -> list[dict[str, Any]]:
        """The SQL store's GROUP BY, in Python: the same keys, the same exact sums, the same order."""
        grouped: dict[tuple[str, ...], tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]] = {}
        each = next((g for g in groups if g.each), None)
        rows_in: list[tuple[str, dict[str, Any], dict[str, Any]]] = []  # a record once, or once per list item
        for record_id, data in self._selected(collection, where):
            items = _at(data, record_id, each.path) if each is not None else None
            if each is None:
                rows_in.append((record_id, data, {}))
            elif isinstance(items, list):
                rows_in += [(record_id, data, {each.key: item}) for item in items]
        for record_id, data, item in rows_in:
            keys: dict[str, Any] = dict(item)
            for group in groups:
                if group.each:
                    continue
                value = _at(data, record_id, group.path)
                value = None if value is _ABSENT else value
                if group.bucket is not None:
                    try:
                        value = bucket_of(value, group.bucket, group.tz)
                    except NotADate:
                        raise OperationFailed(
                            f"Cannot group {collection} by the {group.bucket} of '{'.'.join(group.path)}': some "
                            "records hold text there that is not an ISO date or timestamp.",
                            details={"collection": collection, "field": ".".join(group.path)},
                        ) from None
                keys[group.key] = value
            marker = tuple(repr(keys[g.key]) for g in groups)
            grouped.setdefault(marker, (keys, []))[1].append((record_id, data))
        if not groups and not grouped:
            grouped[()] = ({}, [])
        rows = []
        for keys, members in grouped.values():
            row = dict(keys)
            for measure in measures:
                row[measure.key] = _measure(collection, measure, members)
            rows.append(row)
        for key in [g.key for g in reversed(groups)]:
            rows.sort(key=lambda row, k=key: _sort_key(row[k]))
        for key, descending in reversed(order):
            rows.sort(key=lambda row, k=key: _sort_key(row[k], descending), reverse=descending)
        return rows if limit is None else rows[:limit]

    def insert(self, collection: str, record_id: str | None, data: dict[str, Any]) -> dict[str, Any]:
        record_id = record_id if record_id is not None else str(uuid.uuid4())
        encoded_record(collection, record_id, data, self.max_bytes)
        if (collection, record_id) in self.records:
            raise OperationFailed(
                f"A record {collection}/{record_id} already exists; use update or upsert to change it.",
                details={"collection": collection, "id": record_id},
            )
        self.records[(collection, record_id)] = copy.deepcopy(data)
        self.inserted[(collection, record_id)] = max(self.inserted.values(), default=-1) + 1
        return document(record_id, data)

    def _merge(self, collection: str, record_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        data = {**self.records[(collection, record_id)], **changes}
        encoded_record(collection, record_id, data, self.max_bytes)
        self.records[(collection, record_id)] = copy.deepcopy(data)  # keeps its place: created_at is not changed
        return document(record_id, data)

    def update(self, collection: str, record_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        if (collection, record_id) not in self.records:
            raise missing(collection, record_id, "update")
        return self._merge(collection, record_id, changes)

    def upsert(self, collection: str, record_id: str, changes: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if (collection, record_id) in self.records:
            return self._merge(collection, record_id, changes), False
        return self.insert(collection, record_id, changes), True

    def delete(self, collection: str, record_id: str) -> dict[str, Any]:
        data = self.records.pop((collection, record_id), None)
        self.inserted.pop((collection, record_id), None)
        if data is None:
            raise missing(collection, record_id, "delete")
        return document(record_id, data)

    def increment(
        self, collection: str, record_id: str, key: str, by: int | float, *, reread: bool
    ) -> dict[str, Any] | None:
        data = self.records.get((collection, record_id))
        if data is None:
            raise missing(collection, record_id, "increment")
        current = data.get(key)
        if current is not None and (isinstance(current, bool) or not isinstance(current, (int, float))):
            raise OperationFailed(
                f"Cannot increment {collection}/{record_id}.{key}: it holds a value that is not a number.",
                details={"collection": collection, "id": record_id, "field": key},
            )
        data[key] = (current or 0) + by
        return document(record_id, copy.deepcopy(data)) if reread else None

    def record_count(self) -> int:
        return len(self.records)

    def records_changed(self, delta: int) -> int:
        return len(self.records)  # the writes already changed it


def _sort_key(value: Any, descending: bool = False) -> tuple[Any, ...]:
    # Missing values last in either direction, as the SQL store's NULLS LAST.
    if value is None:
        return (not descending, 0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (descending, 0, value)
    return (descending, 1, str(value))


def _measure(collection: str, measure: Measure, members: list[tuple[str, dict[str, Any]]]) -> Any:
    if measure.path is None:
        return len(members)
    values = [_at(data, record_id, measure.path) for record_id, data in members]
    present = [v for v in values if v is not _ABSENT and v is not None]
    if measure.fn == "count":
        return len(present)
    numbers = [v for v in present if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if measure.fn in ("min", "max"):
        pick = min if measure.fn == "min" else max
        if numbers:
            return pick(numbers)
        texts = [v for v in present if isinstance(v, str)]
        return pick(texts) if texts else None
    if len(numbers) != len(present):
        raise OperationFailed(
            f"Cannot {measure.fn} {'.'.join(measure.path)} over {collection}: some records hold a value that is "
            "not a number.",
            details={"collection": collection, "field": ".".join(measure.path)},
        )
    total = sum((Decimal(repr(v)) for v in numbers), Decimal(0))
    if measure.fn == "avg":
        return float(total / len(numbers)) if numbers else None
    return float(total) if any(isinstance(v, float) for v in numbers) else int(total)
