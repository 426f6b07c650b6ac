"""The soak (issue 22): ordinary use by one account while another replays every abuse of the issue, for minutes.

    .venv/bin/python benchmarks/soak.py --database postgres --minutes 10   # what docs/performance.md records
    .venv/bin/python benchmarks/soak.py --quick                            # a smoke run on SQLite (about 2 minutes)

A fresh database (a temporary SQLite file, or a throw-away PostgreSQL cluster from .ci/postgres.sh) is served by one
uvicorn process with the documented options and the default settings, rate limits included, behind what a proxy
would say (`--proxy-headers`: each account's requests carry an `X-Forwarded-For` of its own, as two people's would).
Set-up and serving are benchmarks/fairness.py's.

  ordinary  one person, one call after another with 250 ms between them: `query_app` (a comprehension route and a
            plain one) and `mutate_app` through the official SDK client (2026-07-28), every tenth turn a new
            2025-11-25 session through the SDK client (initialize, a query, close), the REST list of apps and a REST
            run, and two pages loaded with a logged-in session (the home page, the app's page).
  abuser    meanwhile, all at once, within its rate limits (a refusal waits its retry hint; each abuse has a token
            of its own, as one account may):
    cel        3 SDK clients calling a route whose comprehension keeps a CEL worker busy to its time limit
    checks     an SDK client calling check_app with 50 such tests, back to back
    schemas    saving a route input of $ref fan-out (each of 20 $defs refers to the next twice through allOf) and
               one with a pattern of 3,000 nested groups, over MCP and REST
    signups    the sign-up page, from one address, every 2 s
    methods    unsupported methods on REST endpoints (PATCH /api/invitations/ and others)
    ids        PUT /api/apps/<id>/definition/ of another account's app, a deleted app and an unused id
    rpc_ids    two requests with one JSON-RPC id at once in a 2025-11-25 session
    sessions   2025-11-25 sessions opened and left open, one every 0.5 s (at the account's cap, the three oldest
               closed)

A quiet window of the ordinary calls alone (--quiet seconds) comes before the abuse and another after it. Printed:
every 5xx either account got (target 0) and the tracebacks the server logged, the server's RSS sampled every
10 s (its process and its CEL workers: flat is the target), the ordinary account's p50/p99 quiet and under abuse
per minute (target: p99 at most 2x quiet, no failed call), and how each abuse was answered. Read the figures
against the load average printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairness import (
    ABUSER,
    ROOT,
    SLOW_TESTS,
    SLOW_TEXT,
    VICTIM,
    _client,
    _error_of,
    _free_port,
    _prepare,
    on_postgres,
    serve,
    server_env,
)
from measure import banner, load, parent_pid, percentile

PASSWORD = "soak-walnut-Pine-41"
ORDINARY_ADDRESS, ABUSER_ADDRESS = "198.51.100.10", "203.0.113.66"
PAUSE = 0.25
ORDINARY = {
    **VICTIM,
    "routes": {
        **VICTIM["routes"],
        "add_note": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "steps": [
                {"insert": {"collection": "notes", "value": "{'text': params.text}"}, "as": "n"},
                {"return": "n.id"},
            ],
        },
    },
}
_DEPTH = 20
FAN_OUT = {
    "name": "Fan-out",
    "routes": {
        "r": {
            "kind": "query",
            "input": {
                "type": "object",
                "$defs": {
                    f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
                    for i in range(_DEPTH)
                }
                | {f"d{_DEPTH}": {"type": "string", "minLength": 3}},
                "properties": {"x": {"$ref": "#/$defs/d0"}},
            },
            "steps": [{"return": "1"}],
        }
    },
}
NESTED = {
    "name": "Nested",
    "routes": {
        "r": {
            "kind": "query",
            "input": {"type": "object", "properties": {"x": {"type": "string", "pattern": "(" * 3000 + ")" * 3000}}},
            "steps": [{"return": "1"}],
        }
    },
}
# Method x endpoint pairs no REST view serves (each must be 405 with Allow).
UNSUPPORTED = [
    ("PATCH", "/api/invitations/"),
    ("DELETE", "/api/apps/"),
    ("PUT", "/api/apps/definitions/"),
    ("PATCH", "/api/apps/{app}/definition/"),
    ("GET", "/api/apps/{app}/run/slow/"),
    ("PUT", "/api/apps/{app}/members/"),
    ("PATCH", "/api/apps/{app}/feedback/"),
]
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Soak:
    started: float = field(default_factory=time.monotonic)
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: {"ordinary": Counter(), "abuser": Counter()})
    ordinary_refusals: list[str] = field(default_factory=list)  # each 429 the ordinary account got, with its answer
    five_xx: list[str] = field(default_factory=list)
    calls: list[tuple[float, str, str, float]] = field(default_factory=list)  # (at, phase, op, seconds)
    failed: list[str] = field(default_factory=list)
    abuses: dict[str, Counter[str]] = field(default_factory=dict)
    rss: list[tuple[float, int, int]] = field(default_factory=list)  # (at, server KiB, server + children KiB)
    phase: str = "quiet"

    def hooks(self, who: str) -> dict[str, list[Any]]:
        async def on_response(response: Any) -> None:
            self.statuses[who][response.status_code] += 1
            if response.status_code >= 500:
                request = response.request
                self.five_xx.append(f"{who}: {request.method} {request.url.path} {response.status_code}")
            if who == "ordinary" and response.status_code == 429:  # which limit: the ordinary account's own, or not
                await response.aread()
                request = response.request
                self.ordinary_refusals.append(f"{request.method} {request.url.path} 429: {response.text[:300]}")

        return {"response": [on_response]}

    def count(self, abuse: str, outcome: str) -> None:
        self.abuses.setdefault(abuse, Counter())[outcome] += 1


def _http(soak: Soak, who: str, token: str | None = None, **extra: Any) -> Any:
    import httpx2

    headers = {"X-Forwarded-For": ORDINARY_ADDRESS if who == "ordinary" else ABUSER_ADDRESS}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.AsyncClient(headers=headers, timeout=120, event_hooks=soak.hooks(who), **extra)


def _prepare_more(env: dict[str, str], tree: Path, prepared: dict[str, str]) -> dict[str, Any]:
    """The ordinary person's password (for the pages), the abuser's extra tokens and an app it deleted."""
    script = f"""
