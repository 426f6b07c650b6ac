"""Per-operation cost as an app grows: each route operation at 1k, 10k, 100k and 1M records, on SQLite and
PostgreSQL, and the ratio of its cost at the largest size to the smallest (issue 13: flat cost with size;
issue 21: at any number of matches).

    .venv/bin/python benchmarks/scaling.py                          # both databases, 1k 10k 100k 1M
    .venv/bin/python benchmarks/scaling.py --sizes 1000,10000,100000 --only postgres
    .venv/bin/python benchmarks/scaling.py --no-gin --only postgres  # without the GIN index on data

Each database runs in its own process on a fresh database (a temp SQLite file in WAL mode; a throw-away
PostgreSQL cluster from .ci/postgres.sh). Every size is an app of its own ("habits"), all in the one records
table and loaded before anything is timed (COPY on PostgreSQL, executemany on SQLite), each with the indexes
its author declares (built by the platform's own collection_indexes_sync). The sizes are then timed
interleaved, in one process: ROUNDS rounds, each timing every operation at every size (sizes in alternating
order), so the machine's load falls on all sizes alike; a figure is the median of the rounds' medians, with
their range. Some filters select a bounded number of records (a habit has 50 check-ins at any size); others
match a share of the app that grows with it (1% and 30% of its records), ordered by an indexed field with
limit 20 — what an index must keep flat; `find undeclared field` filters on a field no declared index
covers. Also: a find ordered by an indexed field without a filter, a paged walk (a page of 20, then the next
four through the cursor, per call timed as one page) and an aggregate over the 30% filter.

Each operation is a route called through the service (`route_run`, as the MCP and REST transports call it),
one call after another on one connection: a warm-up, then CALLS timed calls on random records (fewer, at
least 5, for an operation slower than SECONDS_PER_OPERATION in all); the median is printed (ms), with the
machine's load average at each size. Beside it, what one call costs the database whatever the load: the
buffers its statements touch on PostgreSQL, the virtual-machine instructions it runs on SQLite. Inserts
run at low fill (the records limit 100x the largest size).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SIZES = "1000,10000,100000,1000000"
PER_HABIT = 50
SECONDS_PER_OPERATION = 8.0  # per round: a slow operation is timed on fewer calls (at least 3)
ROUNDS = 3
FIND_20 = {"order_by": "-date", "limit": "20"}
PAGE = {"collection": "checkins", "where": {"p30": "'a'"}, "order_by": "-date", "limit": "20"}
DEFINITION: dict[str, Any] = {
    "name": "Habits (scaling benchmark)",
    "collections": {
        "checkins": {"indexes": [["habit_id", "date"], ["uid"], ["p1", "date"], ["p30", "date"], ["date"]]},
        "counters": {},
    },
    "routes": {
        "one_pct": {
            "kind": "query",
            "steps": [
                {"find": {"collection": "checkins", "where": {"p1": "params.p"}, **FIND_20}, "as": "found"},
                {"return": "size(found)"},
            ],
        },
        "thirty_pct": {
            "kind": "query",
            "steps": [
                {"find": {"collection": "checkins", "where": {"p30": "'a'"}, **FIND_20}, "as": "found"},
                {"return": "size(found)"},
            ],
        },
        "newest": {
            "kind": "query",
            "steps": [{"find": {"collection": "checkins", **FIND_20}, "as": "found"}, {"return": "size(found)"}],
        },
        "page": {
            "kind": "query",
            "steps": [
                {"find": {**PAGE, "cursor": "has(params.cursor) ? params.cursor : null"}, "as": "page"},
                {"return": "page.next_cursor"},
            ],
        },
        "by_category": {
            "kind": "query",
            "steps": [
                {
                    "aggregate": {
                        "collection": "checkins",
                        "where": {"p30": "'a'"},
                        "group_by": {"cat": "cat"},
                        "values": {"total": {"sum": "amount"}, "n": {"count": True}},
                    },
                    "as": "rows",
                },
                {"return": "size(rows)"},
            ],
        },
        "recent": {
            "kind": "query",
            "steps": [
                {
                    "find": {
                        "collection": "checkins",
                        "where": {"habit_id": "params.habit"},
                        "order_by": "-date",
                        "limit": "20",
                    },
                    "as": "found",
                },
                {"return": "size(found)"},
            ],
        },
        "by_uid": {
            "kind": "query",
            "steps": [
                {"find": {"collection": "checkins", "where": {"uid": "params.uid"}, "limit": "1"}, "as": "found"},
                {"return": "size(found)"},
            ],
        },
        "by_tag": {
            "kind": "query",
            "steps": [
                {"find": {"collection": "checkins", "where": {"tag": "params.tag"}, "limit": "20"}, "as": "found"},
                {"return": "size(found)"},
            ],
        },
        "count_habit": {
            "kind": "query",
            "steps": [{"count": {"collection": "checkins", "where": {"habit_id": "params.habit"}}, "as": "n"}],
        },
        "sum_habit": {
            "kind": "query",
            "steps": [
                {
                    "sum": {"collection": "checkins", "field": "amount", "where": {"habit_id": "params.habit"}},
                    "as": "total",
                },
                {"return": "total"},
            ],
        },
        "get_one": {
            "kind": "query",
            "steps": [{"get": {"collection": "checkins", "id": "params.id"}, "as": "it"}, {"return": "it.uid"}],
        },
        "add": {
            "kind": "mutation",
            "steps": [
                {
                    "insert": {
                        "collection": "checkins",
                        "value": "{'uid': params.uid, 'habit_id': params.habit, 'date': params.date, "
                        "'amount': 1.5, 'tag': 'new', 'note': 'added by the benchmark'}",
                    }
                }
            ],
        },
        "bump": {
            "kind": "mutation",
            "steps": [{"increment": {"collection": "counters", "id": "params.id", "field": "n", "by": "1"}}],
        },
    },
}
# (label, route, params for a record number i below the size)
OPERATIONS: list[tuple[str, str, Any]] = [
    ("find where+order+limit 20", "recent", lambda i: {"habit": f"h{i // PER_HABIT}"}),
    ("find 1% of app, newest 20", "one_pct", lambda i: {"p": f"p{i % 100}"}),
    ("find 30% of app, newest 20", "thirty_pct", lambda i: {}),
    ("find all, newest 20 (index)", "newest", lambda i: {}),
    ("paged walk, 30%, per page", "page", lambda i: {}),
    ("aggregate 30% by category", "by_category", lambda i: {}),
    ("find unique value", "by_uid", lambda i: {"uid": f"u{i}"}),
    ("find undeclared field", "by_tag", lambda i: {"tag": f"t{i // 10}"}),
    ("count with filter", "count_habit", lambda i: {"habit": f"h{i // PER_HABIT}"}),
    ("sum with filter", "sum_habit", lambda i: {"habit": f"h{i // PER_HABIT}"}),
    ("get by id", "get_one", lambda i: {"id": str(i)}),
    ("increment", "bump", lambda i: {"id": f"c{i % 100}"}),
]


def record_data(i: int) -> dict[str, Any]:
    return {
        "uid": f"u{i}",
        "habit_id": f"h{i // PER_HABIT}",
        "date": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}",
        "amount": i % 100 + 0.5,
        "tag": f"t{i // 10}",
        "note": "a check-in note of a few words",
        "p1": f"p{i % 100}",  # 1% of the app per value
        "p30": "a" if i % 10 < 3 else "b",  # 30% of the app are "a"
        "cat": f"c{i % 5}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", default=DEFAULT_SIZES, help=f"comma-separated record counts (default {DEFAULT_SIZES})"
    )
    parser.add_argument("--calls", type=int, default=200, help="timed calls per operation and size (default 200)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--no-gin", action="store_true", help="drop the GIN index on record data first (PostgreSQL)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if args.worker:
        worker(sizes, args.calls, no_gin=args.no_gin)
        return
    python, script = sys.executable, str(Path(__file__).resolve())
    passed = ["--worker", "--sizes", ",".join(map(str, sizes)), "--calls", str(args.calls)]
    passed += ["--no-gin"] if args.no_gin else []
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


def worker(sizes: list[int], calls: int, *, no_gin: bool) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    os.environ["CHARMING_RATE_APP_PER_MINUTE"] = "0"  # calls back to back: no per-app rate limit
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from apps_registry.models import Record, Storage
    from apps_registry.services.collection_indexes import collection_indexes_sync
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    vendor = connection.vendor
    call_command("migrate", verbosity=0)
    if vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
    if no_gin and vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS apps_registry_record_data_gin")
    user = get_user_model().objects.create(username="bench")
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 100 * max(sizes)
    apps: dict[int, Any] = {}
    for size in sizes:
        started = time.perf_counter()
        app = app_definition_save(actor=user, definition={**DEFINITION, "name": f"Habits {size_label(size)}"})
        storage_id = app.storage.id
        collection_indexes_sync(storage_id=storage_id)
        Record.objects.bulk_create(
            Record(storage_id=storage_id, collection="counters", record_id=f"c{c}", data={"n": 0}) for c in range(100)
        )
        bulk_load(connection, storage_id, 0, size)
        Storage.objects.filter(pk=storage_id).update(records_held=size + 100)
        apps[size] = app
        print(f"loaded {size} records in {time.perf_counter() - started:.1f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE" if vendor == "postgresql" else "ANALYZE apps_registry_record")

    def call(size: int, op: str, params: dict[str, Any], kind: str) -> Any:
        return route_run(actor=user, app_id=apps[size].id, op=op, params=params, kind=kind).value

    def walk(size: int) -> None:
        cursor = None
        for _ in range(5):
            cursor = call(size, "page", {} if cursor is None else {"cursor": cursor}, "query")

    def timed(op: str, params_of: Any, size: int, kind: str, rng: random.Random) -> float:
        per_call = 5 if op == "page" else 1

        def once() -> None:
            if op == "page":
                walk(size)
            else:
                call(size, op, params_of(rng.randrange(size)), kind)

        began = time.perf_counter()
        for _ in range(max(5, calls // 10)):
            once()
            if time.perf_counter() - began > SECONDS_PER_OPERATION / 4:
                break
        samples: list[float] = []
        began = time.perf_counter()
        while len(samples) < calls and (len(samples) < 3 or time.perf_counter() - began < SECONDS_PER_OPERATION):
            start = time.perf_counter()
            once()
            samples.append((time.perf_counter() - start) / per_call)
        return statistics.median(samples) * 1000

    def database_work(size: int, op: str, params: dict[str, Any], kind: str) -> int:
        """What one call costs the database, independent of the machine's load: on PostgreSQL the buffers
        its statements touch (EXPLAIN ANALYZE BUFFERS, replayed in a rolled-back transaction); on SQLite the
        virtual-machine instructions it runs (a progress handler)."""
        if vendor == "sqlite":
            raw = connection.connection
            steps = [0]

            def tick() -> int:
                steps[0] += 1
                return 0

            raw.set_progress_handler(tick, 10)
            try:
                call(size, op, params, kind)
            finally:
                raw.set_progress_handler(None, 10)
            return steps[0] * 10
        with transaction.atomic():
            with CaptureQueriesContext(connection) as queries:
                call(size, op, params, kind)
            transaction.set_rollback(True)
        buffers = 0
        for query in queries.captured_queries:
            sql = query["sql"]
            if sql.split(None, 1)[0].upper() not in ("SELECT", "INSERT", "UPDATE", "DELETE"):
                continue
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)
                plan = cursor.fetchone()[0]
                plan = json.loads(plan) if isinstance(plan, str) else plan
                top = plan[0]["Plan"]
                buffers += int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
                transaction.set_rollback(True)
        return buffers

    print(f"\n== {vendor}{' (no GIN index on data)' if no_gin and vendor == 'postgresql' else ''} ==", flush=True)
    operations = [*OPERATIONS, ("insert, low fill", "add", None)]
    rounds: dict[str, dict[int, list[float]]] = {}
    work: dict[str, dict[int, float]] = {}
    loads: list[str] = []
    for round_number in range(ROUNDS):
        order = sizes if round_number % 2 == 0 else sizes[::-1]
        for label, op, params_of in operations:
            kind = "mutation" if op in ("bump", "add") else "query"
            for size in order:
                params = params_of if params_of is not None else _Inserts(size, round_number)
                rng = random.Random(7 + round_number)
                rounds.setdefault(label, {}).setdefault(size, []).append(timed(op, params, size, kind, rng))
                if round_number == 0 and op != "page":
                    work.setdefault(label, {})[size] = database_work(size, op, params(rng.randrange(size)), kind)
        loads.append("/".join(f"{x:.1f}" for x in os.getloadavg()))
        print(f"  round {round_number + 1} of {ROUNDS} done (load average {loads[-1]})", flush=True)
    table = {label: {size: statistics.median(v) for size, v in by_size.items()} for label, by_size in rounds.items()}
    spread = {label: {size: (min(v), max(v)) for size, v in by_size.items()} for label, by_size in rounds.items()}
    report(f"{vendor}: median ms per call (median of {ROUNDS} interleaved rounds)", sizes, table)
    report(f"{vendor}: the rounds' range, ms (min-max)", sizes, table, ranges=spread)
    unit = "buffers touched" if vendor == "postgresql" else "VM instructions"
    report(f"{vendor}: database work per call ({unit}; the same on an idle machine)", sizes, work, digits=0)
    print("load average (1/5/15 min) after each round: " + ", ".join(loads))
    if vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_size_pretty(pg_table_size('apps_registry_record')), "
                "pg_size_pretty(pg_indexes_size('apps_registry_record')), "
                "coalesce((SELECT pg_size_pretty(pg_relation_size(c.oid)) FROM pg_class c "
                "WHERE c.relname = 'apps_registry_record_data_gin'), 'none')"
            )
            table_size, indexes_size, gin_size = cursor.fetchone()
        print(f"records table {table_size}, its indexes {indexes_size} (GIN on data: {gin_size})")


class _Inserts:
    """Params for new check-ins: a fresh uid each call."""

    def __init__(self, size: int, round_number: int = 0) -> None:
        self.size, self.round, self.n = size, round_number, 0

    def __call__(self, _i: int) -> dict[str, Any]:
        self.n += 1
        uid = f"x{self.size}-{self.round}-{self.n}"
        return {"uid": uid, "habit": f"hx{self.n % 1000}", "date": "2026-12-01T00:00"}


def bulk_load(connection: Any, storage_id: Any, start: int, stop: int) -> None:
    """Records start..stop-1 of the checkins collection, straight into the table (not through the engine)."""
    from django.db import transaction
    from django.utils import timezone

    now = timezone.now()
    columns = "storage_id, collection, record_id, data, version, created_at, updated_at"
    if connection.vendor == "postgresql":
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY apps_registry_record ({columns}) FROM STDIN") as copy,
        ):
            for i in range(start, stop):
                copy.write_row((str(storage_id), "checkins", str(i), json.dumps(record_data(i)), 1, now, now))
        return
    stamp = now.isoformat(sep=" ")
    sql = f"INSERT INTO apps_registry_record ({columns}) VALUES (%s, %s, %s, %s, 1, %s, %s)"
    batch = 20_000
    with transaction.atomic(), connection.cursor() as cursor:
        for low in range(start, stop, batch):
            rows = [
                (storage_id.hex, "checkins", str(i), json.dumps(record_data(i), separators=(",", ":")), stamp, stamp)
                for i in range(low, min(low + batch, stop))
            ]
            cursor.executemany(sql, rows)


def size_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def report(
    title: str,
    sizes: list[int],
    table: dict[str, dict[int, float]],
    *,
    digits: int = 3,
    ranges: dict[str, dict[int, tuple[float, float]]] | None = None,
) -> None:
    width = max(len(label) for label in table)
    cell = 16 if ranges else 10
    head = "".join(f"{size_label(s):>{cell}}" for s in sizes)
    print(f"\n{title}")
    print(f"{'operation':<{width}}{head}{'ratio':>10}")
    for label, by_size in table.items():
        if ranges:
            shown = (f"{ranges[label][s][0]:.2f}-{ranges[label][s][1]:.2f}" for s in sizes)
            cells = "".join(f"{text:>{cell}}" for text in shown)
        else:
            cells = "".join(f"{by_size[s]:>10.{digits}f}" for s in sizes)
        ratio = by_size[sizes[-1]] / by_size[sizes[0]] if by_size[sizes[0]] else float("nan")
        print(f"{label:<{width}}{cells}{ratio:>9.2f}x")


if __name__ == "__main__":
    main()
