"""Views of a route's result for the app page: every JSON shape drawn for a reader, never as raw JSON.

A list of objects is a table (its nested lists as sub-tables a row opens, its nested objects as labelled
fields), an object is labelled fields (its lists as tables under their label), a single value is a figure,
a list of values a list. Numbers, money (`x-charming-unit`), dates (`format: date`, `date-time`, ISO text)
and booleans are formatted; ids are left out of tables unless the author's `columns` ask for them; long
tables are paged. The raw JSON is only ever behind the person's own "Show JSON". docs/pages.md, "Views".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

from django.utils import dateformat

from apps_registry.pages.words import humanize
from apps_registry.routes.hints import UNIT

ROWS_PER_PAGE = 25  # a table's rows on one page of the app page
NESTED_ROWS = 50  # rows of a sub-table, then "and N more" (the JSON has them all)
INLINE_VALUES = 8  # a list of values inside a cell is written out inline up to this many
MAX_NESTING = 4  # tables within fields within tables ...: deeper values are summarized
JSON_CHARS = 100_000  # what "Show JSON" shows of a value
_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_CURRENCY = re.compile(r"^[A-Z]{3}$")
CURRENCY_SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£", "JPY": "¥", "CNY": "¥", "INR": "₹", "KRW": "₩", "ILS": "₪"}
ZERO_DECIMAL_CURRENCIES = frozenset({"JPY", "KRW", "ISK", "CLP", "VND"})
MINUS = "−"


@dataclass(frozen=True)
class Cell:
    kind: str  # text, number, money, date, datetime, month, bool, id, empty, nested, more
    text: str  # what the reader sees
    value: Any = None
    label: str = ""  # the column's label, for a table cell (phones show it beside the value)
    iso: str = ""  # machine-readable value of a date or time (<time datetime>), or an id's full text
    nested: ResultView | None = None  # a list or an object inside a cell or a field


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    numeric: bool


@dataclass
class Row:
    cells: list[Cell]
    id: str = ""  # the row's `id` (row actions send it); never a column unless asked
    label: str = ""  # a short name of the row for buttons' accessible names ("Complete todo: Buy milk")
    data: Mapping[str, Any] = field(default_factory=dict)
    actions: list[Any] = field(default_factory=list)  # the page's forms for the row actions (app_views.RowForm)


@dataclass
class ResultView:
    """How a value is drawn: a table, labelled fields, a figure, a list, a chart, or nothing."""

    shape: str  # table, fields, figure, list, chart, empty
    columns: list[Column] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    items: list[tuple[str, Cell]] = field(default_factory=list)  # fields: (label, cell)
    figure: Cell | None = None
    values: list[Cell] = field(default_factory=list)  # list of primitives
    chart: Any = None  # apps_registry.pages.charts.Chart, with `table` beside it for screen readers
    table: ResultView | None = None
    total: int = 0  # rows (or values) in the whole value
    page: int = 1
    pages: int = 1
    more: int = 0  # rows not drawn (a sub-table's rest; the JSON holds them)
    json: str = ""  # the value as JSON, behind the page's "Show JSON" (top-level views only)

    @property
    def has_row_actions(self) -> bool:
        return any(row.actions for row in self.rows)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def type_of(schema: Mapping[str, Any]) -> str | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        types = [t for t in declared if t != "null"]
        if len(types) == 1 and isinstance(types[0], str):
            return types[0]
    return None


def is_id_key(key: str) -> bool:
    """Keys a table leaves out unless asked: a record's `id`, and references to other records (`todo_id`)."""
    return key == "id" or key.endswith("_id")


def json_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False)
    return text if len(text) <= JSON_CHARS else text[:JSON_CHARS] + "\n…"


def result_view(
    value: Any,
    output_schema: Any,
    *,
    view: str = "",
    columns: tuple[tuple[str, str], ...] = (),
    chart: Mapping[str, Any] | None = None,
    page: int = 1,
) -> ResultView:
    """The view of `value`, shaped by the route's output schema (or by the value itself without one).

    `view`, `columns` and `chart` are the author's hints (apps_registry.pages.hints); a `view` that does not
    fit the value (a figure of a list) is ignored. `page` is the page of a long table to draw.
    """
    drawn = _view(value, _mapping(output_schema), view=view, columns=columns, chart=chart, page=page, depth=0)
    drawn.json = json_text(value)
    return drawn


