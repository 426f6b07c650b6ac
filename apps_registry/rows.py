"""Model instances from hand-written SQL on the hot path: the column list to select and the instance a row's slice
makes, with the database's value conversions applied as the ORM applies them (SQLite's text datetimes, say).

The ORM builds, compiles and populates a query anew on every call; for the few statements every request sends
(the token lookup, the route lookup) that was a tenth of a call's server time. `Columns` is built once per model
and alias; the SQL around it stays hand-written, next to the rule it serves.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Model


@dataclass(frozen=True)
class Columns:
    model: type[Model]
    alias: str  # the database alias the converters belong to
    attnames: tuple[str, ...]
    columns: tuple[str, ...]
    converters: tuple[tuple[int, tuple[Any, ...], Any], ...]  # (position, converter functions, the column expression)

    def select(self, table_alias: str) -> str:
        """`t."id", t."name", ...`: every concrete column of the model, in the order `instance` reads them."""
        quote = connections[self.alias].ops.quote_name
        return ", ".join(f"{table_alias}.{quote(column)}" for column in self.columns)

    def instance(self, row: tuple[Any, ...] | list[Any], start: int = 0) -> Any:
        """The model instance held by `row[start : start + len(columns)]`, as if the ORM had loaded it."""
        values = list(row[start : start + len(self.columns)])
        connection = connections[self.alias]
        for position, functions, expression in self.converters:
            for convert in functions:
                values[position] = convert(values[position], expression, connection)
        return self.model.from_db(self.alias, list(self.attnames), values)


@functools.cache
def columns_of(model: type[Model], alias: str = "default") -> Columns:
    fields = model._meta.concrete_fields
    connection = connections[alias]
    converters = []
    for position, field in enumerate(fields):
        expression = field.get_col(model._meta.db_table)
        functions = tuple(connection.ops.get_db_converters(expression) + expression.get_db_converters(connection))
        if functions:
            converters.append((position, functions, expression))
    return Columns(
        model=model,
        alias=alias,
        attnames=tuple(field.attname for field in fields),
        columns=tuple(field.column for field in fields),
        converters=tuple(converters),
    )
