"""Running a compiled route against a store: input validation, the steps (each kind runs itself, see
routes/steps.py; a mutation inside the store's transaction), output validation. Every failure is one
of apps_registry.exceptions; a failed mutation writes nothing."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from django.db import DataError
from django.utils import timezone

from apps_registry.exceptions import InvalidInput, InvalidOutput, OperationFailed
from apps_registry.routes.budget import CallBudget, Size
from apps_registry.routes.compiler import CompiledRoute
from apps_registry.routes.expressions import INT64_MAX, INT64_MIN
from apps_registry.routes.limits import Limits, limit_details
from apps_registry.routes.schemas import ValidationErrors, coerce_numbers
from apps_registry.routes.steps import Call, NoticeDraft, run_steps
from apps_registry.routes.store import MeteredStore, Store
from apps_registry.values import type_name


def run_route(
    route: CompiledRoute,
    *,
    params: Any,
    caller: dict[str, Any],
    app_id: str,
    store: Store,
    limits: Limits,
    now: datetime | None = None,
    notices: list[NoticeDraft] | None = None,
) -> Any:
    """Validate `params`, run the steps against `store` (a mutation inside `store.atomic()`) and validate
    the result; returns the route's JSON value. Its notify steps' notices go to `notices` (the caller sends them
    with the mutation's commit); without it they are checked and dropped."""
    params, params_size = _params_checked(route, params, limits)
    call = Call(
        route=route.name,
        values={"params": params, "caller": caller, "app": {"id": app_id}, "now": now or timezone.now()},
        budget=CallBudget(limits=limits, route=route.name, sizes={"params": params_size}),
        store=MeteredStore(store, max_read=limits.records_read_per_call, max_written=limits.records_written_per_call),
        notices=notices,
    )
    try:
        if route.kind == "query":
            return _finish(route, run_steps(route.steps, call))
        with store.atomic():
            return _mutate(route, call, limits)
    except DataError as exc:
        # A value the database refuses (e.g. a number too large for it); the transaction is rolled back.
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise OperationFailed(
            f"Route '{route.name}': the database refused a value ({reason}).", details={"route": route.name}
        ) from None


def params_check(route: CompiledRoute, params: Any, limits: Limits) -> None:
    """InvalidInput (or OperationFailed for a limit) unless `params` would be accepted by the route, as a call
    checks them before its steps (a schedule's fixed params, when it is saved)."""
    _params_checked(route, params, limits)


def _params_checked(route: CompiledRoute, params: Any, limits: Limits) -> tuple[dict[str, Any], Size]:
    if not isinstance(params, dict):
        raise InvalidInput(
            f"params of route '{route.name}' must be a JSON object, got {type_name(params)}.",
            errors=[{"path": "$", "message": f"must be of type object, got {type_name(params)}"}],
        )
    params_size = _check_params(route, params, limits)
    params = coerce_numbers(params, route.input_numbers)
    errors = route.input_validator.errors(params)
    if errors:
        raise InvalidInput(
            f"params do not match the input schema of route '{route.name}': {_summary(errors)}", errors=errors
        )
    return params, params_size


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


def _mutate(route: CompiledRoute, call: Call, limits: Limits) -> Any:
    """The steps of a mutation; the caller holds the transaction."""
    value = run_steps(route.steps, call)
    metered = call.store
    if metered.written:
        # One UPDATE of the storage's counters, not a count of its records: the same cost at any size. Every
        # write counts a change (open pages refresh on it), so an app's writes take its storage row in turn.
        total = metered.store.records_changed(metered.created - metered.deleted)
        if metered.created > metered.deleted and total > limits.records_per_app:
            raise OperationFailed(
                f"This app would hold more than {limits.records_per_app} records; delete some before adding more.",
                details=limit_details("records_per_app", limits.records_per_app),
            )
    # Validated inside the transaction, so a route that breaks its output contract writes nothing.
    return _finish(route, value)


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
    """The first three errors, then how many more the value has: the real count, not the entries listed (a
    validator's list ends with an entry counting those past MAX_ERRORS, see ValidationErrors; when only the first
    was looked for, more may follow)."""
    total = errors.total if isinstance(errors, ValidationErrors) else len(errors)
    listed = errors[: 1 if total is None else min(len(errors), total)]  # without a validator's counting entry
    shown = "; ".join(f"{e['path']}: {e['message']}" for e in listed[:3])
    if total is None:
        return shown + "; further errors may follow, not checked"
    more = total - min(total, 3)
    return shown + (f"; and {more} more" if more else "")