import json, django
django.setup()
from django.contrib.auth import get_user_model
from apps_registry.services.apps import app_delete
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
users = get_user_model().objects
victim, abuser = users.get(username="victim"), users.get(username="abuser")
victim.set_password({PASSWORD!r})
victim.save(update_fields=["password"])
gone = app_definition_save(actor=abuser, definition={{**json.loads({json.dumps(json.dumps(ABUSER))}), "name": "Gone"}})
app_delete(actor=abuser, app_id=gone.id, purge_storage=False, confirmed_via="soak")
tokens = {{name: token_create(user=abuser, name=name).plaintext for name in {json.dumps(ABUSES)}}}
print(json.dumps({{"deleted_app": str(gone.id), "abuser_tokens": tokens}}))
"""
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"preparing the soak failed:\n{out.stderr}")
    return {**prepared, **json.loads(out.stdout.strip().splitlines()[-1])}


# --- the ordinary account ---


async def _logged_in(soak: Soak, base: str) -> Any:
    """An HTTP client holding the ordinary person's session cookie, logged in through the log-in page."""
    http = _http(soak, "ordinary", follow_redirects=False)
    page = await http.get(f"{base}/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, "no CSRF token on the log-in page"
    form = {"username": "victim", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}
    answer = await http.post(f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/accounts/login/"})
    if answer.status_code != 302:
        raise RuntimeError(f"log-in failed: {answer.status_code}")
    return http


async def _legacy_session(soak: Soak, base: str, token: str, app_id: str) -> dict[str, Any] | None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with _http(soak, "ordinary", token) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            result = await client.call_tool("query_app", {"app_id": app_id, "op": "plain", "params": {}})
            return _error_of(result)


async def _ordinary(soak: Soak, target: dict[str, Any], until: float, phase: str) -> None:
    base, token, app_id = target["base"], target["victim_token"], target["victim_app"]
    headers = {"X-Forwarded-For": ORDINARY_ADDRESS}
    async with (
        _client(base, token, headers=headers, hooks=soak.hooks("ordinary")) as mcp,
        _http(soak, "ordinary", token) as rest,
    ):
        pages = await _logged_in(soak, base)
        try:

            async def status(response: Awaitable[Any]) -> dict[str, Any] | None:
                answered = await response
                return None if answered.status_code < 400 else {"kind": f"HTTP {answered.status_code}"}

            ops: list[tuple[str, Callable[[], Awaitable[dict[str, Any] | None]]]] = [
                ("query comprehension", lambda: _tool(mcp, "query_app", app_id, "doubled", {"xs": list(range(50))})),
                ("query plain", lambda: _tool(mcp, "query_app", app_id, "plain", {})),
                ("mutate", lambda: _tool(mcp, "mutate_app", app_id, "add_note", {"text": "soak"})),
                ("REST list", lambda: status(rest.get(f"{base}/api/apps/"))),
                ("REST run", lambda: status(rest.post(f"{base}/api/apps/{app_id}/run/plain/", json={"kind": "query"}))),
                ("page home", lambda: status(pages.get(f"{base}/"))),
                ("page app", lambda: status(pages.get(f"{base}/apps/{app_id}/"))),
            ]
            turn = 0
            while time.monotonic() < until:
                name, call = ops[turn % len(ops)]
                if turn % 10 == 9:
                    name, call = "2025 session", lambda: _legacy_session(soak, base, token, app_id)
                turn += 1
                started = time.perf_counter()
                try:
                    error = await call()
                except Exception as exc:  # noqa: BLE001 - a transport failure is a failed call too
                    error = {"kind": type(exc).__name__, "message": str(exc)[:200]}
                took = time.perf_counter() - started
                soak.calls.append((time.monotonic() - soak.started, phase, name, took))
                if error is not None:
                    soak.failed.append(f"{phase} {name}: {error.get('kind')}: {str(error.get('message', ''))[:200]}")
                await asyncio.sleep(PAUSE)
        finally:
            await pages.aclose()


async def _tool(client: Any, tool: str, app_id: str, op: str, params: dict[str, Any]) -> dict[str, Any] | None:
    return _error_of(await client.call_tool(tool, {"app_id": app_id, "op": op, "params": params}))


# --- the abuser ---


async def _refused_wait(error: dict[str, Any] | None) -> None:
    if error is not None and error.get("kind") == "rate_limited":
        await asyncio.sleep(float((error.get("details") or {}).get("retry_after_seconds", 1)))


async def _retry_after(response: Any) -> None:
    if response.status_code == 429:
        await asyncio.sleep(float(response.headers.get("Retry-After", "1")))


def _outcome(result: Any) -> tuple[str, dict[str, Any] | None]:
    error = _error_of(result)
    return ("ok" if error is None else str(error.get("kind"))), error


async def _abuse_cel(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    async def one() -> None:
        token = target["abuser_tokens"]["cel"]
        async with _client(target["base"], token, {"X-Forwarded-For": ABUSER_ADDRESS}, soak.hooks("abuser")) as c:
            while not stop.is_set():
                args = {"app_id": target["abuser_app"], "op": "slow", "params": {"s": SLOW_TEXT}}
                outcome, error = _outcome(await c.call_tool("query_app", args))
                soak.count("cel", outcome)
                await _refused_wait(error)

    await asyncio.gather(one(), one(), one())


async def _abuse_checks(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    token = target["abuser_tokens"]["checks"]
    async with _client(target["base"], token, {"X-Forwarded-For": ABUSER_ADDRESS}, soak.hooks("abuser")) as client:
        while not stop.is_set():
            outcome, error = _outcome(await client.call_tool("check_app", {"definition": SLOW_TESTS}))
            soak.count("checks", outcome)
            await _refused_wait(error)


async def _abuse_schemas(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    token, base = target["abuser_tokens"]["schemas"], target["base"]
    async with (
        _client(base, token, {"X-Forwarded-For": ABUSER_ADDRESS}, soak.hooks("abuser")) as client,
        _http(soak, "abuser", token) as rest,
    ):
        while not stop.is_set():
            for name, definition in (("fan-out", FAN_OUT), ("nested pattern", NESTED)):
                outcome, error = _outcome(await client.call_tool("create_app", {"definition": definition}))
                soak.count("schemas", f"{name} MCP {outcome}")
                await _refused_wait(error)
                answer = await rest.post(f"{base}/api/apps/definitions/", json=definition)
                soak.count("schemas", f"{name} REST {answer.status_code}")
                await _retry_after(answer)
            await asyncio.sleep(1)


async def _abuse_signups(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    base = target["base"]
    async with _http(soak, "abuser") as http:
        while not stop.is_set():
            page = await http.get(f"{base}/accounts/signup/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            name = f"m{uuid.uuid4().hex[:10]}"
            form = {
                "username": name,
                "email": f"{name}@example.org",
                "password1": PASSWORD,
                "password2": PASSWORD,
                "csrfmiddlewaretoken": token.group(1) if token else "",
            }
            answer = await http.post(f"{base}/accounts/signup/", data=form, headers={"Referer": f"{base}/"})
            soak.count("signups", str(answer.status_code))
            http.cookies.clear()  # each sign-up as a new visitor
            await asyncio.sleep(2)


async def _abuse_methods(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    token, base = target["abuser_tokens"]["methods"], target["base"]
    async with _http(soak, "abuser", token) as rest:
        while not stop.is_set():
            for method, path in UNSUPPORTED:
                answer = await rest.request(method, base + path.format(app=target["abuser_app"]), json={})
                allowed = "with Allow" if answer.headers.get("Allow") else "no Allow"
                soak.count("methods", f"{answer.status_code} {allowed}")
                await _retry_after(answer)
                await asyncio.sleep(0.5)


async def _abuse_ids(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    token, base = target["abuser_tokens"]["ids"], target["base"]
    ids = {"another's": target["victim_app"], "deleted": target["deleted_app"]}
    async with _http(soak, "abuser", token) as rest:
        while not stop.is_set():
            for name, app_id in (*ids.items(), ("unused", str(uuid.uuid4()))):
                answer = await rest.put(f"{base}/api/apps/{app_id}/definition/", json=ABUSER)
                kind = (answer.json().get("error") or {}).get("kind") if answer.status_code >= 400 else "saved"
                soak.count("ids", f"{name} {answer.status_code} {kind}")
                await _retry_after(answer)
                await asyncio.sleep(0.5)


async def _session(http: Any, base: str) -> tuple[int, dict[str, str]]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}},
    }
    opened = await http.post(f"{base}/mcp", json=initialize, headers=ACCEPT)
    if opened.status_code != 200:
        return opened.status_code, {}
    session = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    await http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return 200, session


async def _abuse_rpc_ids(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    token, base = target["abuser_tokens"]["rpc_ids"], target["base"]
    arguments = {"app_id": target["abuser_app"], "op": "slow", "params": {"s": SLOW_TEXT}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "query_app", "arguments": arguments}}
    async with _http(soak, "abuser", token) as http:
        while not stop.is_set():
            opened, session = await _session(http, base)
            if opened != 200:
                soak.count("rpc_ids", f"initialize {opened}")
                await asyncio.sleep(2)
                continue
            first, second = await asyncio.gather(
                http.post(f"{base}/mcp", json=call, headers=session),
                http.post(f"{base}/mcp", json=call, headers=session),
            )
            soak.count("rpc_ids", " + ".join(sorted(str(r.status_code) for r in (first, second))))
            await http.delete(f"{base}/mcp", headers=session)
            await asyncio.sleep(2)


async def _abuse_sessions(soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    token, base = target["abuser_tokens"]["sessions"], target["base"]
    open_sessions: list[dict[str, str]] = []
    async with _http(soak, "abuser", token) as http:
        while not stop.is_set():
            opened, session = await _session(http, base)
            soak.count("sessions", f"initialize {opened}")
            if opened == 200:
                open_sessions.append(session)
            elif opened == 429:  # at the account's cap: close a few of the oldest and go on filling it
                for old in open_sessions[:3]:
                    await http.delete(f"{base}/mcp", headers=old)
                del open_sessions[:3]
            await asyncio.sleep(0.5)


ABUSE_TASKS = {
    "cel": _abuse_cel,
    "checks": _abuse_checks,
    "schemas": _abuse_schemas,
    "signups": _abuse_signups,
    "methods": _abuse_methods,
    "ids": _abuse_ids,
    "rpc_ids": _abuse_rpc_ids,
    "sessions": _abuse_sessions,
}
ABUSES = list(ABUSE_TASKS)


async def _guarded(name: str, soak: Soak, target: dict[str, Any], stop: asyncio.Event) -> None:
    """One abuse until `stop`, started again after a transport failure (counted)."""
    while not stop.is_set():
        try:
            await ABUSE_TASKS[name](soak, target, stop)
        except Exception as exc:  # noqa: BLE001 - e.g. a 429 the SDK client raises: count it, go on
            soak.count(name, f"raised {type(exc).__name__}")
            await asyncio.sleep(1)


# --- sampling and the report ---


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (its CEL workers), whichever of its threads started them."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and parent_pid(int(p.name)) == pid]


async def _sample_rss(soak: Soak, pid: int, stop: asyncio.Event) -> None:
    while not stop.is_set():
        own = _rss_kib(pid)
        soak.rss.append((time.monotonic() - soak.started, own, own + sum(_rss_kib(c) for c in _children(pid))))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 10)


async def _soak(target: dict[str, Any], pid: int, minutes: float, quiet: float, soak: Soak) -> None:
    done = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(soak, pid, done))
    await _ordinary(soak, target, time.monotonic() + min(quiet, 5), "warm-up")
    await _ordinary(soak, target, time.monotonic() + quiet, "quiet")
    stop = asyncio.Event()
    abuses = [asyncio.create_task(_guarded(name, soak, target, stop)) for name in ABUSES]
    await asyncio.sleep(2)  # the abuse under way before the ordinary account's clock starts
    started = time.monotonic()
    minute = 0
    while time.monotonic() < started + minutes * 60:
        minute += 1
        await _ordinary(soak, target, min(started + minute * 60, started + minutes * 60), f"abused {minute}")
        _print_minute(soak, minute)
    stop.set()
    await asyncio.gather(*abuses, return_exceptions=True)
    await _ordinary(soak, target, time.monotonic() + quiet, "quiet after")
    done.set()
    await sampler


def _latencies(soak: Soak, phase: str) -> list[float]:
    return [took for _at, p, _op, took in soak.calls if p == phase or (phase == "abused" and p.startswith("abused"))]


def _quiet(soak: Soak) -> list[float]:
    return _latencies(soak, "quiet") + _latencies(soak, "quiet after")


def _print_minute(soak: Soak, minute: int) -> None:
    calls = _latencies(soak, f"abused {minute}")
    quiet_p99 = percentile(_quiet(soak), 0.99) or 1e-9
    p99 = percentile(calls, 0.99)
    rss = soak.rss[-1][1:] if soak.rss else (0, 0)
    five_xx = len(soak.five_xx)
    print(
        f"minute {minute:>3}: {len(calls):>4} ordinary calls, p50 {percentile(calls, 0.5) * 1000:7.1f} ms, "
        f"p99 {p99 * 1000:7.1f} ms ({p99 / quiet_p99:.2f}x quiet), failed so far {len(soak.failed)}, 5xx so far "
        f"{five_xx}, RSS {rss[0] / 1024:.0f} MiB (with CEL workers {rss[1] / 1024:.0f}), load {load()}",
        flush=True,
    )


def _report(soak: Soak, log: Path) -> None:
    quiet, abused = _quiet(soak), _latencies(soak, "abused")
    quiet_p99, abused_p99 = percentile(quiet, 0.99) * 1000, percentile(abused, 0.99) * 1000
    print(f"\nordinary account: {len(quiet)} quiet calls, {len(abused)} under abuse")
    print(f"  p50 ms quiet {percentile(quiet, 0.5) * 1000:.1f} -> abused {percentile(abused, 0.5) * 1000:.1f}")
    print(f"  p99 ms quiet {quiet_p99:.1f} -> abused {abused_p99:.1f}: {abused_p99 / quiet_p99:.2f}x (target <= 2x)")
    ops = sorted({op for _at, _p, op, _t in soak.calls})
    for op in ops:
        q = [t for _a, p, o, t in soak.calls if o == op and p.startswith("quiet")]
        a = [t for _a, p, o, t in soak.calls if o == op and p.startswith("abused")]
        print(
            f"    {op:<20} quiet p50/p99 {percentile(q, 0.5) * 1000:6.1f}/{percentile(q, 0.99) * 1000:7.1f} ms, "
            f"abused {percentile(a, 0.5) * 1000:6.1f}/{percentile(a, 0.99) * 1000:7.1f} ms ({len(a)} calls)"
        )
    print(f"  failed calls: {len(soak.failed)} (target 0)")
    for failure in soak.failed[:5]:
        print(f"    {failure}")
    print(f"5xx answers: {len(soak.five_xx)} (target 0)")
    for line in soak.five_xx[:5]:
        print(f"    {line}")
    for who, counts in soak.statuses.items():
        print(f"  {who} HTTP statuses: {dict(sorted(counts.items()))}")
    for line in soak.ordinary_refusals[:5]:
        print(f"    ordinary refused: {line}")
    text = log.read_text(errors="replace") if log.exists() else ""
    print(f"tracebacks in the server's log: {text.count('Traceback')} ({len(text):,} bytes of log)")
    if soak.rss:
        own = [kib for _at, kib, _tree in soak.rss]
        tree = [kib for _at, _own, kib in soak.rss]
        quarter = max(1, len(own) // 4)
        first, last = sorted(own[:quarter])[quarter // 2], sorted(own[-quarter:])[quarter // 2]
        print(
            f"server RSS MiB over {len(own)} samples: first {own[0] / 1024:.0f}, min {min(own) / 1024:.0f}, "
            f"max {max(own) / 1024:.0f}, last {own[-1] / 1024:.0f}; median of the first quarter {first / 1024:.0f}, "
            f"of the last {last / 1024:.0f}; with CEL workers first {tree[0] / 1024:.0f}, max {max(tree) / 1024:.0f}, "
            f"last {tree[-1] / 1024:.0f}"
        )
    print("abuses, how they were answered:")
    for name in ABUSES:
        print(f"  {name:<9} {dict(sorted((soak.abuses.get(name) or Counter()).items()))}")
    print(f"load average at the end: {load()}")


def _run(args: argparse.Namespace, database_url: str) -> None:
    port = _free_port()
    env = server_env(port, database_url, {})
    prepared = _prepare_more(env, ROOT, _prepare(env, ROOT, victim=ORDINARY))
    target: dict[str, Any] = {**prepared, "base": f"http://127.0.0.1:{port}"}
    with tempfile.NamedTemporaryFile(prefix="charming-soak-", suffix=".log", delete=False) as log:
        options = ("--proxy-headers", "--forwarded-allow-ips", "127.0.0.1")
        with serve(env, ROOT, port, options, output=log) as server:
            banner(f"soak, {prepared['database']}, one uvicorn process, default settings, {args.minutes:g} minutes")
            print(
                f"ordinary: one call after another, {PAUSE * 1000:.0f} ms apart (MCP query/mutate, a 2025-11-25 "
                f"session every tenth, REST, pages); quiet {args.quiet:g} s before and after; "
                f"abuses: {', '.join(ABUSES)}",
                flush=True,
            )
            soak = Soak()
            asyncio.run(_soak(target, server.pid, args.minutes, args.quiet, soak))
        _report(soak, Path(log.name))
        print(f"server log: {log.name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--database-url", default="", help="use this EMPTY throw-away database instead of a fresh one")
    parser.add_argument("--minutes", type=float, help="minutes of abuse (default 10; quick 1)")
    parser.add_argument("--quiet", type=float, help="seconds of ordinary calls alone before and after (default 60)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: one minute of abuse on SQLite")
    args = parser.parse_args()
    args.minutes = args.minutes or (1.0 if args.quick else 10.0)
    args.quiet = args.quiet or (20.0 if args.quick else 60.0)
    if args.quick and args.database == "postgres" and "--database" not in sys.argv:
        args.database = "sqlite"
    if args.database_url:
        _run(args, args.database_url)
    elif args.database == "sqlite":
        with tempfile.TemporaryDirectory(prefix="charming-soak-") as workdir:
            _run(args, f"sqlite:///{workdir}/soak.sqlite3")
    else:
        on_postgres(Path(__file__), ["--minutes", str(args.minutes), "--quiet", str(args.quiet)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
