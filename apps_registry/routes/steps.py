"""The step kinds, one class each, in one registry (`STEP_KINDS`).

A step kind declares its keys, parses and checks its body (with the problems an author sees), runs
itself against the call's store, and names its authoring advisories. The compiler and the runtime
are loops over this registry: adding a step kind is one class here (and, if it touches records, one
`Store` method).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from apps_registry.cursors import cursor_make, cursor_read, items_within_budget
from apps_registry.exceptions import HandlerError, OperationFailed
from apps_registry.routes.dates import BUCKETS, zone
from apps_registry.routes.expressions import Expr, to_json
from apps_registry.routes.limits import limit_details
from apps_registry.routes.store import Group, Measure, Where
from apps_registry.routes.types import AdvisoryDraft
from apps_registry.values import clip, json_repr, type_name

if TYPE_CHECKING:
    from apps_registry.routes.budget import CallBudget
    from apps_registry.routes.limits import Limits
    from apps_registry.routes.store import MeteredStore

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,7}\Z")
WHERE_OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "contains")
# A fail step's message is for people (and agents): longer ones are clipped; details carry data.
FAIL_MESSAGE_CHARS = 2000


def bad_name(what: str) -> str:
    return f"must be {what}: letters, digits and underscores, not starting with a digit, at most 100 characters"


# --- the compiled form ----------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    path: tuple[str, ...]  # ("id",) is the record's id
    op: str
    expr: Expr
    when: Expr | None = None  # the condition applies only when this is true (an optional filter)


@dataclass(frozen=True)
class GroupSpec:
    """An aggregate's group key as written: a field, or a field's calendar bucket (its time zone is the
    step's expression `group_by.<key>.tz`, UTC when absent)."""

    key: str
    path: tuple[str, ...]
    bucket: str | None = None
    each: bool = False  # group by each item of a list field (a record with tags [a, b] is in groups a and b)


@dataclass
class Step:
    index: int
    kind: StepKind
    as_name: str | None = None
    collection: str | None = None
    exprs: dict[str, Expr] = field(default_factory=dict)
    where: list[Condition] = field(default_factory=list)
    order_by: list[tuple[tuple[str, ...], bool]] = field(default_factory=list)  # (path, descending)
    field_path: tuple[str, ...] | None = None
    uses: set[str] = field(default_factory=set)  # names bound by earlier steps that this step reads
    # The input fields its expressions read by name; None when one reads `params` whole (any field may be read).
    params_read: set[str] | None = field(default_factory=set)
    at: str = ""  # where the step is in its route: "steps[2]", or "steps[2].for_each.steps[0]" inside a loop
    when: Expr | None = None  # the step runs only when this is true (otherwise its `as` binds null)
    steps: list[Step] = field(default_factory=list)  # a for_each's steps, run once per item
    item_name: str | None = None  # a for_each's name for the current item
    groups: list[GroupSpec] = field(default_factory=list)  # an aggregate's group keys
    measures: list[Measure] = field(default_factory=list)  # an aggregate's values
    roles: tuple[str, ...] = ()  # a notify's recipients, by role ("owner", "editors", "viewers")

    def __post_init__(self) -> None:
        self.at = self.at or f"steps[{self.index}]"

    @property
    def op(self) -> str:
        return self.kind.op

    @property
    def label(self) -> str:
        return f"{self.at} ({self.kind.op})"


@dataclass(frozen=True)
class NoticeDraft:
    """A notice a notify step made: sent to the app's members in `roles` when the mutation commits (the service
    that ran the route resolves the members; the engine never sees an address)."""

    roles: tuple[str, ...]
    subject: str
    text: str


@dataclass
class Call:
    """One route call, explicit: what CEL sees, the call's budget and its (metered) store."""

    route: str
    values: dict[str, Any]  # params, caller, app, now, and the names bound by the steps so far
    budget: CallBudget
    store: MeteredStore
    # Where notify steps put their notices (services/routes.py sends them with the mutation); None: evaluated and
    # checked, then dropped (an author test, a preview).
    notices: list[NoticeDraft] | None = None
    notified: int = 0  # notify steps run in this call (bounded by notices_per_call)


class StepParser(Protocol):
    """What a step kind's `parse` gets from the compiler: problem reporting and checked expressions."""

    def problem(self, path: str, message: str) -> None: ...

    def expression(self, source: Any, where: str) -> Expr | None:
        """The compiled expression at `<step path>.<where>`, or None (its problems reported)."""
        ...

    def steps(self, raw: Any, where: str, names: tuple[str, ...]) -> list[Step]:
        """The steps nested at `<step path>.<where>` (a for_each's), parsed with `names` bound besides the
        names bound so far; the names they bind stay inside them."""
        ...


@dataclass(frozen=True)
class Key:
    """One key of a step's body: what its value is, and whether the step needs it."""

    what: str  # "collection", "expr", "field", "where", "order_by", "group_by" or "values"
    required: bool = False
    top_level: bool = False  # a "field" that must be a top-level field


# --- step kinds -----------------------------------------------------------------------------


class StepKind:
    """One kind of step. Its body is an object with `keys`, or (when `keys` is empty) one expression."""

    op: ClassVar[str]
    keys: ClassVar[dict[str, Key]] = {}
    writes: ClassVar[bool] = False  # a query route may not use it
    binding: ClassVar[str] = "optional"  # "optional", "required" (let) or "none" (fail, return)
    ends: ClassVar[bool] = False  # the call ends with its value (return)
    advisory_kinds: ClassVar[tuple[str, ...]] = ()  # the authoring advisories `advisories` may name

    def parse(self, step: Step, body: Any, path: str, parser: StepParser) -> None:
        """Fill `step` from its body, reporting every problem to `parser`."""
        op = self.op
        if not self.keys:
            compiled = parser.expression(body, op)
            if compiled is not None:
                step.exprs["value"] = compiled
            return
        if not isinstance(body, dict):
            parser.problem(f"{path}.{op}", f"must be an object with {', '.join(self.keys)}, got {type_name(body)}")
            return
        for key in body:
            if key not in self.keys:
                parser.problem(f"{path}.{op}.{key}", f"unknown key; {op} takes {', '.join(self.keys)}")
        for key, spec in self.keys.items():
            where = f"{op}.{key}"
            if key not in body:
                if spec.required:
                    parser.problem(f"{path}.{where}", "required")
                continue
            _PARSE_KEY[spec.what](step, key, spec, body[key], f"{path}.{where}", where, parser)

    def run(self, step: Step, call: Call) -> Any:
        raise NotImplementedError

    def advisories(self, route: str, step: Step, limits: Limits) -> list[AdvisoryDraft]:
        """Authoring advisories about this step (beyond those every step may get)."""
        return []


class GetStep(StepKind):
    op = "get"
    keys = {"collection": Key("collection", True), "id": Key("expr", True), "default": Key("expr")}

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        record = call.store.get(step.collection, record_id(step, call))
        if record is not None:
            return record
        default = step.exprs.get("default")
        if default is not None:
            return json_value(step, call, "get.default", default.evaluate(call))
        wanted = record_id(step, call)
        raise OperationFailed(
            f"Route '{call.route}' {step.label}: no record with id '{wanted}' in collection '{step.collection}'.",
            details={"collection": step.collection, "id": wanted},
        )


class FindStep(StepKind):
    op = "find"
    keys = {
        "collection": Key("collection", True),
        "where": Key("where"),
        "order_by": Key("order_by"),
        "limit": Key("expr"),
        "cursor": Key("expr"),
    }
    advisory_kinds = ("unbounded-find",)

    def parse(self, step: Step, body: Any, path: str, parser: StepParser) -> None:
        super().parse(step, body, path, parser)
        if isinstance(body, dict) and "cursor" in body and "limit" not in body:
            parser.problem(f"{path}.find.cursor", "a paged find (with 'cursor') needs a 'limit': the page size")

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        limit = row_limit(step, call)
        if "cursor" in step.exprs:
            assert limit is not None
            return self._page(step, call, limit)
        return call.store.find(step.collection, where_values(step, call), step.order_by, limit)

    def _page(self, step: Step, call: Call, limit: int) -> dict[str, Any]:
        """A paged find: `{items, next_cursor, truncated}`, continuing after the given cursor (keyset), cut
        at a record boundary once the items' JSON passes the tool result budget (at least one record)."""
        assert step.collection is not None
        if limit < 1:
            raise wrong(step, call, "find.limit", "a positive integer (the page size of a paged find)", limit)
        token = step.exprs["cursor"].evaluate(call)
        if token is not None and not isinstance(token, str):
            raise wrong(step, call, "find.cursor", "a string (a next_cursor this find returned) or null", token)
        binding = find_binding(call, step)
        after = None
        if token:
            after = cursor_read(
                token,
                binding=binding,
                length=len(step.order_by) + 2,
                what=f"route '{call.route}' at {step.at}.find.cursor",
                path=path_of(call.values["params"], token),
            )
        rows, positions, more = call.store.find_page(
            step.collection, where_values(step, call), step.order_by, limit, after
        )
        kept = items_within_budget(rows)
        truncated = kept < len(rows)
        next_cursor = cursor_make(positions[kept - 1], binding=binding) if rows and (more or truncated) else None
        return {"items": rows[:kept], "next_cursor": next_cursor, "truncated": truncated}

    def advisories(self, route: str, step: Step, limits: Limits) -> list[AdvisoryDraft]:
        if "limit" in step.exprs:
            return []
        return [
            AdvisoryDraft(
                kind="unbounded-find",
                severity="warn",
                summary=(
                    f"Route '{route}' {step.at} finds in '{step.collection}' without a 'limit'. "
                    f"Once the collection holds more than {limits.records_read_per_call} matching records "
                    "the call fails; add a 'limit' (and a 'cursor', so callers can page through them: "
                    "docs/authoring.md#paging-a-find)."
                ),
                user_summary="One of this app's lists may stop working once it grows large.",
                data={"route": route, "step": step.index, "collection": step.collection},
            )
        ]


class CountStep(StepKind):
    op = "count"
    keys = {"collection": Key("collection", True), "where": Key("where")}

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        return call.store.count(step.collection, where_values(step, call))


class SumStep(StepKind):
    op = "sum"
    keys = {"collection": Key("collection", True), "field": Key("field", True), "where": Key("where")}

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None and step.field_path is not None
        return call.store.sum(step.collection, step.field_path, where_values(step, call))


class AggregateStep(StepKind):
    """Totals by group, computed by the database (one GROUP BY): binds a list of maps, one per group, each
    with its group keys and its values."""

    op = "aggregate"
    keys = {
        "collection": Key("collection", True),
        "where": Key("where"),
        "group_by": Key("group_by"),
        "values": Key("values"),
        "order_by": Key("order_by"),
        "limit": Key("expr"),
    }

    def parse(self, step: Step, body: Any, path: str, parser: StepParser) -> None:
        super().parse(step, body, path, parser)
        if not isinstance(body, dict):
            return
        if "group_by" not in body and "values" not in body:
            parser.problem(
                f"{path}.aggregate",
                "needs 'group_by' (the keys of each group), 'values' (what to compute per group), or both",
            )
        keys = [g.key for g in step.groups] + [m.key for m in step.measures]
        for key in sorted({k for k in keys if keys.count(k) > 1}):
            parser.problem(
                f"{path}.aggregate.values.{key}", f"'{key}' is also a group key; give the value another name"
            )
        for field_path, _descending in step.order_by:
            name = ".".join(field_path)
            if name not in keys:
                parser.problem(
                    f"{path}.aggregate.order_by",
                    f"'{name}' is not a key of this aggregate's rows; order by one of: {', '.join(keys) or '(none)'}",
                )

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        groups = [Group(g.key, g.path, g.bucket, time_zone(step, call, g.key), g.each) for g in step.groups]
        order = [(".".join(field_path), descending) for field_path, descending in step.order_by]
        return call.store.aggregate(
            step.collection, where_values(step, call), groups, step.measures, order, row_limit(step, call)
        )


class ForEachStep(StepKind):
    """Runs its steps once per item of a list; binds the list of each pass's `return` value (null for a pass
    that returns nothing). Names bound inside a pass stay inside it."""

    op = "for_each"
    keys = {"in": Key("expr", True), "as": Key("item", True), "steps": Key("steps", True)}

    def parse(self, step: Step, body: Any, path: str, parser: StepParser) -> None:
        if not isinstance(body, dict):
            parser.problem(
                f"{path}.for_each", f'must be an object {{"in": ..., "as": ..., "steps": [...]}}, got {type_name(body)}'
            )
            return
        for key in body:
            if key not in self.keys:
                parser.problem(f"{path}.for_each.{key}", "unknown key; for_each takes in, as, steps")
        for key in self.keys:
            if key not in body:
                parser.problem(f"{path}.for_each.{key}", "required")
        if "in" in body:
            compiled = parser.expression(body["in"], "for_each.in")
            if compiled is not None and not (compiled.type == "dyn" or compiled.type.startswith("list")):
                parser.problem(f"{path}.for_each.in", f"must be a list to loop over, but it gives {compiled.type}")
            elif compiled is not None:
                step.exprs["in"] = compiled
        item = body.get("as")
        if "as" in body and (not isinstance(item, str) or not NAME.match(item)):
            parser.problem(f"{path}.for_each.as", bad_name("the name of the current item"))
            item = None
        if "steps" not in body:
            return
        step.item_name = item
        step.steps = parser.steps(body["steps"], "for_each.steps", (item,) if item else ())
        for inner in walk_steps(step.steps):
            if inner.kind is self:
                parser.problem(
                    f"{path}.{inner.at.removeprefix(step.at + '.')}",
                    "a for_each cannot hold another for_each; loop over a flattened list instead (flatten())",
                )

    def run(self, step: Step, call: Call) -> Any:
        assert step.item_name is not None
        items = json_value(step, call, "for_each.in", step.exprs["in"].evaluate(call))
        if not isinstance(items, list):
            raise wrong(step, call, "for_each.in", "an array", items)
        cap = call.budget.limits.for_each_items
        if len(items) > cap:
            raise OperationFailed(
                f"Route '{call.route}' failed at {step.at}.for_each.in: the list holds {len(items)} items; the limit "
                f"is {cap} per for_each. Send fewer items per call, or split the work into several calls.",
                details=limit_details("for_each_items", cap, route=call.route, step=f"{step.at}.for_each.in"),
            )
        outer = call.values
        results = []
        try:
            for item in items:
                call.values = {**outer, step.item_name: item}  # a pass's names stay inside it
                call.budget.bind(step.item_name, item, f"{step.at}.for_each.as")
                results.append(run_steps(step.steps, call))
        finally:
            call.values = outer
        return results


class LetStep(StepKind):
    op = "let"
    binding = "required"

    def run(self, step: Step, call: Call) -> Any:
        return step.exprs["value"].evaluate(call)


class InsertStep(StepKind):
    op = "insert"
    keys = {"collection": Key("collection", True), "value": Key("expr", True), "id": Key("expr")}
    writes = True

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        data = record_value(step, call)
        new_id = data.pop("id", None)
        if "id" in step.exprs:
            new_id = record_id(step, call)
        elif new_id is not None and not isinstance(new_id, str):
            new_id = str(new_id) if isinstance(new_id, int) and not isinstance(new_id, bool) else None
            if new_id is None:
                raise wrong(step, call, "insert.value.id", "a string or an integer", data.get("id"))
        return call.store.insert(step.collection, new_id, data)


class _MergeStep(StepKind):
    """update and upsert: merge a value into the record with the given id (whose id never changes)."""

    keys = {"collection": Key("collection", True), "id": Key("expr", True), "value": Key("expr", True)}
    writes = True

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        target = record_id(step, call)
        data = record_value(step, call)
        data.pop("id", None)  # a record's id never changes
        write = call.store.update if self.op == "update" else call.store.upsert
        return write(step.collection, target, data)


class UpdateStep(_MergeStep):
    op = "update"


class UpsertStep(_MergeStep):
    op = "upsert"


class DeleteStep(StepKind):
    op = "delete"
    keys = {"collection": Key("collection", True), "id": Key("expr", True)}
    writes = True

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None
        return call.store.delete(step.collection, record_id(step, call))


class IncrementStep(StepKind):
    op = "increment"
    keys = {
        "collection": Key("collection", True),
        "id": Key("expr", True),
        "field": Key("field", True, top_level=True),
        "by": Key("expr"),
    }
    writes = True

    def run(self, step: Step, call: Call) -> Any:
        assert step.collection is not None and step.field_path is not None
        target = record_id(step, call)
        by: Any = 1
        if "by" in step.exprs:
            by = step.exprs["by"].evaluate(call)
            if not isinstance(by, (int, float)) or isinstance(by, bool) or not math.isfinite(by):
                raise wrong(step, call, "increment.by", "a finite number", by)
        return call.store.increment(step.collection, target, step.field_path[0], by, reread=step.as_name is not None)


class FailStep(StepKind):
    op = "fail"
    keys = {"message": Key("expr", True), "details": Key("expr"), "when": Key("expr")}
    binding = "none"

    def run(self, step: Step, call: Call) -> Any:
        when = step.exprs.get("when")
        if when is not None:
            condition = when.evaluate(call)
            if not isinstance(condition, bool):
                raise wrong(step, call, "fail.when", "a boolean", condition)
            if not condition:
                return None
        budget = call.budget
        message = step.exprs["message"].evaluate(call)
        budget.check(message, f"{step.at}.fail.message")
        message = json_value(step, call, "fail.message", message)
        details_expr = step.exprs.get("details")
        details = None
        if details_expr is not None:
            details = details_expr.evaluate(call)
            budget.check(details, f"{step.at}.fail.details")
            details = json_value(step, call, "fail.details", details)
        if details is not None and not isinstance(details, dict):
            raise wrong(step, call, "fail.details", "an object", details)
        text = message if isinstance(message, str) else str(message)
        raise HandlerError(clip(text, FAIL_MESSAGE_CHARS), details=details)


# A notify's recipients, by the names authors write, and the role each stands for.
NOTIFY_ROLES: dict[str, str] = {"owner": "owner", "editors": "editor", "viewers": "viewer"}
NOTICE_SUBJECT_CHARS = 150
NOTICE_TEXT_CHARS = 2000


class NotifyStep(StepKind):
    """Tell the app's members: a subject and a text (CEL strings) to those in the roles `to` names, on their home
    page and by e-mail, once the mutation commits. Who they are is the app's membership, never an address from the
    route."""

    op = "notify"
    keys = {"to": Key("roles", True), "subject": Key("expr", True), "text": Key("expr", True)}
    writes = True  # it acts on the world: only in mutations, sent only if the mutation commits
    binding = "none"

    def run(self, step: Step, call: Call) -> Any:
        limits = call.budget.limits
        call.notified += 1
        if call.notified > limits.notices_per_call:
            raise OperationFailed(
                f"This call sent more than {limits.notices_per_call} notices (notify steps); send one that says it "
                "all, outside any for_each.",
                details=limit_details("notices_per_call", limits.notices_per_call),
            )
        shown: dict[str, str] = {}
        for key, most in (("subject", NOTICE_SUBJECT_CHARS), ("text", NOTICE_TEXT_CHARS)):
            value = step.exprs[key].evaluate(call)
            if not isinstance(value, str):
                raise wrong(step, call, f"notify.{key}", "a string", value)
            text = value.strip() if key == "text" else " ".join(value.split())
            if not text:
                raise wrong(step, call, f"notify.{key}", "a string that is not empty", value)
            shown[key] = clip(text, most)
        if call.notices is not None:
            call.notices.append(NoticeDraft(roles=step.roles, subject=shown["subject"], text=shown["text"]))
        return None


class ReturnStep(StepKind):
    op = "return"
    binding = "none"
    ends = True

    def run(self, step: Step, call: Call) -> Any:
        return json_value(step, call, "return", step.exprs["value"].evaluate(call))


# In the order the author format lists them (problem messages name them in this order).
STEP_KINDS: dict[str, StepKind] = {
    kind.op: kind
    for kind in (
        GetStep(),
        FindStep(),
        CountStep(),
        SumStep(),
        AggregateStep(),
        LetStep(),
        InsertStep(),
        UpdateStep(),
        UpsertStep(),
        DeleteStep(),
        IncrementStep(),
        FailStep(),
        NotifyStep(),
        ReturnStep(),
        ForEachStep(),
    )
}


def walk_steps(steps: list[Step]) -> Any:
    """Every step, the steps nested in a for_each included (each after the step holding it)."""
    for step in steps:
        yield step
        yield from walk_steps(step.steps)


def run_steps(steps: list[Step], call: Call) -> Any:
    """Run `steps` in order: the value of the `return` that ends them, or None when none does. A step whose
    `when` is false does nothing, and its `as` binds null."""
    budget, values = call.budget, call.values
    for step in steps:
        if step.when is not None:
            condition = step.when.evaluate(call)
            if not isinstance(condition, bool):
                raise wrong(step, call, "when", "a boolean", condition)
            if not condition:
                if step.as_name:
                    values[step.as_name] = None
                continue
        result = step.kind.run(step, call)
        if step.kind.ends:
            budget.bind("return", result, step.label)
            return result
        if step.as_name:
            budget.bind(step.as_name, result, step.label)
            values[step.as_name] = result
    return None


# --- parsing a key's value ------------------------------------------------------------------


def _parse_collection(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    if not isinstance(value, str) or not NAME.match(value):
        parser.problem(path, bad_name("a collection name"))
    else:
        step.collection = value


def _parse_expr(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    compiled = parser.expression(value, where)
    if compiled is not None:
        step.exprs[key] = compiled


def _parse_field(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    if not isinstance(value, str) or not FIELD_PATH.match(value) or value == "id":
        parser.problem(path, "must be a field name such as 'amount' or 'totals.spent' (not 'id')")
    elif spec.top_level and "." in value:
        parser.problem(path, f"{step.kind.op} works on a top-level field, such as 'spent'")
    else:
        step.field_path = tuple(value.split("."))


def _parse_where(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    if not isinstance(value, dict):
        parser.problem(path, 'must be an object: {"field": "cel expr", "other": {"gte": "cel expr"}}')
        return
    for field_name, test in value.items():
        if not isinstance(field_name, str) or not FIELD_PATH.match(field_name):
            parser.problem(f"{path}.{field_name}", "must be a field name such as 'category' or 'a.b'")
            continue
        tests = dict(test) if isinstance(test, dict) else {"eq": test}
        when = None
        if "when" in tests:
            when = parser.expression(tests.pop("when"), f"{where}.{field_name}.when")
            if when is not None and when.type not in ("bool", "dyn"):
                parser.problem(
                    f"{path}.{field_name}.when", f"must be a condition (a boolean), but it gives {when.type}"
                )
                when = None
            if not tests:
                parser.problem(f"{path}.{field_name}", "a 'when' needs a comparison beside it, such as eq")
        for op, source in tests.items():
            if op not in WHERE_OPS:
                parser.problem(
                    f"{path}.{field_name}.{op}", f"unknown comparison; use {', '.join(WHERE_OPS)} (and when)"
                )
                continue
            if op == "contains" and field_name == "id":
                parser.problem(f"{path}.id.contains", "a record's id is a string, not a list; use eq or in")
                continue
            compiled = parser.expression(source, f"{where}.{field_name}" + (f".{op}" if isinstance(test, dict) else ""))
            if compiled is not None:
                step.where.append(Condition(path=tuple(field_name.split(".")), op=op, expr=compiled, when=when))


def _parse_order_by(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        parser.problem(path, "must be a field name, '-field' for descending, or an array of them")
        return
    for item in items:
        name = item[1:] if isinstance(item, str) and item.startswith("-") else item
        if not isinstance(name, str) or not FIELD_PATH.match(name):
            parser.problem(path, f"{json_repr(item)} is not a field name (use 'amount' or '-amount')")
            continue
        step.order_by.append((tuple(name.split(".")), item.startswith("-")))


def _parse_group_by(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    shape = (
        'must be an object mapping each output key to a field ("category"), a date bucket '
        '({"bucket": "month", "field": "day", "tz": "params.tz"}) or the items of a list field ({"each": "tags"}); '
        "{} makes one group of all records"
    )
    if not isinstance(value, dict):
        parser.problem(path, shape)
        return
    for name, group in value.items():
        at = f"{path}.{name}"
        if not NAME.match(name):
            parser.problem(at, bad_name("an output key"))
            continue
        if isinstance(group, str):
            if not FIELD_PATH.match(group) or group == "id":
                parser.problem(
                    at, "must be a field name such as 'category' or 'meta.kind' (not 'id'), or a date bucket"
                )
            else:
                step.groups.append(GroupSpec(name, tuple(group.split("."))))
            continue
        if not isinstance(group, dict):
            parser.problem(at, shape)
            continue
        if "each" in group:
            each = group["each"]
            if set(group) != {"each"}:
                parser.problem(at, 'a list field\'s items are grouped as {"each": "tags"}, with no other key')
            elif not isinstance(each, str) or not FIELD_PATH.match(each) or each == "id":
                parser.problem(f"{at}.each", "must be the name of a field holding a list, such as 'tags'")
            elif any(g.each for g in step.groups):
                parser.problem(f"{at}.each", "an aggregate groups by the items of one list field at most")
            else:
                step.groups.append(GroupSpec(name, tuple(each.split(".")), each=True))
            continue
        for extra in sorted(set(group) - {"bucket", "field", "tz"}):
            parser.problem(f"{at}.{extra}", "unknown key; a date bucket takes bucket, field, tz")
        bucket, field_name = group.get("bucket"), group.get("field")
        good = True
        if bucket not in BUCKETS:
            parser.problem(f"{at}.bucket", f"must be one of {', '.join(BUCKETS)}, got {clip(repr(bucket), 40)}")
            good = False
        if not isinstance(field_name, str) or not FIELD_PATH.match(field_name) or field_name == "id":
            parser.problem(f"{at}.field", "required: the field holding an ISO date or timestamp, such as 'day'")
            good = False
        if "tz" in group:
            compiled = parser.expression(group["tz"], f"{where}.{name}.tz")
            if compiled is None:
                good = False
            else:
                step.exprs[f"group_by.{name}.tz"] = compiled
        if good:
            assert isinstance(field_name, str) and isinstance(bucket, str)
            step.groups.append(GroupSpec(name, tuple(field_name.split(".")), bucket))


MEASURES = ("count", "sum", "avg", "min", "max")


def _parse_values(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    shape = (
        'must be an object mapping each output key to one of {"count": true}, {"count": "field"}, '
        '{"sum": "field"}, {"avg": "field"}, {"min": "field"}, {"max": "field"}'
    )
    if not isinstance(value, dict):
        parser.problem(path, shape)
        return
    for name, measure in value.items():
        at = f"{path}.{name}"
        if not NAME.match(name):
            parser.problem(at, bad_name("an output key"))
            continue
        if not isinstance(measure, dict) or len(measure) != 1 or next(iter(measure)) not in MEASURES:
            parser.problem(at, shape)
            continue
        fn, target = next(iter(measure.items()))
        if fn == "count" and target is True:
            step.measures.append(Measure(name, "count"))
        elif not isinstance(target, str) or not FIELD_PATH.match(target) or target == "id":
            expected = "true (count the records) or a field name" if fn == "count" else "a field name such as 'amount'"
            parser.problem(f"{at}.{fn}", f"must be {expected}")
        else:
            step.measures.append(Measure(name, fn, tuple(target.split("."))))


def _parse_roles(step: Step, key: str, spec: Key, value: Any, path: str, where: str, parser: StepParser) -> None:
    names = [value] if isinstance(value, str) else value
    allowed = ", ".join(f"'{name}'" for name in NOTIFY_ROLES)
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        parser.problem(path, f'must be a list of roles to tell, from {allowed} (e.g. ["owner", "editors"])')
        return
    unknown = [name for name in names if name not in NOTIFY_ROLES]
    if unknown:
        parser.problem(path, f"'{clip(unknown[0], 40)}' is not a role to tell; use {allowed}")
        return
    if len(set(names)) != len(names):
        parser.problem(path, "names a role twice")
        return
    step.roles = tuple(names)


_PARSE_KEY = {
    "collection": _parse_collection,
    "expr": _parse_expr,
    "field": _parse_field,
    "where": _parse_where,
    "order_by": _parse_order_by,
    "roles": _parse_roles,
    "group_by": _parse_group_by,
    "values": _parse_values,
}


# --- running: the values a step hands its store ---------------------------------------------


def wrong(step: Step, call: Call, where: str, expected: str, got: Any) -> HandlerError:
    return HandlerError(
        f"Route '{call.route}' failed at {step.at}.{where}: the expression must evaluate to "
        f"{expected}, got {_cel_shown(got)}",
        details={"route": call.route, "step": f"{step.at}.{where}"},
    )


def _cel_shown(value: Any) -> str:
    """The value's JSON type, and a number's value too: "a non-negative integer, got integer -1", not "got integer"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{_cel_type(value)} {clip(value, 40)}"
    return _cel_type(value)


def _cel_type(value: Any) -> str:
    """A value's type in JSON's words (what the caller and the author's schemas call it); CEL's own values
    that JSON has no type for by their CEL names."""
    if isinstance(value, (datetime, date)):
        return "timestamp"
    if isinstance(value, timedelta):
        return "duration"
    if isinstance(value, bytes):
        return "bytes"
    return type_name(value)


def json_value(step: Step, call: Call, where: str, value: Any) -> Any:
    """`to_json`, with a value JSON cannot hold reported at the route and step that made it."""
    try:
        return to_json(value)
    except HandlerError as exc:
        raise HandlerError(
            f"Route '{call.route}' failed at {step.at}.{where}: {exc.message}",
            details={"route": call.route, "step": f"{step.at}.{where}"},
        ) from None


def row_limit(step: Step, call: Call) -> int | None:
    """A find's or an aggregate's `limit`, when it has one: a non-negative int."""
    if "limit" not in step.exprs:
        return None
    value = step.exprs["limit"].evaluate(call)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise wrong(step, call, f"{step.op}.limit", "a non-negative integer", value)
    return value


def time_zone(step: Step, call: Call, key: str) -> str:
    """The IANA time zone of an aggregate's date bucket (UTC unless the author gave one)."""
    expr = step.exprs.get(f"group_by.{key}.tz")
    if expr is None:
        return "UTC"
    value = expr.evaluate(call)
    if not isinstance(value, str) or zone(value) is None:
        raise wrong(step, call, f"aggregate.group_by.{key}.tz", "an IANA time zone name such as 'Europe/Paris'", value)
    return value


def record_id(step: Step, call: Call, key: str = "id") -> str:
    value = step.exprs[key].evaluate(call)
    if isinstance(value, str) and value and len(value) <= 200:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise wrong(step, call, f"{step.op}.{key}", "a non-empty string (at most 200 characters) or an integer", value)


def record_value(step: Step, call: Call) -> dict[str, Any]:
    value = json_value(step, call, f"{step.op}.value", step.exprs["value"].evaluate(call))
    if not isinstance(value, dict):
        raise wrong(step, call, f"{step.op}.value", "an object", value)
    return value


# The form of a paged find's positions, part of its cursors' binding. 2: ties follow the last order key's direction
# (before, always oldest first): a cursor of form 1 would continue in another order, so it is refused instead.
FIND_CURSOR_FORM = 2


def find_binding(call: Call, step: Step) -> str:
    """What a paged find's cursor is bound to: the app, the route, the collection and the order (and the form of
    its positions)."""
    order = ",".join(("-" if descending else "") + ".".join(path) for path, descending in step.order_by)
    return f"find{FIND_CURSOR_FORM}|{call.values['app']['id']}|{call.route}|{step.collection}|{order}"


def path_of(value: Any, wanted: str, path: str = "$") -> str:
    """The JSON path in the params where the caller sent `wanted` (a cursor), or "$" if it came from elsewhere."""
    if value == wanted:
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = path_of(item, wanted, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]")
        if found != "$":
            return found
    return "$"


def where_values(step: Step, call: Call) -> Where:
    where = []
    for condition in step.where:
        at = condition.expr.where.removeprefix(f"{step.at}.")
        if condition.when is not None:
            applies = condition.when.evaluate(call)
            if not isinstance(applies, bool):
                raise wrong(step, call, condition.when.where.removeprefix(f"{step.at}."), "a boolean", applies)
            if not applies:
                continue
        value = json_value(step, call, at, condition.expr.evaluate(call))
        values = value if condition.op == "in" else [value]
        if condition.op == "in" and not isinstance(value, list):
            raise wrong(step, call, at, "an array", value)
        cap = call.budget.limits.in_values
        if condition.op == "in" and len(value) > cap:
            raise OperationFailed(
                f"Route '{call.route}' failed at {step.at}.{at}: the `in` list holds {len(value)} values; "
                f"the limit is {cap}. Filter with fewer values per call, or page through them.",
                details=limit_details("in_values", cap, route=call.route, step=f"{step.at}.{at}"),
            )
        if condition.path == ("id",):
            if any(not _is_id(v) for v in values):
                expected = (
                    "an array of strings or integers (record ids)" if condition.op == "in" else "a string or an integer"
                )
                raise wrong(step, call, at, expected, value if condition.op != "in" else _first_bad(values, _is_id))
            value = [str(v) for v in value] if condition.op == "in" else str(value)
        elif condition.op in ("gt", "gte", "lt", "lte"):
            if not _is_orderable(value):
                raise wrong(step, call, at, f"a number or a string to compare with {condition.op}", value)
        elif any(not _is_scalar(v) for v in values):
            expected = (
                "an array of strings, numbers, booleans or nulls"
                if condition.op == "in"
                else "a string, number, boolean or null"
            )
            raise wrong(step, call, at, expected, value if condition.op != "in" else _first_bad(values, _is_scalar))
        where.append((condition.path, condition.op, value))
    return where


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_orderable(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _first_bad(values: list[Any], ok: Any) -> Any:
    return next(v for v in values if not ok(v))
