"""A cheaper `flush` for the tests with committed data (`transactional_db`: the live servers' tests, ~1,250 of them).

Django ends each such test with the `flush` command: it empties every table (one TRUNCATE of all of them on
PostgreSQL, which gives each table and index new files: 80 ms a test; a DELETE of each on SQLite), then sends
post_migrate, whose receivers (content types, permissions) make their rows again one model at a time (25-90 ms a
test). Together about 50 s of the suite on SQLite and 100 s on PostgreSQL.

`FlushRows` leaves the database in the same state in a few milliseconds:

- it empties only the tables that hold rows (one query finds them), each with a DELETE in one transaction (Django's
  foreign keys are checked at its commit);
- the first flush sends post_migrate as Django does and keeps what its receivers made. Later, a table holding
  exactly those rows again (no test touched it) is left as it is; one that changed (or was emptied) is emptied
  and given them back, same primary keys, in one transaction.

A flush the test case asks to reset sequences or cascade (`reset_sequences`, `available_apps`: the suite uses
neither) is Django's own.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.core.management.commands import flush
from django.db import connections, transaction

# Per table: its rows as read back, and the INSERT with its values that puts them back.
Held = dict[str, tuple[list[tuple], str, list[list]]]


class FlushRows:
    def __init__(self) -> None:
        self.sql_flush, self.post_migrate = flush.sql_flush, flush.emit_post_migrate_signal
        self.made: dict[str, Held] = {}  # per database: what post_migrate made
        self.emptied: dict[str, list[str]] = {}  # per database: the tables of `made` the pending flush empties

    def install(self) -> None:
        flush.sql_flush, flush.emit_post_migrate_signal = self.statements, self.rows_back

    def uninstall(self) -> None:
        flush.sql_flush, flush.emit_post_migrate_signal = self.sql_flush, self.post_migrate

    def statements(self, style: Any, connection: Any, reset_sequences: bool = True, allow_cascade: bool = False):
        if reset_sequences or allow_cascade:
            return self.sql_flush(style, connection, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        made = self.made.get(connection.alias, {})
        tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        filled = set(_tables_with_rows(connection, tables))
        # A table of post_migrate's that a test emptied is "emptied" again (an empty DELETE), so it is given its rows
        # back, and the flush sends post_migrate even when no other table held a row.
        ours = [
            table for table in tables if table in made and (table not in filled or _changed(connection, table, made))
        ]
        self.emptied[connection.alias] = ours
        emptied = ours + [table for table in tables if table in filled and table not in made]
        return [f"DELETE FROM {connection.ops.quote_name(table)}" for table in emptied]

    def rows_back(self, verbosity: int, interactive: bool, db: str, **kwargs: Any) -> None:
        if db not in self.made:
            self.post_migrate(verbosity, interactive, db, **kwargs)
            self.made[db] = _rows_of_every_table(connections[db])
            return
        with transaction.atomic(using=db), connections[db].cursor() as cursor:
            for table in self.emptied.pop(db, []):
                _rows, insert, values = self.made[db][table]
                cursor.executemany(insert, values)
        ContentType.objects.clear_cache()


def _tables_with_rows(connection: Any, tables: list[str]) -> list[str]:
    if not tables:
        return []
    quote = connection.ops.quote_name
    union = " UNION ALL ".join(f"SELECT %s WHERE EXISTS (SELECT 1 FROM {quote(table)})" for table in tables)
    with connection.cursor() as cursor:
        cursor.execute(union, tables)
        return [row[0] for row in cursor.fetchall()]


def _rows(connection: Any, table: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)} ORDER BY 1")
        return cursor.fetchall()


def _changed(connection: Any, table: str, made: Held) -> bool:
    """Whether `table`, one of post_migrate's, holds anything but what it made."""
    return _rows(connection, table) != made[table][0]


def _rows_of_every_table(connection: Any) -> Held:
    """For each table holding rows: those rows as read back, and an INSERT with its values as the columns take them."""
    quote = connection.ops.quote_name
    held: Held = {}
    for model in apps.get_models(include_auto_created=True):
        fields = model._meta.local_concrete_fields
        values = [
            [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields]
            for row in model._base_manager.using(connection.alias).order_by("pk")
        ]
        if values:
            table = model._meta.db_table
            columns = ", ".join(quote(field.column) for field in fields)
            insert = f"INSERT INTO {quote(table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
            held[table] = (_rows(connection, table), insert, values)
    return held
