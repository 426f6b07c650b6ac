"""Limits that show before data does: a route's worst case at its declared limits, found when it is saved.

A route that works on a handful of test records can still fail once an app holds more: its finds return more
records, its comprehensions iterate over them (the CEL work estimate grows with them, routes/budget.py), its
values hold more items, a for_each runs more passes. This module runs the route's steps on paper with every
find returning N records of a typical size, using the run-time rules themselves (`CallBudget.estimate` and the
limits), and finds the smallest N at which a call would fail. When N is within what an app may hold, the save
gets an advisory naming the route, the step, the limit and N, so the author fixes it before a user meets it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from apps_registry.routes.budget import CallBudget, Size
from apps_registry.routes.limits import Limits
from apps_registry.routes.steps import Step, walk_steps

# What the estimate assumes a record holds when nothing says otherwise: about a dozen fields of short text.
TYPICAL_RECORD = Size(items=25, chars=400, longest=12)
TYPICAL_PARAMS = Size(items=12, chars=300, longest=6)
_CONTEXT = {
    "params": TYPICAL_PARAMS,
    "caller": Size(items=5, chars=50, longest=2),
    "app": Size(items=3, chars=40, longest=1),
    "now": Size(items=1, chars=0, longest=0),
}
_INT = re.compile(r"\b\d{1,9}\b")
_PARAM = re.compile(r"\bparams\.([A-Za-z_]\w*)")
_NAME = re.compile(r"(?<![.\w])([A-Za-z_]\w*)")
_KEYWORDS = frozenset({"has", "params", "true", "false", "null", "int", "size", "math", "min", "max"})


@dataclass(frozen=True)
class Risk:
    """The first limit a route's call would pass once its finds return `records` records each."""

    limit: str  # a Limits field
    at: str  # where in the route: "steps[2].let"
    records: int
    collections: tuple[str, ...]


def limit_bound(source: str, input_schema: dict[str, Any]) -> int | None:
    """The largest value a find's `limit` expression can take, when its text tells: the larger of its integer
    literals and of the `maximum` the input schema gives each param it reads (`has(params.limit) ?
    params.limit : 20` with `"limit": {"maximum": 100}` is 100). None when it reads anything unbounded."""
    properties = input_schema.get("properties", {}) if isinstance(input_schema, dict) else {}
    bounds = [int(n) for n in _INT.findall(source)]
    for name in _PARAM.findall(source):
        spec = properties.get(name) if isinstance(properties, dict) else None
        maximum = spec.get("maximum") if isinstance(spec, dict) else None
        if not isinstance(maximum, int) or isinstance(maximum, bool):
            return None
        bounds.append(maximum)
    stripped = _PARAM.sub("", source)
    if any(name not in _KEYWORDS for name in _NAME.findall(re.sub(r"'[^']*'|\"[^\"]*\"", "", stripped))):
        return None  # a bound name or another variable: no bound the text shows
    return max(bounds) if bounds else None


def _records(n: int) -> Size:
    return Size(items=n * TYPICAL_RECORD.items + 1, chars=n * TYPICAL_RECORD.chars, longest=n)


class _Trial:
    """One pass over a route's steps on paper, every find returning `n` records."""

    def __init__(self, route: str, limits: Limits, n: int, input_schema: dict[str, Any]) -> None:
        self.limits, self.n, self.input_schema = limits, n, input_schema
        self.budget = CallBudget(limits=limits, route=route, sizes=dict(_CONTEXT))
        self.read = 0
        self.written = 0

    def run(self, steps: list[Step], passes: int = 1) -> tuple[str, str] | None:
        limits = self.limits
        for step in steps:
            for expr in [*([step.when] if step.when else []), *step.exprs.values(), *(c.expr for c in step.where)]:
                estimate, _span = self.budget.estimate(expr)
                self.budget.work += estimate * passes
                if self.budget.work > limits.cel_work:
                    return "cel_work", expr.where
            size, rows = self._result(step)
            self.read += rows * passes
            if self.read > limits.records_read_per_call:
                return "records_read_per_call", step.at
            if step.kind.writes:
                self.written += passes
                if self.written > limits.records_written_per_call:
                    return "records_written_per_call", step.at
            if step.steps:  # a for_each: its passes, each over one item
                items = self._longest(step)
                if items > limits.for_each_items:
                    return "for_each_items", f"{step.at}.for_each.in"
                if step.item_name:
                    self.budget.sizes[step.item_name] = TYPICAL_RECORD
                found = self.run(step.steps, passes * max(items, 1))
                if found is not None:
                    return found
                size = Size(items=items + 1, chars=0, longest=items)
            if size.items > limits.value_items:
                return "value_items", step.at
            if step.as_name:
                self.budget.sizes[step.as_name] = size
        return None

    def _longest(self, step: Step) -> int:
        """The longest list the step's expressions read (a for_each's `in`)."""
        names = {name for expr in step.exprs.values() for name in expr.names}
        return max((self.budget.sizes.get(name, TYPICAL_RECORD).longest for name in names), default=0)

    def _cap(self, step: Step) -> int | None:
        expr = step.exprs.get("limit")
        return None if expr is None else limit_bound(expr.source, self.input_schema)

    def _result(self, step: Step) -> tuple[Size, int]:
        """The size of what the step binds, and the records it reads."""
        op = step.op
        if op == "find":
            cap = self._cap(step)
            rows = self.n if cap is None else min(cap, self.n)
            return _records(rows), rows
        if op == "aggregate":
            cap = self._cap(step)
            rows = 1 if not step.groups else self.n if cap is None else min(cap, self.n)
            width = 1 + 2 * (len(step.groups) + len(step.measures))
            return Size(items=rows * width + 1, chars=rows * 20 * len(step.groups), longest=rows), rows
        if op in ("get", "insert", "update", "upsert", "delete"):
            return TYPICAL_RECORD, 1 if op == "get" else 0
        if op in ("count", "sum", "increment"):
            return Size(items=1, chars=0, longest=0), 0
        # let and the like: at most as large as what it reads.
        names = {name for expr in step.exprs.values() for name in expr.names}
        sizes = [self.budget.sizes.get(name, TYPICAL_RECORD) for name in names]
        if not sizes:
            return Size(items=1, chars=0, longest=0), 0
        return max(sizes, key=lambda size: size.items), 0


def route_risk(route: str, steps: list[Step], limits: Limits, input_schema: dict[str, Any]) -> Risk | None:
    """The smallest number of records each find may return at which a call of the route fails, up to what an
    app may hold (None when it never fails on paper, or has no find or aggregate)."""
    collections = tuple(
        sorted({s.collection for s in walk_steps(steps) if s.op in ("find", "aggregate") and s.collection is not None})
    )
    if not collections:
        return None
    ceiling = limits.records_per_app
    if _Trial(route, limits, ceiling, input_schema).run(steps) is None:
        return None
    low, high = 0, ceiling  # fails at high, passes at low
    if _Trial(route, limits, low, input_schema).run(steps) is not None:
        return None  # fails with no records at all: the route's tests show that, not this estimate
    while high - low > 1:
        middle = (low + high) // 2
        if _Trial(route, limits, middle, input_schema).run(steps) is None:
            low = middle
        else:
            high = middle
    found = _Trial(route, limits, high, input_schema).run(steps)
    assert found is not None
    limit, at = found
    return Risk(limit=limit, at=at, records=high, collections=collections)
