"""mutate_app through the MCP SDK client (both protocol versions) beside the same route through the REST endpoint,
with the CPU each call costs the client, the server and the database; and a `floor` mode that prices a call
against its own SQL replayed by pgbench.

    .venv/bin/python benchmarks/mcp_calls.py                      # SQLite and PostgreSQL, 1 and 8 clients
    .venv/bin/python benchmarks/mcp_calls.py --quick              # a smoke run (about a minute)
    .venv/bin/python benchmarks/mcp_calls.py floor                # PostgreSQL: the call vs its SQL under pgbench
    .venv/bin/python benchmarks/mcp_calls.py --database sqlite --calls 400 --repeats 5
    .venv/bin/python benchmarks/mcp_calls.py --env CHARMING_SOME_SETTING=1  # extra settings for the server
    .venv/bin/python benchmarks/mcp_calls.py --servers 2          # two uvicorn processes, one per port
    .venv/bin/python benchmarks/mcp_calls.py --tree /tmp/old      # serve another checkout (older code, say)
    .venv/bin/python benchmarks/mcp_calls.py --app-server         # also the route as a tool of /mcp/apps/<id>
    .venv/bin/python benchmarks/mcp_calls.py --bare --database postgres  # beside the bare reference server
    .venv/bin/python benchmarks/mcp_calls.py --kinds rest,mcp-2026-07-28 --profile /tmp/prof  # py-spy per transport

Each database gets a fresh one: a temporary SQLite file with the project's settings (WAL; SQLite's default
`synchronous=FULL`, so every commit waits for the disk, which is printed), or a throw-away PostgreSQL cluster
(.ci/postgres.sh, `fsync=off`). The script starts `uvicorn charming.asgi:application` (one process; with
`--servers N`, N processes on N ports, each client staying on one as behind the sticky proxy of
docs/operations.md), creates a user, a token and an app whose one mutation route inserts a record, and runs that
route through:

  rest            POST /api/apps/<id>/run/<op>/ with the token (httpx2, one keep-alive connection per client);
  mcp-2025-11-25  the official SDK client in session mode (one session per client, SSE responses);
  mcp-2026-07-28  the same client in stateless mode.

Clients are set up and warmed up before the clock starts and closed after it stops: only calls are timed. Every
repetition runs each transport once per client count, in an order that alternates between repetitions, so they
share the machine's load. Figures are median (min-max) over repetitions; "vs REST" is the throughput ratio
within each repetition. CPU per call is this client process (time.process_time), the server's process tree and
the PostgreSQL cluster (all backends, from /proc), over the timed calls only.

--bare (PostgreSQL) also starts benchmarks/bare_server.py, the reference of issue 21 (a minimal MCP server on the
same SDK, served the same way, whose one tool sends the same INSERT and record count through a psycopg pool),
on the same database, and adds it as the transport `bare-2026-07-28` (the SDK client in stateless mode), timed
alternately with the others; "vs bare" is Charming's throughput over the bare server's within each repetition.

--find N times query_app instead: the newest 20 expenses of a category that 30% of the app's N records are in
(`find` with `where`, `order_by: "-date"`, `limit: 20`, the collection declaring the index [category, date]), the
records bulk-loaded and ANALYZEd before the servers start; with --bare, the bare server's tool `recent_expenses`
sends the very statement Charming's find sent (captured in that preparation), with its parameters.

--profile DIR samples the server with py-spy (requirements-dev.txt) during each transport's first timed phase
(`--nonblocking`, 200 Hz, threads holding the GIL only, so idle waits do not count), writes DIR/<transport>-<n>.txt
(collapsed stacks) and prints each transport's top functions by share of the samples, own time and inclusive.

floor mode (PostgreSQL) also captures the SQL of one mutate_app call (2026-07-28) with log_statement=all,
replays it with pgbench (-n -c 1 -r) on a kept connection and with -C (a new connection per call, as a server
without a pool does), and runs pgbench's single-row UPDATE as the ceiling, on the same cluster in the same run;
it prints each transport's server and database CPU per call as a multiple of the replay's database CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import RATE_LIMITS_HIGH, Spread, banner, load, parent_pid, percentile, tree_cpu

ROOT = Path(__file__).resolve().parent.parent
ROUTE = "add_expense"
DEFINITION = {
    "format": 1,
    "name": "Benchmark budget",
    "description": "One cheap mutation route",
    "collections": {"expenses": {}},
    "routes": {
        ROUTE: {
            "kind": "mutation",
            "description": "Record one expense.",
            "input": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "category": {"type": "string"}},
                "required": ["amount", "category"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "steps": [
                {
                    "insert": {
                        "collection": "expenses",
                        "value": "{'amount': params.amount, 'category': params.category}",
                    },
                    "as": "expense",
                },
                {"return": "{'id': expense.id}"},
            ],
        }
    },
}
PARAMS = {"amount": 4.5, "category": "coffee"}
# --find N: query_app's newest 20 expenses of a category that 30% of the app's N records are in, the collection
# declaring the index [category, date] (docs/authoring.md, "Indexes"), beside the bare server sending the same SQL.
FIND_ROUTE = "recent_expenses"
FIND_CATEGORY = "groceries"
FIND_PARAMS = {"category": FIND_CATEGORY}
FIND_INDEX = [["category", "date"]]
FIND_STEPS = [
    {
        "find": {
            "collection": "expenses",
            "where": {"category": "params.category"},
            "order_by": "-date",
            "limit": "20",
        },
        "as": "found",
    },
    {"return": "found"},
]
KINDS = ("rest", "mcp-2025-11-25", "mcp-2026-07-28")


def find_definition() -> dict[str, Any]:
    """The benchmark app for --find: the insert route's app, its collection indexed, with the find route beside."""
    route = {
        "kind": "query",
        "description": "The newest 20 expenses of a category.",
        "input": {
            "type": "object",
            "properties": {"category": {"type": "string"}},
            "required": ["category"],
            "additionalProperties": False,
        },
        "output": {"type": "array", "items": {"type": "object"}},
        "steps": FIND_STEPS,
    }
    return {
        **DEFINITION,
        "collections": {"expenses": {"indexes": FIND_INDEX}},
        "routes": {**DEFINITION["routes"], FIND_ROUTE: route},
    }