def _view(
    value: Any,
    schema: Mapping[str, Any],
    *,
    view: str = "",
    columns: tuple[tuple[str, str], ...] = (),
    chart: Mapping[str, Any] | None = None,
    page: int = 0,
    depth: int,
) -> ResultView:
    if view == "chart" and chart:
        from apps_registry.pages.charts import chart_view

        drawn = chart_view(value, schema, chart)
        if drawn is not None:
            return drawn
    if isinstance(value, list):
        items_schema = _mapping(schema.get("items"))
        if (value and all(isinstance(row, Mapping) for row in value)) or type_of(items_schema) == "object":
            return table_view(value, items_schema, columns, page=page, depth=depth)
        return _list(value, items_schema, depth=depth, page=page)
    if isinstance(value, Mapping):
        props = _mapping(schema.get("properties"))
        if view == "table":
            return table_view([value], {"properties": props}, columns, depth=depth)
        if view == "figure" and len(value) == 1:
            ((key, only),) = value.items()
            return ResultView(
                shape="figure",
                figure=replace(cell(only, props.get(key), depth=depth), label=_label(key, props.get(key))),
            )
        return _fields(value, props, depth=depth)
    if value is None:
        return ResultView(shape="empty")
    return ResultView(shape="figure", figure=cell(value, schema, depth=depth))


def _fields(value: Mapping[str, Any], props: Mapping[str, Any], *, depth: int) -> ResultView:
    keys = [k for k in list(props) + [k for k in value if k not in props] if k in value]
    shown = [k for k in keys if not is_id_key(k)] or keys
    return ResultView(
        shape="fields",
        items=[(_label(k, props.get(k)), cell(value.get(k), props.get(k), depth=depth + 1)) for k in shown],
    )


def _list(values: list[Any], items_schema: Mapping[str, Any], *, depth: int, page: int) -> ResultView:
    limit = ROWS_PER_PAGE if page else NESTED_ROWS
    start, pages, number = _page_slice(len(values), page, limit)
    shown = values[start : start + limit]
    return ResultView(
        shape="list",
        values=[cell(v, items_schema, depth=depth + 1) for v in shown],
        total=len(values),
        page=number,
        pages=pages,
        more=0 if page else max(0, len(values) - limit),
    )


def _label(key: str, schema: Any) -> str:
    if isinstance(schema, Mapping) and schema.get("title"):
        return str(schema["title"])
    return humanize(key)


