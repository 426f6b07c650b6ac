"""What the change log costs: one mutate_app-sized mutation (the budget example's add_expense: a get, an insert
and an increment, two records changed) through route_run with the change log on and off
(CHARMING_CHANGE_LOG, read on every call), side by side, on SQLite and on PostgreSQL; then the change log's
storage per 1,000 such changes; then a background record migration (every record of an app rewritten, in batches of
500) with the log on and off, per record.

    .venv/bin/python benchmarks/change_log.py                 # SQLite, and PostgreSQL via .ci/postgres.sh
    .venv/bin/python benchmarks/change_log.py --quick         # a smoke run (seconds)
    .venv/bin/python benchmarks/change_log.py --calls 500 --rounds 15 --only postgres

Each database runs in its own process on a fresh database (a temp SQLite file with the project's settings; a
throw-away PostgreSQL cluster with fsync=off). Calls run one after another on one connection. After a warm-up,
the two sides run in short rounds whose order alternates from round to round, so both see the same machine load;
figures are median (min-max) over rounds, per call: wall time, this process's CPU (the server's: route_run is
what a request runs) and, on PostgreSQL, the backend's CPU (from /proc, the database's). The added cost is
taken within each round (on / off - 1).

Storage: the bytes the change log's two tables and their indexes hold after 1,000 changes of add_expense
(PostgreSQL: pg_total_relation_size after VACUUM; SQLite: the dbstat table's pages, when SQLite was built with it).

    .venv/bin/python benchmarks/change_log.py --mcp           # whole mutate_app calls, SQLite and PostgreSQL
    .venv/bin/python benchmarks/change_log.py --mcp --quick   # a smoke run (about a minute)
    .venv/bin/python benchmarks/change_log.py --mcp --calls 800 --rounds 15 --only postgres

--mcp prices the log against one whole mutate_app call (MCP transport, authentication, rate limits, the route)
instead of route_run alone: it starts two `uvicorn charming.asgi:application` servers from this checkout on the
same fresh database (as benchmarks/mcp_calls.py does), one with CHARMING_CHANGE_LOG=true and one with false, rate
limits set high but checked (measure.RATE_LIMITS_HIGH), and this one process calls mutate_app (add_expense on the
budget example) over the official MCP SDK client in 2026-07-28 (stateless) mode, one call at a time. After a
warm-up on each server, the two run in rounds whose order alternates; each side of a round opens its client and
makes a few calls before the clock starts. Per side and round: calls/s, the server's CPU per call (its process
tree, from /proc) and, on PostgreSQL, the database's: the whole cluster's CPU (every backend and background
process) over the timed calls, nothing subtracted; only one server works during a side, so that is the calls'
database work plus whatever the cluster does meanwhile (autovacuum, the WAL writer). On SQLite the database runs
inside the server, in its CPU. Added is on / off - 1 within each round; "CPU total" is server + database. At the
end the change log's rows are counted, to show that each server ran with its setting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import RATE_LIMITS_HIGH, Spread, banner, load, process_cpu, tree_cpu

ROOT = Path(__file__).resolve().parents[1]
MCP_CALLS = 500  # --mcp: timed calls per side per round
MCP_WARMUP = 100  # --mcp: calls on each server before the first round (quick: 20), not recorded
MCP_SIDE_WARMUP = 3  # --mcp: calls after a side's client is set up, before its clock starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, help="calls per side per round (default 300, --mcp 500; quick 40)")
    parser.add_argument("--rounds", type=int, help="rounds (default 11; quick 3)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few calls, three rounds")
    parser.add_argument("--mcp", action="store_true", help="whole mutate_app calls: two servers, log on and off")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    calls = args.calls or (40 if args.quick else MCP_CALLS if args.mcp else 300)
    rounds = args.rounds or (3 if args.quick else 11)
    if args.mcp:
        mcp_main(args, calls, rounds)
        return
    if args.worker:
        worker(calls, rounds)
        return
    python = sys.executable
    script = str(Path(__file__).resolve())
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
            subprocess.run(
                [python, script, "--worker", "--calls", str(calls), "--rounds", str(rounds)],
                env=env,
                check=True,
                cwd=ROOT,
            )
    if args.only in (None, "postgres"):
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f"'{python}' '{script}' --worker --calls {calls} --rounds {rounds}; rc=$?; pg_stop; exit $rc"
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def worker(calls: int, rounds: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    for name, value in RATE_LIMITS_HIGH.items():
        os.environ.setdefault(name, value)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from apps_registry.models import Change, ChangeEntry
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username="bench")
    definition = json.loads((ROOT / "examples" / "budget.json").read_text())
    app = app_definition_save(actor=user, definition=definition)
    route_run(actor=user, app_id=app.id, op="set_budget", params={"limit": 1e12}, kind="mutation", via="mcp")
    counter = iter(range(10**9))

    def call() -> None:
        i = next(counter)
        route_run(
            actor=user,
            app_id=app.id,
            op="add_expense",
            params={"amount": 1.25, "category": f"c{i % 7}", "note": "bench"},
            kind="mutation",
            via="mcp",
        )

    postgres = connection.vendor == "postgresql"
    backend = None
    if postgres:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]

    def timed(on: bool, n: int) -> tuple[float, float, float]:
        settings.CHARMING_CHANGE_LOG = on
        db0 = process_cpu(backend) if backend else 0.0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            call()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        db = (process_cpu(backend) - db0) if backend else 0.0
        return wall / n * 1e6, cpu / n * 1e6, db / n * 1e6

    timed(True, calls)  # warm-up: compiled routes, prepared statements, caches
    timed(False, calls)
    banner(f"change log cost per add_expense, {connection.vendor}, {calls} calls x {rounds} rounds")
    figures: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    ratios: list[tuple[float, float, float]] = []
    for r in range(rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {on: timed(on, calls) for on in order}
        for on in (True, False):
            figures[on].append(got[on])
        ratios.append(
            tuple(  # type: ignore[arg-type]
                (got[True][k] / got[False][k] - 1) * 100 if got[False][k] else 0.0 for k in range(3)
            )
        )
    columns = ["wall µs", "server CPU µs"] + (["database CPU µs"] if postgres else [])
    print(f"{'':18}" + "".join(f"{c:>24}" for c in columns))
    for on in (False, True):
        row = [Spread.of(f[k] for f in figures[on]).show() for k in range(len(columns))]
        print(f"{'change log ' + ('on' if on else 'off'):18}" + "".join(f"{v:>24}" for v in row))
    added = [Spread.of(ratio[k] for ratio in ratios).show(1) + " %" for k in range(len(columns))]
    print(f"{'added':18}" + "".join(f"{v:>24}" for v in added))
    if postgres:
        both = [
            ((on[1] + on[2]) / (off[1] + off[2]) - 1) * 100
            for on, off in zip(figures[True], figures[False], strict=True)
        ]
        print(f"{'added, CPU total':18}{Spread.of(both).show(1) + ' %':>24}")

    # Storage per 1,000 changes: a fresh log, 1,000 calls with it on.
    settings.CHARMING_CHANGE_LOG = True
    if postgres:  # TRUNCATE gives the tables' pages back, so the size below starts from empty tables
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {ChangeEntry._meta.db_table}, {Change._meta.db_table}")
    else:
        ChangeEntry.objects.all().delete()
        Change.objects.all().delete()
    size0 = _log_bytes(connection)
    for _ in range(1000):
        call()
    size = _log_bytes(connection)
    entries = ChangeEntry.objects.count()
    if size is None or size0 is None:
        print("\nstorage per 1,000 changes: not measurable here (SQLite built without dbstat)")
    else:
        print(
            f"\nstorage per 1,000 changes ({entries} records' before/after): {(size - size0) / 1024:.0f} KiB "
            f"(tables and indexes; {(size - size0) / entries:.0f} bytes per record changed), load average {load()}"
        )
    _migration_cost(user, total=max(500, calls * 10), rounds=max(3, rounds // 2), backend=backend)


def _migration_cost(user: Any, total: int, rounds: int, backend: int | None) -> None:
    """A background record migration of `total` records (record_migration_run, batches of 500) with the change log
    on and off, alternating: each round saves the definition again with a migrate that touches every record."""
    from django.conf import settings
    from django.db import connection

    from apps_registry.models import Record, Storage
    from apps_registry.services.definitions import app_definition_save, definition_save
    from apps_registry.services.record_migrations import record_migration_run

    definition = {
        "name": "Reading list",
        "collections": {"books": {}},
        "routes": {
            "all": {
                "kind": "query",
                "steps": [{"find": {"collection": "books", "limit": "10"}, "as": "b"}, {"return": "b"}],
            }
        },
    }
    app = app_definition_save(actor=user, definition=definition)
    storage = Storage.objects.get(app=app)
    Record.objects.bulk_create(
        Record(
            storage=storage, collection="books", record_id=f"b{i}", data={"title": f"Book {i}", "n": i, "touched": 0}
        )
        for i in range(total)
    )
    Storage.objects.filter(pk=storage.pk).update(records_held=total)
    settings.CHARMING_ROUTES_MIGRATE_INLINE_RECORDS = 1  # every migration queued, run in batches as the worker does
    migrate = {"books": "{'title': record.title, 'n': record.n, 'touched': record.touched + 1}"}

    def timed(on: bool) -> tuple[float, float, float]:
        settings.CHARMING_CHANGE_LOG = on
        version = app.__class__.objects.get(pk=app.pk).version
        saved = definition_save(
            actor=user, definition=definition, app_id=app.id, expected_version=version, migrate=migrate
        )
        assert saved.migration is not None and saved.migration.queued_id is not None
        db0 = process_cpu(backend) if backend else 0.0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        row = record_migration_run(migration_id=saved.migration.queued_id)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        assert row is not None and (row.status, row.done) == ("done", total), row
        db = (process_cpu(backend) - db0) if backend else 0.0
        return wall / total * 1e6, cpu / total * 1e6, db / total * 1e6

    timed(True)  # warm-up
    banner(f"a background record migration of {total} records, {connection.vendor}, {rounds} rounds")
    figures: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            figures[on].append(timed(on))
    columns = ["wall µs/record", "server CPU µs/record"] + (["database CPU µs/record"] if backend else [])
    print(f"{'':18}" + "".join(f"{c:>26}" for c in columns))
    for on in (False, True):
        row = [Spread.of(f[k] for f in figures[on]).show() for k in range(len(columns))]
        print(f"{'change log ' + ('on' if on else 'off'):18}" + "".join(f"{v:>26}" for v in row))
    added = [
        Spread.of((on[k] / off[k] - 1) * 100 for on, off in zip(figures[True], figures[False], strict=True)).show(1)
        + " %"
        for k in range(len(columns))
    ]
    print(f"{'added':18}" + "".join(f"{v:>26}" for v in added) + f"   load average {load()}")


def _log_bytes(connection: Any) -> int | None:
    from apps_registry.models import Change, ChangeEntry

    tables = [Change._meta.db_table, ChangeEntry._meta.db_table]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT SUM(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) AS t", [tables])
            return int(cursor.fetchone()[0])
        try:
            cursor.execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name IN "
                "(SELECT name FROM sqlite_master WHERE tbl_name IN (%s, %s))",
                tables,
            )
        except Exception:  # dbstat is a compile-time option of SQLite
            return None
        return int(cursor.fetchone()[0] or 0)


# ---------------------------------------------------------------------------------------------- --mcp


def mcp_main(args: argparse.Namespace, calls: int, rounds: int) -> None:
    warmup = 20 if args.quick else MCP_WARMUP
    if args.database_url:  # inside the PostgreSQL run below
        mcp_run(args.database_url, calls, rounds, warmup)
        return
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory(prefix="charming-bench-") as tmp:
            mcp_run(f"sqlite:///{tmp}/bench.sqlite3", calls, rounds, warmup)
    if args.only in (None, "postgres"):
        inner = shlex.join(
            [sys.executable, str(Path(__file__).resolve()), "--mcp", "--calls", str(calls), "--rounds", str(rounds)]
            + (["--quick"] if args.quick else [])
        )
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f'{inner} --database-url "$DATABASE_URL"; rc=$?; pg_stop; exit $rc'
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


@dataclass(frozen=True)
class McpServer:
    on: bool  # CHARMING_CHANGE_LOG
    base: str
    pid: int


@dataclass(frozen=True)
class Side:
    calls_per_s: float
    server_us: float  # CPU per call
    db_us: float | None  # the cluster's CPU per call (PostgreSQL)

    @property
    def total_us(self) -> float:
        return self.server_us + (self.db_us or 0.0)


def _mcp_prepare(env: dict[str, str]) -> dict[str, str]:
    """Migrate, then create the user, token and budget app (its budget set) in a child process."""
    script = f"""