def find_statement(user: Any, app_id: Any) -> tuple[str, str]:
    """The statement (and its parameters, as JSON) that the find route's find sends, run once as `user`: what
    the bare server sends for --find. Django set up."""
    from django.db import connection

    from apps_registry.services.routes import route_run

    executed: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, sql_params: Any, many: bool, context: Any) -> Any:
        executed.append((sql, sql_params))
        return execute(sql, sql_params, many, context)

    with connection.execute_wrapper(capture):
        route_run(actor=user, app_id=app_id, op=FIND_ROUTE, params=FIND_PARAMS, kind="query")
    sql, params = next((sql, params) for sql, params in executed if "apps_registry_record" in sql and "ORDER BY" in sql)
    return sql, json.dumps(list(params), default=str)


def expense_data(i: int) -> dict[str, Any]:
    """Record i of --find's app: 30% in FIND_CATEGORY, the rest in 20 others; a date ten records share (ties),
    rising with i, as expenses come in."""
    slot = i % 100
    category = FIND_CATEGORY if slot < 30 else f"category-{slot % 20}"
    day = dt.date(2020, 1, 1) + dt.timedelta(days=i // 10)
    return {"amount": round(1 + (i * 7919) % 10_000 / 100, 2), "category": category, "date": day.isoformat()}


# With --app-server: the same route called as its own tool on the app's MCP server (/mcp/apps/<id>).
APP_KINDS = ("app-2025-11-25", "app-2026-07-28")
BARE = "bare-2026-07-28"  # benchmarks/bare_server.py, with --bare
# The HTTP protocol docs/operations.md serves with (an older checkout given with --tree may lack it: pass --uvicorn).
SERVE_OPTIONS = "--http charming.serving:NoDelayHttpToolsProtocol"
CALL_WARMUP = 3  # calls per client after its setup, before the clock starts


@dataclass(frozen=True)
class Target:
    bases: tuple[str, ...]  # http://127.0.0.1:port of each server process
    token: str
    app_id: str
    server_pids: tuple[int, ...]
    postmaster_pid: int | None  # the PostgreSQL cluster's, when it runs on this machine
    bare_base: str = ""  # the bare reference server's, with --bare
    bare_pid: int | None = None
    kinds: tuple[str, ...] = KINDS
    finding: bool = False  # --find: query_app's find route instead of mutate_app's insert

    @property
    def route(self) -> tuple[str, dict[str, Any]]:
        return (FIND_ROUTE, FIND_PARAMS) if self.finding else (ROUTE, PARAMS)


@dataclass(frozen=True)
class Phase:
    kind: str
    clients: int
    calls_per_s: float
    p50_ms: float
    p99_ms: float
    client_ms: float  # CPU per call
    server_ms: float
    db_ms: float | None


# ---------------------------------------------------------------------------------------------- the clients


@contextlib.asynccontextmanager
async def _caller(kind: str, target: Target, index: int = 0) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """A set-up client for `kind`, the `index`th (it stays on one server process, as behind a sticky proxy);
    yields a function making one call (returns the call's value)."""
    import httpx2

    base = target.bases[index % len(target.bases)]
    headers = {"Authorization": f"Bearer {target.token}"}
    route, params = target.route
    route_kind = "query" if target.finding else "mutation"
    if kind == "rest":
        url = f"{base}/api/apps/{target.app_id}/run/{route}/"
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:

            async def rest_call() -> Any:
                response = await http.post(url, json={"params": params, "kind": route_kind})
                if response.status_code != 200:
                    raise RuntimeError(f"REST run failed: {response.status_code} {response.text[:500]}")
                return response.json()

            yield rest_call
        return

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    if kind == BARE:
        async with Client(f"{target.bare_base}/mcp", mode="2026-07-28") as bare:
            await bare.list_tools()

            tool = "recent_expenses" if target.finding else "add_expense"

            async def bare_call() -> Any:
                result = await bare.call_tool(tool, params)
                if result.is_error:
                    raise RuntimeError(f"{tool} failed: {result.content}")
                return result.structured_content

            yield bare_call
        return

    mode = "legacy" if kind.endswith("2025-11-25") else "2026-07-28"
    per_app = kind.startswith("app-")
    url = f"{base}/mcp/apps/{target.app_id}" if per_app else f"{base}/mcp"
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        await client.list_tools()

        tool = "query_app" if target.finding else "mutate_app"

        async def mcp_call() -> Any:
            if per_app:
                result = await client.call_tool(route, params)
            else:
                result = await client.call_tool(tool, {"app_id": target.app_id, "op": route, "params": params})
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
            return result.structured_content

        yield mcp_call


def _snapshot(target: Target, kind: str) -> tuple[float, float, float, float | None]:
    """(wall clock, this process's CPU, the server's CPU, the database cluster's CPU or None)."""
    db = None if target.postmaster_pid is None else tree_cpu(target.postmaster_pid)
    pids = (target.bare_pid,) if kind == BARE and target.bare_pid else target.server_pids
    return time.perf_counter(), time.process_time(), sum(tree_cpu(pid) for pid in pids), db


async def _phase(kind: str, clients: int, calls: int, target: Target) -> Phase:
    """`calls` calls split across `clients` concurrent clients; only the calls are inside the clock."""
    per_client = max(1, calls // clients)
    ready, done = asyncio.Barrier(clients + 1), asyncio.Barrier(clients + 1)
    latencies: list[float] = []

    async def client(index: int) -> None:
        try:
            async with _caller(kind, target, index) as call:
                for _ in range(CALL_WARMUP):
                    await call()
                await ready.wait()
                for _ in range(per_client):
                    started = time.perf_counter()
                    await call()
                    latencies.append(time.perf_counter() - started)
                await done.wait()
        except BaseException:
            await ready.abort()
            await done.abort()
            raise

    tasks = [asyncio.create_task(client(index)) for index in range(clients)]
    try:
        await ready.wait()
        start = _snapshot(target, kind)
        await done.wait()
        end = _snapshot(target, kind)
    except asyncio.BrokenBarrierError:
        await asyncio.gather(*tasks)  # raises the client's own error
        raise
    await asyncio.gather(*tasks)
    n = len(latencies)
    db_start, db_end = start[3], end[3]
    return Phase(
        kind=kind,
        clients=clients,
        calls_per_s=n / (end[0] - start[0]),
        p50_ms=percentile(latencies, 0.5) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        client_ms=(end[1] - start[1]) / n * 1000,
        server_ms=(end[2] - start[2]) / n * 1000,
        db_ms=None if db_start is None or db_end is None else (db_end - db_start) / n * 1000,
    )


async def _same_finds(target: Target) -> None:
    """--find --bare: the bare server's records are Charming's, in the same order (the same statement), or the
    comparison would mean nothing."""
    async with _caller("mcp-2026-07-28", target) as charming, _caller(BARE, target) as bare:
        mine = [record["id"] for record in (await charming())["value"]]
        theirs = [record["id"] for record in (await bare())["expenses"]]
    if mine != theirs or len(mine) != 20:
        raise RuntimeError(f"the bare server's find differs from Charming's: {theirs} vs {mine}")


async def _benchmark(
    target: Target, *, clients: list[int], calls: int, repeats: int, warmup: int, profile: Path | None = None
) -> list[Phase]:
    if target.finding and BARE in target.kinds:
        await _same_finds(target)
    for kind in target.kinds:  # compile the route, start the CEL worker, fill caches; not recorded
        await _phase(kind, 1, warmup, target)
    phases = []
    for repetition in range(repeats):
        order = target.kinds if repetition % 2 == 0 else target.kinds[::-1]
        for count in clients:
            for kind in order:
                if profile is not None and repetition == 0:
                    with _sampled(target, kind, profile / f"{kind}-{count}.txt"):
                        phases.append(await _phase(kind, count, calls, target))
                else:
                    phases.append(await _phase(kind, count, calls, target))
    return phases


@contextlib.contextmanager
def _sampled(target: Target, kind: str, out: Path) -> Any:
    """py-spy recording the server that `kind` calls while the block runs (collapsed stacks into `out`)."""
    pid = target.bare_pid if kind == BARE and target.bare_pid else target.server_pids[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).with_name("py-spy"))
    command = [spy, "record", "--pid", str(pid), "--format", "raw", "--output", str(out), "--rate", "200"]
    command += ["--nonblocking", "--gil", "--subprocesses"]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # py-spy attaches
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=30)


