"""The engine's SQL store: an app's records, queried and written by the database itself.

Filters, ordering, limits and aggregates run as SQL on the JSON data (jsonb on PostgreSQL, JSON1
on SQLite); `increment` is one UPDATE computed in SQL, never a read-modify-write in Python.
"""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import DataError, IntegrityError, connection, transaction
from django.db.models import (
    BooleanField,
    DateTimeField,
    ExpressionWrapper,
    F,
    FloatField,
    JSONField,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
)
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import Exact, GreaterThan, GreaterThanOrEqual, IsNull, LessThan, LessThanOrEqual
from django.utils import timezone

from apps_registry.exceptions import OperationFailed
from apps_registry.models import Record, Storage
from apps_registry.plans import plan_stable
from apps_registry.routes.dates import DATE_PATTERN, NOT_A_DATE, TIMESTAMP_PATTERN, sqlite_bucket
from apps_registry.routes.expressions import INT64_MAX, INT64_MIN
from apps_registry.routes.store import ChangeSet, Group, Measure, RowOrder, document, encoded_record, missing

# The output fields of the SQL fragments below, made once (a field's __init__ is about 4 µs, and a find builds
# several fragments): they only say how a value converts.
_BOOLEAN: BooleanField[Any, Any] = BooleanField()
_JSON: JSONField[Any, Any] = JSONField()