import json, django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.email_confirmation import email_confirmed_by_operator
from apps_registry.services.routes import route_run
from apps_registry.services.tokens import token_create
user = get_user_model().objects.create(username="bench", email="bench@example.com")
email_confirmed_by_operator(user=user)  # tokens need a confirmed address
token = token_create(user=user, name="bench").plaintext
app = app_definition_save(actor=user, definition=json.loads(open({str(ROOT / "examples" / "budget.json")!r}).read()))
route_run(actor=user, app_id=app.id, op="set_budget", params={{"limit": 1e12}}, kind="mutation", via="mcp")
found = {{"token": token, "app_id": str(app.id)}}
with connection.cursor() as cursor:
    if connection.vendor == "sqlite":
        cursor.execute("PRAGMA synchronous")
        level = ["OFF", "NORMAL", "FULL", "EXTRA"][cursor.fetchone()[0]]
        cursor.execute("PRAGMA journal_mode")
        found["database"] = f"SQLite (journal_mode={{cursor.fetchone()[0]}}, synchronous={{level}})"
    else:
        cursor.execute("SELECT current_setting('server_version'), current_setting('fsync')")
        version, fsync = cursor.fetchone()
        found["database"] = f"PostgreSQL {{version}} (fsync={{fsync}})"
print(json.dumps(found))
"""
    return _django_json(env, script)


def _mcp_counts(env: dict[str, str]) -> dict[str, int]:
    """The change log's changes and entries, and the expenses, now in the database."""
    script = """
import json, django
django.setup()
from apps_registry.models import Change, ChangeEntry, Record
print(json.dumps({"changes": Change.objects.count(), "entries": ChangeEntry.objects.count(),
                  "records": Record.objects.count()}))
"""
    return {key: int(value) for key, value in _django_json(env, script).items()}


