"""Route engine cost: the budget example's main mutation (add_expense) through the service, beside the same
work written with the ORM the way a Django developer would (the idiomatic baseline, with the same access check),
the old "bare ORM" baseline, and plain SQL (the floor), on SQLite and on PostgreSQL.

    .venv/bin/python benchmarks/route_engine.py                 # SQLite, and PostgreSQL via .ci/postgres.sh
    .venv/bin/python benchmarks/route_engine.py --quick         # a smoke run (seconds)
    .venv/bin/python benchmarks/route_engine.py --calls 1000 --rounds 21 --only postgres

Each database runs in its own process on a fresh database (a temp SQLite file with the project's settings: WAL,
SQLite's default synchronous=FULL; a throw-away PostgreSQL cluster with fsync=off). Calls run one after another on
one connection. After a warm-up, the five sides run in short rounds whose order alternates from round to round, so
all see the same machine load; figures are median (min-max) over rounds: wall time, this process's CPU and, on
PostgreSQL, the backend's CPU (from /proc), each per call. Ratios are taken within each round.

  engine          route_run(): access check, route lookup, input/output validation, CEL, the writes in one
                  transaction;
  idiomatic ORM   the app's rate limit taken (app_budget_take, as route_run does), then in one transaction:
                  apps_registry.access.app_for(need="mutate"), the budget read with
                  select_for_update() (a row lock on PostgreSQL), Record.objects.create() for the expense, the
                  budget's `spent` changed in Python and save(update_fields=...); the route's two checks;
  idiomatic, no access check
                  the same without app_for and the rate limit (the storage id known beforehand): shows what
                  they cost;
  bare ORM (old)  the old baseline: no access check and no lock, .first() twice, an UPDATE and a re-read;
  plain SQL       the statements the engine sends for the data, hand-written (no access check, no validation, no
                  CEL): the floor.

A second, instrumented pass splits the engine's time into JSON Schema validation, CEL evaluation, database time
(inside cursor.execute, including the driver) and the rest (Python in the engine and Django).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from measure import RATE_LIMITS_HIGH, Spread, banner, load, process_cpu

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, help="calls per side per round (default 300; quick 40)")
    parser.add_argument("--rounds", type=int, help="rounds (default 15; quick 3)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few calls, three rounds")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    calls = args.calls or (40 if args.quick else 300)
    rounds = args.rounds or (3 if args.quick else 15)
    if args.worker:
        worker(calls, rounds)
        return
    python = sys.executable
    script = str(Path(__file__).resolve())
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
            worker_command = [python, script, "--worker", "--calls", str(calls), "--rounds", str(rounds)]
            subprocess.run(worker_command, env=env, check=True, cwd=ROOT)
    if args.only in (None, "postgres"):
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f"'{python}' '{script}' --worker --calls {calls} --rounds {rounds}; rc=$?; pg_stop; exit $rc"
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def worker(calls: int, rounds: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    for name, value in RATE_LIMITS_HIGH.items():  # route_run takes from the app's budget on every call
        os.environ.setdefault(name, value)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.db.models import Expression, JSONField
    from django.utils import timezone

    from apps_registry.access import app_for
    from apps_registry.models import Record
    from apps_registry.routes import expressions, schemas

    class _JSONIncrement(Expression):
        """The ORM baseline's increment: `data` with one number field increased, computed in SQL (the
        expression the engine used before its UPDATE ... RETURNING)."""

        output_field = JSONField()

        def __init__(self, key: str, by: float) -> None:
            super().__init__()
            self.key, self.by = key, by

        def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
            column = compiler.quote_name_unless_alias("data")
            if connection.vendor == "postgresql":
                total = f"COALESCE(({column} ->> %s)::numeric, 0) + %s::numeric"
                return f"jsonb_set({column}, %s::text[], to_jsonb({total}), true)", [[self.key], self.key, self.by]
            path = "$." + json.dumps(self.key)
            return f"json_set({column}, %s, COALESCE(json_extract({column}, %s), 0) + %s)", [path, path, self.by]

    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.rate_limits import app_budget_take
    from apps_registry.services.routes import route_run

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username="bench")
    definition = json.loads((ROOT / "examples" / "budget.json").read_text())
    app = app_definition_save(actor=user, definition=definition)
    route_run(actor=user, app_id=app.id, op="set_budget", params={"limit": 1e12}, kind="mutation")
    storage_id = app.storage.id
    counter = iter(range(10**9))

    def engine_call() -> None:
        i = next(counter)
        route_run(
            actor=user,
            app_id=app.id,
            op="add_expense",
            params={"amount": 1.25, "category": f"c{i % 7}", "note": "bench"},
            kind="mutation",
        )

    app_id = app.id

    def idiomatic_call() -> None:
        # What a Django developer would write for this route: the project's access check, a row lock on the
        # budget, the expense created, the budget changed and saved; the route's two checks; one transaction.
        i = next(counter)
        amount = 1.25
        app_budget_take(actor=user, app_id=app_id)  # the app's rate limit, as route_run takes it
        with transaction.atomic():
            found, _role = app_for(actor=user, app_id=app_id, need="mutate")
            budget = (
                Record.objects.select_for_update(of=("self",))
                .filter(storage__app=found, collection="budgets", record_id="current")
                .get()
            )
            if amount <= 0:
                raise ValueError("amount must be positive")
            expense = Record.objects.create(
                storage_id=budget.storage_id,
                collection="expenses",
                record_id=str(uuid.uuid4()),
                data={"amount": amount, "category": f"c{i % 7}", "note": "bench", "at": timezone.now().isoformat()},
            )
            budget.data["spent"] = budget.data.get("spent", 0) + amount
            budget.version += 1
            budget.save(update_fields=["data", "version", "updated_at"])
            _ = {"id": expense.record_id, "remaining": budget.data["limit"] - budget.data["spent"]}

    def unchecked_call() -> None:
        # The idiomatic baseline without the access check (the storage id known beforehand): what the check costs.
        i = next(counter)
        amount = 1.25
        with transaction.atomic():
            budget = Record.objects.select_for_update().get(
                storage_id=storage_id, collection="budgets", record_id="current"
            )
            if amount <= 0:
                raise ValueError("amount must be positive")
            expense = Record.objects.create(
                storage_id=storage_id,
                collection="expenses",
                record_id=str(uuid.uuid4()),
                data={"amount": amount, "category": f"c{i % 7}", "note": "bench", "at": timezone.now().isoformat()},
            )
            budget.data["spent"] = budget.data.get("spent", 0) + amount
            budget.version += 1
            budget.save(update_fields=["data", "version", "updated_at"])
            _ = {"id": expense.record_id, "remaining": budget.data["limit"] - budget.data["spent"]}

    def orm_call() -> None:
        # The old "bare ORM" baseline, kept beside earlier figures: the statements the route issued for its data
        # before its UPDATE ... RETURNING (read the budget, insert the expense, increment the budget in SQL, read it
        # back), with no access check and no lock; in one transaction.
        i = next(counter)
        records = Record.objects.filter(storage_id=storage_id)
        with transaction.atomic():
            budget = records.filter(collection="budgets", record_id="current").values_list("data", flat=True).first()
            assert budget is not None
            expense = Record.objects.create(
                storage_id=storage_id,
                collection="expenses",
                record_id=f"orm-{i}",
                data={"amount": 1.25, "category": f"c{i % 7}", "note": "bench", "at": "2026-01-01T00:00:00+00:00"},
            )
            records.filter(collection="budgets", record_id="current").update(data=_JSONIncrement("spent", 1.25))
            updated = records.filter(collection="budgets", record_id="current").values_list("data", flat=True).first()
            assert updated is not None
            _ = {"id": expense.record_id, "remaining": updated["limit"] - updated["spent"]}

    quote = connection.ops.quote_name
    table = quote(Record._meta.db_table)
    storage_param = Record._meta.get_field("storage").get_db_prep_value(storage_id, connection)
    if connection.vendor == "postgresql":
        increment = "jsonb_set(data, '{spent}', to_jsonb(COALESCE((data ->> 'spent')::numeric, 0) + %s::numeric))"
    else:
        increment = "json_set(data, '$.spent', COALESCE(json_extract(data, '$.spent'), 0) + %s)"
    now_param = Record._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)

    def sql_call() -> None:
        # The floor: the same statements as hand-written SQL, with no access check, no route lookup,
        # no validation and no CEL.
        i = next(counter)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"SELECT data FROM {table} WHERE storage_id = %s AND collection = %s AND record_id = %s",
                [storage_param, "budgets", "current"],
            )
            assert cursor.fetchone() is not None
            data = {"amount": 1.25, "category": f"c{i % 7}", "note": "bench", "at": "2026-01-01T00:00:00+00:00"}
            cursor.execute(
                f"INSERT INTO {table} (storage_id, collection, record_id, data, version, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, 1, %s, %s)",
                [storage_param, "expenses", f"sql-{i}", json.dumps(data), now_param, now_param],
            )
            cursor.execute(
                f"UPDATE {table} SET data = {increment}, version = version + 1 "
                "WHERE storage_id = %s AND collection = %s AND record_id = %s RETURNING data",
                [1.25, storage_param, "budgets", "current"],
            )
            updated = cursor.fetchone()[0]
            updated = json.loads(updated) if isinstance(updated, str) else updated
            _ = {"id": f"sql-{i}", "remaining": updated["limit"] - updated["spent"]}

    database: Any = connection  # the backend's own attributes (pg_version, Database, _commit) are not in the stubs
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
            backend: int | None = cursor.fetchone()[0]
            version = f"PostgreSQL {database.pg_version // 10000}.{database.pg_version % 10000}"
        else:
            backend = None
            cursor.execute("PRAGMA synchronous")
            synchronous = ["OFF", "NORMAL", "FULL", "EXTRA"][cursor.fetchone()[0]]
            cursor.execute("PRAGMA journal_mode")
            version = f"SQLite {database.Database.sqlite_version}, {cursor.fetchone()[0]}, synchronous={synchronous}"

    def timed(fn: Any, n: int) -> tuple[float, float, float]:
        """µs per call of wall time, of this process's CPU and of the PostgreSQL backend's CPU (0 on SQLite)."""
        start, cpu = time.perf_counter(), time.process_time()
        db = 0.0 if backend is None else process_cpu(backend)
        for _ in range(n):
            fn()
        db = 0.0 if backend is None else process_cpu(backend) - db
        return (time.perf_counter() - start) / n * 1e6, (time.process_time() - cpu) / n * 1e6, db / n * 1e6

    sides = {
        "engine": engine_call,
        "idiomatic ORM": idiomatic_call,
        "idiomatic, no access check": unchecked_call,
        "bare ORM (old)": orm_call,
        "plain SQL": sql_call,
    }
    banner(f"route_engine, {version}")
    for fn in sides.values():  # warm up: compile the route, fill caches
        timed(fn, min(200, calls))
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    names = list(sides)
    for round_number in range(rounds):  # short rounds in alternating order, so every side sees the same load
        for name in names if round_number % 2 == 0 else names[::-1]:
            runs[name].append(timed(sides[name], calls))

    # Instrumented pass: where the engine's time goes.
    spent = {"validation": 0.0, "cel": 0.0, "database": 0.0}
    statements = {"n": 0}
    original_errors = schemas.SchemaValidator.errors
    original_evaluate = expressions.Expr.evaluate

    def timed_errors(self: Any, instance: Any) -> Any:
        start = time.perf_counter()
        try:
            return original_errors(self, instance)
        finally:
            spent["validation"] += time.perf_counter() - start

    def timed_evaluate(self: Any, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return original_evaluate(self, context)
        finally:
            spent["cel"] += time.perf_counter() - start

    original_commit = database._commit

    def timed_commit() -> Any:
        start = time.perf_counter()
        try:
            return original_commit()
        finally:
            spent["database"] += time.perf_counter() - start

    def timed_execute(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements["n"] += 1
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent["database"] += time.perf_counter() - start

    schemas.SchemaValidator.errors = timed_errors  # type: ignore[method-assign]
    expressions.Expr.evaluate = timed_evaluate  # type: ignore[method-assign,assignment]
    database._commit = timed_commit
    start = time.perf_counter()
    with connection.execute_wrapper(timed_execute):
        for _ in range(calls):
            engine_call()
    total = time.perf_counter() - start
    engine_statements = statements["n"] / calls
    counts: dict[str, float] = {}
    for name in list(sides)[1:]:
        statements["n"] = 0
        with connection.execute_wrapper(timed_execute):
            sides[name]()
        counts[name] = statements["n"]
    counts["engine"] = round(engine_statements, 1)
    schemas.SchemaValidator.errors = original_errors  # type: ignore[method-assign]
    expressions.Expr.evaluate = original_evaluate  # type: ignore[method-assign]
    database._commit = original_commit

    other = total - sum(spent.values())
    print(f"{calls} calls per side per round, {rounds} rounds; median (min-max) over rounds")
    print(f"{'side':<26} {'wall µs/call':>20} {'client CPU µs':>20} {'DB CPU µs':>17} {'statements':>10}")
    for name, rows in runs.items():
        wall, cpu, db = (Spread.of(row[i] for row in rows) for i in range(3))
        db_text = db.show() if backend is not None else "-"
        print(f"{name:<26} {wall.show():>20} {cpu.show():>20} {db_text:>17} {counts[name]:>10}")
    for name in list(sides)[1:]:
        pairs = list(zip(runs["engine"], runs[name], strict=True))
        wall = Spread.of(e[0] / o[0] for e, o in pairs)
        cpu = Spread.of((e[1] + e[2]) / (o[1] + o[2]) for e, o in pairs)
        target = "   (target: <= 1.10x)" if name == "idiomatic ORM" else ""
        print(f"engine / {name:<26}: wall {wall.show(2)}x, CPU (client + DB) {cpu.show(2)}x{target}")
    print("engine time, instrumented pass (database = inside cursor.execute and commit):")
    for name, seconds in [*spent.items(), ("other Python", other)]:
        print(f"  {name:<13} {seconds / total * 100:5.1f}%  ({seconds / calls * 1e6:6.1f} µs/call)")
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
