"""What open_app costs the server beside query_app: the app page's panels rendered as HTML for the MCP Apps view,
in process (no HTTP), on the budget example with a number of expenses.

    .venv/bin/python benchmarks/open_app.py                 # 25 and 200 expenses, 5 repeats of 50 calls
    .venv/bin/python benchmarks/open_app.py --quick         # a smoke run (a few seconds)
    .venv/bin/python benchmarks/open_app.py --expenses 25 --calls 100 --repeats 3

Cases, interleaved within each repeat:

  query_app   the handler's unit of work for the start view (route_run of `summary`), as query_app runs it;
  open_app    `app_inline` (what open_app runs): that query, every view that needs no filter, the pickers'
              choices, "Recently added", and the template render.

Figures are milliseconds of CPU (time.process_time) per call, median (min-max) over repeats, with the SQL
statements per call and the sizes of what travels: open_app's HTML (in the result's _meta) and the
ui://charming/app document, read once by a host. A temporary SQLite database with the project's settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from measure import Spread, banner

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 25 expenses, 2 repeats of 10 calls")
    parser.add_argument("--expenses", type=int, nargs="*", default=[25, 200], help="expenses stored (default 25 200)")
    parser.add_argument("--calls", type=int, default=50, help="calls per case per repeat (default 50)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (default 5)")
    args = parser.parse_args()
    if args.quick:
        args.expenses, args.calls, args.repeats = [25], 10, 2
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="charming-open-app-") as workdir:
        os.environ["DJANGO_SETTINGS_MODULE"] = "charming.settings"
        os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/open-app.sqlite3"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        return run(args)


def run(args: argparse.Namespace) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps_registry.pages.inline import app_inline
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run
    from mcp_tools.ui import app_ui_html

    call_command("migrate", verbosity=0)
    definition = json.loads((ROOT / "examples" / "budget.json").read_text())
    banner(f"open_app vs query_app, in process ({args.repeats} repeats of {args.calls} calls)")
    print(f"ui://charming/app document: {len(app_ui_html().encode()):,} bytes (read once per host)")
    print(f"{'expenses':>8}  {'case':<10} {'CPU ms/call':>20}  {'SQL/call':>8}  {'HTML bytes':>10}")
    for count in args.expenses:
        user = get_user_model().objects.create(username=f"bench-{count}")
        app = app_definition_save(actor=user, definition=definition)
        route_run(actor=user, app_id=app.id, op="set_budget", params={"limit": 10_000}, kind="mutation")
        for n in range(count):
            params = {"amount": 1 + n % 40, "category": ("food", "travel", "books")[n % 3], "note": f"item {n}"}
            route_run(actor=user, app_id=app.id, op="add_expense", params=params, kind="mutation")

        def query(user=user, app=app) -> int:
            route_run(actor=user, app_id=app.id, op="summary", params={}, kind="query")
            return 0

        def open_app(user=user, app=app) -> int:
            return len(app_inline(actor=user, app_id=app.id).html.encode())

        cases = {"query_app": query, "open_app": open_app}
        sizes, statements = {}, {}
        for name, fn in cases.items():
            for _ in range(3):
                sizes[name] = fn()
            with CaptureQueriesContext(connection) as captured:
                fn()
            statements[name] = len(captured.captured_queries)
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, fn in cases.items():
                started = time.process_time()
                for _ in range(args.calls):
                    fn()
                cpu[name].append((time.process_time() - started) * 1000 / args.calls)
        for name in cases:
            size = f"{sizes[name]:,}" if sizes[name] else "-"
            print(f"{count:>8}  {name:<10} {Spread.of(cpu[name]).show(2):>20}  {statements[name]:>8}  {size:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
