"""Running a compiled route: input validation, the steps (a mutation in one transaction), output
validation. Every failure is one of apps_registry.exceptions; a failed mutation writes nothing."""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

from django.db import DataError, transaction
from django.utils import timezone

from apps_registry.exceptions import HandlerError, InvalidInput, InvalidOutput, OperationFailed
from apps_registry.routes.budget import CallBudget, Size
from apps_registry.routes.compiler import CompiledRoute, Step
from apps_registry.routes.expressions import INT64_MAX, INT64_MIN, METER, to_json
from apps_registry.routes.limits import Limits, limit_details
from apps_registry.routes.schemas import coerce_numbers
from apps_registry.routes.storage import RecordStore


def run_route(
    route: CompiledRoute,
    *,
    params: Any,
    caller: dict[str, Any],
    app_id: str,
    storage_id: Any,
    limits: Limits,
) -> Any:
    """Validate `params`, run the steps and validate the result; returns the route's JSON value."""
    if not isinstance(params, dict):
        raise InvalidInput(
            f"params of route '{route.name}' must be a JSON object, got {type(params).__name__}.",
            errors=[{"path": "$", "message": f"{type(params).__name__} is not of type 'object'"}],
        )
    params_size = _check_params(route, params, limits)
    params = coerce_numbers(params, route.input_numbers)
    errors = route.input_validator.errors(params)
    if errors:
        raise InvalidInput(
            f"params do not match the input schema of route '{route.name}': {_summary(errors)}", errors=errors
        )
    meter = CallBudget(limits=limits, route=route.name, sizes={"params": params_size})
    context = {"params": params, "caller": caller, "app": {"id": app_id}, "now": timezone.now(), METER: meter}
    store = RecordStore(
        storage_id=storage_id,
        max_read=limits.records_read_per_call,
        max_written=limits.records_written_per_call,
        max_bytes=limits.record_bytes,
    )
    try:
        if route.kind == "query":
            return _finish(route, _run_steps(route, context, store))
        with transaction.atomic():
            return _mutate(route, context, store, limits)
    except DataError as exc:
        # A value the database refuses (e.g. a number too large for it); the transaction is rolled back.
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise OperationFailed(
            f"Route '{route.name}': the database refused a value ({reason}).", details={"route": route.name}
        ) from None


def _check_params(route: CompiledRoute, params: dict[str, Any], limits: Limits) -> Size:
    """Refuse params over the size limit, too deeply nested, or holding numbers CEL cannot represent
    (integers outside int64, non-finite doubles). Returns their size."""
    try:
        size = len(json.dumps(params, separators=(",", ":"), ensure_ascii=False).encode())
    except (RecursionError, ValueError):  # nested beyond Python's limits, or an integer of > 4300 digits
        raise InvalidInput(
            f"params of route '{route.name}' are nested too deeply or hold a number too long to read.",
            errors=[{"path": "$", "message": "nested too deeply or holds an over-long number"}],
        ) from None
    if size > limits.params_bytes:
        raise OperationFailed(
            f"params of route '{route.name}' are {size} bytes of JSON; the limit is {limits.params_bytes}. "
            "Send less data per call.",
            details=limit_details("params_bytes", limits.params_bytes, route=route.name, size=size),
        )
    errors: list[dict[str, str]] = []
    longest = items = chars = 0
    stack: list[tuple[Any, str, int]] = [(params, "$", 1)]
    while stack:
        value, path, depth = stack.pop()
        items += 1
        if depth > limits.value_nesting:
            raise OperationFailed(
                f"params of route '{route.name}' are nested more than {limits.value_nesting} levels deep "
                f"(at {path}); the limit is {limits.value_nesting}.",
                details=limit_details("value_nesting", limits.value_nesting, route=route.name, path=path),
            )
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, dict):
            longest = max(longest, len(value))
            items += len(value)
            chars += sum(len(k) for k in value)
            stack.extend((v, f"{path}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            longest = max(longest, len(value))
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            shown = str(value)
            shown = shown if len(shown) <= 40 else shown[:12] + "…" + shown[-6:]
            errors.append(
                {
                    "path": path,
                    "message": f"the integer {shown} is outside the 64-bit range of CEL's int "
                    f"({INT64_MIN} to {INT64_MAX}); send it as a string, or as a decimal number (1e30) "
                    "if approximate is fine",
                }
            )
        elif isinstance(value, float) and not math.isfinite(value):
            errors.append({"path": path, "message": f"{value} is not a finite number (is it beyond ±1.8e308?)"})
    if errors:
        errors.sort(key=lambda e: e["path"])
        raise InvalidInput(
            f"params of route '{route.name}' hold numbers the engine cannot represent: {_summary(errors)}",
            errors=errors[:50],
        )
    return Size(items=items, chars=chars, longest=longest)


def _mutate(route: CompiledRoute, context: dict[str, Any], store: RecordStore, limits: Limits) -> Any:
    """The steps of a mutation; the caller holds the transaction."""
    value = _run_steps(route, context, store)
    if store.created and _over_app_limit(store, limits.records_per_app):
        raise OperationFailed(
            f"This app would hold more than {limits.records_per_app} records; delete some before adding more.",
            details=limit_details("records_per_app", limits.records_per_app),
        )
    # Validated inside the transaction, so a route that breaks its output contract writes nothing.
    return _finish(route, value)


# storage id -> (records counted or estimated, when last counted). Counting an app's records costs a
# query that grows with the app, so far below the limit the count is estimated from this process's own
# inserts and recounted exactly at least every RECOUNT_SECONDS; from half the limit on, every call
# that inserts counts exactly. Estimates only err high (deletes are not subtracted).
RECOUNT_SECONDS = 60.0
# A fail step's message is for people (and agents): longer ones are clipped; details carry data.
FAIL_MESSAGE_CHARS = 2000
_known_counts: dict[Any, tuple[int, float]] = {}
_known_counts_lock = threading.Lock()


def _over_app_limit(store: RecordStore, limit: int) -> bool:
    now = time.monotonic()
    with _known_counts_lock:
        known = _known_counts.get(store.storage_id)
        if known is not None:
            count, counted_at = known
            estimate = count + store.created
            if estimate < limit // 2 and now - counted_at < RECOUNT_SECONDS:
                _known_counts[store.storage_id] = (estimate, counted_at)
                return False
    count = store.app_record_count()
    with _known_counts_lock:
        _known_counts[store.storage_id] = (count, now)
    return count > limit


def _finish(route: CompiledRoute, value: Any) -> Any:
    if route.output_validator is not None:
        errors = route.output_validator.errors(value)
        if errors:
            raise InvalidOutput(
                f"Route '{route.name}' returned a value that does not match its output schema "
                f"(the app's author must fix the route): {_summary(errors)}",
                errors=errors,
            )
    return value


def _summary(errors: list[dict[str, str]]) -> str:
    shown = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:3])
    return shown + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")


