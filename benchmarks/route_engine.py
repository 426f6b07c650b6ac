"""Route engine throughput: the budget example's main mutation (add_expense) through the service,
beside the same database work done directly with the ORM and as plain SQL (the floor), on SQLite
and on PostgreSQL.

    .venv/bin/python benchmarks/route_engine.py                 # SQLite, and PostgreSQL via .ci/postgres.sh
    .venv/bin/python benchmarks/route_engine.py --calls 5000
    .venv/bin/python benchmarks/route_engine.py --only sqlite

Each database runs in its own process on a fresh database (a temp SQLite file in WAL mode, as
in production; a throw-away PostgreSQL cluster). Calls run one after another on one connection;
engine and ORM alternate in rounds and the median round is reported. A second, instrumented
pass splits the engine's time into JSON Schema validation, CEL evaluation, database time
(inside cursor.execute, including the driver) and the rest (Python in the engine and Django).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="calls per side per round (default 300)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.calls)
        return
    python = sys.executable
    script = str(Path(__file__).resolve())
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
            subprocess.run([python, script, "--worker", "--calls", str(args.calls)], env=env, check=True, cwd=ROOT)
    if args.only in (None, "postgres"):
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f"'{python}' '{script}' --worker --calls {args.calls}; rc=$?; pg_stop; exit $rc"
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def worker(calls: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.db.models import Expression, JSONField
    from django.utils import timezone

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

    def orm_call() -> None:
        # The same statements the route issues for its data: read the budget, insert the expense,
        # increment the budget in SQL and read it back; in one transaction.
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

    def timed(fn: Any, n: int) -> tuple[float, float]:
        """(calls per second of wall time, µs of this process's CPU per call)."""
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        return n / (time.perf_counter() - start), (time.process_time() - cpu) / n * 1e6

    timed(engine_call, 200)  # warm up: compile the route, fill caches
    timed(orm_call, 200)
    timed(sql_call, 200)
    engine_runs, orm_runs, sql_runs = [], [], []
    for _ in range(ROUNDS):  # short alternating rounds, so every side sees the same machine load
        engine_runs.append(timed(engine_call, calls))
        orm_runs.append(timed(orm_call, calls))
        sql_runs.append(timed(sql_call, calls))
    sql_rate = statistics.median(r for r, _ in sql_runs)
    sql_cpu = statistics.median(c for _, c in sql_runs)
    engine_rates, orm_rates = [r for r, _ in engine_runs], [r for r, _ in orm_runs]
    engine_rate, orm_rate = statistics.median(engine_rates), statistics.median(orm_rates)
    engine_cpu = statistics.median(c for _, c in engine_runs)
    orm_cpu = statistics.median(c for _, c in orm_runs)

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

    original_commit = connection._commit

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
    expressions.Expr.evaluate = timed_evaluate  # type: ignore[method-assign]
    connection._commit = timed_commit  # type: ignore[method-assign]
    start = time.perf_counter()
    with connection.execute_wrapper(timed_execute):
        for _ in range(calls):
            engine_call()
    total = time.perf_counter() - start
    engine_statements = statements["n"] / calls
    statements["n"] = 0
    with connection.execute_wrapper(timed_execute):
        orm_call()
    orm_statements = statements["n"]
    schemas.SchemaValidator.errors = original_errors  # type: ignore[method-assign]
    expressions.Expr.evaluate = original_evaluate  # type: ignore[method-assign]
    connection._commit = original_commit  # type: ignore[method-assign]

    other = total - sum(spent.values())
    vendor = connection.vendor
    overhead = (orm_rate / engine_rate - 1) * 100
    print(f"\n== {vendor} ({connection.Database.__name__} {getattr(connection.Database, 'sqlite_version', '')}) ==")
    print(f"add_expense through route_run : {engine_rate:8.0f} routes/s  ({1e6 / engine_rate:6.0f} µs/call)")
    print(f"same data work with the ORM   : {orm_rate:8.0f} calls/s   ({1e6 / orm_rate:6.0f} µs/call)")
    print(f"same statements as plain SQL  : {sql_rate:8.0f} calls/s   ({1e6 / sql_rate:6.0f} µs/call)")
    print(f"engine cost over the bare ORM : {overhead:+.1f}% wall time per call (median of {ROUNDS} rounds)")
    print(f"engine cost over plain SQL    : {(sql_rate / engine_rate - 1) * 100:+.1f}% wall time per call")
    print(
        f"client CPU per call           : engine {engine_cpu:.0f} µs, ORM {orm_cpu:.0f} µs "
        f"({(engine_cpu / orm_cpu - 1) * 100:+.1f}%), plain SQL {sql_cpu:.0f} µs"
    )
    print(f"load average                  : {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"statements per call           : engine {engine_statements:.1f}, ORM {orm_statements}")
    print("engine time, instrumented pass (database = inside cursor.execute and commit):")
    for name, seconds in [*spent.items(), ("other Python", other)]:
        print(f"  {name:<13} {seconds / total * 100:5.1f}%  ({seconds / calls * 1e6:6.1f} µs/call)")
    print(f"rounds, engine (routes/s): {[round(r) for r in engine_rates]}")
    print(f"rounds, ORM (calls/s)    : {[round(r) for r in orm_rates]}")


if __name__ == "__main__":
    main()
