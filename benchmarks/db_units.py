"""What one unit of database work costs the MCP endpoint besides its SQL: the hand-off to a database thread and
back (`mcp_tools.database.db`), and Django's connection handling around it (`close_old_connections`, which on
PostgreSQL gives the connection back to the pool; the unit's first statement takes one again).

    .venv/bin/python benchmarks/db_units.py                                 # temporary SQLite database
    .venv/bin/python benchmarks/db_units.py --database-url postgres://…/db  # any database, nothing written
    .venv/bin/python benchmarks/db_units.py --quick                         # a smoke run

An MCP call runs two units (authenticating the request, then the tool's work), a REST call one; the bare reference
server (benchmarks/bare_server.py) runs its statement on the event loop with an async pool, and has none. The cases,
interleaved within each repetition, CPU of this process (all its threads) per unit, median (min-max):

- unit, nothing: `await db(f)` where f does nothing (the hand-off alone), one at a time and eight at once;
- unit, SELECT 1: `await db(f)` where f runs `SELECT 1` (the hand-off, the connection handling, the statement);
- thread, SELECT 1: f in one thread, close_old_connections before and after (no hand-off);
- thread, kept: f in one thread on a kept connection (the statement alone, through Django's cursor).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000, help="units per case and repetition")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--database-url", default="", help="default: a temporary SQLite database")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 units per case, 2 repetitions")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.repeats = 300, 2
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="charming-units-") as workdir:
        os.environ["DJANGO_SETTINGS_MODULE"] = "charming.settings"
        os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{workdir}/units.sqlite3"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        import django

        django.setup()
        asyncio.run(_measure(args.calls, args.repeats))
    return 0


async def _measure(calls: int, repeats: int) -> None:
    from django.conf import settings
    from django.db import close_old_connections, connection

    from benchmarks.measure import Spread, banner
    from mcp_tools.database import db, executor

    def select_one() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    def nothing() -> None:
        return None

    def around(fn: Callable[[], None]) -> Callable[[], None]:
        def unit() -> None:  # the body of mcp_tools.database.db's unit
            close_old_connections()
            try:
                fn()
            finally:
                close_old_connections()

        return unit

    async def units(fn: Callable[[], None], at_once: int) -> float:
        async def client() -> None:
            for _ in range(calls // at_once):
                await db(fn)

        start = time.process_time()
        await asyncio.gather(*(client() for _ in range(at_once)))
        return (time.process_time() - start) / (calls // at_once * at_once)

    async def in_one_thread(fn: Callable[[], None]) -> float:
        def run() -> float:
            fn()  # warm: for the kept case, the connection stays open for the timed statements
            start = time.process_time()
            for _ in range(calls):
                fn()
            elapsed = (time.process_time() - start) / calls
            close_old_connections()
            return elapsed

        return await asyncio.get_running_loop().run_in_executor(executor(), run)

    cases: dict[str, Callable[[], Awaitable[float]]] = {
        "unit, nothing, 1 at once": functools.partial(units, nothing, 1),
        "unit, nothing, 8 at once": functools.partial(units, nothing, 8),
        "unit, SELECT 1, 1 at once": functools.partial(units, select_one, 1),
        "unit, SELECT 1, 8 at once": functools.partial(units, select_one, 8),
        "thread, SELECT 1": functools.partial(in_one_thread, around(select_one)),
        "thread, kept": functools.partial(in_one_thread, select_one),
    }
    banner(
        f"a unit of database work ({connection.vendor}), {settings.DATABASE_POOL_MAX_SIZE} threads, {calls} units "
        f"per case, {repeats} repetitions, interleaved"
    )
    for at_once in (1, 8):  # warm up: the threads, the pool's connections, the prepared statement
        await units(select_one, at_once)
    figures: dict[str, list[float]] = {name: [] for name in cases}
    for repetition in range(repeats):
        for name in list(cases) if repetition % 2 == 0 else list(reversed(cases)):
            figures[name].append(await cases[name]())
    for name, values in figures.items():
        print(f"  {name:28} {Spread.of(v * 1e6 for v in values).show()} µs CPU")


if __name__ == "__main__":
    raise SystemExit(main())
