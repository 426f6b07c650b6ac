"""The engine's storage seam: the `Store` a route runs against, and the per-call accounting that wraps it.

`run_route` receives a `Store` (the SQL one is `routes.storage.SqlStore`; tests use an in-memory one)
and wraps it in a `MeteredStore`, which counts the records one call reads and writes against the
limits. A store reports records as their data plus `id`, and refuses records over `record_bytes`.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from apps_registry.exceptions import OperationFailed
from apps_registry.routes.limits import limit_details

# A filter: (field path, comparison, value); ("id",) is the record's id. Comparisons: eq ne gt gte lt lte in,
# and contains (a list field holding the value).
Where = list[tuple[tuple[str, ...], str, Any]]
# An ordering: (field path, descending).
OrderBy = list[tuple[tuple[str, ...], bool]]
# Where a record stands in one find's order (its sort values, then its insertion time and id), as the
# store that made it compares them; a paged find's cursor carries the position of its page's last record.
Position = list[Any]


@dataclass(frozen=True)
class Group:
    """One key of an aggregate's groups: a field's value, or the calendar bucket (routes/dates.py) of a
    field holding an ISO date or timestamp, in the time zone `tz`."""

    key: str  # the key of the output rows
    path: tuple[str, ...]
    bucket: str | None = None  # day, week, month or year
    tz: str = "UTC"
    each: bool = False  # one group per item of a list field (a record counts in each of its items' groups)


@dataclass(frozen=True)
class Measure:
    """One value of an aggregate's rows: count (of records, or of a field's non-null values), or the sum,
    avg, min or max of a field. Sums and averages of numbers are exact for decimals (0.1 + 0.2 is 0.3)."""

    key: str
    fn: str  # count, sum, avg, min, max
    path: tuple[str, ...] | None = None  # None: count the records


# An aggregate's order: (output key, descending).
RowOrder = list[tuple[str, bool]]


class Store(Protocol):
    """The records of one app's storage. Writes that find no record raise `missing`'s error; a failed
    call's writes are undone by `atomic` (the engine runs a mutation inside it)."""

    @property
    def storage_id(self) -> Any: ...

    def atomic(self) -> AbstractContextManager[Any]: ...

    def get(self, collection: str, record_id: str) -> dict[str, Any] | None: ...

    def find(self, collection: str, where: Where, order_by: OrderBy, limit: int | None) -> list[dict[str, Any]]: ...

    def find_page(
        self, collection: str, where: Where, order_by: OrderBy, limit: int, after: Position | None
    ) -> tuple[list[dict[str, Any]], list[Position], bool]:
        """Up to `limit` records in find's order strictly after `after` (keyset: records inserted meanwhile
        never shift a page): the records, each one's position, and whether more records follow."""
        ...

    def count(self, collection: str, where: Where) -> int: ...

    def sum(self, collection: str, path: tuple[str, ...], where: Where) -> float: ...

    def aggregate(
        self,
        collection: str,
        where: Where,
        groups: list[Group],
        measures: list[Measure],
        order: RowOrder,
        limit: int | None,
    ) -> list[dict[str, Any]]:
        """One row per group of the matching records (one row in all when `groups` is empty), each with its
        group keys and measures, computed by the database; in `order`, then by the group keys (missing
        values last), at most `limit` rows."""
        ...

    def insert(self, collection: str, record_id: str | None, data: dict[str, Any]) -> dict[str, Any]: ...

    def update(self, collection: str, record_id: str, changes: dict[str, Any]) -> dict[str, Any]: ...

    def upsert(self, collection: str, record_id: str, changes: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The merged (or new) record, and whether it was created."""
        ...

    def delete(self, collection: str, record_id: str) -> dict[str, Any]: ...

    def increment(
        self, collection: str, record_id: str, key: str, by: int | float, *, reread: bool
    ) -> dict[str, Any] | None:
        """Add `by` to a top-level number field (absent or null counts as 0); the new record when `reread`."""
        ...

    def record_count(self) -> int:
        """Records in the whole storage (every collection)."""
        ...

    def records_changed(self, delta: int) -> int:
        """Note a call that wrote records: add `delta` (records created minus deleted) to the storage's record
        counter and 1 to its changes counter (what open pages poll), in the call's transaction; returns the new
        total. Exact under concurrent calls: the counters are one row, updated in place, so a second call waits
        for the first to commit and adds to its totals."""
        ...


class ChangeSet:
    """The records one mutation changed, each with its data before and after (None: absent), as a store that
    records (`SqlStore(changes=...)`) notes its writes. A record written twice in one call counts once: its first
    before and its last after; one created and deleted again, or left as it was, not at all."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], list[Any]] = {}

    def note(
        self, collection: str, record_id: str, before: dict[str, Any] | None, after: dict[str, Any] | None
    ) -> None:
        noted = self._records.get((collection, record_id))
        if noted is None:
            self._records[(collection, record_id)] = [before, after]
        else:
            noted[1] = after

    def entries(self) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]]:
        """(collection, record_id, before, after) in the order the records were first written."""
        return [
            (collection, record_id, before, after)
            for (collection, record_id), (before, after) in self._records.items()
            if before != after
        ]