def _profile_summary(profile: Path, kinds: tuple[str, ...], top: int = 14) -> None:
    """Each recorded transport's functions with the largest share of its samples (own, and inclusive)."""
    for out in sorted(profile.glob("*.txt")):
        own: dict[str, int] = {}
        inclusive: dict[str, int] = {}
        total = 0
        for line in out.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [_frame(f) for f in stack.split(";")[1:]]  # the first is the process
            total += count
            if frames:
                own[frames[-1]] = own.get(frames[-1], 0) + count
            for frame in set(frames):
                inclusive[frame] = inclusive.get(frame, 0) + count
        if not total:
            continue
        print(f"profile {out.name}: {total} samples holding the GIL")
        print("  own:       " + "; ".join(f"{f} {n / total:.0%}" for f, n in _largest(own, top)))
        print("  inclusive: " + "; ".join(f"{f} {n / total:.0%}" for f, n in _largest(inclusive, top * 2)))


def _frame(text: str) -> str:
    """`function (path/to/module.py:line)` as `module.function`."""
    name, _, where = text.partition(" (")
    module = where.split(":")[0].rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{name.strip()}"


def _largest(counts: dict[str, int], n: int) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: -item[1])[:n]


def _table(phases: list[Phase], kinds: tuple[str, ...]) -> None:
    print(
        f"{'transport':<15} {'clients':>7} {'calls/s':>20} {'p50 ms':>7} {'p99 ms':>7} {'vs REST':>17} "
        f"{'client':>7} {'server':>7} {'DB':>7}  (CPU ms/call)"
    )
    for count in sorted({p.clients for p in phases}):
        rest = [p for p in phases if p.kind == "rest" and p.clients == count]
        for kind in kinds:
            rows = [p for p in phases if p.kind == kind and p.clients == count]
            if not rows:
                continue
            ratios = Spread.of(row.calls_per_s / base.calls_per_s for row, base in zip(rows, rest, strict=True))
            db = [r.db_ms for r in rows if r.db_ms is not None]
            print(
                f"{kind:<15} {count:>7} {Spread.of(r.calls_per_s for r in rows).show(0):>20} "
                f"{Spread.of(r.p50_ms for r in rows).median:>7.1f} {Spread.of(r.p99_ms for r in rows).median:>7.1f} "
                f"{ratios.show(2):>17} {Spread.of(r.client_ms for r in rows).median:>7.2f} "
                f"{Spread.of(r.server_ms for r in rows).median:>7.2f} "
                f"{f'{Spread.of(db).median:.2f}' if db else '-':>7}"
            )


