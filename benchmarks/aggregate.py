"""The `aggregate` step as an app grows (issue 19): grouped totals of an expenses app at 1k to 1M records on
PostgreSQL and 1k to 200k on SQLite, each beside the same aggregate written by hand in SQL (the floor).

    .venv/bin/python benchmarks/aggregate.py                        # both databases, the default sizes
    .venv/bin/python benchmarks/aggregate.py --only postgres --rounds 21
    .venv/bin/python benchmarks/aggregate.py --quick                # a smoke run (small sizes, 3 rounds)

Each database runs in its own process on a fresh database (a temp SQLite file with the project's settings, WAL;
a throw-away PostgreSQL cluster from .ci/postgres.sh). Each size is its own app ("expenses", saved through the
service with the declared index `[["day"]]` on `expenses`, built by collection_indexes_sync after the bulk
load: COPY on PostgreSQL, executemany on SQLite), so every size is in the database at once and the sizes can
be timed in the same rounds. An expense has a category (one of 12; `food` is 8% of them), an amount (a decimal
with 2 fraction digits), a day (`YYYY-MM-DD`), who paid and a note. Every app records 10 expenses a day, going
back from 2026-11-30 as far as its size takes it (1k records: 100 days; 1M: 274 years), so a month holds ~300
records at every size, and the apps' records are the same ones (the 1k app's are the 1M app's newest).

Operations, each a query route called through the service (`route_run`, as the transports call it; the
per-app rate limit off, as in scaling.py, so a query writes nothing):

  month     where day in 2026-11 (gte/lt: the declared index serves it), group by category,
            sum/count/avg of amount: 300 matching records at every size;
  year      where day in 2025-12..2026-11, grouped by a `month` bucket of day in Europe/Paris, the same
            values: 3650 matching records from 10k up (1000 at 1k, which holds 100 days);
  food      where category == 'food' (no declared index on category; on PostgreSQL the GIN index on data
            may serve the containment), grouped by who paid: 8% of the records, so it grows with the app;
            printed with its cost per matching record.

Beside each, `hand SQL`: one GROUP BY over the same table with the same filter, written by hand for this data
(no type checks; the month bucket of a date as its first 7 characters), sent on the same connection with
cursor.execute. Loading ends with VACUUM ANALYZE on PostgreSQL (the table as autovacuum would leave it), ANALYZE
on SQLite. After a warm-up, which also sets how many calls each (operation, size, side) makes per round (enough
for about CELL_SECONDS), all of them run in rounds whose order alternates (forward, then backward), so they share
the machine's load; figures are median (min-max) over rounds of the mean per call: wall time and CPU (this
process's, plus the whole PostgreSQL cluster's from /proc: a parallel query's workers are processes of their
own). Ratios are taken within each round: engine / hand SQL, and the largest size / the smallest (and / the
smallest size matching as many records, when the smallest matches fewer). Then, per operation and size: the
engine's time split by an instrumented pass (in its aggregate statement, in its other statements, the rest), and
for one call of each side the plan (PostgreSQL: EXPLAIN (ANALYZE, BUFFERS) of the engine's statement, captured
with connection.execute_wrapper, and of the hand SQL: whether the declared index serves the filter, each node's
rows and the planner's estimate; SQLite: EXPLAIN QUERY PLAN) and the database work of one call, which load does
not change (buffers touched on PostgreSQL, virtual-machine instructions on SQLite).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from measure import Spread, banner, load, parent_pid, tree_cpu

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"postgresql": [1_000, 10_000, 100_000, 1_000_000], "sqlite": [1_000, 10_000, 100_000, 200_000]}
QUICK_SIZES = [1_000, 4_000]
PER_DAY = 10
LAST_DAY = date(2026, 11, 30)
MONTH = ("2026-11-01", "2026-12-01")
YEAR = ("2025-12-01", "2026-12-01")
TIME_ZONE = "Europe/Paris"
# (category, share of the expenses in %, amount range in cents)
CATEGORIES: list[tuple[str, int, tuple[int, int]]] = [
    ("groceries", 20, (300, 15_000)),
    ("transport", 12, (150, 6_000)),
    ("leisure", 10, (500, 12_000)),
    ("other", 10, (100, 20_000)),
    ("food", 8, (400, 9_000)),
    ("household", 8, (200, 25_000)),
    ("utilities", 7, (2_000, 18_000)),
    ("health", 6, (500, 30_000)),
    ("clothing", 6, (900, 25_000)),
    ("travel", 5, (2_000, 150_000)),
    ("gifts", 5, (500, 20_000)),
    ("rent", 3, (60_000, 150_000)),
]
PAYERS = ["ana", "ben", "chloe"]
NOTES = ["", "", "card", "cash", "shared", "refund due", "weekly shop", "with friends"]
VALUES = {"total": {"sum": "amount"}, "n": {"count": True}, "average": {"avg": "amount"}}


def _route(where: dict[str, Any], group_by: dict[str, Any]) -> dict[str, Any]:
    aggregate = {"collection": "expenses", "where": where, "group_by": group_by, "values": VALUES}
    return {"kind": "query", "steps": [{"aggregate": aggregate, "as": "rows"}, {"return": "rows"}]}


DEFINITION: dict[str, Any] = {
    "name": "Expenses (aggregate benchmark)",
    "collections": {"expenses": {"indexes": [["day"]]}},
    "routes": {
        "month_totals": _route({"day": {"gte": "params.from", "lt": "params.to"}}, {"category": "category"}),
        "year_by_month": _route(
            {"day": {"gte": "params.from", "lt": "params.to"}},
            {"month": {"bucket": "month", "field": "day", "tz": "params.tz"}},
        ),
        "food_by_payer": _route({"category": "params.category"}, {"paid_by": "paid_by"}),
    },
}
# (label, route, params)
OPERATIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("month", "month_totals", {"from": MONTH[0], "to": MONTH[1]}),
    ("year", "year_by_month", {"from": YEAR[0], "to": YEAR[1], "tz": TIME_ZONE}),
    ("food", "food_by_payer", {"category": "food"}),
]
TITLES = {
    "month": "month: where day in 2026-11 (the declared index), by category, sum/count/avg",
    "year": f"year: where day in 2025-12..2026-11, by month bucket ({TIME_ZONE}), sum/count/avg",
    "food": "food: where category == 'food' (no declared index), by who paid, sum/count/avg",
}


def hand_sql(vendor: str, label: str) -> tuple[str, list[Any]]:
    """The aggregate written by hand for this data, and its parameters after (storage id, collection)."""
    if vendor == "postgresql":
        amount = "(data ->> 'amount')::numeric"
        measures = f"SUM({amount}), COUNT(*), AVG({amount})"
        table = "apps_registry_record WHERE storage_id = %s AND collection = %s"
        # `data -> 'day'` is the declared index's expression (routes.storage.field_sql), so the index serves it.
        days = "AND (data -> 'day') >= %s::jsonb AND (data -> 'day') < %s::jsonb"
        if label == "month":
            return f"SELECT data -> 'category', {measures} FROM {table} {days} GROUP BY 1 ORDER BY 1", [
                json.dumps(MONTH[0]),
                json.dumps(MONTH[1]),
            ]
        if label == "year":
            return f"SELECT left(data ->> 'day', 7), {measures} FROM {table} {days} GROUP BY 1 ORDER BY 1", [
                json.dumps(YEAR[0]),
                json.dumps(YEAR[1]),
            ]
        return f"SELECT data -> 'paid_by', {measures} FROM {table} AND data @> %s::jsonb GROUP BY 1 ORDER BY 1", [
            json.dumps({"category": "food"})
        ]
    amount = "json_extract(data, '$.amount')"
    measures = f"SUM({amount}), COUNT(*), AVG({amount})"
    table = "apps_registry_record WHERE storage_id = %s AND collection = %s"
    day = "json_extract(data, '$.\"day\"')"  # the declared index's expression, path quoted as field_sql writes it
    days = f"AND {day} >= %s AND {day} < %s"
    if label == "month":
        sql = f"SELECT json_extract(data, '$.category'), {measures} FROM {table} {days} GROUP BY 1 ORDER BY 1"
        return sql, list(MONTH)
    if label == "year":
        return f"SELECT substr({day}, 1, 7), {measures} FROM {table} {days} GROUP BY 1 ORDER BY 1", list(YEAR)
    sql = (
        f"SELECT json_extract(data, '$.paid_by'), {measures} FROM {table} "
        "AND json_extract(data, '$.category') = %s GROUP BY 1 ORDER BY 1"
    )
    return sql, ["food"]


def records(count: int) -> Any:
    """The first `count` expenses, newest first: the same ones for every app (one seed)."""
    rng = random.Random(19)
    names = [name for name, _share, _cents in CATEGORIES]
    shares = [share for _name, share, _cents in CATEGORIES]
    cents = {name: span for name, _share, span in CATEGORIES}
    for i in range(count):
        category = rng.choices(names, shares)[0]
        low, high = cents[category]
        yield (
            str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            {
                "category": category,
                "amount": rng.randint(low, high) / 100,
                "day": (LAST_DAY - timedelta(days=i // PER_DAY)).isoformat(),
                "paid_by": rng.choice(PAYERS),
                "note": rng.choice(NOTES),
            },
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        help="comma-separated record counts for both databases "
        "(default: 1k,10k,100k,1M on PostgreSQL, 1k,10k,100k,200k on SQLite; quick 1k,4k)",
    )
    parser.add_argument("--rounds", type=int, help="rounds (default 15; quick 3)")
    parser.add_argument(
        "--cell-seconds", type=float, help="about how long each operation, size and side runs per round (default 0.25)"
    )
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: small sizes, three short rounds")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 15)
    cell_seconds = args.cell_seconds or (0.02 if args.quick else 0.25)
    sizes = args.sizes or (",".join(map(str, QUICK_SIZES)) if args.quick else "")
    if args.worker:
        vendor_sizes = sorted({int(s) for s in sizes.split(",") if s.strip()}) if sizes else None
        worker(vendor_sizes, rounds, cell_seconds)
        return
    python, script = sys.executable, str(Path(__file__).resolve())
    passed = ["--worker", "--rounds", str(rounds), "--cell-seconds", str(cell_seconds)]
    passed += ["--sizes", sizes] if sizes else []
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


def worker(sizes: list[int] | None, rounds: int, cell_seconds: float) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    os.environ["CHARMING_RATE_APP_PER_MINUTE"] = "0"  # calls back to back: no per-app rate limit (no write per call)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from apps_registry.models import Storage
    from apps_registry.services.collection_indexes import collection_indexes_sync
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    vendor = connection.vendor
    sizes = sizes or SIZES[vendor]
    call_command("migrate", verbosity=0)
    database: Any = connection  # the backend's own attributes (pg_version, Database) are not in the stubs
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid(), current_setting('shared_buffers')")
            backend, shared_buffers = cursor.fetchone()
            cluster: int | None = parent_pid(backend)
            version = f"PostgreSQL {database.pg_version // 10000}.{database.pg_version % 10000} (fsync=off, "
            version += f"shared_buffers {shared_buffers})"
        else:
            cluster = None
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous")
            synchronous = ["OFF", "NORMAL", "FULL", "EXTRA"][cursor.fetchone()[0]]
            version = f"SQLite {database.Database.sqlite_version}, WAL, synchronous={synchronous}"
    banner(f"aggregate, {version}")

    user = get_user_model().objects.create(username="bench")
    apps: dict[int, Any] = {}
    started = time.perf_counter()
    for size in sizes:
        app = app_definition_save(actor=user, definition={**DEFINITION, "name": f"{DEFINITION['name']} {size}"})
        bulk_load(connection, app.storage.id, size)
        Storage.objects.filter(pk=app.storage.id).update(records_held=size)
        collection_indexes_sync(storage_id=app.storage.id)
        apps[size] = app
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE apps_registry_record" if vendor == "postgresql" else "ANALYZE")
    print(f"loaded {sum(sizes)} records ({', '.join(map(size_label, sizes))}) in {time.perf_counter() - started:.0f} s")

    def storage_param(size: int) -> Any:
        return apps[size].storage.id if vendor == "postgresql" else apps[size].storage.id.hex

    def engine(size: int, label: str) -> Any:
        _label, op, params = next(o for o in OPERATIONS if o[0] == label)
        return route_run(actor=user, app_id=apps[size].id, op=op, params=params, kind="query").value

    def hand(size: int, label: str) -> list[tuple[Any, ...]]:
        sql, params = hand_sql(vendor, label)
        with connection.cursor() as cursor:
            cursor.execute(sql, [storage_param(size), "expenses", *params])
            return cursor.fetchall()

    sides = {"engine": engine, "hand SQL": hand}
    labels = [label for label, _op, _params in OPERATIONS]
    matches = {(label, size): sum(int(row[2]) for row in hand(size, label)) for label in labels for size in sizes}
    for label in labels:  # the engine and the hand SQL agree (counts per group)
        for size in sizes:
            counted = sum(row["n"] for row in engine(size, label))
            assert counted == matches[label, size], (label, size, counted, matches[label, size])

    def timed(side: str, size: int, label: str, n: int) -> tuple[float, float]:
        """ms per call: wall, and CPU (this process + the PostgreSQL cluster, parallel workers included)."""
        fn = sides[side]
        db = 0.0 if cluster is None else tree_cpu(cluster)
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(n):
            fn(size, label)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        db = 0.0 if cluster is None else tree_cpu(cluster) - db
        return wall / n * 1e3, (cpu + db) / n * 1e3

    def split(size: int, label: str, n: int) -> tuple[float, float, float]:
        """The engine's wall ms per call: in its aggregate statement, in its other statements, and the rest."""
        inside = {"aggregate": 0.0, "other": 0.0}

        def clocked(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            start = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                inside["aggregate" if " GROUP BY " in sql else "other"] += time.perf_counter() - start

        start = time.perf_counter()
        with connection.execute_wrapper(clocked):
            for _ in range(n):
                engine(size, label)
        total = time.perf_counter() - start
        rest = total - inside["aggregate"] - inside["other"]
        return inside["aggregate"] / n * 1e3, inside["other"] / n * 1e3, rest / n * 1e3

    cells = [(label, size, side) for label in labels for size in sizes for side in sides]
    calls: dict[tuple[str, int, str], int] = {}
    for cell in cells:  # warm-up: compile routes, fill caches; and how many calls fill CELL_SECONDS
        timed(cell[2], cell[1], cell[0], 1)
        wall, _cpu = timed(cell[2], cell[1], cell[0], 1)
        calls[cell] = max(1, min(500, math.ceil(cell_seconds * 1e3 / wall)))
    print(f"warmed up; {rounds} rounds, about {cell_seconds} s per operation, size and side per round")
    print(f"load average at the start of the rounds: {load()}")
    runs: dict[tuple[str, int, str], list[tuple[float, float]]] = {cell: [] for cell in cells}
    for round_number in range(rounds):
        for cell in cells if round_number % 2 == 0 else cells[::-1]:
            runs[cell].append(timed(cell[2], cell[1], cell[0], calls[cell]))
    print(f"load average at the end of the rounds: {load()}")

    splits = {(label, size): split(size, label, calls[label, size, "engine"]) for label in labels for size in sizes}
    plans = {
        (label, size): explain(connection, vendor, engine, hand, size, label, storage_param(size))
        for label in labels
        for size in sizes
    }
    for label in labels:
        report(vendor, label, sizes, runs, matches, plans, splits)
    print(f"\nload average at the end: {load()}")
    if vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_size_pretty(pg_table_size('apps_registry_record')), "
                "pg_size_pretty(pg_indexes_size('apps_registry_record'))"
            )
            table_size, indexes_size = cursor.fetchone()
        print(f"records table {table_size}, its indexes {indexes_size}")


