"""What an MCP call costs besides its route: the token lookup, and the route with the advisories its result
carries, measured in-process (no HTTP), per call, with the SQL statements each runs.

    .venv/bin/python benchmarks/call_overhead.py                        # temporary SQLite database
    .venv/bin/python benchmarks/call_overhead.py --database-url postgres://…/empty_db
    .venv/bin/python benchmarks/call_overhead.py --root /work/main      # the same against another checkout

Each case runs `--calls` times after a warm-up, `--repeats` times, interleaved; it prints min / median of
the repeats' wall and CPU microseconds per call (CPU: this process only, so on PostgreSQL the database's own
CPU is not in it) and the statements per call. The cases:

- token: `token_authenticate` of a personal token (what mcp_tools.auth does per request);
- mutate: `mcp_tools.tools.run_route._run` for a mutation (route and advisories, what the mutate_app handler
  runs on its database thread), on an app with two open advisories;
- query: the same for a query.

`--root` runs the same cases against another checkout (e.g. main before a change); `_run` has kept its
signature, so both sides run the same code path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFINITION: dict[str, Any] = {
    "name": "Overhead",
    "collections": {"items": {}, "counters": {}},
    "routes": {
        "add": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "steps": [{"insert": {"collection": "items", "value": "{'n': params.n}"}, "as": "r"}, {"return": "r.id"}],
        },
        "count": {"kind": "query", "steps": [{"count": {"collection": "items"}, "as": "c"}, {"return": "c"}]},
    },
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="calls per case and repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--database-url", default="", help="an EMPTY throw-away database; default: temporary SQLite")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="the checkout to measure")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    sys.path.insert(0, str(root))
    os.chdir(root)
    with tempfile.TemporaryDirectory(prefix="charming-overhead-") as workdir:
        os.environ["DJANGO_SETTINGS_MODULE"] = "charming.settings"
        os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{workdir}/overhead.sqlite3"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        return _run_cases(args, root)


def _run_cases(args: argparse.Namespace, root: Path) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps_registry.models import Advisory
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.tokens import token_authenticate, token_create
    from mcp_tools.tools.run_route import _run

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username="overhead")
    plaintext = token_create(user=user, name="overhead").plaintext
    app = app_definition_save(actor=user, definition=DEFINITION)
    # Both routes lack an output schema: two authoring advisories, open, as many real apps have.
    open_advisories = Advisory.objects.filter(app=app, resolved=False).count()

    def token() -> None:
        token_authenticate(plaintext=plaintext)

    def mutate() -> None:
        value, error, _notes, _replayed = _run(user, str(app.id), "add", {"n": 1}, "mutation", {})
        assert error is None, error

    def query() -> None:
        value, error, _notes, _replayed = _run(user, str(app.id), "count", {}, "query", {})
        assert error is None, error

    cases = {"token": token, "mutate": mutate, "query": query}
    statements: dict[str, float] = {}
    for name, fn in cases.items():
        for _ in range(20):
            fn()
        with CaptureQueriesContext(connection) as captured:
            for _ in range(10):
                fn()
        statements[name] = len(captured.captured_queries) / 10
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, fn in cases.items():  # interleaved: each repeat runs every case once
            started, started_cpu = time.perf_counter(), time.process_time()
            for _ in range(args.calls):
                fn()
            wall[name].append((time.perf_counter() - started) / args.calls * 1e6)
            cpu[name].append((time.process_time() - started_cpu) / args.calls * 1e6)
    print(f"checkout: {root}  database: {connection.vendor}  open advisories: {open_advisories}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'case':8s} {'wall µs min/median':>22s} {'CPU µs min/median':>22s} {'statements':>11s}")
    for name in cases:
        w, c = sorted(wall[name]), sorted(cpu[name])
        print(
            f"{name:8s} {w[0]:10.0f} / {statistics.median(w):7.0f}   {c[0]:10.0f} / {statistics.median(c):7.0f}"
            f"   {statements[name]:9.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