def _django_json(env: dict[str, str], script: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"a Django step failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def mcp_run(database_url: str, calls: int, rounds: int, warmup: int) -> None:
    from mcp_calls import SERVE_OPTIONS, _free_port, _postmaster

    env = {
        **os.environ,
        **RATE_LIMITS_HIGH,
        "DJANGO_SETTINGS_MODULE": "charming.settings",
        "DATABASE_URL": database_url,
        "LOG_LEVEL": "WARNING",
    }
    prepared = _mcp_prepare(env)
    processes: list[subprocess.Popen[bytes]] = []
    servers: dict[bool, McpServer] = {}
    try:
        for on in (True, False):
            port = _free_port()
            server_env = {
                **env,
                "CHARMING_CHANGE_LOG": "true" if on else "false",
                "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{port}",
            }
            command = [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1"]
            command += ["--port", str(port), "--lifespan", "on", "--log-level", "warning", "--no-access-log"]
            command += shlex.split(SERVE_OPTIONS)
            process = subprocess.Popen(command, env=server_env, cwd=ROOT)
            processes.append(process)
            servers[on] = McpServer(on=on, base=f"http://127.0.0.1:{port}", pid=process.pid)
        deadline = time.monotonic() + 60
        for server, process in zip(servers.values(), processes, strict=True):
            port = int(server.base.rsplit(":", 1)[1])
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise RuntimeError("a server did not start") from None
                    time.sleep(0.1)
        postmaster = _postmaster(database_url)
        before = load()
        banner(
            f"change log cost per mutate_app (add_expense, MCP 2026-07-28), {prepared['database']}, "
            f"{calls} calls x {rounds} rounds"
        )
        print(
            "two uvicorn servers, one process each, same checkout and database: CHARMING_CHANGE_LOG=true and "
            "=false; rate limits 1000000000 (checked, never reached); one client, one call at a time"
        )
        made = {True: 0, False: 0}
        figures, order_of = asyncio.run(_mcp_rounds(servers, prepared, postmaster, calls, rounds, warmup, made))
        _mcp_table(figures, order_of, postgres=postmaster is not None)
        counts = _mcp_counts(env)
        print(
            f"\nchange log rows: {counts['changes']} changes, {counts['entries']} entries for {made[True]} calls "
            f"with the log on (+1 set_budget) and {made[False]} with it off; {counts['records']} records "
            f"(expenses + the budget)"
        )
        if counts["changes"] != made[True] + 1 or counts["records"] != made[True] + made[False] + 1:
            raise RuntimeError("the servers did not run with the settings they were given")
        print(f"load average before: {before}; after: {load()}")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=15)


@contextlib.asynccontextmanager
async def _mutate_app(
    server: McpServer, prepared: dict[str, str], made: dict[bool, int]
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """A set-up SDK client (2026-07-28) on `server`; yields a function making one mutate_app call of add_expense."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    counter = itertools.count(made[server.on])
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {prepared['token']}"}, timeout=60)
    async with (
        http,
        Client(streamable_http_client(f"{server.base}/mcp", http_client=http), mode="2026-07-28") as client,
    ):
        await client.list_tools()

        async def call() -> None:
            i = next(counter)
            params = {"amount": 1.25, "category": f"c{i % 7}", "note": "bench"}
            result = await client.call_tool(
                "mutate_app", {"app_id": prepared["app_id"], "op": "add_expense", "params": params}
            )
            if result.is_error:
                raise RuntimeError(f"mutate_app failed: {result.content}")
            made[server.on] += 1

        yield call


async def _side(
    server: McpServer, prepared: dict[str, str], postmaster: int | None, n: int, made: dict[bool, int]
) -> Side:
    """`n` calls on `server` after its client's set-up and a few calls; only the `n` calls are inside the clock."""
    async with _mutate_app(server, prepared, made) as call:
        for _ in range(MCP_SIDE_WARMUP):
            await call()
        db0 = tree_cpu(postmaster) if postmaster else 0.0
        server0, wall0 = tree_cpu(server.pid), time.perf_counter()
        for _ in range(n):
            await call()
        wall, server_cpu = time.perf_counter() - wall0, tree_cpu(server.pid) - server0
        db = (tree_cpu(postmaster) - db0) if postmaster else None
    return Side(calls_per_s=n / wall, server_us=server_cpu / n * 1e6, db_us=None if db is None else db / n * 1e6)


async def _mcp_rounds(
    servers: dict[bool, McpServer],
    prepared: dict[str, str],
    postmaster: int | None,
    calls: int,
    rounds: int,
    warmup: int,
    made: dict[bool, int],
) -> tuple[list[dict[bool, Side]], list[tuple[bool, bool]]]:
    for on in (True, False):  # compiled routes, the CEL worker, the pool, caches; not recorded
        await _side(servers[on], prepared, postmaster, warmup, made)
    figures, orders = [], []
    for r in range(rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {on: await _side(servers[on], prepared, postmaster, calls, made) for on in order}
        figures.append(got)
        orders.append(order)
    return figures, orders


def _mcp_table(figures: list[dict[bool, Side]], orders: list[tuple[bool, bool]], *, postgres: bool) -> None:
    def added(get: Callable[[Side], float | None]) -> list[float]:
        return [(get(f[True]) or 0.0) / (get(f[False]) or 1.0) * 100 - 100 for f in figures]

    def difference(get: Callable[[Side], float | None]) -> list[float]:
        return [(get(f[True]) or 0.0) - (get(f[False]) or 0.0) for f in figures]

    columns: list[tuple[str, Callable[[Side], float | None], int]] = [
        ("calls/s", lambda s: s.calls_per_s, 0),
        ("server CPU µs/call", lambda s: s.server_us, 0),
    ]
    if postgres:
        columns += [("database CPU µs/call", lambda s: s.db_us, 0), ("CPU total µs/call", lambda s: s.total_us, 0)]
    print("per round: on/off - 1 (the side run first in brackets)")
    for r, (f, order) in enumerate(zip(figures, orders, strict=True)):
        parts = [
            f"{name.split(' µs')[0]} {(get(f[True]) or 0) / (get(f[False]) or 1) * 100 - 100:+.1f} %"
            for name, get, _ in columns
        ]
        print(f"  round {r + 1:>2} ({'on' if order[0] else 'off'} first): " + ", ".join(parts))
    print(f"\n{'':22}" + "".join(f"{name:>26}" for name, _, _ in columns))
    for on in (False, True):
        row = [Spread.of(get(f[on]) or 0.0 for f in figures).show(digits) for _, get, digits in columns]
        print(f"{'change log ' + ('on' if on else 'off'):22}" + "".join(f"{v:>26}" for v in row))
    row = [Spread.of(added(get)).show(1) + " %" for _, get, _ in columns]
    print(f"{'added (on/off - 1)':22}" + "".join(f"{v:>26}" for v in row))
    row = ["" if name == "calls/s" else Spread.of(difference(get)).show(0) for name, get, _ in columns]
    print(f"{'added µs (on - off)':22}" + "".join(f"{v:>26}" for v in row))
    total = Spread.of(added(lambda s: s.total_us)).show(1)
    where = "server + database" if postgres else "server; SQLite runs inside it"
    print(f"\nCPU total added ({where}): {total} %")
    if postgres:
        print(
            "database CPU: the whole PostgreSQL cluster's (all backends and background processes) over each side's "
            "timed calls, nothing subtracted (only that side's server was working)"
        )
    print("calls/s: on/off - 1 is the throughput's change (negative: fewer calls per second with the log on)")


if __name__ == "__main__":
    main()