def _versus_bare(phases: list[Phase], *, finding: bool) -> None:
    """Issue 21's insert (or find) target: Charming's throughput over the bare server's, paired within each
    repetition."""
    target = ">= 0.6x" if finding else ">= 0.7x"
    print(f"vs the bare reference server (ratio of calls/s within each repetition; issue 21 target {target}):")
    for count in sorted({p.clients for p in phases}):
        bare = [p for p in phases if p.kind == BARE and p.clients == count]
        for kind in KINDS:
            mine = [p for p in phases if p.kind == kind and p.clients == count]
            if not mine or not bare:
                continue
            ratios = Spread.of(m.calls_per_s / b.calls_per_s for m, b in zip(mine, bare, strict=True))
            cpu = Spread.of(m.server_ms / b.server_ms for m, b in zip(mine, bare, strict=True) if b.server_ms > 0)
            print(f"  {kind:<15} {count:>2} clients  {ratios.show(2):>17}x  server CPU {cpu.show(1)}x the bare one's")


def _targets(phases: list[Phase], database: str) -> None:
    """Issue 13's targets that this run can judge, each with its figure (medians over repetitions)."""

    def rows(kind: str, clients: int) -> list[Phase]:
        return [p for p in phases if p.kind == kind and p.clients == clients]

    def ratio(kind: str, clients: int, field: str) -> float | None:
        mine, rest = rows(kind, clients), rows("rest", clients)
        if not mine or not rest:
            return None
        return Spread.of(getattr(m, field) / getattr(r, field) for m, r in zip(mine, rest, strict=True)).median

    checks: list[tuple[str, float | None, str, float]] = []
    if database.startswith("SQLite"):
        for kind in KINDS[1:]:
            checks.append((f"{kind} p99 vs REST p99, 8 clients", ratio(kind, 8, "p99_ms"), "<=", 1.5))
    else:
        checks.append(
            ("MCP 2026-07-28 calls/s vs REST, 8 clients", ratio("mcp-2026-07-28", 8, "calls_per_s"), ">=", 0.9)
        )
        checks.append(
            ("MCP 2025-11-25 calls/s vs REST, 8 clients", ratio("mcp-2025-11-25", 8, "calls_per_s"), ">=", 0.8)
        )
        mcp = rows("mcp-2026-07-28", 1) or rows("mcp-2026-07-28", 8)
        if mcp and all(p.db_ms is not None for p in mcp):
            checks.append(
                ("DB CPU ms per mutate_app (2026-07-28)", Spread.of(p.db_ms or 0.0 for p in mcp).median, "<=", 3)
            )
        if mcp:
            checks.append(
                ("server CPU ms per mutate_app (2026-07-28)", Spread.of(p.server_ms for p in mcp).median, "<=", 6)
            )
    print("targets (issue 13):")
    for name, value, sense, bound in checks:
        if value is None:
            continue
        met = value >= bound if sense == ">=" else value <= bound
        print(f"  {name:<45} {value:6.2f}  (target {sense} {bound})  {'met' if met else 'NOT met'}")