def _run_steps(route: CompiledRoute, context: dict[str, Any], store: RecordStore) -> Any:
    for step in route.steps:
        op = step.op
        if op == "return":
            value = _json(route, step, "return", step.exprs["value"].evaluate(context))
            context[METER].bind("return", value, step.label)
            return value
        if op == "fail":
            _fail(route, step, context)
            continue
        result = _STEPS[op](route, step, context, store)
        if step.as_name:
            context[METER].bind(step.as_name, result, step.label)
            context[step.as_name] = result
    return None


def _fail(route: CompiledRoute, step: Step, context: dict[str, Any]) -> None:
    when = step.exprs.get("when")
    if when is not None:
        condition = when.evaluate(context)
        if not isinstance(condition, bool):
            raise _wrong(route, step, "fail.when", "a bool", condition)
        if not condition:
            return
    meter = context[METER]
    message = step.exprs["message"].evaluate(context)
    meter.check(message, f"steps[{step.index}].fail.message")
    message = _json(route, step, "fail.message", message)
    details_expr = step.exprs.get("details")
    details = None
    if details_expr is not None:
        details = details_expr.evaluate(context)
        meter.check(details, f"steps[{step.index}].fail.details")
        details = _json(route, step, "fail.details", details)
    if details is not None and not isinstance(details, dict):
        raise _wrong(route, step, "fail.details", "a map", details)
    text = message if isinstance(message, str) else str(message)
    if len(text) > FAIL_MESSAGE_CHARS:
        text = text[: FAIL_MESSAGE_CHARS - 1] + "…"
    raise HandlerError(text, details=details)


def _wrong(route: CompiledRoute, step: Step, where: str, expected: str, got: Any) -> HandlerError:
    return HandlerError(
        f"Route '{route.name}' failed at steps[{step.index}].{where}: the expression must evaluate to "
        f"{expected}, got {_cel_type(got)}",
        details={"route": route.name, "step": f"steps[{step.index}].{where}"},
    )


def _cel_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return {int: "int", float: "double", str: "string", dict: "map", list: "list"}.get(
        type(value), type(value).__name__
    )


def _record_id(route: CompiledRoute, step: Step, context: dict[str, Any], key: str = "id") -> str:
    value = step.exprs[key].evaluate(context)
    if isinstance(value, str) and value and len(value) <= 200:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _wrong(route, step, f"{step.op}.{key}", "a non-empty string (at most 200 characters) or an int", value)


