"""What one unit of database work costs the MCP endpoint besides its SQL: the hand-off to a database thread and
back (`mcp_tools.database.db`), and Django's connection handling around it (`close_old_connections`, which on
PostgreSQL gives the connection back to the pool; the unit's first statement takes one again).

    .venv/bin/python benchmarks/db_units.py                                 # temporary SQLite database
    .venv/bin/python benchmarks/db_units.py --database-url postgres://…/db  # any database, nothing written

An MCP call runs two units (authenticating the request, then the tool's work), a REST call one; the bare reference
server (benchmarks/bare_server.py) runs its statement on the event loop with an async pool, and has none. Each
case runs a unit's body (close_old_connections, the work, close_old_connections) through the server's pool of
threads (charming/threads.py, the most recently idle thread first) and through the standard ThreadPoolExecutor of
as many threads, one unit at a time and eight at once; then the statement alone in one thread, on a kept
connection. Interleaved within each repetition; CPU of this process (all its threads) per unit, median (min-max).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
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
    args = parser.parse_args()
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
    from concurrent.futures import Executor, ThreadPoolExecutor

    from django.conf import settings
    from django.db import close_old_connections, connection

    from benchmarks.measure import Spread, banner
    from charming.threads import RecentFirstExecutor

    def select_one() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    def nothing() -> None:
        return None

    def unit_of(fn: Callable[[], None]) -> Callable[[], None]:
        def unit() -> None:  # as mcp_tools.database.db's
            close_old_connections()
            try:
                fn()
            finally:
                close_old_connections()

        return unit

    async def units(pool: Executor, fn: Callable[[], None], at_once: int) -> float:
        loop = asyncio.get_running_loop()
        unit = unit_of(fn)

        async def client() -> None:
            for _ in range(calls // at_once):
                await loop.run_in_executor(pool, contextvars.copy_context().run, unit)

        start = time.process_time()
        await asyncio.gather(*(client() for _ in range(at_once)))
        return (time.process_time() - start) / (calls // at_once * at_once)

    async def kept() -> float:
        def run() -> float:
            select_one()  # the connection stays open for the timed statements
            start = time.process_time()
            for _ in range(calls):
                select_one()
            elapsed = (time.process_time() - start) / calls
            close_old_connections()
            return elapsed

        return await asyncio.get_running_loop().run_in_executor(None, run)

    threads = settings.DATABASE_POOL_MAX_SIZE
    pools: dict[str, Executor] = {
        "recent-first": RecentFirstExecutor(threads, "recent"),
        "ThreadPoolExecutor": ThreadPoolExecutor(threads, "stdlib"),
    }
    cases: dict[str, Callable[[], Awaitable[float]]] = {}
    for at_once in (1, 8):
        for work, fn in (("nothing", nothing), ("SELECT 1", select_one)):
            for name, pool in pools.items():
                cases[f"{name}, {work}, {at_once} at once"] = functools.partial(units, pool, fn, at_once)
    cases["SELECT 1 alone, kept connection"] = kept
    banner(
        f"a unit of database work ({connection.vendor}), {threads} threads, {calls} units per case, "
        f"{repeats} repetitions, interleaved"
    )
    for pool in pools.values():  # warm up: the threads, the pool's connections, the prepared statement
        for at_once in (1, 8):
            await units(pool, select_one, at_once)
    figures: dict[str, list[float]] = {name: [] for name in cases}
    for repetition in range(repeats):
        for name in list(cases) if repetition % 2 == 0 else list(reversed(cases)):
            figures[name].append(await cases[name]())
    for name, values in figures.items():
        print(f"  {name:40} {Spread.of(v * 1e6 for v in values).show()} µs CPU")
    for pool in pools.values():
        pool.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
