"""The PostgreSQL cursor the settings name: server-side binding that prepares only plan-stable statements."""

from __future__ import annotations

import select
import time
import weakref
from typing import Any

import psycopg
from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]
from psycopg_pool import ConnectionPool

from apps_registry.plans import is_plan_stable


class PlanStableCursor(ServerBindingCursor):  # type: ignore[misc]
    """Django's server-side binding cursor; a statement not declared `plan_stable` (apps_registry/plans.py) is
    never prepared, so PostgreSQL plans it for its own values on every execution."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        if prepare is None and not is_plan_stable(query):
            prepare = False
        return super().execute(query, params, prepare=prepare, binary=binary)


class IdleConnectionCheck:
    """The psycopg pool's `check` (run as a connection leaves the pool): an empty query only for a connection that
    sat idle for `idle_seconds` or more, or whose socket has something to read (PostgreSQL writes its "terminating
    connection" notice and closes the socket when it shuts down or restarts, so a connection a restart cut off is
    still caught, and replaced, without a round trip for every healthy one). Idle time is counted from the
    connection's previous checkout, which is never later than its return: a connection is checked at least as often
    as the setting says. 0 checks every connection every time (the SDK's own `check_connection`)."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self._out_at: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def __call__(self, conn: Any) -> None:
        now = time.monotonic()
        out_at = self._out_at.get(conn)
        self._out_at[conn] = now
        if out_at is not None and now - out_at < self.idle_seconds and not _readable(conn):
            return
        ConnectionPool.check_connection(conn)


def _readable(conn: Any) -> bool:
    """Whether an idle connection's socket has anything to read (a server's goodbye, or its closed end)."""
    try:
        ready, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True  # no usable socket: let the real check find out
    return bool(ready)
