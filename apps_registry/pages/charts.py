"""Charts of a query's rows, drawn on the server as SVG (templates/apps/_chart.html): no chart library and
no script on the page. A route asks for one with `"view": "chart", "chart": {"type": "bar" | "line", "x":
key, "y": key or [keys]}` (checked at save time by apps_registry.routes.hints); `aggregate` rows are the
natural input. The SVG is an image labelled by its caption, and the same numbers are a table beside it
for screen readers and for anyone who wants the figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import dateformat

from apps_registry.pages.results import ResultView, cell, number_text, table_view
from apps_registry.pages.words import humanize

WIDTH, HEIGHT = 420, 240  # the viewBox; the picture scales to the card's width
LEFT, RIGHT, TOP, BOTTOM = 36, 12, 30, 44  # the least room for the y axis' figures; the x axis' labels
MAX_POINTS = 60  # rows drawn; the table beside the chart has them all
MAX_X_LABELS = 8
LABEL_CHARS = 10
CHAR_WIDTH = 7.5  # an axis label character's width in the viewBox's units, about


@dataclass(frozen=True)
class Tick:
    position: float
    text: str


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str  # "Food: €120.00", a tooltip


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str


@dataclass
class Series:
    label: str
    index: int  # the colour: CSS classes series-0 ... series-5
    bars: list[Bar] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def polyline(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


@dataclass
class Chart:
    kind: str  # bar or line
    caption: str  # "Total by month (bar chart)"
    x_label: str
    y_label: str
    series: list[Series]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    baseline: float  # y of the value 0
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM
    note: str = ""  # "The first 60 of 75 rows are drawn."

    @property
    def x_label_y(self) -> int:
        return self.height - 6

    @property
    def y_label_y(self) -> int:
        return self.top - 14

    @property
    def middle_x(self) -> float:
        return (self.left + self.right) / 2


def _rows(value: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(value, Mapping):  # an object holding one list of rows (a paged find's page)
        lists = [v for v in value.values() if isinstance(v, list)]
        value = lists[0] if len(lists) == 1 else None
    if isinstance(value, list) and all(isinstance(row, Mapping) for row in value):
        return value
    return None


def _items_schema(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    from apps_registry.routes.hints import rows_schema

    found = rows_schema(schema)
    return found if isinstance(found, Mapping) else {}


def nice_step(span: float, ticks: int = 4) -> float:
    """A round step (1, 2 or 5 times a power of ten) dividing `span` into about `ticks` parts."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power * 1.25:  # a little over `ticks` parts is fine: 0-1000 by 200, not by 500
            return factor * power
    return 10 * power


def _axis_text(value: Any) -> str:
    """A value as an axis label: a day without its year ("3 Nov"), a month as "Nov 26", else as the page shows it."""
    if value.kind in ("date", "datetime"):
        return dateformat.format(value.value, "j M")
    if value.kind == "month":
        return dateformat.format(value.value, "M y")
    return str(value.text)


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def chart_view(value: Any, schema: Mapping[str, Any], spec: Mapping[str, Any]) -> ResultView | None:
    """The chart of `value`'s rows, with its table; None when the value has no rows to draw (the page then
    draws it as it would without the hint)."""
    rows = _rows(value)
    x_key, y_spec, kind = spec.get("x"), spec.get("y"), spec.get("type")
    y_keys = [y_spec] if isinstance(y_spec, str) else list(y_spec) if isinstance(y_spec, list) else []
    if rows is None or not isinstance(x_key, str) or not y_keys or kind not in ("bar", "line"):
        return None
    items = _items_schema(schema)
    props = items.get("properties") if isinstance(items.get("properties"), Mapping) else {}
    assert isinstance(props, Mapping)
    table = table_view(rows, items, ((x_key, ""), *((k, "") for k in y_keys)))
    drawn = rows[:MAX_POINTS]
    labels = {k: str(props.get(k, {}).get("title") or humanize(k)) for k in [x_key, *y_keys]}
    numbers = [
        float(row[k])
        for row in drawn
        for k in y_keys
        if isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)
    ]
    low, high = min([0.0, *numbers]), max([0.0, *numbers])
    if high == low:
        high = low + 1
    step = nice_step(high - low)
    low, high = math.floor(low / step) * step, math.ceil(high / step) * step
    chart = Chart(
        kind=str(kind),
        caption=f"{' and '.join(labels[k] for k in y_keys)} by {labels[x_key].lower()}",
        x_label=labels[x_key],
        y_label=labels[y_keys[0]] if len(y_keys) == 1 else "",
        series=[],
        x_ticks=[],
        y_ticks=[],
        baseline=0.0,
    )

    def y_of(number: float) -> float:
        return chart.bottom - (number - low) / (high - low) * (chart.bottom - chart.top)

    y_schema = props.get(y_keys[0]) if isinstance(props.get(y_keys[0]), Mapping) else {}
    ticks = round((high - low) / step)
    chart.y_ticks = [
        Tick(y_of(low + i * step), number_text(_tidy(low + i * step), y_schema, compact=True)[1])
        for i in range(ticks + 1)
    ]
    chart.baseline = y_of(0.0)
    # room for the widest figure of the y axis (about 8 units a character at its font size)
    chart.left = max(LEFT, 12 + 8 * max((len(tick.text) for tick in chart.y_ticks), default=0))
    band = (chart.right - chart.left) / max(1, len(drawn))
    x_cells = [cell(row.get(x_key), props.get(x_key)) for row in drawn]
    x_texts = [c.text for c in x_cells]
    labels_x = [_short(_axis_text(c)) for c in x_cells]
    # As many labels as fit side by side (about 7 units a character at the axis' font size), evenly spread.
    widest = max((len(text) for text in labels_x), default=1) * CHAR_WIDTH + 10
    fit = max(1, min(MAX_X_LABELS, int((chart.right - chart.left) // widest)))
    every = max(1, math.ceil(len(drawn) / fit))
    chart.x_ticks = [Tick(chart.left + band * (i + 0.5), text) for i, text in enumerate(labels_x) if i % every == 0]
    for index, key in enumerate(y_keys):
        series = Series(label=labels[key], index=index)
        key_schema = props.get(key) if isinstance(props.get(key), Mapping) else {}
        bar_width = band * 0.8 / len(y_keys)
        for i, row in enumerate(drawn):
            number = row.get(key)
            if not isinstance(number, (int, float)) or isinstance(number, bool):
                continue
            title = f"{x_texts[i]}: {cell(number, key_schema).text}"
            if kind == "bar":
                top, bottom = sorted((y_of(float(number)), chart.baseline))
                x = chart.left + band * i + band * 0.1 + bar_width * index
                series.bars.append(Bar(x=x, y=top, width=bar_width, height=max(bottom - top, 0.5), title=title))
            else:
                series.points.append(Point(x=chart.left + band * (i + 0.5), y=y_of(float(number)), title=title))
        chart.series.append(series)
    chart.caption += " (bar chart)" if kind == "bar" else " (line chart)"
    if len(rows) > len(drawn):
        chart.note = f"The first {len(drawn)} of {len(rows)} rows are drawn; the table has them all."
    return ResultView(shape="chart", chart=chart, table=table, total=len(rows))


def _tidy(number: float) -> int | float:
    rounded = round(number, 10)
    return int(rounded) if float(rounded).is_integer() else rounded
