"""Fair shares under abuse (issue 22): one account replays an abuse within its rate limits while another account
makes ordinary calls; the other account's latency (p50, p99) and failures are compared with a quiet run.

    .venv/bin/python benchmarks/fairness.py                       # SQLite and PostgreSQL, every abuse
    .venv/bin/python benchmarks/fairness.py --quick               # a smoke run (about three minutes)
    .venv/bin/python benchmarks/fairness.py --database postgres --abuse cel --rounds 10 --seconds 10
    .venv/bin/python benchmarks/fairness.py --tree /tmp/old       # serve another checkout (older code, say)

Each database is a fresh one (a temporary SQLite file, or a throw-away PostgreSQL cluster from .ci/postgres.sh).
One uvicorn process serves it with the documented options and the default settings: the default rate limits
too, so the abuser stays within them (a refused call waits `retry_after_seconds`, as a client should).

The two accounts speak MCP 2026-07-28 with the official SDK client:

  victim   one client, calls one after another with 50 ms between them: `query_app` of a route with a
           comprehension (evaluated in a CEL worker process, as every comprehension is) and of a plain route,
           alternately. Its p50/p99 are over the calls of one phase; "failed" counts every call that was not ok.
  abuser   (none in the quiet phase)
    cel      8 concurrent clients calling a route whose comprehension keeps a CEL worker busy for most of the call's CEL
             time (CHARMING_ROUTES_MAX_CEL_MS), back to back: the finding that took another account's comprehension
             route from 4.9 ms to 1.2 s at p50;
    checks   4 concurrent clients calling check_app with a definition of 50 such tests, back to back: the finding
             that held one request 54 s;

Quiet and abused windows alternate (a quiet window, then one with the abuse under way, `--rounds` times), so both
meet the machine's other load alike; p50/p99 are over all the rounds' calls. The target (docs/performance.md,
"Fair shares"): under each abuse the victim's p99 at most 2x its quiet p99, and no failed call. Figures are
printed with the load average: on a machine shared with other jobs, read them against it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measure import banner, load, percentile

ROOT = Path(__file__).resolve().parent.parent
SERVE_OPTIONS = "--http charming.serving:NoDelayHttpToolsProtocol"
# 8,100 replacements in the text, within CEL's iteration budget: most of a second of a worker's time for 1,200
# characters (RE2 regexes are linear in the text, so no pattern keeps a worker busy).
_NINETY = "[" + ", ".join(str(i) for i in range(90)) + "]"
SLOW_MATCH = f"{_NINETY}.map(a, {_NINETY}.map(b, params.s.replace('a', 'bb').size())).size() == 0"
SLOW_TEXT = "a" * 1200
VICTIM = {
    "name": "Ordinary",
    "collections": {"notes": {}},
    "routes": {
        "doubled": {
            "kind": "query",
            "input": {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}},
            "steps": [{"return": "params.xs.map(x, x * 2)"}],
        },
        "plain": {"kind": "query", "steps": [{"return": "{'ok': true, 'at': string(now)}"}]},
    },
}
ABUSER = {
    "name": "Greedy",
    "routes": {
        "slow": {
            "kind": "query",
            "input": {"type": "object", "properties": {"s": {"type": "string"}}},
            "steps": [{"return": SLOW_MATCH}],
        }
    },
}
SLOW_TESTS = {
    **ABUSER,
    "tests": [
        {"name": f"t{i}", "route": "slow", "params": {"s": SLOW_TEXT}, "expect": {"value": False}} for i in range(50)
    ],
}
ABUSER_CLIENTS = {"cel": 8, "checks": 4}
VICTIM_PAUSE = 0.25  # 4 calls a second at most: within the token's rate limit (300 a minute)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    by_op: dict[str, list[float]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    calls: int = 0
    refused: int = 0  # the abuser's calls answered rate_limited (a fair share, or its rate limit)
    other_errors: int = 0


@contextlib.asynccontextmanager
async def _client(
    base: str, token: str, headers: dict[str, str] | None = None, hooks: dict[str, list[Any]] | None = None
) -> AsyncIterator[Any]:
    """The official SDK client speaking 2026-07-28 with `token` (and `headers`; `hooks`: httpx event hooks)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}", **(headers or {})}
    http = httpx2.AsyncClient(headers=headers, timeout=120, event_hooks=hooks)
    async with http, Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="2026-07-28") as client:
        await client.list_tools()
        yield client


