"""Idempotent retries of mutations: a caller-chosen key makes a retried call return the first call's result.

The key is scoped to the caller, the app and the route, remembered for CHARMING_IDEMPOTENCY_WINDOW_HOURS, and
stored in the mutation's own transaction (services.routes.route_run), so it is remembered exactly when the
mutation committed: a call that failed wrote nothing, and its retry runs again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps_registry.exceptions import InvalidInput, OperationFailed
from apps_registry.models import App, IdempotentResult
from apps_registry.values import text_problems

KEY_MAX_CHARS = 200


@dataclass(frozen=True)
class IdempotencyKey:
    """A checked key, where it came from (for messages: the MCP `_meta` entry or the REST header)."""

    value: str
    source: str


def _key_problem(value: object) -> str:
    if not isinstance(value, str):
        return "must be a string"
    if not value.strip():
        return "must be a non-empty string"
    if len(value) > KEY_MAX_CHARS:
        return f"must be at most {KEY_MAX_CHARS} characters, got {len(value)}"
    if text_problems(value) or not value.isprintable():
        return "must be printable text (no control characters, NUL or lone surrogates)"
    return ""


def idempotency_key_check(value: object, *, source: str) -> IdempotencyKey | None:
    """The key a caller sent (None when they sent none), or InvalidInput saying what a key must be."""
    if value is None:
        return None
    problem = _key_problem(value)
    if problem or not isinstance(value, str):
        raise InvalidInput(
            f"The idempotency key ({source}) {problem}; send a unique string per intended change, such as a UUID.",
            errors=[{"path": source, "message": problem}],
        )
    return IdempotencyKey(value=value, source=source)


def params_hash(params: dict[str, Any] | None) -> str:
    canonical = json.dumps({} if params is None else params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _window_start() -> Any:
    return timezone.now() - timedelta(hours=settings.CHARMING_IDEMPOTENCY_WINDOW_HOURS)


@dataclass(frozen=True)
class Remembered:
    value: Any
    change_id: int | None = None  # the first call's change (None: it changed no record, or the log was off)


def idempotent_result_find(
    *, actor: Any, app: App, op: str, key: IdempotencyKey, params: dict[str, Any] | None
) -> Remembered | None:
    """The first result of this key's call, if one committed within the window; InvalidInput when the key was used
    with other params (a different change: the caller must pick a new key)."""
    found = IdempotentResult.objects.filter(
        user=actor, app_id=app.id, op=op, key=key.value, created_at__gte=_window_start()
    ).first()
    if found is None:
        return None
    if found.params_hash != params_hash(params):
        raise InvalidInput(
            f"The idempotency key ({key.source}) was already used for a call of '{op}' with other params; a retry "
            "must send the same params. Use a new key for a different change.",
            errors=[{"path": key.source, "message": "already used with other params"}],
        )
    return Remembered(value=found.value, change_id=found.change_id)


class KeyTaken(Exception):
    """A concurrent call with the same key committed first: this call's writes must be rolled back."""


def idempotent_result_remember(
    *,
    actor: Any,
    app: App,
    op: str,
    key: IdempotencyKey,
    params: dict[str, Any] | None,
    value: Any,
    change_id: int | None = None,
) -> None:
    """Record the result, in the caller's (the mutation's) transaction. KeyTaken when a concurrent call with the
    same key got there first (the unique constraint waits for it to commit)."""
    IdempotentResult.objects.filter(
        user=actor, app_id=app.id, op=op, key=key.value, created_at__lt=_window_start()
    ).delete()
    try:
        with transaction.atomic():
            IdempotentResult.objects.create(
                user=actor,
                app_id=app.id,
                op=op,
                key=key.value,
                params_hash=params_hash(params),
                value=value,
                change_id=change_id,
                created_at=timezone.now(),
            )
    except IntegrityError:
        raise KeyTaken from None


def idempotency_conflict(key: IdempotencyKey, op: str) -> OperationFailed:
    """When the concurrent call that took the key is not visible yet (it cannot be after it committed)."""
    return OperationFailed(
        f"Another call with this idempotency key ({key.source}) to '{op}' is running; retry in a moment to get its "
        "result."
    )
