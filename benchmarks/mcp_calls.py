"""mutate_app through the MCP SDK client over HTTP, beside the same route through the plain REST endpoint.

    .venv/bin/python benchmarks/mcp_calls.py [--calls 200] [--database-url postgres://...]

Starts `uvicorn charming.asgi:application` (one worker) on a fresh database (a temporary SQLite file
unless --database-url is given: it must point at an empty, throw-away database), creates a user,
a token and an app with one mutation route (insert one record, return its id), then runs the route
at 1 and 8 concurrent clients through: the SDK client on protocol 2025-11-25 (one session per client,
SSE responses), on 2026-07-28 (stateless), and POST /api/apps/<id>/run/<op>/ (DRF). Prints calls per
second, p50 and p99 latency, and each MCP row's throughput as a ratio of the REST row's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROUTE = "add_expense"
DEFINITION = {
    "format": 1,
    "name": "Benchmark budget",
    "description": "One cheap mutation route",
    "collections": {"expenses": {}},
    "routes": {
        ROUTE: {
            "kind": "mutation",
            "description": "Record one expense.",
            "input": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "category": {"type": "string"}},
                "required": ["amount", "category"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "steps": [
                {
                    "insert": {
                        "collection": "expenses",
                        "value": "{'amount': params.amount, 'category': params.category}",
                    },
                    "as": "expense",
                },
                {"return": "{'id': expense.id}"},
            ],
        }
    },
}
PARAMS = {"amount": 4.5, "category": "coffee"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _prepare(env: dict[str, str]) -> tuple[str, str]:
    """Migrate, then create the user, token and app in a child process (Django set up there)."""
    script = f"""
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from apps_registry.services.tokens import token_create
from apps_registry.services.definitions import app_definition_save
user = get_user_model().objects.create(username="bench")
token = token_create(user=user, name="bench").plaintext
app = app_definition_save(actor=user, definition=json.loads({json.dumps(json.dumps(DEFINITION))}))
print(json.dumps({{"token": token, "app_id": str(app.id)}}))
"""
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["token"], data["app_id"]


async def _mcp_worker(url: str, token: str, app_id: str, mode: str, calls: int, latencies: list[float]) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        await client.list_tools()
        for _ in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("mutate_app", {"app_id": app_id, "op": ROUTE, "params": PARAMS})
            latencies.append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError(f"mutate_app failed: {result.content}")


async def _rest_worker(base: str, token: str, app_id: str, calls: int, latencies: list[float]) -> None:
    import httpx2

    url = f"{base}/api/apps/{app_id}/run/{ROUTE}/"
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        for _ in range(calls):
            started = time.perf_counter()
            response = await http.post(url, json={"params": PARAMS})
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise RuntimeError(f"REST run failed: {response.status_code} {response.text}")


async def _measure(kind: str, concurrency: int, calls: int, base: str, token: str, app_id: str) -> dict[str, Any]:
    latencies: list[float] = []
    per_client = max(1, calls // concurrency)
    if kind == "rest":
        workers = [_rest_worker(base, token, app_id, per_client, latencies) for _ in range(concurrency)]
    else:
        mode = "legacy" if kind == "mcp-2025-11-25" else "2026-07-28"
        workers = [_mcp_worker(f"{base}/mcp", token, app_id, mode, per_client, latencies) for _ in range(concurrency)]
    started = time.perf_counter()
    await asyncio.gather(*workers)
    # Throughput over the calls themselves: connection setup and tools/list are included only in wall time.
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "kind": kind,
        "concurrency": concurrency,
        "calls": len(ordered),
        "calls_per_s": len(ordered) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="calls per configuration (split across clients)")
    parser.add_argument("--database-url", default="", help="an EMPTY throw-away database; default: temporary SQLite")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))

    with tempfile.TemporaryDirectory(prefix="charming-bench-") as workdir:
        port = _free_port()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "charming.settings",
            "DATABASE_URL": args.database_url or f"sqlite:///{workdir}/bench.sqlite3",
            "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "LOG_LEVEL": "WARNING",
        }
        token, app_id = _prepare(env)
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "charming.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--lifespan",
                "on",
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            env=env,
            cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("the server did not start") from None
                    time.sleep(0.1)
            base = f"http://127.0.0.1:{port}"
            database = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
            print(f"mutate_app benchmark: {args.calls} calls per row, one uvicorn worker, {database}")
            print(f"{'transport':<18} {'clients':>7} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs REST':>8}")
            for concurrency in (1, 8):
                rows = [
                    asyncio.run(_measure(kind, concurrency, args.calls, base, token, app_id))
                    for kind in ("rest", "mcp-2025-11-25", "mcp-2026-07-28")
                ]
                rest = rows[0]["calls_per_s"]
                for row in rows:
                    ratio = row["calls_per_s"] / rest
                    print(
                        f"{row['kind']:<18} {row['concurrency']:>7} {row['calls_per_s']:>9.1f} "
                        f"{row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {ratio:>7.2f}x"
                    )
        finally:
            server.terminate()
            server.wait(timeout=15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