def report(
    vendor: str,
    label: str,
    sizes: list[int],
    runs: dict[tuple[str, int, str], list[tuple[float, float]]],
    matches: dict[tuple[str, int], int],
    plans: dict[tuple[str, int], dict[str, tuple[str, int]]],
    splits: dict[tuple[str, int], tuple[float, float, float]],
) -> None:
    sides = ["engine", "hand SQL"]
    print(f"\n{vendor}: {TITLES[label]}")
    print("median (min-max) over rounds; ms per call (CPU: this process + the database); µs per matching record")
    head = f"{'size':>5} {'matches':>7} {'engine wall':>22} {'hand SQL wall':>22} {'engine / hand':>18}"
    print(head + f" {'engine CPU':>18} {'hand CPU':>18} {'µs/match: engine':>16} {'hand':>6}")
    for size in sizes:
        e, h = runs[label, size, "engine"], runs[label, size, "hand SQL"]
        ratio = Spread.of(a[0] / b[0] for a, b in zip(e, h, strict=True))
        wall_e, wall_h = Spread.of(r[0] for r in e), Spread.of(r[0] for r in h)
        line = f"{size_label(size):>5} {matches[label, size]:>7} {wall_e.show(3):>22} {wall_h.show(3):>22}"
        line += f" {ratio.show(2) + 'x':>18} {Spread.of(r[1] for r in e).show(2):>18}"
        line += f" {Spread.of(r[1] for r in h).show(2):>18}"
        count = matches[label, size]
        print(line + f" {wall_e.median * 1e3 / count:>16.2f} {wall_h.median * 1e3 / count:>6.2f}")
    largest = sizes[-1]
    # The size to compare the largest with: the smallest, and the smallest matching as many records if that differs.
    bases = [sizes[0]]
    same = [s for s in sizes[1:-1] if matches[label, s] == matches[label, largest]]
    if matches[label, sizes[0]] != matches[label, largest] and same:
        bases.append(same[0])
    for base in bases:
        for side in sides:
            pairs = list(zip(runs[label, largest, side], runs[label, base, side], strict=True))
            wall = Spread.of(a[0] / b[0] for a, b in pairs)
            cpu = Spread.of(a[1] / b[1] for a, b in pairs if b[1] > 0)
            note = ""
            if label == "month" and side == "engine" and base == sizes[0]:
                note = f"   (issue 19 target <= 1.5x: {'met' if wall.median <= 1.5 else 'NOT met'})"
            matched = f"{matches[label, largest]} / {matches[label, base]} matches"
            print(
                f"{side:<8} {size_label(largest)} / {size_label(base)} ({matched}): wall {wall.show(2)}x, "
                f"CPU {cpu.show(2)}x{note}"
            )
    if matches[label, sizes[0]] != matches[label, largest]:
        for side in sides:
            slopes = []
            for low, high in zip(sizes, sizes[1:], strict=False):
                added = matches[label, high] - matches[label, low]
                if added <= 0:
                    continue
                t_low = Spread.of(r[0] for r in runs[label, low, side]).median
                t_high = Spread.of(r[0] for r in runs[label, high, side]).median
                slopes.append(f"{size_label(low)}-{size_label(high)} {(t_high - t_low) * 1e3 / added:.2f}")
            print(f"{side:<8} µs per added matching record, between sizes: {', '.join(slopes)}")
    print("the engine's wall ms per call, instrumented: in its aggregate statement, its other statements, the rest")
    for size in sizes:
        aggregate, other, rest = splits[label, size]
        print(f"  {size_label(size):>5} aggregate {aggregate:.3f}, other statements {other:.3f}, rest {rest:.3f}")
    print("one call each (PostgreSQL: EXPLAIN ANALYZE, its time; work: buffers touched / SQLite VM instructions):")
    for size in sizes:
        for side in sides:
            plan, work = plans[label, size][side]
            print(f"  {size_label(size):>5} {side:<8} work {work:>8}  {plan}")