def document(record_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """A record as routes see it: its data plus `id`."""
    return {**data, "id": record_id}


def encoded_record(collection: str, record_id: str, data: dict[str, Any], max_bytes: int) -> str:
    """The compact JSON a store writes for a record, refusing one over `max_bytes`."""
    encoded = json.dumps(data, separators=(",", ":"))
    size = len(encoded.encode())
    if size > max_bytes:
        raise OperationFailed(
            f"Record {collection}/{record_id} would be {size} bytes; the limit is {max_bytes}.",
            details=limit_details("record_bytes", max_bytes, collection=collection, id=record_id),
        )
    return encoded


def missing(collection: str, record_id: str, action: str) -> OperationFailed:
    return OperationFailed(
        f"Cannot {action} {collection}/{record_id}: no record with id '{record_id}' in collection '{collection}'.",
        details={"collection": collection, "id": record_id},
    )


class MeteredStore:
    """A store with one call's accounting: records read and written (failing the call past the
    limits) and records created and deleted (for the records-per-app limit)."""

    __slots__ = ("store", "max_read", "max_written", "read", "written", "created", "deleted")

    def __init__(self, store: Store, *, max_read: int, max_written: int) -> None:
        self.store = store
        self.max_read = max_read
        self.max_written = max_written
        self.read = 0
        self.written = 0
        self.created = 0
        self.deleted = 0

    def _count_read(self, n: int) -> None:
        self.read += n
        if self.read > self.max_read:
            raise OperationFailed(
                f"This call read more than {self.max_read} records; "
                "add a tighter 'where' or a 'limit' to its find steps.",
                details=limit_details("records_read_per_call", self.max_read),
            )

    def _count_write(self) -> None:
        self.written += 1
        if self.written > self.max_written:
            raise OperationFailed(
                f"This call wrote more than {self.max_written} records; split the work into several calls.",
                details=limit_details("records_written_per_call", self.max_written),
            )

    # --- reads ------------------------------------------------------------------------------
    def get(self, collection: str, record_id: str) -> dict[str, Any] | None:
        record = self.store.get(collection, record_id)
        if record is not None:
            self._count_read(1)
        return record

    def find(self, collection: str, where: Where, order_by: OrderBy, limit: int | None) -> list[dict[str, Any]]:
        # One row past what is left of the budget: enough to know the call went over it.
        budget = self.max_read - self.read + 1
        rows = self.store.find(collection, where, order_by, budget if limit is None else min(limit, budget))
        self._count_read(len(rows))
        return rows

    def find_page(
        self, collection: str, where: Where, order_by: OrderBy, limit: int, after: Position | None
    ) -> tuple[list[dict[str, Any]], list[Position], bool]:
        budget = self.max_read - self.read + 1
        rows, positions, more = self.store.find_page(collection, where, order_by, min(limit, budget), after)
        self._count_read(len(rows))
        return rows, positions, more

    def count(self, collection: str, where: Where) -> int:
        return self.store.count(collection, where)

    def sum(self, collection: str, path: tuple[str, ...], where: Where) -> float:
        return self.store.sum(collection, path, where)

    def aggregate(
        self,
        collection: str,
        where: Where,
        groups: list[Group],
        measures: list[Measure],
        order: RowOrder,
        limit: int | None,
    ) -> list[dict[str, Any]]:
        # Each group returned counts as one record read (the records behind it are never loaded).
        budget = self.max_read - self.read + 1
        rows = self.store.aggregate(
            collection, where, groups, measures, order, budget if limit is None else min(limit, budget)
        )
        self._count_read(len(rows))
        return rows

    # --- writes -----------------------------------------------------------------------------
    def insert(self, collection: str, record_id: str | None, data: dict[str, Any]) -> dict[str, Any]:
        self._count_write()
        record = self.store.insert(collection, record_id, data)
        self.created += 1
        return record

    def update(self, collection: str, record_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        self._count_write()
        return self.store.update(collection, record_id, changes)

    def upsert(self, collection: str, record_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        self._count_write()
        record, created = self.store.upsert(collection, record_id, changes)
        if created:
            self.created += 1
        return record

    def delete(self, collection: str, record_id: str) -> dict[str, Any]:
        self._count_write()
        record = self.store.delete(collection, record_id)
        self.deleted += 1
        return record

    def increment(
        self, collection: str, record_id: str, key: str, by: int | float, *, reread: bool
    ) -> dict[str, Any] | None:
        self._count_write()
        record = self.store.increment(collection, record_id, key, by, reread=reread)
        if reread:
            self._count_read(1)
        return record