def _record_value(route: CompiledRoute, step: Step, context: dict[str, Any]) -> dict[str, Any]:
    value = _json(route, step, f"{step.op}.value", step.exprs["value"].evaluate(context))
    if not isinstance(value, dict):
        raise _wrong(route, step, f"{step.op}.value", "a map", value)
    return value


def _where(route: CompiledRoute, step: Step, context: dict[str, Any]) -> list[tuple[tuple[str, ...], str, Any]]:
    where = []
    for condition in step.where:
        at = condition.expr.where.split(".", 1)[1]
        value = _json(route, step, at, condition.expr.evaluate(context))
        values = value if condition.op == "in" else [value]
        if condition.op == "in" and not isinstance(value, list):
            raise _wrong(route, step, at, "a list", value)
        if condition.path == ("id",):
            if any(not _is_id(v) for v in values):
                expected = "a list of strings or ints (record ids)" if condition.op == "in" else "a string or an int"
                raise _wrong(route, step, at, expected, value if condition.op != "in" else _first_bad(values, _is_id))
            value = [str(v) for v in value] if condition.op == "in" else str(value)
        elif condition.op in ("gt", "gte", "lt", "lte"):
            if not _is_orderable(value):
                raise _wrong(route, step, at, f"a number or a string to compare with {condition.op}", value)
        elif any(not _is_scalar(v) for v in values):
            expected = "a list of strings, numbers or bools" if condition.op == "in" else "a string, number, bool, null"
            raise _wrong(route, step, at, expected, value if condition.op != "in" else _first_bad(values, _is_scalar))
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


def _json(route: CompiledRoute, step: Step, where: str, value: Any) -> Any:
    """`to_json`, with a value JSON cannot hold reported at the route and step that made it."""
    try:
        return to_json(value)
    except HandlerError as exc:
        raise HandlerError(
            f"Route '{route.name}' failed at steps[{step.index}].{where}: {exc.message}",
            details={"route": route.name, "step": f"steps[{step.index}].{where}"},
        ) from None


def _get(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    record = store.get(step.collection, _record_id(route, step, context))
    if record is not None:
        return record
    default = step.exprs.get("default")
    if default is not None:
        return _json(route, step, "get.default", default.evaluate(context))
    record_id = _record_id(route, step, context)
    raise OperationFailed(
        f"Route '{route.name}' {step.label}: no record with id '{record_id}' in collection '{step.collection}'.",
        details={"collection": step.collection, "id": record_id},
    )


def _find(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    limit = None
    if "limit" in step.exprs:
        value = step.exprs["limit"].evaluate(context)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _wrong(route, step, "find.limit", "a non-negative int", value)
        limit = value
    return store.find(step.collection, _where(route, step, context), step.order_by, limit)


def _count(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    return store.count(step.collection, _where(route, step, context))


def _sum(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None and step.field_path is not None
    return store.sum(step.collection, step.field_path, _where(route, step, context))


def _let(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    return step.exprs["value"].evaluate(context)


def _insert(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    data = _record_value(route, step, context)
    record_id = data.pop("id", None)
    if "id" in step.exprs:
        record_id = _record_id(route, step, context)
    elif record_id is not None and not isinstance(record_id, str):
        record_id = str(record_id) if isinstance(record_id, int) and not isinstance(record_id, bool) else None
        if record_id is None:
            raise _wrong(route, step, "insert.value.id", "a string or an int", data.get("id"))
    return store.insert(step.collection, record_id, data)


def _update(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    record_id = _record_id(route, step, context)
    data = _record_value(route, step, context)
    data.pop("id", None)  # a record's id never changes
    return store.update(step.collection, record_id, data)


def _upsert(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    record_id = _record_id(route, step, context)
    data = _record_value(route, step, context)
    data.pop("id", None)
    return store.upsert(step.collection, record_id, data)


def _delete(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None
    return store.delete(step.collection, _record_id(route, step, context))


def _increment(route: CompiledRoute, step: Step, context: dict[str, Any], store: RecordStore) -> Any:
    assert step.collection is not None and step.field_path is not None
    record_id = _record_id(route, step, context)
    by: Any = 1
    if "by" in step.exprs:
        by = step.exprs["by"].evaluate(context)
        if not isinstance(by, (int, float)) or isinstance(by, bool) or not math.isfinite(by):
            raise _wrong(route, step, "increment.by", "a finite int or double", by)
    return store.increment(step.collection, record_id, step.field_path[0], by, reread=step.as_name is not None)


_STEPS = {
    "get": _get,
    "find": _find,
    "count": _count,
    "sum": _sum,
    "let": _let,
    "insert": _insert,
    "update": _update,
    "upsert": _upsert,
    "delete": _delete,
    "increment": _increment,
}