def _error_of(result: Any) -> dict[str, Any] | None:
    structured = result.structured_content or {}
    if result.is_error:
        return structured.get("error") or {"kind": "?", "message": str(result.content)[:300]}
    return None


async def _victim(base: str, token: str, app_id: str, seconds: float, tally: Tally) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            await _victim_calls(base, token, app_id, deadline, tally)
        except Exception as exc:  # noqa: BLE001 - the client could not even connect (or list the tools): a failure
            tally.latencies.append(time.perf_counter() - started)
            tally.calls += 1
            tally.failed.append(f"connecting: {type(exc).__name__}: {str(exc)[:200]}")
            await asyncio.sleep(VICTIM_PAUSE)


async def _victim_calls(base: str, token: str, app_id: str, deadline: float, tally: Tally) -> None:
    async with _client(base, token) as client:
        turn = 0
        while time.monotonic() < deadline:
            op, params = ("doubled", {"xs": list(range(50))}) if turn % 2 == 0 else ("plain", {})
            turn += 1
            started = time.perf_counter()
            try:
                result = await client.call_tool("query_app", {"app_id": app_id, "op": op, "params": params})
                error = _error_of(result)
            except Exception as exc:  # noqa: BLE001 - a transport failure is a failed call too
                error = {"kind": type(exc).__name__, "message": str(exc)[:300]}
            took = time.perf_counter() - started
            tally.latencies.append(took)
            tally.by_op.setdefault(op, []).append(took)
            tally.calls += 1
            if error is not None:
                tally.failed.append(f"{op}: {error.get('kind')}: {str(error.get('message'))[:200]}")
            await asyncio.sleep(VICTIM_PAUSE)


async def _abuser(base: str, token: str, app_id: str, kind: str, stop: asyncio.Event, tally: Tally) -> None:
    async with _client(base, token) as client:
        while not stop.is_set():
            if kind == "cel":
                call = client.call_tool("query_app", {"app_id": app_id, "op": "slow", "params": {"s": SLOW_TEXT}})
            else:
                call = client.call_tool("check_app", {"definition": SLOW_TESTS})
            try:
                result = await call
            except Exception:  # noqa: BLE001 - e.g. HTTP 429 from the token's rate limit
                tally.calls += 1
                tally.refused += 1
                await asyncio.sleep(1)
                continue
            tally.calls += 1
            error = _error_of(result)
            if error is None:
                continue
            if error.get("kind") == "rate_limited":
                tally.refused += 1
                wait = (error.get("details") or {}).get("retry_after_seconds", 1)
                await asyncio.sleep(float(wait))
            else:
                tally.other_errors += 1


async def _phase(target: dict[str, Any], abuse: str | None, seconds: float) -> tuple[Tally, Tally]:
    victim, abuser = Tally(), Tally()
    stop = asyncio.Event()
    abusers = []
    if abuse is not None:
        for _ in range(ABUSER_CLIENTS[abuse]):
            abusers.append(
                asyncio.create_task(
                    _abuser(target["base"], target["abuser_token"], target["abuser_app"], abuse, stop, abuser)
                )
            )
        await asyncio.sleep(2)  # the abuse under way before the victim's clock starts
    try:
        await _victim(target["base"], target["victim_token"], target["victim_app"], seconds, victim)
    finally:
        stop.set()
        await asyncio.gather(*abusers, return_exceptions=True)
    return victim, abuser