# ---------------------------------------------------------------------------------------------- the floor

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[(\d+)\] (\w+):  (.*)$")
_STATEMENT = re.compile(r"^(?:statement|execute [^:]*): (.*)$", re.DOTALL)
_PARAMETER = re.compile(r"\$(\d+) = ('(?:[^']|'')*'|NULL)")


def _statements_logged(log: str) -> list[tuple[int, str]]:
    """(backend pid, SQL) of each statement in a PostgreSQL log written with log_statement=all."""
    entries: list[tuple[int, str, str]] = []
    for line in log.splitlines():
        match = _LOG_LINE.match(line)
        if match:
            entries.append((int(match[1]), match[2], match[3]))
        elif entries:  # a statement's further lines
            pid, level, text = entries[-1]
            entries[-1] = (pid, level, f"{text}\n{line}")
    found: list[tuple[int, str]] = []
    for pid, level, text in entries:
        if level == "DETAIL" and text.startswith("parameters:"):
            # Server-side binding: the statement just logged has $1, $2 ... and this line their values, each a
            # quoted literal or NULL. Inlined, the replay sends what a client-side binding driver would.
            owner, sql = found[-1]
            if owner != pid:
                raise RuntimeError(f"parameters of backend {pid} follow a statement of backend {owner}")
            values: dict[str, str] = dict(_PARAMETER.findall(text))
            found[-1] = (pid, re.sub(r"\$(\d+)\b", functools.partial(_parameter_value, values), sql))
            continue
        statement = _STATEMENT.match(text) if level == "LOG" else None
        if statement:
            found.append((pid, statement[1].strip().rstrip(";")))
    return found


def _parameter_value(values: dict[str, str], match: re.Match[str]) -> str:
    return values[match[1]]


