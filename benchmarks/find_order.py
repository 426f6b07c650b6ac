"""Finds that a declared index should serve whole (issue 21 item 1): `where habit_id == X`, `order_by -date`,
`limit 20`, on a collection declaring `[["habit_id", "date"]]`, as a plain find, a paged find's first page and
a later page (the 6th), where X matches 1% or 30% of the records: the matches grow with the app, so only an
index that serves the filter, the order and the limit together keeps a find flat.

    .venv/bin/python benchmarks/find_order.py                          # both databases, 1k 100k 300k
    .venv/bin/python benchmarks/find_order.py --sizes 1000,100000 --only sqlite

Each database runs in its own process on a fresh database (a temp SQLite file in WAL mode; a throw-away
PostgreSQL cluster from .ci/postgres.sh with autovacuum off for the records table, so the statistics are
exactly the ones the run says). The app is saved and its index built (collection_indexes_sync) before any
record, then the collection grows by bulk load from one size to the next (COPY on PostgreSQL, executemany on
SQLite), its records inserted one millisecond apart. At each size every find is measured twice: with the
statistics as the load left them (none at the first size, those of the previous size after it), then after
ANALYZE of the records table.

Printed per find: the median wall time of the route through `route_run` (ms), and the find's own statement,
sent with its parameters as the store sends them: on PostgreSQL EXPLAIN (ANALYZE, BUFFERS) (execution time,
buffers touched, whether the plan sorts, the indexes it uses); on SQLite the statement's median time, the
virtual-machine instructions it runs, and EXPLAIN QUERY PLAN (a TEMP B-TREE means a sort, and the index used).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SIZES = "1000,100000,300000"
SECONDS_PER_FIND = 8.0  # a slow find is timed on fewer calls (at least 5)
FIND = {"collection": "checkins", "where": {"habit_id": "params.habit"}, "order_by": "-date", "limit": "20"}
DEFINITION: dict[str, Any] = {
    "name": "Habits (find order benchmark)",
    "collections": {"checkins": {"indexes": [["habit_id", "date"]]}},
    "routes": {
        "recent": {"kind": "query", "steps": [{"find": FIND, "as": "found"}, {"return": "size(found)"}]},
        "paged": {
            "kind": "query",
            "steps": [
                {"find": {**FIND, "cursor": "has(params.cursor) ? params.cursor : null"}, "as": "page"},
                {"return": "{'n': size(page.items), 'next': page.next_cursor}"},
            ],
        },
    },
}
HABITS = {"1%": "few", "30%": "many"}
LATER_PAGE = 6


def record_data(i: int) -> dict[str, Any]:
    """Record i: in habit `few` (1% of the records), `many` (30%) or one of a thousand others; a date four
    records share (ties), rising with i, as check-ins come in."""
    slot = i % 100
    habit = "few" if slot == 0 else "many" if slot <= 30 else f"h{i % 1000}"
    day = dt.date(2020, 1, 1) + dt.timedelta(days=i // 4)
    return {"habit_id": habit, "date": day.isoformat(), "note": "a check-in note of a few words"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", default=DEFAULT_SIZES, help=f"comma-separated record counts (default {DEFAULT_SIZES})"
    )
    parser.add_argument("--calls", type=int, default=40, help="timed calls per find (default 40)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if args.worker:
        worker(sizes, args.calls)
        return
    python, script = sys.executable, str(Path(__file__).resolve())
    passed = ["--worker", "--sizes", ",".join(map(str, sizes)), "--calls", str(args.calls)]
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
            subprocess.run([python, script, *passed], env=env, check=True, cwd=ROOT)
    if args.only in (None, "postgres"):
        quoted = " ".join(f"'{a}'" for a in passed)
        command = (
            f"source .ci/postgres.sh && pg_start >/dev/null && '{python}' '{script}' {quoted}; rc=$?; pg_stop; exit $rc"
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def worker(sizes: list[int], calls: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    os.environ["CHARMING_RATE_APP_PER_MINUTE"] = "0"  # calls back to back: no per-app rate limit
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from apps_registry.services.collection_indexes import collection_indexes_sync
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    vendor = connection.vendor
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        if vendor == "sqlite":
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("SELECT sqlite_version()")
        else:
            cursor.execute("ALTER TABLE apps_registry_record SET (autovacuum_enabled = false)")
            cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    user = get_user_model().objects.create(username="bench")
    app = app_definition_save(actor=user, definition=DEFINITION)
    storage_id = app.storage.id
    collection_indexes_sync(storage_id=storage_id)
    print(f"\n== {vendor} {version} ==", flush=True)

    def call(op: str, params: dict[str, Any]) -> Any:
        return route_run(actor=user, app_id=app.id, op=op, params=params, kind="query").value

    def find_statement(op: str, params: dict[str, Any]) -> tuple[str, Any]:
        executed: list[tuple[str, Any]] = []

        def capture(execute: Any, sql: str, sql_params: Any, many: bool, context: Any) -> Any:
            executed.append((sql, sql_params))
            return execute(sql, sql_params, many, context)

        with connection.execute_wrapper(capture):
            call(op, params)
        return next((s, p) for s, p in executed if "apps_registry_record" in s and "ORDER BY" in s)

    def measured(op: str, params: dict[str, Any]) -> dict[str, Any]:
        for _ in range(3):
            call(op, params)
        samples: list[float] = []
        began = time.perf_counter()
        while len(samples) < calls and (len(samples) < 5 or time.perf_counter() - began < SECONDS_PER_FIND):
            start = time.perf_counter()
            call(op, params)
            samples.append(time.perf_counter() - start)
        sql, sql_params = find_statement(op, params)
        figures = {"call_ms": statistics.median(samples) * 1000}
        figures.update(_postgres_work(connection, sql, sql_params) if vendor == "postgresql" else {})
        figures.update(_sqlite_work(connection, sql, sql_params) if vendor == "sqlite" else {})
        return figures

    loaded = 0
    rows: list[tuple[str, str, str, str, dict[str, Any]]] = []
    for size in sizes:
        started = time.perf_counter()
        bulk_load(connection, storage_id, loaded, size)
        loaded = size
        print(f"loaded {size} records in {time.perf_counter() - started:.1f} s", flush=True)
        for state in ("stats as loaded", "after ANALYZE"):
            if state == "after ANALYZE":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE apps_registry_record")
            load = "/".join(f"{x:.1f}" for x in os.getloadavg())
            for share, habit in HABITS.items():
                rows.append((size_label(size), state, share, "find", measured("recent", {"habit": habit})))
                rows.append((size_label(size), state, share, "first page", measured("paged", {"habit": habit})))
                cursor_value = None
                for _ in range(LATER_PAGE - 1):
                    cursor_value = call("paged", {"habit": habit, "cursor": cursor_value})["next"]
                later = measured("paged", {"habit": habit, "cursor": cursor_value})
                rows.append((size_label(size), state, share, f"page {LATER_PAGE}", later))
            print(f"  measured at {size}, {state} (load average {load})", flush=True)
        report(vendor, rows)


def _postgres_work(connection: Any, sql: str, params: Any) -> dict[str, Any]:
    times, plan = [], None
    for _ in range(5):
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
            raw = cursor.fetchone()[0]
        plan = json.loads(raw) if isinstance(raw, str) else raw
        times.append(plan[0]["Execution Time"])
    assert plan is not None
    top = plan[0]["Plan"]
    nodes = list(_nodes(top))
    return {
        "db_ms": statistics.median(times),
        "buffers": int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0)),
        "sort": any("Sort" in n["Node Type"] for n in nodes),
        "indexes": sorted({_short(n["Index Name"]) for n in nodes if "Index Name" in n}),
    }


def _nodes(node: dict[str, Any]) -> Any:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _sqlite_work(connection: Any, sql: str, params: Any) -> dict[str, Any]:
    raw = connection.connection
    times = []
    for _ in range(5):
        with connection.cursor() as cursor:
            start = time.perf_counter()
            cursor.execute(sql, params)
            cursor.fetchall()
            times.append((time.perf_counter() - start) * 1000)
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    raw.set_progress_handler(tick, 10)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            cursor.fetchall()
    finally:
        raw.set_progress_handler(None, 10)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [str(row[-1]) for row in cursor.fetchall()]
    used = sorted({_short(word) for line in plan for word in line.split() if word.startswith(("rix_", "record_"))})
    return {
        "db_ms": statistics.median(times),
        "vm_instructions": steps[0] * 10,
        "sort": any("TEMP B-TREE" in line for line in plan),
        "indexes": used,
    }


def _short(name: str) -> str:
    return "declared" if name.startswith("rix_") else name


def bulk_load(
    connection: Any,
    storage_id: Any,
    start: int,
    stop: int,
    collection: str = "checkins",
    data: Callable[[int], dict[str, Any]] = record_data,
) -> None:
    """Records start..stop-1 of `collection` (record i holds `data(i)`), straight into the table (not through the
    engine); benchmarks/mcp_calls.py --find loads its expenses with it too."""
    from django.db import transaction

    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    columns = "storage_id, collection, record_id, data, version, created_at, updated_at"
    order = list(range(start, stop))
    random.Random(start).shuffle(order)  # record ids not in insertion order
    if connection.vendor == "postgresql":
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY apps_registry_record ({columns}) FROM STDIN") as copy,
        ):
            for i in range(start, stop):
                at = base + dt.timedelta(milliseconds=i)
                copy.write_row((str(storage_id), collection, f"r{order[i - start]}", json.dumps(data(i)), 1, at, at))
        return
    sql = f"INSERT INTO apps_registry_record ({columns}) VALUES (%s, %s, %s, %s, 1, %s, %s)"
    batch = 20_000
    with transaction.atomic(), connection.cursor() as cursor:
        for low in range(start, stop, batch):
            rows = []
            for i in range(low, min(low + batch, stop)):
                at = (base + dt.timedelta(milliseconds=i)).isoformat(sep=" ")
                value = json.dumps(data(i), separators=(",", ":"))
                rows.append((storage_id.hex, collection, f"r{order[i - start]}", value, at, at))
            cursor.executemany(sql, rows)


def size_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def report(vendor: str, rows: list[tuple[str, str, str, str, dict[str, Any]]]) -> None:
    work = "buffers" if vendor == "postgresql" else "VM instr."
    key = "buffers" if vendor == "postgresql" else "vm_instructions"
    print(f"\n{vendor}: find 20 by habit_id, order_by -date")
    print(f"| size | statistics | matches | find | call ms | db ms | {work} | sort | indexes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size, state, share, find, f in rows:
        print(
            f"| {size} | {state} | {share} | {find} | {f['call_ms']:.2f} | {f['db_ms']:.2f} | {f[key]} | "
            f"{'yes' if f['sort'] else 'no'} | {', '.join(f['indexes']) or 'none'} |"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