def _merge(into: Tally, tally: Tally) -> None:
    into.latencies += tally.latencies
    for op, values in tally.by_op.items():
        into.by_op.setdefault(op, []).extend(values)
    into.failed += tally.failed
    into.calls += tally.calls
    into.refused += tally.refused
    into.other_errors += tally.other_errors


def _row(name: str, victim: Tally, abuser: Tally, quiet_p99: float | None) -> str:
    p50 = percentile(victim.latencies, 0.5) * 1000
    p99 = percentile(victim.latencies, 0.99) * 1000
    ratio = f"{p99 / quiet_p99:.2f}x" if quiet_p99 else "-"
    abuse = f"{abuser.calls} calls, {abuser.refused} refused" if abuser.calls else "-"
    ops = ", ".join(
        f"{op} {percentile(values, 0.5) * 1000:.0f}/{percentile(values, 0.99) * 1000:.0f}"
        for op, values in sorted(victim.by_op.items())
    )
    return (
        f"{name:<8} {victim.calls:>6} {p50:>8.1f} {p99:>8.1f} {ratio:>9} {len(victim.failed):>7}   {abuse}   "
        f"[p50/p99 ms: {ops}]   (load {load()})"
    )


def _prepare(
    env: dict[str, str], tree: Path, victim: dict[str, Any] = VICTIM, abuser: dict[str, Any] = ABUSER
) -> dict[str, str]:
    """Migrate; the two accounts (addresses confirmed), their tokens and apps (`victim`'s and `abuser`'s
    definitions), in a child process."""
    script = f"""
import json, django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
try:
    from apps_registry.services.email_confirmation import email_confirmed_by_operator
except ImportError:  # older code: no confirmation
    email_confirmed_by_operator = lambda user: None
found = {{}}
for name, definition in (("victim", {json.dumps(json.dumps(victim))}), ("abuser", {json.dumps(json.dumps(abuser))})):
    user = get_user_model().objects.create(username=name, email=name + "@example.com")
    email_confirmed_by_operator(user=user)
    found[name + "_token"] = token_create(user=user, name="bench").plaintext
    found[name + "_app"] = str(app_definition_save(actor=user, definition=json.loads(definition)).id)
found["database"] = "SQLite" if connection.vendor == "sqlite" else "PostgreSQL"
print(json.dumps(found))
"""
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"preparing the database failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %cs"], capture_output=True, text=True)
    return out.stdout.strip() or "not a git checkout"


def _run(args: argparse.Namespace, database_url: str) -> None:
    port = _free_port()
    extra = dict(item.split("=", 1) for item in args.env)
    env = server_env(port, database_url, extra)
    prepared = _prepare(env, args.tree)
    with serve(env, args.tree, port):
        target = {**prepared, "base": f"http://127.0.0.1:{port}"}
        banner(f"fairness under abuse, {prepared['database']}, one uvicorn process, default settings")
        if args.tree != ROOT:
            print(f"code under test: {args.tree} ({_commit(args.tree)}); benchmark script: {_commit(ROOT)}")
        if extra:
            print(f"server settings from --env: {', '.join(f'{k}={v}' for k, v in sorted(extra.items()))}")
        pause = f"{VICTIM_PAUSE * 1000:.0f} ms"
        print(
            f"victim: query_app (a comprehension route, a plain route, alternately), one client, {pause} between "
            f"calls, {args.seconds:g} s per phase; abuser clients: {ABUSER_CLIENTS}"
        )
        asyncio.run(_phase(target, None, 3))  # warm-up: compile the routes, start a CEL worker; not recorded
        print(
            f"each abuse: {args.rounds} rounds of a quiet window then an abused window, {args.seconds:g} s of victim "
            "calls each (interleaved, so both see the machine's other load alike); p50/p99 over all the rounds"
        )
        print(f"{'phase':<8} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'p99/quiet':>9} {'failed':>7}   abuser")
        for abuse in args.abuse:
            quiet, abused, abuser = Tally(), Tally(), Tally()
            for _round in range(args.rounds):
                for tally, (victim, during) in (
                    (quiet, asyncio.run(_phase(target, None, args.seconds))),
                    (abused, asyncio.run(_phase(target, abuse, args.seconds))),
                ):
                    _merge(tally, victim)
                    if tally is abused:
                        _merge(abuser, during)
            quiet_p99 = percentile(quiet.latencies, 0.99) * 1000
            print(_row("quiet", quiet, Tally(), None))
            print(_row(abuse, abused, abuser, quiet_p99))
            for failure in abused.failed[:3]:
                print(f"         failed: {failure}")
        print(f"load average at the end: {load()}")


