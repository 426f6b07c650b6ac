"""Database work from the MCP endpoint's async code: one unit at a time, on a bounded set of threads.

A request spends most of its life waiting on the network (a 2025-11-25 GET stream stays open for as
long as the client likes; delete_app waits for the user's answer), so it must hold no database
connection while it waits. Each unit of work (authenticating the request, each `db()` call of a tool)
therefore runs on one of `DATABASE_POOL_MAX_SIZE` worker threads and gives its connection back when it
ends: to the psycopg pool on PostgreSQL (no new connection per unit), closed on SQLite. The thread
bound keeps this process's MCP connections within the pool's ceiling, however many requests wait.

Units carry a copy of the caller's contextvars, so `current_caller` reads the same inside a unit as in the
handler that started it (a unit only reads them; what it sets stays in its copy). A unit is handed to its
thread with the event loop's own `run_in_executor`: asgiref's `sync_to_async` does the same with more
bookkeeping per call, which showed in an MCP call's server time.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from asgiref.sync import AsyncToSync, sync_to_async
from django.conf import settings
from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")


@functools.cache
def executor() -> ThreadPoolExecutor:
    """The process's threads for database work: MCP's units, and each REST request whole (charming/one_hop.py)."""
    return ThreadPoolExecutor(max_workers=settings.DATABASE_POOL_MAX_SIZE, thread_name_prefix="charming-db")


def _called_from_sync_code() -> bool:
    """Whether this coroutine runs under `async_to_sync` from a sync thread (asgiref records that thread)."""
    return getattr(AsyncToSync.executors, "current", None) is not None


async def db(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `fn` (sync ORM code: a service, a selector) as one unit of database work, off the event loop."""
    if _called_from_sync_code():
        # A sync caller (the test suite's in-process tool calls) owns its thread's connection and transaction:
        # run there, as asgiref's thread-sensitive default does, and leave the connection to that caller.
        return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)

    def unit() -> R:
        # Django's own request boundaries, around one unit: drop a connection that went bad or stale before, give
        # this one back after (CONN_MAX_AGE is 0 with the pool, so "give back" is putconn).
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return await asyncio.get_running_loop().run_in_executor(executor(), contextvars.copy_context().run, unit)