def _page_slice(total: int, page: int, limit: int) -> tuple[int, int, int]:
    """(first index, pages, page number) of page `page` (0: not paged, the first `limit` rows)."""
    pages = max(1, -(-total // limit))
    number = min(max(page, 1), pages)
    return (number - 1) * limit, pages, number


def row_label(row: Mapping[str, Any]) -> str:
    """A short name of a row for a person: its title, name or label, else its first short text."""
    for key in ("title", "name", "label", "description", "category"):
        if isinstance(row.get(key), str) and row[key].strip():
            return row[key].strip()[:60]
    for key, value in row.items():
        if not is_id_key(key) and isinstance(value, str) and value.strip() and not _UUID.match(value):
            return value.strip()[:60]
    return ""


def table_view(
    rows: list[Any],
    items_schema: Mapping[str, Any],
    columns: tuple[tuple[str, str], ...] = (),
    *,
    page: int = 0,
    depth: int = 0,
) -> ResultView:
    """A table of `rows` (objects): a column per declared property (ids left out unless `columns` name them)."""
    props = _mapping(items_schema.get("properties"))
    keys: list[str] = list(props)
    for name in items_schema.get("required") or []:
        if isinstance(name, str) and name not in keys:
            keys.append(name)
    if not props:  # no declared columns: the keys the rows have, in first-seen order
        for row in rows:
            if isinstance(row, Mapping):
                keys.extend(k for k in row if k not in keys)
    hinted = dict(columns)
    # the author's choice and order of columns; else every column but the ids
    keys = [key for key, _label_text in columns] if columns else [k for k in keys if not is_id_key(k)] or keys
    labels = [hinted.get(k) or _label(k, props.get(k)) for k in keys]
    limit = ROWS_PER_PAGE if page else NESTED_ROWS
    start, pages, number = _page_slice(len(rows), page, limit)
    shown = rows[start : start + limit]
    drawn = []
    for row in shown:
        data = _mapping(row)
        cells = [
            replace(cell(data.get(k), props.get(k), depth=depth + 1), label=label)
            for k, label in zip(keys, labels, strict=True)
        ]
        row_id = data.get("id")
        drawn.append(
            Row(cells=cells, id=str(row_id) if isinstance(row_id, (str, int)) else "", label=row_label(data), data=data)
        )
    numeric = [
        type_of(_mapping(props.get(k))) in ("number", "integer")
        or (
            bool(drawn)
            and all(r.cells[i].kind in ("number", "money", "empty") for r in drawn)
            and any(r.cells[i].kind in ("number", "money") for r in drawn)
        )
        for i, k in enumerate(keys)
    ]
    heads = [Column(key=k, label=lb, numeric=n) for k, lb, n in zip(keys, labels, numeric, strict=True)]
    return ResultView(
        shape="table",
        columns=heads,
        rows=drawn,
        total=len(rows),
        page=number,
        pages=pages,
        more=0 if page else max(0, len(rows) - limit),
    )


def number_text(
    value: int | float, schema: Mapping[str, Any] | None = None, *, compact: bool = False
) -> tuple[str, str]:
    """(kind, text) of a number: `number` with thousands separators, or `money` in its currency, or with its unit.
    `compact` (a chart's axis) drops the cents of whole amounts and writes thousands as k."""
    unit = schema.get(UNIT) if isinstance(schema, Mapping) else None
    unit = unit.strip() if isinstance(unit, str) else ""
    sign = MINUS if value < 0 else ""
    magnitude: int | float = abs(value)
    if compact and magnitude >= 10_000:
        kind, text = number_text(magnitude / 1000, {}, compact=True)
        return number_text_with_unit(sign + text + "k", unit)
    if unit and _CURRENCY.match(unit):
        digits = 0 if unit in ZERO_DECIMAL_CURRENCIES or (compact and float(magnitude).is_integer()) else 2
        amount = f"{magnitude:,.{digits}f}"
        symbol = CURRENCY_SYMBOLS.get(unit)
        return "money", f"{sign}{symbol}{amount}" if symbol else f"{sign}{amount} {unit}"
    if isinstance(magnitude, int):
        text = f"{magnitude:,}"
    elif magnitude.is_integer():
        text = f"{magnitude:,.0f}"
    elif magnitude >= 0.01:
        text = f"{magnitude:,.2f}"
    else:
        text = f"{magnitude:g}"
    return number_text_with_unit(sign + text, unit)


def number_text_with_unit(text: str, unit: str) -> tuple[str, str]:
    if not unit:
        return "number", text
    if _CURRENCY.match(unit):
        symbol = CURRENCY_SYMBOLS.get(unit)
        negative = text.startswith(MINUS)
        bare = text.removeprefix(MINUS)
        return "money", (MINUS if negative else "") + (f"{symbol}{bare}" if symbol else f"{bare} {unit}")
    return "number", f"{text}{unit}" if unit == "%" else f"{text} {unit}"


def cell(value: Any, schema: Any = None, *, depth: int = 0) -> Cell:
    """One value as the page shows it: numbers and money formatted, dates as dates, booleans as ticks,
    lists and objects as nested views (summarized past MAX_NESTING), the rest as text."""
    schema = schema if isinstance(schema, Mapping) else {}
    if value is None:
        return Cell(kind="empty", text="—")
    if isinstance(value, bool):
        return Cell(kind="bool", text="Yes" if value else "No", value=value)
    if isinstance(value, (int, float)):
        kind, text = number_text(value, schema)
        return Cell(kind=kind, text=text, value=value)
    if isinstance(value, str):
        return _text_cell(value, schema)
    size = len(value) if isinstance(value, (list, Mapping)) else 0
    if depth >= MAX_NESTING or not isinstance(value, (list, Mapping)):
        noun = "item" if isinstance(value, list) else "field"
        return Cell(kind="more", text=f"{size} {noun}{'s' if size != 1 else ''} (see Show JSON)")
    if isinstance(value, list):
        items_schema = _mapping(schema.get("items"))
        if not value:
            return Cell(kind="empty", text="none")
        if not any(isinstance(v, (list, Mapping)) for v in value) and len(value) <= INLINE_VALUES:
            return Cell(kind="text", text=", ".join(cell(v, items_schema).text for v in value), value=value)
        nested = _view(value, schema, depth=depth)
        return Cell(kind="nested", text=f"{len(value)} item{'s' if len(value) != 1 else ''}", nested=nested)
    nested = _fields(value, _mapping(schema.get("properties")), depth=depth)
    return Cell(kind="nested", text=f"{len(nested.items)} field{'s' if len(nested.items) != 1 else ''}", nested=nested)


def _text_cell(value: str, schema: Mapping[str, Any]) -> Cell:
    fmt = schema.get("format")
    if fmt == "date" or (fmt is None and _ISO_DATE.match(value)):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            pass
        else:
            return Cell(kind="date", text=dateformat.format(day, "j M Y"), value=day, iso=value)
    if fmt == "date-time" or (fmt is None and _ISO_DATETIME.match(value)):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return Cell(kind="datetime", text=dateformat.format(moment, "j M Y, H:i"), value=moment, iso=value)
    if fmt is None and _ISO_MONTH.match(value):
        first = date.fromisoformat(value + "-01")
        return Cell(kind="month", text=dateformat.format(first, "M Y"), value=first, iso=value)
    if _UUID.match(value):
        return Cell(kind="id", text=value[:8] + "…", value=value, iso=value)
    return Cell(kind="text", text=value)