def server_env(port: int, database_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The server's environment: the default settings, `extra` over them, a quiet log."""
    return {
        **os.environ,
        **extra,
        "DJANGO_SETTINGS_MODULE": "charming.settings",
        "DATABASE_URL": database_url,
        "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "LOG_LEVEL": "ERROR",
    }


@contextlib.contextmanager
def serve(
    env: dict[str, str], tree: Path, port: int, options: tuple[str, ...] = (), output: Any = None
) -> Iterator[subprocess.Popen[bytes]]:
    """One uvicorn process serving `tree` with the documented options (and `options`), until the block ends; its
    output (stdout and stderr) to `output` when given."""
    command = [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--lifespan", "on", "--log-level", "warning", "--no-access-log", *shlex.split(SERVE_OPTIONS), *options]
    server = subprocess.Popen(command, env=env, cwd=tree, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        yield server
    finally:
        server.terminate()
        server.wait(timeout=15)


def on_postgres(script: Path, forwarded: list[str]) -> None:
    """Run `script` again with `forwarded` arguments and --database-url of a throw-away PostgreSQL cluster."""
    inner = shlex.join([sys.executable, str(script.resolve()), *forwarded])
    command = (
        "source .ci/postgres.sh && pg_start >/dev/null && "
        f'{inner} --database-url "$DATABASE_URL"; rc=$?; pg_stop; exit $rc'
    )
    subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--database-url", default="", help="use this EMPTY throw-away database instead of a fresh one")
    parser.add_argument("--abuse", default="cel,checks", help="abuses to replay, comma-separated (default cel,checks)")
    parser.add_argument("--seconds", type=float, help="seconds of victim calls per window (default 15; quick 8)")
    parser.add_argument("--rounds", type=int, help="quiet/abused window pairs per abuse (default 6; quick 2)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="run the server from this checkout (older code, say)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="a setting for the server")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: short phases, one repetition")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if any("=" not in item for item in args.env):
        parser.error("--env takes KEY=VALUE")
    args.abuse = [name for name in args.abuse.split(",") if name]
    if unknown := [name for name in args.abuse if name not in ABUSER_CLIENTS]:
        parser.error(f"--abuse takes {', '.join(ABUSER_CLIENTS)}; got {', '.join(unknown)}")
    args.seconds = args.seconds or (8.0 if args.quick else 15.0)
    args.rounds = args.rounds or (2 if args.quick else 6)
    args.tree = args.tree.resolve()
    sys.path.insert(0, str(ROOT))
    if args.worker or args.database_url:
        _run(args, args.database_url)
        return 0
    if args.database in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="charming-fair-") as workdir:
            _run(args, f"sqlite:///{workdir}/bench.sqlite3")
    if args.database in ("postgres", "both"):
        forwarded = ["--worker", "--abuse", ",".join(args.abuse), "--seconds", str(args.seconds)]
        forwarded += ["--rounds", str(args.rounds), "--tree", str(args.tree), *[f"--env={e}" for e in args.env]]
        on_postgres(Path(__file__), forwarded)
    return 0


if __name__ == "__main__":
    sys.exit(main())