def explain(
    connection: Any, vendor: str, engine: Any, hand: Any, size: int, label: str, storage: Any
) -> dict[str, tuple[str, int]]:
    """Per side: (the plan in a line, the database work of one call), the engine's statement captured as it runs."""
    captured: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if " GROUP BY " in sql:
            captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        engine(size, label)
    sql, params = captured[-1]
    hand_statement, hand_params = hand_sql(vendor, label)
    statements = {"engine": (sql, params), "hand SQL": (hand_statement, [storage, "expenses", *hand_params])}
    found: dict[str, tuple[str, int]] = {}
    for side, (statement, bound) in statements.items():
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, bound)
                document = cursor.fetchone()[0]
            document = json.loads(document) if isinstance(document, str) else document
            top = document[0]["Plan"]
            work = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
            line = _plan_line(top)
            served = _declared_index_serves(top)
            declared = "the declared index serves the filter" if served else "the declared index does not serve it"
            found[side] = (f"{document[0]['Execution Time']:.2f} ms, {declared}: {line}", work)
            continue
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + statement, bound)
            plan = "; ".join(row[3] for row in cursor.fetchall())
        found[side] = (_declared(plan), _vm_instructions(connection, engine if side == "engine" else hand, size, label))
    return found


def _vm_instructions(connection: Any, fn: Any, size: int, label: str) -> int:
    """SQLite virtual-machine instructions one call runs (to the hundred), counted by a progress handler."""
    raw = connection.connection
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    raw.set_progress_handler(tick, 100)
    try:
        fn(size, label)
    finally:
        raw.set_progress_handler(None, 100)
    return steps[0] * 100