def _cluster_sql(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection, connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall() if cursor.description else []


async def _one_call_sql(target: Target, url: str, log_path: Path) -> tuple[list[tuple[int, str]], str]:
    """The statements one warmed-up mutate_app call (2026-07-28) sends, and the id of the record it inserted."""
    async with _caller("mcp-2026-07-28", target) as call:
        await call()
        _cluster_sql(url, "ALTER SYSTEM SET log_statement = 'all'")
        _cluster_sql(url, "SELECT pg_reload_conf()")
        await asyncio.sleep(1)  # every backend, pooled ones too, rereads its settings before its next statement
        offset = log_path.stat().st_size
        value = await call()
        await asyncio.sleep(1)
        with log_path.open() as log:
            log.seek(offset)
            text = log.read()
        _cluster_sql(url, "ALTER SYSTEM RESET log_statement")
        _cluster_sql(url, "SELECT pg_reload_conf()")
    return _statements_logged(text), str(value["value"]["id"])


def _replay_script(statements: list[tuple[int, str]], record_id: str) -> str:
    """A pgbench script running the statements connection by connection, each call inserting a fresh record id."""
    order = list(dict.fromkeys(pid for pid, _ in statements))
    lines = ["\\set rid random(1, 1000000000000000)"]
    for pid in order:
        for owner, sql in statements:
            if owner == pid:
                lines.append(sql.replace(record_id, "replay-:rid") + ";")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Replay:
    name: str
    per_s: float
    db_ms: float
    statements: str  # pgbench's per-statement latencies (-r)


def _pgbench(name: str, script: Path, url: str, postmaster_pid: int, seconds: int, *flags: str) -> Replay:
    pgbench = Path(os.environ.get("PG_BIN_DIR", "/usr/lib/postgresql/15/bin")) / "pgbench"
    command = [str(pgbench), "-n", "-f", str(script), "-c", "1", "-T", str(seconds), "-r", *flags, url]
    before = tree_cpu(postmaster_pid)
    out = subprocess.run(command, capture_output=True, text=True)
    cpu = tree_cpu(postmaster_pid) - before
    processed = re.search(r"number of transactions actually processed: (\d+)", out.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    if out.returncode != 0 or processed is None or int(processed[1]) == 0 or (failed and int(failed[1])):
        raise RuntimeError(f"pgbench failed ({' '.join(command)}):\n{out.stdout}\n{out.stderr}")
    count = int(processed[1])
    latencies = out.stdout.split("statement latencies in milliseconds", 1)[-1].split("\n", 1)[-1]
    return Replay(name=name, per_s=count / seconds, db_ms=cpu / count * 1000, statements=latencies.rstrip())


def _floor(target: Target, url: str, phases: list[Phase], seconds: int, sql_out: str) -> None:
    assert target.postmaster_pid is not None
    log_path = Path(os.environ["PG_TMP"]) / "server.log"
    statements, record_id = asyncio.run(_one_call_sql(target, url, log_path))
    script = _replay_script(statements, record_id)
    _cluster_sql(url, "CREATE TABLE bench_ceiling (id int PRIMARY KEY, n int NOT NULL)")
    _cluster_sql(url, "INSERT INTO bench_ceiling VALUES (1, 0)")
    with tempfile.TemporaryDirectory(prefix="charming-floor-") as tmp:
        replay, ceiling = Path(tmp) / "replay.sql", Path(tmp) / "ceiling.sql"
        replay.write_text(script)
        ceiling.write_text("UPDATE bench_ceiling SET n = n + 1 WHERE id = 1;\n")
        if sql_out:
            Path(sql_out).write_text(script)
        pid = target.postmaster_pid
        kept = _pgbench("replay, kept connection", replay, url, pid, seconds)
        fresh = _pgbench("replay, new connection (-C)", replay, url, pid, seconds, "-C")
        top = _pgbench("single-row UPDATE (ceiling)", ceiling, url, pid, seconds)
    connections = len({pid for pid, _ in statements})
    print(
        f"\nfloor: one mutate_app call (MCP 2026-07-28) sent {len(statements)} statements on {connections} "
        f"connection(s); pgbench -c 1 -T {seconds} replayed them (per-statement ms, kept connection):"
    )
    print(kept.statements)
    print(f"{'pgbench':<30} {'tx/s':>8} {'DB CPU ms/tx':>13}")
    for run in (kept, fresh, top):
        print(f"{run.name:<30} {run.per_s:>8.0f} {run.db_ms:>13.3f}")
    print(
        f"\n{'transport':<15} {'clients':>7} {'server ms':>10} {'DB ms':>7} {'server/floor':>13} "
        f"{'DB/floor':>9} {'(server+DB)/floor':>18}   (CPU per call; floor = replay DB CPU, kept connection)"
    )
    for count in sorted({p.clients for p in phases}):
        for kind in KINDS:
            rows = [p for p in phases if p.kind == kind and p.clients == count]
            server = Spread.of(r.server_ms for r in rows).median
            db = Spread.of(r.db_ms or 0.0 for r in rows).median
            print(
                f"{kind:<15} {count:>7} {server:>10.2f} {db:>7.2f} {server / kept.db_ms:>12.1f}x "
                f"{db / kept.db_ms:>8.1f}x {(server + db) / kept.db_ms:>17.1f}x"
            )
    print("targets (issue 13): DB CPU per mutate_app <= 3 ms, server <= 6 ms, (server+DB)/floor <= 3x")


# ---------------------------------------------------------------------------------------------- one database


def _prepare(env: dict[str, str], tree: Path, records: int = 0) -> dict[str, str]:
    """Migrate, then create the user, token and app in a child process (Django set up there); with `records`
    (--find), load them and capture the find route's statement for the bare server."""
    definition = find_definition() if records else DEFINITION
    script = f"""
import json, django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from apps_registry.services.tokens import token_create
from apps_registry.services.definitions import app_definition_save
try:
    from apps_registry.services.email_confirmation import email_confirmed_by_operator
except ImportError:  # older code (--tree): no confirmation
    email_confirmed_by_operator = lambda user: None
user = get_user_model().objects.create(username="bench", email="bench@example.com")
email_confirmed_by_operator(user=user)  # tokens need a confirmed address
token = token_create(user=user, name="bench").plaintext
app = app_definition_save(actor=user, definition=json.loads({json.dumps(json.dumps(definition))}))
from apps_registry.models import Storage
storage = Storage.objects.get(app=app)
found = {{"token": token, "app_id": str(app.id), "storage_id": str(storage.id)}}
if {records}:
    import sys
    sys.path.insert(0, {str(ROOT / "benchmarks")!r})
    from find_order import bulk_load
    from mcp_calls import expense_data, find_statement
    from apps_registry.services.collection_indexes import collection_indexes_sync
    collection_indexes_sync(storage_id=storage.id)
    bulk_load(connection, storage.id, 0, {records}, collection="expenses", data=expense_data)
    Storage.objects.filter(id=storage.id).update(records_held={records})
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    found["find_sql"], found["find_params"] = find_statement(user, app.id)
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
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"preparing the database failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _postmaster(url: str) -> int | None:
    """The cluster's postmaster pid when it runs on this machine (the parent of this connection's backend)."""
    if not url.startswith("postgres"):
        return None
    [(backend,)] = _cluster_sql(url, "SELECT pg_backend_pid()")
    return parent_pid(int(backend))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(args: argparse.Namespace, database_url: str) -> None:
    ports = [_free_port() for _ in range(args.servers)]
    extra = dict(item.split("=", 1) for item in args.env)
    env = {
        **os.environ,
        **RATE_LIMITS_HIGH,
        **extra,
        "DJANGO_SETTINGS_MODULE": "charming.settings",
        "DATABASE_URL": database_url,
        "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{ports[0]}",
        "LOG_LEVEL": "WARNING",
    }
    prepared = _prepare(env, args.tree, args.find)
    servers = []
    for port in ports:
        command = [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1"]
        command += ["--port", str(port), "--lifespan", "on", "--log-level", "warning", "--no-access-log"]
        command += shlex.split(args.uvicorn)
        servers.append(subprocess.Popen(command, env=env, cwd=args.tree))
    bare = args.bare and database_url.startswith("postgres")  # the reference server uses a psycopg pool
    bare_port = _free_port() if bare else 0
    if bare:
        command = [sys.executable, "-m", "uvicorn", "bare_server:app", "--app-dir", str(ROOT / "benchmarks")]
        command += ["--host", "127.0.0.1", "--port", str(bare_port), "--lifespan", "on", "--log-level", "warning"]
        command += ["--no-access-log", *shlex.split(SERVE_OPTIONS)]
        bare_env = {**env, "BARE_DATABASE_URL": database_url, "BARE_STORAGE_ID": prepared["storage_id"]}
        if args.find:  # the find route's own statement, and the category its params hold
            bare_env |= {"BARE_FIND_SQL": prepared["find_sql"], "BARE_FIND_PARAMS": prepared["find_params"]}
            bare_env["BARE_FIND_CATEGORY"] = FIND_CATEGORY
        servers.append(subprocess.Popen(command, env=bare_env, cwd=ROOT))
        ports = [*ports, bare_port]
    try:
        deadline = time.monotonic() + 60
        for port, server in zip(ports, servers, strict=True):
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("the server did not start") from None
                    time.sleep(0.1)
        charming = servers[: args.servers]
        target = Target(
            bases=tuple(f"http://127.0.0.1:{port}" for port in ports[: args.servers]),
            token=prepared["token"],
            app_id=prepared["app_id"],
            server_pids=tuple(server.pid for server in charming),
            postmaster_pid=_postmaster(database_url),
            bare_base=f"http://127.0.0.1:{bare_port}" if bare else "",
            bare_pid=servers[-1].pid if bare else None,
            kinds=(*args.kinds, BARE) if bare else args.kinds,
            finding=bool(args.find),
        )
        processes = "one uvicorn process" if args.servers == 1 else f"{args.servers} uvicorn processes (one per port)"
        work = f"query_app (find 20 of {args.find:,} records, 30% matching)" if args.find else "mutate_app"
        banner(f"{work}, {prepared['database']}, {processes}")
        if args.tree != ROOT:
            print(f"code under test: {args.tree} ({_commit(args.tree)}); benchmark script: {_commit(ROOT)}")
        if args.servers > 1:
            print("each client stays on one process (client i on process i mod N), as behind a sticky proxy")
        print("rate limits: CHARMING_RATE_*_PER_MINUTE and _BURST = 1000000000 (checked, never reached)")
        if extra:
            print(f"server settings from --env: {', '.join(sorted(extra))}")
        if args.uvicorn:
            print(f"uvicorn options: {args.uvicorn}")
        print(
            f"{args.calls} timed calls per row per repetition, {args.repeats} repetition(s), transports interleaved; "
            "median (min-max) over repetitions"
        )
        profile = args.profile / prepared["database"].split()[0].lower() if args.profile else None
        phases = asyncio.run(
            _benchmark(
                target,
                clients=args.clients,
                calls=args.calls,
                repeats=args.repeats,
                warmup=args.warmup,
                profile=profile,
            )
        )
        _table(phases, target.kinds)
        if profile is not None:
            _profile_summary(profile, target.kinds)
        if bare:
            _versus_bare(phases, finding=target.finding)
        if not target.finding:  # issue 13's targets are mutate_app's
            _targets(phases, prepared["database"])
        if args.mode == "floor":
            _floor(target, database_url, phases, args.seconds, args.sql_out)
        print(f"load average at the end: {load()}")
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=15)


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %cs"], capture_output=True, text=True)
    return out.stdout.strip() or "not a git checkout"


def main() -> int:
    global KINDS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=["compare", "floor"], default="compare", help="default: compare")
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], help="default: both (floor: postgres)")
    parser.add_argument("--database-url", default="", help="use this EMPTY throw-away database instead of a fresh one")
    parser.add_argument("--calls", type=int, help="timed calls per row per repetition (default 200; quick 40)")
    parser.add_argument("--repeats", type=int, help="repetitions (default 3; quick 1)")
    parser.add_argument("--clients", default="1,8", help="concurrent client counts, comma-separated (default 1,8)")
    parser.add_argument("--seconds", type=int, help="floor: seconds per pgbench run (default 10; quick 2)")
    parser.add_argument("--sql-out", default="", help="floor: also write the captured pgbench script to this file")
    parser.add_argument("--servers", type=int, default=1, help="uvicorn processes, one per port (default 1)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="run the server from this checkout (older code, say)")
    parser.add_argument(
        "--uvicorn",
        default=SERVE_OPTIONS,
        help=f"uvicorn options beyond host and port, one string (default {SERVE_OPTIONS!r}, as documented)",
    )
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="a setting for the server")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few calls, one repetition")
    parser.add_argument("--app-server", action="store_true", help="also call the route as a tool of /mcp/apps/<id>")
    parser.add_argument("--bare", action="store_true", help="PostgreSQL: also time the bare reference server")
    parser.add_argument(
        "--find", type=int, default=0, metavar="N", help="time query_app's find of 20 in an app of N records instead"
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"transports to time (default {','.join(KINDS)})")
    parser.add_argument("--profile", type=Path, help="sample the server with py-spy per transport, into this dir")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if any("=" not in item for item in args.env):
        parser.error("--env takes KEY=VALUE")
    args.clients = [int(n) for n in str(args.clients).split(",")]
    if args.app_server:
        KINDS = (*KINDS, *APP_KINDS)
        args.kinds = f"{args.kinds},{','.join(APP_KINDS)}"
    args.kinds = tuple(kind for kind in KINDS if kind in str(args.kinds).split(","))
    if "rest" not in args.kinds:
        parser.error(f"--kinds takes some of {', '.join(KINDS)}, rest among them (the table compares with it)")
    args.calls = args.calls or (40 if args.quick else 200)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.seconds = args.seconds or (2 if args.quick else 10)
    args.warmup = 10 if args.quick else 30
    args.tree = args.tree.resolve()
    if args.find and args.mode == "floor":
        parser.error("floor mode replays mutate_app's SQL: leave out --find")
    if args.find < 0:
        parser.error("--find takes a number of records (at least 1)")
    if args.servers < 1:
        parser.error("--servers takes a positive number of processes")
    sys.path.insert(0, str(ROOT))

    if args.worker or args.database_url:
        if args.mode == "floor" and "PG_TMP" not in os.environ:
            parser.error("floor mode needs the throw-away cluster this script starts (leave out --database-url)")
        _run(args, args.database_url)
        return 0
    databases = args.database or ("postgres" if args.mode == "floor" else "both")
    if args.mode == "floor" and databases != "postgres":
        parser.error("floor mode runs on PostgreSQL only")
    if databases in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="charming-bench-") as workdir:
            _run(args, f"sqlite:///{workdir}/bench.sqlite3")
    if databases in ("postgres", "both"):
        forwarded = [args.mode, "--calls", str(args.calls), "--repeats", str(args.repeats), "--worker"]
        forwarded += ["--clients", ",".join(map(str, args.clients)), "--seconds", str(args.seconds)]
        forwarded += [*(["--quick"] if args.quick else []), *(["--sql-out", args.sql_out] if args.sql_out else [])]
        forwarded += ["--app-server"] if args.app_server else []
        forwarded += ["--bare"] if args.bare else []
        forwarded += ["--find", str(args.find)]
        forwarded += ["--kinds", ",".join(args.kinds), *(["--profile", str(args.profile)] if args.profile else [])]
        forwarded += [f"--env={item}" for item in args.env]
        forwarded += ["--servers", str(args.servers), "--tree", str(args.tree), f"--uvicorn={args.uvicorn}"]
        inner = shlex.join([sys.executable, str(Path(__file__).resolve()), *forwarded])
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f'{inner} --database-url "$DATABASE_URL"; rc=$?; pg_stop; exit $rc'
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
