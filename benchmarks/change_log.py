"""What the change log costs: one mutate_app-sized mutation (the budget example's add_expense: a get, an insert
and an increment, two records changed) through route_run with the change log on and off
(CHARMING_CHANGE_LOG, read on every call), side by side, on SQLite and on PostgreSQL; then the change log's
storage per 1,000 such changes.

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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measure import RATE_LIMITS_HIGH, Spread, banner, load, process_cpu

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, help="calls per side per round (default 300; quick 40)")
    parser.add_argument("--rounds", type=int, help="rounds (default 11; quick 3)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few calls, three rounds")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    calls = args.calls or (40 if args.quick else 300)
    rounds = args.rounds or (3 if args.quick else 11)
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


if __name__ == "__main__":
    main()