def _declared(text: str) -> str:
    return text.replace("rix_", "declared index rix_")


def _declared_index_serves(node: dict[str, Any]) -> bool:
    """Whether a plan reads a declared index (rix_...) with a condition on it (not whole, as a list of the records)."""
    if node.get("Index Name", "").startswith("rix_") and "Index Cond" in node:
        return True
    return any(_declared_index_serves(child) for child in node.get("Plans") or [])


def _plan_line(node: dict[str, Any]) -> str:
    """A plan node as one line, its inputs after `>` (several in brackets): each node's type, the index it reads
    (rix_...: the declared one), the rows it gave, the rows the planner expected and those its filter removed."""
    name = node["Node Type"]
    if "Index Name" in node:
        index = node["Index Name"]
        name += f" on {'declared index' if index.startswith('rix_') else index}"
        if "Index Cond" not in node:
            name += " (read whole: no condition on it)"
    removed = node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
    name += f" [{node.get('Actual Rows', '?')} rows, planned {node.get('Plan Rows', '?')}"
    name += f"{f', {removed} removed' if removed else ''}]"
    children = [_plan_line(child) for child in node.get("Plans") or []]
    if not children:
        return name
    return f"{name} > {children[0] if len(children) == 1 else '(' + ' + '.join(children) + ')'}"


def bulk_load(connection: Any, storage_id: Any, count: int) -> None:
    """`count` expenses for one app, straight into the table (not through the engine)."""
    from django.db import transaction
    from django.utils import timezone

    now = timezone.now()
    columns = "storage_id, collection, record_id, data, version, created_at, updated_at"
    if connection.vendor == "postgresql":
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY apps_registry_record ({columns}) FROM STDIN") as copy,
        ):
            for record_id, data in records(count):
                copy.write_row((str(storage_id), "expenses", record_id, json.dumps(data), 1, now, now))
        return
    stamp = now.isoformat(sep=" ")
    sql = f"INSERT INTO apps_registry_record ({columns}) VALUES (%s, %s, %s, %s, 1, %s, %s)"
    rows: list[tuple[Any, ...]] = []
    with transaction.atomic(), connection.cursor() as cursor:
        for record_id, data in records(count):
            rows.append((storage_id.hex, "expenses", record_id, json.dumps(data, separators=(",", ":")), stamp, stamp))
            if len(rows) == 20_000:
                cursor.executemany(sql, rows)
                rows = []
        if rows:
            cursor.executemany(sql, rows)


def size_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


if __name__ == "__main__":
    main()
