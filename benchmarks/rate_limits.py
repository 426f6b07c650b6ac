"""What the rate limits cost each request: one budget write (a token's or an app's row: the atomic upsert of
apps_registry/services/rate_limits.py) and one read (the address check before a token is looked up), on SQLite
(a temp file in WAL mode, with the default synchronous=FULL and with synchronous=NORMAL) and on PostgreSQL.

    .venv/bin/python benchmarks/rate_limits.py                  # SQLite, and PostgreSQL via .ci/postgres.sh
    .venv/bin/python benchmarks/rate_limits.py --calls 5000 --only sqlite

Calls run one after another on one connection, over 50 keys (as 50 busy tokens would); each figure is the median
of 5 rounds. Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="run one database only")
    parser.add_argument("--worker", choices=["default", "normal"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.calls, synchronous_normal=args.worker == "normal")
        return
    python = sys.executable
    script = str(Path(__file__).resolve())
    if args.only in (None, "sqlite"):
        for mode in ("default", "normal"):
            with tempfile.TemporaryDirectory() as tmp:
                env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
                command = [python, script, "--worker", mode, "--calls", str(args.calls)]
                subprocess.run(command, env=env, check=True, cwd=ROOT)
    if args.only in (None, "postgres"):
        command = (
            "source .ci/postgres.sh && pg_start >/dev/null && "
            f"'{python}' '{script}' --worker default --calls {args.calls}; rc=$?; pg_stop; exit $rc"
        )
        subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def worker(calls: int, *, synchronous_normal: bool) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import override_settings

    from apps_registry.ratelimits import current_rate
    from apps_registry.services.rate_limits import auth_failures_check, rate_budget_take

    call_command("migrate", verbosity=0)
    label = connection.vendor
    if connection.vendor == "sqlite":
        synchronous = "NORMAL" if synchronous_normal else "FULL"
        if synchronous_normal:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=NORMAL")
        label = f"sqlite (synchronous={synchronous})"
    with override_settings(CHARMING_RATE_TOKEN_PER_MINUTE=10**9, CHARMING_RATE_TOKEN_BURST=10**9):
        rate = current_rate("token")
        cases: list[tuple[str, Callable[[int], object]]] = [
            ("budget write (admitted)", lambda i: rate_budget_take(key=f"token:{i % 50}", rate=rate)),
            ("address check (read)", lambda i: auth_failures_check(address="203.0.113.7")),
        ]
        for name, call in cases:
            for i in range(200):  # warm-up
                call(i)
            rounds = []
            for _ in range(ROUNDS):
                started = time.perf_counter()
                for i in range(calls):
                    call(i)
                rounds.append((time.perf_counter() - started) / calls * 1e6)
            shown = ", ".join(f"{r:.0f}" for r in rounds)
            print(f"{label:28s} {name:24s} median {statistics.median(rounds):8.1f} µs/call  (rounds: {shown})")
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
