"""The store an author test runs on: the engine's SqlStore over a scratch storage (services/definitions.py
makes one per test, in a transaction that is always rolled back), plus one bulk insert for the records a
test generates, so thousands of them cost one statement sent many times, not a round of the engine each."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import timedelta

from django.db import IntegrityError, connection
from django.utils import timezone

from apps_registry.exceptions import OperationFailed
from apps_registry.models import Record
from apps_registry.plans import plan_stable
from apps_registry.routes.storage import SqlStore


class ScratchSqlStore(SqlStore):
    def insert_generated(self, collection: str, rows: Sequence[tuple[str, str]]) -> None:
        """Insert (record id, compact JSON) rows, already checked and sized when the definition was, in their
        order: their created_at steps by a microsecond up to now, so a find without order_by (insertion
        order) sees them as they were generated, and before any record the test's route writes."""
        if not rows:
            return
        opts = Record._meta
        storage = opts.get_field("storage").get_db_prep_value(self.storage_id, connection)
        created_at = opts.get_field("created_at")
        start = timezone.now() - timedelta(microseconds=len(rows))
        params = []
        for n, (record_id, encoded) in enumerate(rows):
            at = created_at.get_db_prep_value(start + timedelta(microseconds=n), connection)
            params.append((storage, collection, record_id, encoded, at, at))
        try:
            with connection.cursor() as cursor:
                cursor.executemany(_insert_sql(), params)
        except IntegrityError:  # ids were checked distinct; a record already there (none should be) is refused
            raise OperationFailed(
                f"The generated records of {collection} repeat an id already stored in it.",
                details={"collection": collection},
            ) from None


@functools.cache
def _insert_sql() -> str:
    # An insert of values (apps_registry/plans.py): psycopg prepares what executemany sends many times anyway.
    return plan_stable(
        f"INSERT INTO {connection.ops.quote_name(Record._meta.db_table)} "
        "(storage_id, collection, record_id, data, version, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, 1, %s, %s)"
    )