def _json(value: Any) -> Any:
    """A JSON column read with a plain cursor: text on SQLite (and jsonb under Django's loaders)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


@dataclass(frozen=True)
class _Column:
    """One column of find's order, as both ORDER BY and a page's keyset condition compile it."""

    expression: Any
    descending: bool
    kind: str  # "data" (a data field: JSON, may be missing, i.e. SQL NULL), "created_at" or "record_id"

    @property
    def nullable(self) -> bool:
        return self.kind == "data"

    def order(self) -> Any:
        return self.expression.desc() if self.descending else self.expression.asc()

    def order_sql(self) -> str:
        """This column in a hand-written ORDER BY (find's one statement), as `order()` compiles it."""
        sql = self.expression.sql if self.kind == "data" else connection.ops.quote_name(self.kind)
        return f"{sql} {'DESC' if self.descending else 'ASC'}"

    def nulls_last(self) -> bool:
        # The database's default place for NULLs, which find's ORDER BY uses (and an index scanned either way
        # gives): PostgreSQL sorts them as the largest value (last ascending), SQLite as the smallest.
        return (connection.vendor == "postgresql") != self.descending

    def value(self, raw: Any) -> Any:
        """A position's value as an SQL operand of the same type as the column."""
        if self.kind == "data" and connection.vendor == "postgresql":
            return RawSQL("%s::jsonb", (raw,), output_field=_JSON)
        if self.kind == "created_at":
            return Value(datetime.fromisoformat(raw), output_field=DateTimeField())
        return Value(raw)


def _page_columns(order_by: list[tuple[tuple[str, ...], bool]]) -> list[_Column]:
    """find's order: the author's, then insertion order (created_at, then the record's id: unique) in the direction
    of the last order key, so that one declared index (its fields, created_at, record_id) serves the find whole,
    scanned forward or backward."""
    vendor = connection.vendor

    def model_column(name: str, descending: bool) -> _Column:
        return _Column(F(name), descending, name)

    def data_column(path: tuple[str, ...], descending: bool) -> _Column:
        # The field as a literal expression, the form of a declared index (field_sql): never the path as a parameter.
        return _Column(RawSQL(field_sql(path, vendor), (), output_field=_JSON), descending, "data")

    columns = [
        model_column("record_id", descending) if path == ("id",) else data_column(path, descending)
        for path, descending in order_by
    ]
    last = order_by[-1][1] if order_by else False
    return [*columns, model_column("created_at", last), model_column("record_id", last)]


def _beyond(columns: list[_Column], position: list[Any]) -> Q | None:
    """Rows strictly after `position` in the order of `columns` (None: no row can be): for some column, every
    earlier one equal and this one beyond."""
    beyond_any: Q | None = None
    equal: list[Any] = []
    for column, raw in zip(columns, position, strict=True):
        expression = column.expression
        if raw is None:
            beyond = None if column.nulls_last() else Q(IsNull(expression, False))
        else:
            operand = column.value(raw)
            beyond = Q(LessThan(expression, operand) if column.descending else GreaterThan(expression, operand))
            if column.nullable and column.nulls_last():
                beyond |= Q(IsNull(expression, True))
        if beyond is not None:
            beyond_any = Q(*equal, beyond) if beyond_any is None else beyond_any | Q(*equal, beyond)
        equal.append(IsNull(expression, True) if raw is None else Exact(expression, column.value(raw)))
    return beyond_any


def _bounded_after(columns: list[_Column], position: list[Any]) -> Q:
    """Rows strictly after `position` whose first column is not NULL (that column is not NULL at the position),
    written so an index range-scans the first column from the position: its bound, then "not equal to the
    position's value, or beyond it on the other columns" (`_beyond`). Equivalent to `_beyond` under the bound,
    and the planners estimate it as the one range (PostgreSQL estimated `c0 < v OR (c0 = v AND ...)` under the
    bound at a ninth of the range's rows, and then preferred a bitmap scan and a sort for later pages)."""
    first, raw = columns[0], position[0]
    operand = first.value(raw)
    rest = _beyond(columns[1:], position[1:])
    if rest is None:
        return Q(LessThan(first.expression, operand) if first.descending else GreaterThan(first.expression, operand))
    bound: Any = (LessThanOrEqual if first.descending else GreaterThanOrEqual)(first.expression, operand)
    return Q(bound) & (~Q(Exact(first.expression, first.value(raw))) | rest)


def _from_start(columns: list[_Column]) -> list[tuple[Q, list[_Column]]]:
    """All rows in the order of `columns`, as `_after` gives the rows after a position: conditions whose rows follow
    one another, each with the columns to order its rows by. One, except on SQLite when the first column is a data
    field: its present values (a range from below every value: every number, text and JSON text is at least -inf),
    and its missing ones (NULL, smallest on SQLite), in their place. The range lets a declared index on the field
    serve the order whatever SQLite's statistics say: with ANALYZE's, an app of 200,000 records among others was
    read by `record_collection_recent` (storage and collection, the app's records) and sorted whole."""
    first = columns[0]
    if connection.vendor != "sqlite" or not first.nullable:
        return [(Q(), columns)]
    present = (Q(GreaterThanOrEqual(first.expression, Value(-math.inf))), columns)
    missing = (Q(IsNull(first.expression, True)), columns[1:])
    return [present, missing] if first.nulls_last() else [missing, present]


def _after(columns: list[_Column], position: list[Any]) -> list[tuple[Q, list[_Column]]]:
    """The rows strictly after `position` in the order of `columns`, as conditions whose rows follow one another
    in that order (all of the first condition's rows come before the second's), each with the columns to order
    its rows by. Each bounds the first column (a range; or IS NULL, and then the next columns' own conditions),
    so an index on the order scans from the position instead of from the start: where missing values (NULL) come
    after the position's value, they are a condition of their own, since one range cannot hold both. On SQLite,
    rows whose first column is
    NULL are ordered by the other columns alone: it does not see that an expression IS NULL is constant, and
    would sort what the index already orders (PostgreSQL, the other way round, sorts unless it orders by the
    column IS NULL holds)."""
    first, raw = columns[0], position[0]
    postgres = connection.vendor == "postgresql"
    if raw is None:  # a missing value: the rest of the missing ones, then (when they come first) every other
        parts = [
            (Q(IsNull(first.expression, True), condition), [first, *ordered] if postgres else ordered)
            for condition, ordered in _after(columns[1:], position[1:])
        ]
        return parts if first.nulls_last() else [*parts, (Q(IsNull(first.expression, False)), columns)]
    parts = [(_bounded_after(columns, position), columns)]
    if first.nullable and first.nulls_last():
        parts.append((Q(IsNull(first.expression, True)), columns if postgres else columns[1:]))
    return parts


_FIELD_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


# PostgreSQL's SQLSTATE for "program limit exceeded": among them, a B-tree entry over ~2,700 bytes.
PROGRAM_LIMIT_EXCEEDED = "54000"


def index_entry_too_large(error: BaseException) -> bool:
    """Whether a write failed because a value is too large for an index (PostgreSQL: an author-declared
    index's entry over the B-tree limit). SQLite has no such limit."""
    return getattr(error.__cause__, "sqlstate", None) == PROGRAM_LIMIT_EXCEEDED


def index_entry_refusal() -> OperationFailed:
    return OperationFailed(
        "A value this call writes is too large for an index the app declares: PostgreSQL keeps at most about "
        "2,700 bytes per entry of an index. Nothing was written. Write a shorter value to the indexed field, or "
        "remove that field from the collection's indexes.",
        details={"limit": "index_entry_bytes", "max": 2700},
    )


def field_sql(path: tuple[str, ...], vendor: str, *, column: str | None = None) -> str:
    """A data field as SQL, written the one way both the engine's filters and the indexes an author declares
    use (an expression index serves a query only when the expressions match; on PostgreSQL this is also
    the form Django's key transforms take, which `order_by` uses). The compiler admits only field names
    of letters, digits and underscores, so they are written as literals."""
    if not path or not all(_FIELD_PART.match(part) for part in path):
        raise ValueError(f"not a field path: {path!r}")
    column = column or _data_column()
    if vendor == "postgresql":
        if len(path) == 1:
            return f"({column} -> '{path[0]}')"
        return f"({column} #> '{{{','.join(path)}}}')"
    return f"json_extract({column}, '{_sqlite_path(path)}')"


def _data_column() -> str:
    return f"{connection.ops.quote_name(Record._meta.db_table)}.{connection.ops.quote_name('data')}"


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "$." + ".".join(f'"{part}"' for part in path)


def _nested(path: tuple[str, ...], value: Any) -> Any:
    for part in reversed(path):
        value = {part: value}
    return value


def equality_sql(path: tuple[str, ...], op: str, value: Any, vendor: str, *, gin: bool = True) -> RawSQL:
    """`eq`, `ne` or `in` on a data field, type-exact on both databases: a value matches one of the same JSON
    type that is equal to it (numbers compare as numbers, so 1 matches 1.0; true matches neither 1 nor "true";
    null matches a field that holds null, not a missing one). `ne` matches the records that hold the field
    (null included) with any other value: a record without the field matches neither.

    On PostgreSQL an `eq` or `in` is also a jsonb containment (`data @> '{"k": v}'`, which the GIN index on
    `data` serves), unless `gin` is false: for a field a declared index serves, whose B-tree the containment
    only misleads (the planner estimates containment far too selective, and picks the GIN index and a sort over
    the index that would give the order too). Both compare the field expression (`field_sql`), which a declared
    index serves. For the scalars filters take, containment and jsonb equality agree exactly."""
    values = value if op == "in" else [value]
    if not values:
        return RawSQL("FALSE", [], output_field=_BOOLEAN)
    field = field_sql(path, vendor)
    if vendor == "postgresql":
        data = _data_column()
        if op == "in":
            # Each list is one array parameter: one statement shape whatever the list's length (it is prepared
            # once), and no bound on how many values a list holds.
            compared = [json.dumps(v) for v in values]
            if not gin:
                return RawSQL(f"({field} = ANY(%s::jsonb[]))", [compared], output_field=_BOOLEAN)
            contained = [json.dumps(_nested(path, v)) for v in values]
            sql = f"({data} @> ANY(%s::jsonb[]) AND {field} = ANY(%s::jsonb[]))"
            return RawSQL(sql, [contained, compared], output_field=_BOOLEAN)
        params: list[Any] = [json.dumps(_nested(path, value))]
        if op == "ne":
            return RawSQL(f"({field} IS NOT NULL AND NOT {data} @> %s::jsonb)", params, output_field=_BOOLEAN)
        if not gin:
            return RawSQL(f"({field} = %s::jsonb)", [json.dumps(value)], output_field=_BOOLEAN)
        params.append(json.dumps(value))
        return RawSQL(f"({data} @> %s::jsonb AND {field} = %s::jsonb)", params, output_field=_BOOLEAN)
    # SQLite: one condition per JSON type, each value list an IN (a chain of one OR per value grows SQLite's
    # expression tree past its depth limit at about a thousand values).
    typed = f"json_type({_data_column()}, '{_sqlite_path(path)}')"
    parts: list[str] = []
    params = []
    if any(v is None for v in values):
        parts.append(f"({typed} = 'null' AND {field} IS NULL)")
    for flag in sorted({v for v in values if isinstance(v, bool)}):
        parts.append(f"({typed} = '{'true' if flag else 'false'}' AND {field} = {1 if flag else 0})")
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numbers:
        parts.append(f"({typed} IN ('integer', 'real') AND {field} IN ({', '.join(['%s'] * len(numbers))}))")
        params += numbers
    texts = [v for v in values if isinstance(v, str)]
    if texts:
        parts.append(f"({typed} = 'text' AND {field} IN ({', '.join(['%s'] * len(texts))}))")
        params += texts
    matched = " OR ".join(parts)
    if op == "ne":
        return RawSQL(f"({typed} IS NOT NULL AND NOT COALESCE(({matched}), FALSE))", params, output_field=_BOOLEAN)
    return RawSQL(f"({matched})", params, output_field=_BOOLEAN)


_COMPARISONS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _id_sql(op: str, value: Any) -> RawSQL:
    """A filter on the record's id: a string (steps.where_values made it one), never missing."""
    if op == "in":
        sql = f"record_id IN ({', '.join(['%s'] * len(value))})" if value else "FALSE"
        return RawSQL(sql, list(value), output_field=_BOOLEAN)
    sql = "NOT (record_id = %s)" if op == "ne" else f"record_id {'=' if op == 'eq' else _COMPARISONS[op]} %s"
    return RawSQL(sql, [value], output_field=_BOOLEAN)


# A collection's declared indexes, each as its fields' paths in order: what the store needs to know of them.
Indexes = tuple[tuple[tuple[str, ...], ...], ...]


def declared_index_paths(collections: Any) -> dict[str, Indexes]:
    """Collection -> its declared indexes' field paths, from an app's (checked) `collections`
    (`{"checkins": {"indexes": [["habit_id", "date"]]}}`)."""
    if not isinstance(collections, dict):
        return {}
    found: dict[str, Indexes] = {}
    for name, spec in collections.items():
        indexes = spec.get("indexes") if isinstance(spec, dict) else None
        if isinstance(indexes, list) and indexes:
            found[name] = tuple(
                tuple(tuple(str(f).split(".")) for f in fields) for fields in indexes if isinstance(fields, list)
            )
    return found


def index_served_equalities(indexes: Indexes, where: list[tuple[tuple[str, ...], str, Any]]) -> set[tuple[str, ...]]:
    """The fields whose equality (`eq`, `in`) filters a declared index serves: an index's leading fields, as far
    as each has one (`[a, b]` serves a and b under `{a: .., b: ..}`, a under `{a: ..}`, neither under `{b: ..}`)."""
    equal = {path for path, op, _value in where if op in ("eq", "in")}
    served: set[tuple[str, ...]] = set()
    for fields in indexes:
        for path in fields:
            if path not in equal:
                break
            served.add(path)
    return served


def comparison_sql(path: tuple[str, ...], op: str, value: Any, vendor: str) -> RawSQL:
    """`gt`, `gte`, `lt` or `lte` on a data field: numbers compare with numbers and strings with strings (a field
    holding another type never matches), in the form a declared index on the field serves (`field_sql`)."""
    field, operator = field_sql(path, vendor), _COMPARISONS[op]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if vendor == "postgresql":
        kind = "number" if number else "string"
        return RawSQL(
            f"(jsonb_typeof({field}) = '{kind}' AND {field} {operator} %s::jsonb)",
            [json.dumps(value)],
            output_field=_BOOLEAN,
        )
    kinds = "'integer', 'real'" if number else "'text'"
    return RawSQL(
        f"(json_type({_data_column()}, '{_sqlite_path(path)}') IN ({kinds}) AND {field} {operator} %s)",
        [value],
        output_field=_BOOLEAN,
    )


def contains_sql(path: tuple[str, ...], value: Any, vendor: str) -> RawSQL:
    """A list field holding `value` (type-exact, as `eq`). On PostgreSQL a jsonb containment, which the GIN
    index on `data` serves."""
    if vendor == "postgresql":
        return RawSQL(f"({_data_column()} @> %s::jsonb)", [json.dumps(_nested(path, [value]))], output_field=_BOOLEAN)
    path_sql = _sqlite_path(path)
    params: list[Any] = []
    if value is None:
        typed = "j.type = 'null'"
    elif isinstance(value, bool):
        typed = f"j.type = '{'true' if value else 'false'}'"
    elif isinstance(value, (int, float)):
        typed, params = "j.type IN ('integer', 'real') AND j.value = %s", [value]
    else:
        typed, params = "j.type = 'text' AND j.value = %s", [value]
    data = _data_column()
    return RawSQL(
        f"(json_type({data}, '{path_sql}') = 'array' AND EXISTS "
        f"(SELECT 1 FROM json_each({data}, '{path_sql}') AS j WHERE {typed}))",
        params,
        output_field=_BOOLEAN,
    )


_BUCKET_FORMATS = {"day": "YYYY-MM-DD", "week": "YYYY-MM-DD", "month": "YYYY-MM", "year": "YYYY"}


class _AggregatePlan:
    """The SQL of one aggregate: each group key's and measure's select expressions, and how a result row
    becomes the route's map (exact decimal sums, JSON types kept)."""

    def __init__(self, vendor: str, groups: list[Group], measures: list[Measure]) -> None:
        self.vendor, self.groups, self.measures = vendor, groups, measures
        self.select: list[str] = []
        self.select_params: list[Any] = []
        self._sort: dict[str, list[str]] = {}  # output key -> the SQL to order by (no parameters)
        self.join = ""  # a list field's items, one row each, for an `each` group (`e.v` / `e.value`)
        self._columns: dict[str, list[int]] = {}  # output key -> its columns in the result row
        for group in groups:
            expression, params, sort = self._group(group)
            self._add(group.key, [expression], params)
            self._sort[group.key] = [sort or str(len(self.select))]
        for measure in measures:
            self._measure(measure)

    def _add(self, key: str, expressions: list[str], params: list[Any]) -> None:
        start = len(self.select)
        self.select += expressions
        self.select_params += params
        self._columns[key] = list(range(start, start + len(expressions)))

    def _field(self, path: tuple[str, ...]) -> str:
        return field_sql(path, self.vendor, column="r.data")

    def _group(self, group: Group) -> tuple[str, list[Any], str | None]:
        """(the select expression, its parameters, the SQL to order by or None for the column's position)."""
        field = self._field(group.path)
        if group.each:
            if self.vendor == "postgresql":
                self.join = (
                    " CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof("
                    f"{field}) = 'array' THEN {field} ELSE '[]'::jsonb END) AS e(v)"
                )
                return "NULLIF(e.v, 'null'::jsonb)", [], None
            path = _sqlite_path(group.path)
            self.join = f" JOIN json_each(r.data, '{path}') AS e ON json_type(r.data, '{path}') = 'array'"
            # The item as JSON text (types kept, as a field's group key is), ordered by its value.
            text = (
                "CASE e.type WHEN 'null' THEN NULL WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
                "WHEN 'object' THEN e.value WHEN 'array' THEN e.value ELSE json_quote(e.value) END"
            )
            return text, [], "e.value"
        if group.bucket is None:
            if self.vendor == "postgresql":
                # A missing field and a JSON null are one group (SQL NULL: last); jsonb orders numbers as numbers.
                return f"NULLIF({field}, 'null'::jsonb)", [], None
            # SQLite: grouped by the JSON text (types kept), ordered by the value (numbers as numbers).
            path = _sqlite_path(group.path)
            return f"NULLIF(r.data -> '{path}', 'null')", [], f"json_extract(r.data, '{path}')"
        if self.vendor == "postgresql":
            text = f"({field} #>> '{{}}')"
            day = f"({text})::date"
            moment = f"(({text})::timestamptz AT TIME ZONE %s)::date"
            if group.bucket == "week":
                day, moment = f"date_trunc('week', {day})", f"date_trunc('week', {moment})"
            fmt = _BUCKET_FORMATS[group.bucket]
            expression = (
                f"CASE WHEN jsonb_typeof({field}) = 'string' THEN CASE "
                f"WHEN {text} ~ '{DATE_PATTERN}' THEN to_char({day}, '{fmt}') "
                f"WHEN {text} ~ '{TIMESTAMP_PATTERN}' THEN to_char({moment}, '{fmt}') END END"
            )
            return expression, [group.tz], None
        return f"charming_bucket({field}, '{group.bucket}', %s)", [group.tz], None

    def _numbers(self, path: tuple[str, ...]) -> tuple[str, str, str]:
        """(a record's number at `path` or NULL, 1 when it holds something else there, 1 when a decimal)."""
        field = self._field(path)
        if self.vendor == "postgresql":
            kind = f"jsonb_typeof({field})"
            return (
                f"CASE WHEN {kind} = 'number' THEN ({field} #>> '{{}}')::numeric END",
                f"CASE WHEN {kind} NOT IN ('number', 'null') THEN 1 ELSE 0 END",
                "0",  # numeric keeps the scale: the sum says itself whether it is a decimal
            )
        kind = f"json_type(r.data, '{_sqlite_path(path)}')"
        return (
            f"CASE WHEN {kind} IN ('integer', 'real') THEN {field} END",
            f"CASE WHEN {kind} NOT IN ('integer', 'real', 'null') THEN 1 ELSE 0 END",
            f"CASE WHEN {kind} = 'real' THEN 1 ELSE 0 END",
        )

    def _exact_sum(self, number: str) -> tuple[list[str], str]:
        """Select expressions summing `number` exactly, and SQL for ordering by that sum."""
        if self.vendor == "postgresql":
            return [f"SUM({number})"], f"SUM({number})"
        # SQLite sums doubles in floating point (0.1 + 0.2 = 0.30000000000000004): sum the integer parts and
        # the millionths apart, as integers, and add them in Python as decimals.
        whole = f"SUM(CAST({number} AS INTEGER))"
        fraction = f"SUM(CAST(ROUND(({number} - CAST({number} AS INTEGER)) * 1000000) AS INTEGER))"
        return [whole, fraction], f"({whole} + {fraction} / 1000000.0)"

    def _measure(self, measure: Measure) -> None:
        key = measure.key
        if measure.path is None:
            self._add(key, ["COUNT(*)"], [])
            self._sort[key] = ["COUNT(*)"]
            return
        field = self._field(measure.path)
        if measure.fn == "count":
            counted = f"NULLIF({field}, 'null'::jsonb)" if self.vendor == "postgresql" else field
            self._add(key, [f"COUNT({counted})"], [])
            self._sort[key] = [f"COUNT({counted})"]
            return
        number, other, decimal = self._numbers(measure.path)
        if measure.fn in ("min", "max"):
            fn = measure.fn.upper()
            if self.vendor == "postgresql":
                text = f"CASE WHEN jsonb_typeof({field}) = 'string' THEN ({field} #>> '{{}}') END COLLATE \"C\""
            else:
                text = f"CASE WHEN json_type(r.data, '{_sqlite_path(measure.path)}') = 'text' THEN {field} END"
            self._add(key, [f"{fn}({number})", f"{fn}({text})"], [])
            self._sort[key] = [f"{fn}({number})", f"{fn}({text})"]
            return
        sums, sort = self._exact_sum(number)
        self._add(key, [*sums, f"COUNT({number})", f"MAX({other})", f"MAX({decimal})"], [])
        self._sort[key] = [sort if measure.fn == "sum" else f"({sort}) / NULLIF(COUNT({number}), 0)"]

    def order(self, key: str, descending: bool = False) -> str:
        direction = "DESC" if descending else "ASC"
        return ", ".join(f"{sql} {direction} NULLS LAST" for sql in self._sort[key])

    def not_a_date(self, collection: str) -> OperationFailed:
        fields = ", ".join(f"'{'.'.join(g.path)}'" for g in self.groups if g.bucket)
        return OperationFailed(
            f"Cannot group {collection} by date buckets of {fields}: some records hold text there that is not an "
            "ISO date or timestamp (such as 2026-02-30).",
            details={"collection": collection},
        )

    def row(self, collection: str, raw: tuple[Any, ...]) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for group in self.groups:
            value = raw[self._columns[group.key][0]]
            if group.bucket is None:  # a field's (or a list item's) JSON value
                value = _json(value)
            elif value == NOT_A_DATE:
                raise self.not_a_date(collection)
            row[group.key] = value
        for measure in self.measures:
            values = [raw[i] for i in self._columns[measure.key]]
            row[measure.key] = self._value(collection, measure, values)
        return row

    def _value(self, collection: str, measure: Measure, values: list[Any]) -> Any:
        if measure.path is None or measure.fn == "count":
            return int(values[0])
        if measure.fn in ("min", "max"):
            number, text = values
            return _number(number) if number is not None else text
        *sums, counted, other, decimal = values
        if other:
            raise OperationFailed(
                f"Cannot {measure.fn} {'.'.join(measure.path)} over {collection}: some records hold a value that "
                "is not a number.",
                details={"collection": collection, "field": ".".join(measure.path)},
            )
        if self.vendor == "postgresql":
            total = Decimal(0) if sums[0] is None else Decimal(sums[0])
        else:
            whole, fraction = (int(v or 0) for v in sums)
            total = Decimal(whole)
            if decimal:
                total += Decimal(fraction).scaleb(-6)
                if total == total.to_integral_value():
                    total = total.quantize(Decimal("0.0"))  # a sum of decimals stays a decimal (2.5 + 0.5 is 3.0)
        if measure.fn == "avg":
            return float(total / int(counted)) if counted else None
        return _number(total)


def _number(value: Any) -> int | float:
    """A database number as JSON's: integral without a decimal point stays an int, anything else a double."""
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent >= 0:
            return int(value)
        return float(value)
    return value


class SqlStore:
    """The records of one storage in the database (the engine's `Store`), with hand-written SQL where
    the ORM cost more than the rest of a step."""

    def __init__(
        self,
        *,
        storage_id: Any,
        max_bytes: int,
        savepoint: bool = True,
        indexes: dict[str, Indexes] | None = None,
        changes: ChangeSet | None = None,
    ) -> None:
        self.storage_id = storage_id
        # Where the writes note each record's before and after (the change log, services/changes.py); None: not noted.
        self.changes = changes
        self.max_bytes = max_bytes
        # The app's declared indexes by collection (declared_index_paths): on PostgreSQL an equality a declared
        # index serves is written without the GIN containment. Whether the index is built yet does not matter
        # to the results, only to their speed until it is.
        self.indexes = indexes or {}
        # Whether a mutation inside a caller's transaction gets its own savepoint. A caller that rolls back whole
        # on any error (services.routes' mutation) passes False: two statements fewer per call. A caller that
        # goes on after a failed mutation (an author test reading records_after) needs the savepoint.
        self.savepoint = savepoint

    def atomic(self) -> AbstractContextManager[Any]:
        return transaction.atomic(savepoint=self.savepoint)

    def _records(self, collection: str) -> QuerySet[Record]:
        return Record.objects.filter(storage_id=self.storage_id, collection=collection)

    # --- reads ------------------------------------------------------------------------------
    def get(self, collection: str, record_id: str) -> dict[str, Any] | None:
        # A lookup by the unique (storage, collection, record_id) index, as plain SQL: building it with
        # the ORM cost more than the rest of a typical step.
        opts = Record._meta
        with connection.cursor() as cursor:
            cursor.execute(
                _get_sql(),
                [opts.get_field("storage").get_db_prep_value(self.storage_id, connection), collection, record_id],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        return document(record_id, _json(row[0]))

    def _where_sql(self, collection: str, where: list[tuple[tuple[str, ...], str, Any]]) -> tuple[list[str], list[Any]]:
        """The filter as SQL conditions (all must hold) and their parameters: the one form `_filtered` gives the ORM
        and `find` its own statement. Written by hand: type-exact on both databases, with a data field as a literal
        expression (the form a declared index has: a key passed as a parameter never matches an index's
        expression)."""
        vendor = connection.vendor
        served = index_served_equalities(self.indexes.get(collection, ()), where) if vendor == "postgresql" else set()
        conditions: list[str] = []
        params: list[Any] = []
        for path, op, value in where:
            if op == "contains":
                condition = contains_sql(path, value, vendor)
            elif path == ("id",):
                condition = _id_sql(op, value)
            elif op in ("eq", "ne", "in"):
                condition = equality_sql(path, op, value, vendor, gin=path not in served)
            else:
                condition = comparison_sql(path, op, value, vendor)
            conditions.append(condition.sql)
            params += condition.params
        return conditions, params

    def _filtered(self, collection: str, where: list[tuple[tuple[str, ...], str, Any]]) -> QuerySet[Record]:
        qs = self._records(collection)
        conditions, params = self._where_sql(collection, where)
        if conditions:
            qs = qs.filter(RawSQL(" AND ".join(conditions), params, output_field=_BOOLEAN))
        return qs

    def find(
        self,
        collection: str,
        where: list[tuple[tuple[str, ...], str, Any]],
        order_by: list[tuple[tuple[str, ...], bool]],
        limit: int | None,
    ) -> list[dict[str, Any]]:
        parts = _from_start(_page_columns(order_by))
        if len(parts) == 1:  # one statement (always on PostgreSQL), written by hand: the ORM's took a tenth of a call
            return self._find_one_statement(collection, where, parts[0][1], limit)
        qs = self._filtered(collection, where)
        rows: list[tuple[Any, ...]] = []
        # On SQLite, an order by a data field: one statement for its present values and one for its missing.
        for condition, ordered in parts:
            found = (
                qs.filter(condition).order_by(*(column.order() for column in ordered)).values_list("record_id", "data")
            )
            rows.extend(found if limit is None else found[: limit - len(rows)])
            if limit is not None and len(rows) >= limit:
                break
        return [document(record_id, data) for record_id, data in rows]

    def _find_one_statement(
        self,
        collection: str,
        where: list[tuple[tuple[str, ...], str, Any]],
        columns: list[_Column],
        limit: int | None,
    ) -> list[dict[str, Any]]:
        """`find` as one statement: the collection's records under the filter, in the order of `columns`."""
        conditions, params = self._where_sql(collection, where)
        storage = Record._meta.get_field("storage").get_db_prep_value(self.storage_id, connection)
        sql = (
            f"SELECT record_id, data FROM {connection.ops.quote_name(Record._meta.db_table)} "
            f"WHERE {' AND '.join(['storage_id = %s', 'collection = %s', *conditions])} "
            f"ORDER BY {', '.join(column.order_sql() for column in columns)}"
        )
        if limit is not None:
            sql += " LIMIT %s"
        with connection.cursor() as cursor:
            cursor.execute(sql, [storage, collection, *params, *([limit] if limit is not None else [])])
            rows = cursor.fetchall()
        return [document(record_id, _json(data)) for record_id, data in rows]

    def find_page(
        self,
        collection: str,
        where: list[tuple[tuple[str, ...], str, Any]],
        order_by: list[tuple[tuple[str, ...], bool]],
        limit: int,
        after: list[Any] | None,
    ) -> tuple[list[dict[str, Any]], list[list[Any]], bool]:
        """Up to `limit` records in `find`'s order, strictly after the position `after` (keyset, not OFFSET):
        the records, each one's position (its sort values as the database compares them), and whether more
        follow. A position is only meaningful to this store, for the same collection and order."""
        columns = _page_columns(order_by)
        names = [f"_p{n}" for n in range(len(order_by))]
        qs = self._filtered(collection, where).annotate(
            **{
                name: ExpressionWrapper(column.expression, output_field=TextField())
                for name, column in zip(names, columns[: len(names)], strict=True)
            }
        )
        rows: list[tuple[Any, ...]] = []
        # One statement, or (after a position whose missing values come later; on SQLite, an order by a data field)
        # one per condition, in order.
        for condition, ordered in _from_start(columns) if after is None else _after(columns, after):
            found = qs.filter(condition).order_by(*(column.order() for column in ordered))
            rows += found.values_list("record_id", "data", "created_at", *names)[: limit + 1 - len(rows)]
            if len(rows) > limit:
                break
        more = len(rows) > limit
        rows = rows[:limit]
        positions = [[*row[3:], row[2].isoformat(), row[0]] for row in rows]
        return [document(row[0], row[1]) for row in rows], positions, more

    def count(self, collection: str, where: list[tuple[tuple[str, ...], str, Any]]) -> int:
        return self._filtered(collection, where).count()

    def sum(self, collection: str, path: tuple[str, ...], where: list[tuple[tuple[str, ...], str, Any]]) -> float:
        expression: Any = "data"
        for part in path[:-1]:
            expression = KeyTransform(part, expression)
        total = Coalesce(Sum(Cast(KeyTextTransform(path[-1], expression), FloatField())), Value(0.0))
        try:
            result = self._filtered(collection, where).aggregate(total=total)["total"]
        except DataError:
            raise OperationFailed(
                f"Cannot sum {'.'.join(path)} over {collection}: some records hold a value that is not a number.",
                details={"collection": collection, "field": ".".join(path)},
            ) from None
        return float(result)

    def aggregate(
        self,
        collection: str,
        where: list[tuple[tuple[str, ...], str, Any]],
        groups: list[Group],
        measures: list[Measure],
        order: RowOrder,
        limit: int | None,
    ) -> list[dict[str, Any]]:
        """One GROUP BY over the filtered records (the filter is find's, so the same indexes serve it); the
        records themselves never leave the database."""
        vendor = connection.vendor
        if vendor == "sqlite" and any(g.bucket for g in groups):
            connection.ensure_connection()
            connection.connection.create_function("charming_bucket", 3, sqlite_bucket, deterministic=True)
        inner, params = self._filtered(collection, where).order_by().values_list("data").query.sql_with_params()
        plan = _AggregatePlan(vendor, groups, measures)
        sql = f"SELECT {', '.join(plan.select)} FROM ({inner}) AS r{plan.join}"
        if groups:  # by position: an expression with a parameter would not match its twin in the select list
            sql += f" GROUP BY {', '.join(str(n + 1) for n in range(len(groups)))}"
        ordering = [*(plan.order(key, descending) for key, descending in order), *(plan.order(g.key) for g in groups)]
        if ordering:
            sql += f" ORDER BY {', '.join(ordering)}"
        if limit is not None:
            sql += " LIMIT %s"
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, [*plan.select_params, *params, *([limit] if limit is not None else [])])
                found = cursor.fetchall()
        except DataError:  # PostgreSQL: text shaped like a date that is not one (2026-02-30)
            raise plan.not_a_date(collection) from None
        return [plan.row(collection, raw) for raw in found]

    # --- writes -----------------------------------------------------------------------------
    def insert(self, collection: str, record_id: str | None, data: dict[str, Any]) -> dict[str, Any]:
        record_id = record_id if record_id is not None else str(uuid.uuid4())
        encoded = encoded_record(collection, record_id, data, self.max_bytes)
        opts = Record._meta
        now = opts.get_field("created_at").get_db_prep_value(timezone.now(), connection)
        storage = opts.get_field("storage").get_db_prep_value(self.storage_id, connection)
        try:
            with connection.cursor() as cursor:
                cursor.execute(_insert_sql(), [storage, collection, record_id, encoded, now, now])
        except IntegrityError:
            # No savepoint: the error ends the call and the whole transaction is rolled back.
            raise OperationFailed(
                f"A record {collection}/{record_id} already exists; use update or upsert to change it.",
                details={"collection": collection, "id": record_id},
            ) from None
        if self.changes is not None:
            self.changes.note(collection, record_id, None, data)
        return document(record_id, data)

    def _locked(self, collection: str, record_id: str) -> Record | None:
        return self._records(collection).select_for_update().filter(record_id=record_id).first()

    def _locked_data(self, collection: str, record_id: str) -> dict[str, Any] | None:
        """A record's data, its row locked until the call commits (by the unique index, as plain SQL like `get`)."""
        storage = Record._meta.get_field("storage").get_db_prep_value(self.storage_id, connection)
        with connection.cursor() as cursor:
            cursor.execute(_get_sql(locked=connection.vendor == "postgresql"), [storage, collection, record_id])
            row = cursor.fetchone()
        return None if row is None else _json(row[0])

    def update(self, collection: str, record_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        record = self._locked(collection, record_id)
        if record is None:
            raise missing(collection, record_id, "update")
        return self._merge(record, changes)

    def _merge(self, record: Record, changes: dict[str, Any]) -> dict[str, Any]:
        data = {**record.data, **changes}
        encoded_record(record.collection, record.record_id, data, self.max_bytes)
        Record.objects.filter(pk=record.pk).update(data=data, version=F("version") + 1, updated_at=timezone.now())
        if self.changes is not None:
            self.changes.note(record.collection, record.record_id, record.data, data)
        return document(record.record_id, data)

    def upsert(self, collection: str, record_id: str, changes: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        record = self._locked(collection, record_id)
        if record is not None:
            return self._merge(record, changes), False
        encoded_record(collection, record_id, changes, self.max_bytes)
        try:
            with transaction.atomic():  # a savepoint: a concurrent insert of the same id turns this into a merge
                Record.objects.create(
                    storage_id=self.storage_id, collection=collection, record_id=record_id, data=changes
                )
        except IntegrityError:
            record = self._locked(collection, record_id)
            if record is None:
                raise
            return self._merge(record, changes), False
        if self.changes is not None:
            self.changes.note(collection, record_id, None, changes)
        return document(record_id, changes), True

    def delete(self, collection: str, record_id: str) -> dict[str, Any]:
        record = self._locked(collection, record_id)
        if record is None:
            raise missing(collection, record_id, "delete")
        Record.objects.filter(pk=record.pk).delete()
        if self.changes is not None:
            self.changes.note(collection, record_id, record.data, None)
        return document(record_id, record.data)

    def increment(
        self, collection: str, record_id: str, key: str, by: int | float, *, reread: bool
    ) -> dict[str, Any] | None:
        """Add `by` to a top-level number field (absent or null counts as 0) in one UPDATE ... RETURNING
        (PostgreSQL; SQLite >= 3.35, which every supported Python bundles), returning the new record
        when `reread`. A result outside the 64-bit integer range (for an int) or not a finite double
        fails the call, which rolls the UPDATE back: CEL and JSON readers could not load it."""
        if not connection.features.can_return_columns_from_insert:
            raise OperationFailed("increment needs PostgreSQL or SQLite 3.35 or later (UPDATE ... RETURNING).")
        # The change log needs the record before and after. After: the UPDATE returns it. Before: on PostgreSQL the
        # same statement reads and locks it (a CTE); SQLite's RETURNING sees only the new row, so a read by the unique
        # index goes first (in-process, and no other writer can come between: SQLite has one at a time).
        noting = self.changes is not None
        before = None
        if noting and connection.vendor != "postgresql":
            before = self._locked_data(collection, record_id)
        try:
            row = self._increment_returning(collection, record_id, key, by, reread=reread or noting, old=noting)
        except IntegrityError:  # SQLite: an infinite sum is not valid JSON (the column's CHECK refuses it)
            row = (None, math.inf)
        if row is not None and len(row) > 2:
            row, before = row[:2], row[2]
        if row is None:
            if not self._records(collection).filter(record_id=record_id).exists():
                raise missing(collection, record_id, "increment")
            raise OperationFailed(
                f"Cannot increment {collection}/{record_id}.{key}: it holds a value that is not a number.",
                details={"collection": collection, "id": record_id, "field": key},
            )
        data, total = row
        if _out_of_range(total, by):
            raise OperationFailed(
                f"Cannot increment {collection}/{record_id}.{key} by {by!r}: the result is outside the range "
                "of a 64-bit integer (for ints) or of a finite double; nothing was changed.",
                details={"collection": collection, "id": record_id, "field": key},
            )
        if self.changes is not None and before is not None:
            self.changes.note(collection, record_id, before, data if isinstance(data, dict) else {})
        if not reread:
            return None
        return document(record_id, data if isinstance(data, dict) else {})

    def _increment_returning(
        self, collection: str, record_id: str, key: str, by: int | float, *, reread: bool, old: bool = False
    ) -> tuple[Any, ...] | None:
        """One UPDATE ... RETURNING: (the new data when `reread`, the new field value, and on PostgreSQL with `old`
        the data before, read and locked by the same statement); None when no row matched."""
        opts = Record._meta
        quote = connection.ops.quote_name
        if connection.vendor == "postgresql":
            # numeric keeps the scale: 10.0 + 2 stays 12.0 (a double for CEL), 10 + 2 stays 12 (an int).
            new_value = "jsonb_set(data, %s::text[], to_jsonb(COALESCE((data ->> %s)::numeric, 0) + %s::numeric), true)"
            value_params: list[Any] = [[key], key, Decimal(repr(by)) if isinstance(by, float) else by]
            field_type, type_params = "jsonb_typeof(data -> %s)", [key]
            new_field, field_params = "(data ->> %s)", [key]
        else:
            path = "$." + json.dumps(key)
            new_value = "json_set(data, %s, COALESCE(json_extract(data, %s), 0) + %s)"
            value_params = [path, path, by]
            field_type, type_params = "json_type(data, %s)", [path]
            new_field, field_params = "json_extract(data, %s)", [path]
        updated_at = opts.get_field("updated_at").get_db_prep_value(timezone.now(), connection)
        storage = opts.get_field("storage").get_db_prep_value(self.storage_id, connection)
        is_number = f"({field_type} IS NULL OR {field_type} IN ('number', 'integer', 'real', 'null'))"
        table = quote(opts.db_table)
        if old and connection.vendor == "postgresql":
            # The row read FOR UPDATE by the CTE is the version the UPDATE changes (a concurrent writer's is waited
            # for, and then read), so its data is exactly the record before this increment.
            sql = plan_stable(  # by the unique (storage, collection, record_id) index
                f"WITH old AS (SELECT id AS old_id, data AS old_data FROM {table} "
                "WHERE storage_id = %s AND collection = %s AND record_id = %s FOR UPDATE) "
                f"UPDATE {table} SET data = {new_value}, version = version + 1, updated_at = %s FROM old "
                f"WHERE id = old.old_id AND {is_number} RETURNING data, {new_field}, old.old_data"
            )
            params = [storage, collection, record_id, *value_params, updated_at, *type_params, *type_params]
            params += field_params
        else:
            sql = plan_stable(  # by the unique (storage, collection, record_id) index
                f"UPDATE {table} SET data = {new_value}, version = version + 1, updated_at = %s "
                f"WHERE storage_id = %s AND collection = %s AND record_id = %s AND {is_number} "
                f"RETURNING {'data' if reread else 'NULL'}, {new_field}"
            )
            params = [
                *value_params,
                updated_at,
                storage,
                collection,
                record_id,
                *type_params,
                *type_params,
                *field_params,
            ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        if len(row) > 2:
            return _json(row[0]), row[1], _json(row[2])
        return (_json(row[0]) if reread else None), row[1]

    def record_count(self) -> int:
        return Record.objects.filter(storage_id=self.storage_id).count()

    def records_changed(self, delta: int) -> int:
        # Never below 0: records written around the engine (a bulk load, a test's fixtures) are not counted.
        with connection.cursor() as cursor:
            cursor.execute(
                _records_changed_sql(), [delta, Storage._meta.pk.get_db_prep_value(self.storage_id, connection)]
            )
            row = cursor.fetchone()
        return int(row[0]) if row is not None else 0


# The engine's statements by key, written once per process (declared plan-stable: apps_registry/plans.py).
@functools.cache
def _get_sql(*, locked: bool = False) -> str:
    # By the unique (storage, collection, record_id) index.
    table = connection.ops.quote_name(Record._meta.db_table)
    lock = " FOR UPDATE" if locked else ""
    return plan_stable(f"SELECT data FROM {table} WHERE storage_id = %s AND collection = %s AND record_id = %s{lock}")


@functools.cache
def _insert_sql() -> str:
    return plan_stable(
        f"INSERT INTO {connection.ops.quote_name(Record._meta.db_table)} "
        "(storage_id, collection, record_id, data, version, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, 1, %s, %s)"
    )


@functools.cache
def _records_changed_sql() -> str:
    larger = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    return plan_stable(
        f"UPDATE {connection.ops.quote_name(Storage._meta.db_table)} "
        f"SET records_held = {larger}(records_held + %s, 0), records_changes = records_changes + 1 "
        "WHERE id = %s RETURNING records_held"
    )


def _out_of_range(total: Any, by: int | float) -> bool:
    """Whether an increment's result (as the database returned it: a number, or numeric text on
    PostgreSQL) cannot be read back as a CEL int (64-bit) or a finite double."""
    if isinstance(total, str):
        try:
            number = Decimal(total)
        except ArithmeticError:
            return True
        if not number.is_finite():
            return True
        if number == number.to_integral_value() and "." not in total and "e" not in total.lower():
            return not INT64_MIN <= int(number) <= INT64_MAX
        return not math.isfinite(float(number))
    if isinstance(total, bool) or total is None:
        return False
    if isinstance(total, int):
        return not INT64_MIN <= total <= INT64_MAX
    if isinstance(total, float):
        # SQLite turns an overflowing integer sum into a double: refuse that too.
        return not math.isfinite(total) or (isinstance(by, int) and abs(total) > INT64_MAX)
    return False
