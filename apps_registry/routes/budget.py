"""A call's budget: how big a value bound by a step (or returned) may be, how much CEL work the call
may do (estimated before each evaluation from the sizes of its inputs), and which expressions go to
a worker process (routes/celworker.py) to run under the call's CEL deadline.

CEL has no cost limit and its evaluator holds the GIL, so the engine bounds what an expression can
be handed instead: every value a step binds is measured (items, characters, longest list or map),
and an expression using comprehensions is refused before it runs when
`(largest list or map it reads, or its literal items) * (1 + its '+' operators)` raised to
`(comprehension nesting + 1)` would take the call past its budget. `map` and `filter` rebuild their
result on each iteration, so one comprehension over n items costs about n**2 and two nested about
n**3: the estimate follows that.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apps_registry.exceptions import OperationFailed, RateLimited
from apps_registry.routes import celworker
from apps_registry.routes.limits import Limits, limit_details

if TYPE_CHECKING:
    from apps_registry.routes.expressions import Expr

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Size:
    items: int  # every scalar, list and map counts 1, and each map key 1
    chars: int  # characters of its strings and bytes, map keys included
    longest: int  # the longest list or map anywhere in it (0 if none)


def measure(value: Any, *, max_items: int, max_chars: int, max_depth: int) -> Size | str:
    """The size of `value`, or the name of the first limit it exceeds ("value_items", "value_chars",
    "value_nesting") as soon as it does: the walk stops there (and never recurses), so measuring a huge
    or deep value costs no more than measuring one at the limit."""
    items = chars = longest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        items += 1
        if isinstance(current, (str, bytes)):
            chars += len(current)
        elif isinstance(current, dict):
            longest = max(longest, len(current))
            items += len(current)
            for key in current:
                if isinstance(key, (str, bytes)):
                    chars += len(key)
            stack.extend((v, depth + 1) for v in current.values())
        elif isinstance(current, (list, tuple)):
            longest = max(longest, len(current))
            stack.extend((v, depth + 1) for v in current)
        if items > max_items:
            return "value_items"
        if chars > max_chars:
            return "value_chars"
        if depth > max_depth:
            return "value_nesting"
    return Size(items=items, chars=chars, longest=longest)


# Units of the estimate: 20,000,000 (the default budget) is about a second of CEL on a 2026 server core.
ITEM_WEIGHT = 50  # an item costs CEL about as much to copy as 50 characters of text
CONVERT_WEIGHT = 32  # handing one item to CEL
DIVISOR = 100
ISOLATE_ABOVE = 200_000  # estimates above this (about 10 ms) run in a worker process


@dataclass
class CallBudget:
    """One call's budget: the sizes of the values it binds, its estimated CEL work so far, and its time in
    worker processes (where it sends the expressions it cannot bound)."""

    limits: Limits
    route: str
    sizes: dict[str, Size] = field(default_factory=dict)  # name -> size of its value
    work: int = 0
    isolated_seconds: float = 0.0  # time spent waiting for worker processes in this call

    def bind(self, name: str, value: Any, where: str) -> None:
        """Record the size of a value a step binds (or returns), failing the call when it is too big."""
        self.sizes[name] = self.check(value, where)

    def check(self, value: Any, where: str) -> Size:
        """The size of a value the call produces, failing the call when it is too big."""
        limits = self.limits
        size = measure(
            value, max_items=limits.value_items, max_chars=limits.value_chars, max_depth=limits.value_nesting
        )
        if isinstance(size, str):
            cap = getattr(limits, size)
            what = {
                "value_items": f"holds more than {cap} items",
                "value_chars": f"holds more than {cap} characters of text",
                "value_nesting": f"is nested more than {cap} levels deep",
            }[size]
            raise OperationFailed(
                f"Route '{self.route}' {where}: the value {what}; the limit is {cap}. "
                "Read fewer records (a tighter 'where' or a 'limit'), or build smaller values.",
                details=limit_details(size, cap, route=self.route, step=where),
            )
        return size

    def estimate(self, expr: Expr) -> tuple[int, int]:
        """(estimated work, the span a comprehension may iterate over) of evaluating `expr` now."""
        empty = Size(0, 0, 0)
        sizes = [self.sizes.get(name, empty) for name in expr.names]
        read = sum(size.items for size in sizes)
        items = read + expr.literal_items
        chars = sum(size.chars for size in sizes)
        weight = ITEM_WEIGHT * items + chars
        # Handing the values to CEL, then one pass over them per reference.
        work = CONVERT_WEIGHT * read + weight * max(expr.refs, 1) // DIVISOR
        if expr.plus:  # a chain of n `+` copies its growing result n times
            work += weight * (expr.plus + 1) ** 2 // DIVISOR
        span = 0
        if expr.comprehensions:  # map/filter rebuild their result on each iteration
            span = max(expr.literal_items, 1, *(size.longest for size in sizes)) * (expr.plus + 1)
            work += span**expr.comprehensions * max(items, span)
        return work, span

    def charge(self, expr: Expr) -> bool:
        """Account for an expression before it runs; fail the call when its estimated work would take
        the call past its budget. Returns whether to evaluate it in a worker process (under the
        call's CEL deadline): it has comprehensions, whose cost the estimate cannot bound (it
        depends on what each iteration builds), it calls `matches` (a regex's cost depends on the
        pattern's compiled size), `replace` or `lists.range` (their results can be far larger than
        their inputs), or its estimate is large."""
        estimate, span = self.estimate(expr)
        cap = self.limits.cel_work
        if self.work + estimate > cap:
            if expr.comprehensions:
                shape = f"its comprehensions could iterate over {span} items (nested {expr.comprehensions} deep)"
            elif expr.plus:
                shape = f"it concatenates {expr.plus + 1} operands"
            else:
                shape = "it reads large values"
            raise OperationFailed(
                f"Route '{self.route}' {expr.where}: {shape}, an estimated work of {estimate} with {self.work} "
                f"already spent by this call; the limit is {cap}. Work on fewer items (filter records with "
                "'where' and 'limit'), avoid nesting map/filter, or build large values with fewer '+'.",
                details=limit_details("cel_work", cap, route=self.route, step=expr.where, estimate=estimate),
            )
        self.work += estimate
        return bool(expr.comprehensions) or expr.regex or estimate > ISOLATE_ABOVE

    def evaluate_isolated(self, expr: Expr, inputs: dict[str, Any]) -> Any:
        """Evaluate `expr` in a worker process, within what is left of the call's CEL time (the evaluations'
        own time: waiting for a worker process to start is not the call's, see routes/celworker.py)."""
        cap = self.limits.cel_ms
        left = cap / 1000 - self.isolated_seconds
        try:
            if left <= 0:
                raise celworker.Deadline()
            # Room for any value the call may hold (value_chars) in the pickled answer, and no more.
            max_reply = 8 * self.limits.value_chars + (1 << 20)
            evaluated = celworker.evaluate_timed(expr.worker_program, inputs, left, max_reply=max_reply)
        except celworker.Deadline:
            raise OperationFailed(
                f"Route '{self.route}' {expr.where}: CEL evaluation took longer than this call's {cap} ms "
                "and was stopped. Work on fewer items (filter records with 'where' and 'limit'), avoid "
                "nesting map/filter, and keep large values out of comprehensions.",
                details=limit_details("cel_ms", cap, route=self.route, step=expr.where),
            ) from None
        except celworker.ShareTaken as exc:
            raise RateLimited(
                f"Route '{self.route}' {expr.where}: this expression needs a CEL worker process, and your calls "
                f"already hold {exc.held} of this server's {celworker.MAX_RUNNING} (the most one account may hold at "
                "once, so others' calls are not kept waiting). Nothing was saved; try again in 1 second.",
                limit="cel_workers",
                retry_after_seconds=1,
                details={
                    "limit": "cel_workers",
                    "max": exc.held,
                    "route": self.route,
                    "step": expr.where,
                    "retry_after_seconds": 1,
                },
            ) from None
        except celworker.WorkerFailed as exc:
            logger.error("CEL worker failed for route %s at %s: %s", self.route, expr.where, exc)
            raise OperationFailed(
                f"Route '{self.route}' {expr.where}: the expression could not be evaluated (its worker "
                "process failed or its result was too large). Try again with smaller values; if it "
                "persists, ask staff to look at the server log.",
                details={"route": self.route, "step": expr.where},
            ) from None
        self.isolated_seconds += evaluated.seconds
        return evaluated.value
