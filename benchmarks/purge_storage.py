"""Purge throughput: `retained_storage_purge` on one retained storage, per batch size, on SQLite
and PostgreSQL, with another app's records beside it (which must survive, and are counted).

    .venv/bin/python benchmarks/purge_storage.py                      # SQLite, and PostgreSQL via .ci/postgres.sh
    .venv/bin/python benchmarks/purge_storage.py --records 500000 --batch-sizes 1000,10000
    .venv/bin/python benchmarks/purge_storage.py --only sqlite
    .venv/bin/python benchmarks/purge_storage.py --quick               # a smoke run

Each database runs in its own process on a fresh database (a temp SQLite file in WAL mode, as in
production; a throw-away PostgreSQL cluster). For every batch size the storage is re-seeded, then
purged once; the figures are records deleted per second, the longest single batch (how long one
transaction holds its locks) and the CPU of this process and (PostgreSQL) of its backend per 1000 records.
Each purge is a single run (it destroys what it measures): repeat the script for a spread.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from measure import banner, load, process_cpu

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, help="records in the retained storage (default 200000; quick 5000)")
    parser.add_argument(
        "--batch-sizes", help="comma-separated batch sizes (default 500,1000,5000,20000; quick 500,2000)"
    )
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few records, two batch sizes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.records = args.records or (5_000 if args.quick else 200_000)
    args.batch_sizes = args.batch_sizes or ("500,2000" if args.quick else "500,1000,5000,20000")
    worker_args = ["--worker", "--records", str(args.records), "--batch-sizes", args.batch_sizes]
    if args.worker:
        worker(args.records, [int(b) for b in args.batch_sizes.split(",")])
        return
    python, script = sys.executable, str(Path(__file__).resolve())
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
            subprocess.run([python, script, *worker_args], env=env, check=True, cwd=ROOT)
    if args.only in (None, "postgres"):
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f"'{python}' '{script}' {' '.join(worker_args)}; rc=$?; pg_stop; exit $rc"
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def worker(records: int, batch_sizes: list[int]) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from apps_registry.models import Record, Storage
    from apps_registry.services.apps import app_create, app_delete
    from apps_registry.services.retention import retained_storage_purge

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create(username="bench")
    bystander = app_create(owner=owner, name="Bystander")
    Record.objects.bulk_create(
        (Record(storage=bystander.storage, collection="c", record_id=f"b{i}", data={"n": i}) for i in range(10_000)),
        batch_size=5000,
    )
    backend: int | None = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
    banner(f"purge_storage, {connection.vendor}: purge of {records} records (each ~40 bytes of JSON)")
    for batch_size in batch_sizes:
        app = app_create(owner=owner, name=f"Doomed {batch_size}")
        Record.objects.bulk_create(
            (
                Record(
                    storage=app.storage, collection="expenses", record_id=f"r{i}", data={"amount": i, "note": "x" * 20}
                )
                for i in range(records)
            ),
            batch_size=5000,
        )
        storage_id = app_delete(actor=owner, app_id=app.id, purge_storage=False, confirmed_via="command").storage_id
        assert storage_id is not None
        Storage.objects.filter(pk=storage_id).update(detached_at=timezone.now() - timedelta(days=40))
        timer = BatchTimer()
        start, cpu = time.perf_counter(), time.process_time()
        db = 0.0 if backend is None else process_cpu(backend)
        result = retained_storage_purge(actor=None, storage_id=storage_id, batch_size=batch_size, on_batch=timer)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        db = 0.0 if backend is None else process_cpu(backend) - db
        survivors = Record.objects.filter(storage=bystander.storage).count()
        assert result.records_purged == records and survivors == 10_000, (result, survivors)
        print(
            f"  batch {batch_size:>6}: {elapsed:6.2f} s, {records / elapsed:9.0f} records/s, "
            f"longest batch {max(timer.durations) * 1000:7.1f} ms, CPU per 1000 records: this process "
            f"{cpu / records * 1e6:5.1f} ms{'' if backend is None else f', backend {db / records * 1e6:5.1f} ms'}; "
            f"bystander records intact: {survivors}"
        )
    print(f"load average at the end: {load()}")


class BatchTimer:
    """The duration of each committed batch, from the purge's batch hook."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.last = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        self.durations.append(now - self.last)
        self.last = now


if __name__ == "__main__":
    main()
