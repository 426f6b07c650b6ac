"""Faults under load on PostgreSQL (issue 12): the live server's database backends are killed, and PostgreSQL
restarted, while many mutate_app calls run. Whatever the calls were told must match what was committed: every
call reported as failed wrote nothing, every reported success is durable, and no answer is a 5xx or shows
internals.

Each call writes a uniquely keyed record, a log record of the same key and a counter increment, so which writes
exist can be checked exactly, and that each call's writes are all there or none are.

Only the server's backends (client connections to the test database other than the test runner's own and the
killer's) are terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import psycopg
import pytest
from django.db import OperationalError, connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from apps_registry.models import IdempotentResult, Record
from apps_registry.services.definitions import app_definition_save
from tests.mcp_tools.conftest import LEGACY, MODERN, MODES, text_of

pytestmark = [pytest.mark.postgres]

KEY_META = "io.charming/idempotency-key"
CALLS = 48  # per protocol version
CONCURRENCY = 8
# What an answer must never show: a traceback, driver or SQL internals, the terminated backend's own message.
INTERNALS = re.compile(
    r"Traceback|File \"|\.py\b|psycopg|OperationalError|InterfaceError|terminating connection|"
    r"administrator command|server closed the connection|connection is closed|SQLSTATE|\bSELECT\b|\bINSERT\b|"
    r"apps_registry|mcp_tools|django",
    re.IGNORECASE,
)

COUNTING = {
    "format": 1,
    "name": "Counting",
    "collections": {"items": {}, "logs": {}, "counters": {}},
    "routes": {
        "write": {
            "kind": "mutation",
            "input": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
            "steps": [
                {"insert": {"collection": "items", "id": "params.key", "value": "{'key': params.key}"}},
                {"increment": {"collection": "counters", "id": "'total'", "field": "n", "by": "1"}},
                {"insert": {"collection": "logs", "id": "params.key", "value": "{'key': params.key}"}},
                {"return": "{'key': params.key}"},
            ],
        },
    },
    # A test per route: an untested route would add an advisory to every result these tests compare whole.
    "tests": [
        {
            "route": "write",
            "params": {"key": "k"},
            "records": {"counters": [{"id": "total", "n": 0}]},
            "expect": {"value": {"key": "k"}},
        }
    ],
}


@pytest.fixture
def counting(alice):
    app = app_definition_save(actor=alice.user, definition=COUNTING)
    Record.objects.create(storage=app.storage, collection="counters", record_id="total", data={"n": 0})
    return app


# --- the database side: an admin connection of its own, and who the server's backends are ---


def admin_conninfo() -> str:
    s = connection.settings_dict
    parts = {"dbname": s["NAME"], "user": s["USER"], "password": s["PASSWORD"], "host": s["HOST"], "port": s["PORT"]}
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in parts.items() if v})


def runner_pid() -> int:
    """The test runner's own backend (this thread's Django connection): never a target."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


SERVER_BACKENDS = """
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend'
      AND pid <> pg_backend_pid() AND pid <> %(runner)s {extra}
"""


def server_backends(admin: psycopg.Connection, runner: int, extra: str = "") -> list[int]:
    return [row[0] for row in admin.execute(SERVER_BACKENDS.format(extra=extra), {"runner": runner}).fetchall()]


def terminate(admin: psycopg.Connection, pids: list[int]) -> int:
    rows = admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids]).fetchall()
    return sum(1 for (done,) in rows if done)


class Killer(threading.Thread):
    """Terminates server backends at random moments (a seeded schedule) until stopped; bounded in count."""

    def __init__(self, runner: int, seed: int, max_kills: int = 200) -> None:
        super().__init__(name="backend-killer", daemon=True)
        self.runner, self.random, self.max_kills = runner, random.Random(seed), max_kills
        self.stop = threading.Event()
        self.killed = 0

    def run(self) -> None:
        with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
            while not self.stop.is_set() and self.killed < self.max_kills:
                if self.stop.wait(self.random.uniform(0.01, 0.06)):
                    break
                pids = server_backends(admin, self.runner)
                if pids:
                    self.killed += terminate(admin, [self.random.choice(pids)])


# --- the client side: many concurrent calls, and every HTTP answer they got ---


@dataclass
class Outcome:
    key: str
    ok: bool | None = None  # None: the client got no tool result at all
    text: str = ""
    structured: Any = None
    raised: str = ""
    exchanges: list[str] = field(default_factory=list)  # each HTTP request of the call and its status


@dataclass
class Seen:
    """Every HTTP response the clients received. A 5xx is a server fault, except a 503 saying in JSON, without
    internals, that the database cannot be reached (the honest answer while PostgreSQL restarts)."""

    statuses: list[int] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)

    async def hook(self, response: httpx2.Response) -> None:
        self.statuses.append(response.status_code)
        if response.status_code < 500:
            return
        await response.aread()
        clean_503 = (
            response.status_code == 503
            and response.headers.get("content-type", "").startswith("application/json")
            and not INTERNALS.search(response.text)
        )
        if not clean_503:
            request = response.request
            self.server_errors.append(
                f"{response.status_code} {request.method} {request.content[:300]!r}: {response.text[:500]}"
            )


class Agent:
    """One MCP client (a session on 2025-11-25) that has listed the tools already, so a call is one tools/call
    request (the SDK would otherwise list them after the call to check the result, and report a failure of that
    listing as the call's)."""

    def __init__(self, live, token: str, mode: str, seen: Seen) -> None:
        self.current: Outcome | None = None

        async def note(response: httpx2.Response) -> None:
            request = response.request
            method = json.loads(request.content).get("method") if request.content else None
            if self.current is not None:
                self.current.exchanges.append(f"{request.method} {method} -> {response.status_code}")

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=30, event_hooks={"response": [seen.hook, note]}
        )
        self.client = Client(streamable_http_client(live.mcp_url, http_client=http), mode=mode)

    async def __aenter__(self) -> Agent:
        await self.client.__aenter__()
        await self.client.list_tools()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        with contextlib.suppress(Exception):  # closing a session the faults broke; the calls' outcomes are in
            await self.client.__aexit__(*exc)

    async def write(self, app_id: str, key: str, idempotency_key: str | None = None) -> Outcome:
        outcome = self.current = Outcome(key=key)
        meta = {KEY_META: idempotency_key} if idempotency_key else None
        try:
            result = await self.client.call_tool(
                "mutate_app", {"app_id": app_id, "op": "write", "params": {"key": key}}, meta=meta
            )
        except Exception as error:  # noqa: BLE001 - no tool result reached the client: the call counts as failed
            outcome.raised = describe(error)
        else:
            outcome.ok = result.is_error is not True
            outcome.text = text_of(result)
            outcome.structured = result.structured_content
        finally:
            self.current = None
        return outcome


def describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


async def many_calls(
    live, token: str, mode: str, app_id: str, keys: list[str], seen: Seen, ready: asyncio.Event
) -> list[Outcome]:
    """`keys` written by CONCURRENCY agents at once; `ready` is set when all of them are connected (the faults
    start then)."""
    pending, outcomes, connected = list(keys), [], []

    async def agent_loop() -> None:
        async with Agent(live, token, mode, seen) as agent:
            connected.append(agent)
            if len(connected) == CONCURRENCY:
                ready.set()
            await ready.wait()
            while pending:
                outcomes.append(await agent.write(app_id, pending.pop()))

    await asyncio.gather(*(agent_loop() for _ in range(CONCURRENCY)))
    return outcomes


def run_bounded(coro: Any) -> Any:
    async def go():
        return await asyncio.wait_for(coro, timeout=120)

    return asyncio.run(go())


def summary(outcomes: list[Outcome]) -> str:
    told = [o.ok for o in outcomes]
    return f"{told.count(True)} succeeded, {told.count(False)} failed, {told.count(None)} got no result"


def committed(app, collection: str) -> set[str]:
    return set(Record.objects.filter(storage__app=app, collection=collection).values_list("record_id", flat=True))


def once_the_database_answers(read):
    """What `read` returns once the runner's database answers. The runner shares the server's connection pool,
    which after a storm of killed backends or a restart may take longer than its timeout to hand out a fresh
    connection (seen in CI, both reading an outcome and setting up the next test): what is under test is the
    calls' outcome, so the runner waits for the database, up to a minute."""
    deadline = time.monotonic() + 60
    while True:
        connection.close()  # the runner's connection may have been broken by a kill or a restart: open a new one
        try:
            return read()
        except OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.fixture(autouse=True)
def database_back(transactional_db):
    """Each test starts once the database answers again after the previous test's kills or restart."""
    once_the_database_answers(runner_pid)


def what_committed(app) -> tuple[set[str], set[str], int]:
    """The items, the logs and the counter as committed."""

    def read():
        items, logs = committed(app, "items"), committed(app, "logs")
        return items, logs, Record.objects.get(storage__app=app, collection="counters", record_id="total").data["n"]

    return once_the_database_answers(read)


def assert_told_the_truth(app, outcomes: list[Outcome], seen: Seen) -> None:
    items, logs, counter = what_committed(app)
    succeeded = {o.key for o in outcomes if o.ok}
    # A COMMIT whose answer was lost is reported as such (its outcome unknown), never as a plain failure.
    unknown = {o.key for o in outcomes if o.ok is False and "whether it was saved is unknown" in o.text}
    failed = {o.key for o in outcomes if not o.ok} - unknown

    assert succeeded <= items, f"reported successes not committed: {sorted(succeeded - items)}"
    assert failed & items == set(), [o for o in outcomes if o.key in failed & items]
    assert items == logs and counter == len(items)  # each call's writes are all there or none are
    for outcome in outcomes:
        shown = outcome.text + repr(outcome.structured)
        assert not INTERNALS.search(shown), shown
        if outcome.ok:
            assert outcome.structured == {"ok": True, "value": {"key": outcome.key}}
        elif outcome.ok is False:
            assert outcome.structured["ok"] is False, shown
    assert seen.server_errors == [], seen.server_errors


@pytest.mark.parametrize("mode", MODES)
def test_killed_backends_during_mutations_leave_no_reported_failure_committed_and_lose_no_success(
    live, alice, counting, mode
):
    keys = [f"{mode}-{i}" for i in range(CALLS)]
    seen = Seen()
    killer = Killer(runner_pid(), seed=12)

    async def go():
        ready = asyncio.Event()

        async def kill_when_ready():
            await ready.wait()
            killer.start()

        outcomes, _started = await asyncio.gather(
            many_calls(live, alice.token, mode, str(counting.id), keys, seen, ready), kill_when_ready()
        )
        return outcomes

    try:
        outcomes = run_bounded(go())
    finally:
        killer.stop.set()
        if killer.is_alive():
            killer.join(timeout=10)

    print(f"{killer.killed} backends killed;", summary(outcomes))
    assert killer.killed > 0  # the calls did run into terminated backends
    assert_told_the_truth(counting, outcomes, seen)


def pg_ctl(*args: str) -> list[str]:
    command = [os.path.join(os.environ["PG_BIN_DIR"], "pg_ctl"), "-D", os.path.join(os.environ["PG_TMP"], "data")]
    if os.getuid() == 0:  # .ci/postgres.sh runs the cluster as the postgres user
        command = ["runuser", "-u", "postgres", "--", *command]
    return [*command, *args]


@pytest.mark.serial  # the restart cuts every worker's connections, not only this test's
@pytest.mark.skipif(
    not (os.environ.get("PG_BIN_DIR") and os.environ.get("PG_TMP")),
    reason="needs the throw-away cluster of .ci/postgres.sh (PG_BIN_DIR, PG_TMP) to restart",
)
def test_a_postgresql_restart_during_mutations_leaves_no_reported_failure_committed(live, alice, counting):
    keys = {mode: [f"restart-{mode}-{i}" for i in range(CALLS)] for mode in (LEGACY, MODERN)}
    seen = Seen()
    log = os.path.join(os.environ["PG_TMP"], "server.log")

    async def restart_when_ready(events):
        for event in events:
            await event.wait()
        await asyncio.sleep(0.05)
        restart = await asyncio.create_subprocess_exec(
            *pg_ctl("-l", log, "-m", "fast", "-w", "-t", "60", "restart"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return await restart.wait()

    async def go():
        ready = {mode: asyncio.Event() for mode in keys}
        calls = [many_calls(live, alice.token, mode, str(counting.id), keys[mode], seen, ready[mode]) for mode in keys]
        *outcomes, restarted = await asyncio.gather(*calls, restart_when_ready(ready.values()))
        return [o for per_mode in outcomes for o in per_mode], restarted

    try:
        outcomes, restarted = run_bounded(go())
    finally:
        connection.close()  # the restart broke the runner's own connection too; the next query opens a new one

    print("PostgreSQL restarted;", summary(outcomes))
    assert restarted == 0
    assert_told_the_truth(counting, outcomes, seen)


# --- a retried mutate_app with the same idempotency key after a forced connection drop writes once ---


async def waiting_backend(admin: psycopg.AsyncConnection, runner: int) -> int:
    """The server backend waiting for the held lock (bounded wait)."""
    for _ in range(400):
        cursor = await admin.execute(SERVER_BACKENDS.format(extra="AND wait_event_type = 'Lock'"), {"runner": runner})
        rows = await cursor.fetchall()
        if rows:
            return rows[0][0]
        await asyncio.sleep(0.025)
    raise AssertionError("the server's call never waited on the held counter")


HOLD_COUNTER = "SELECT 1 FROM apps_registry_record WHERE storage_id = %s AND collection = 'counters' FOR UPDATE"


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_with_the_same_key_after_the_backend_was_killed_mid_call_writes_once(live, alice, counting, mode):
    runner, seen, key, app_id = runner_pid(), Seen(), f"killed-{mode}", str(counting.id)

    async def go():
        async with (
            await psycopg.AsyncConnection.connect(admin_conninfo()) as holder,
            await psycopg.AsyncConnection.connect(admin_conninfo(), autocommit=True) as admin,
            Agent(live, alice.token, mode, seen) as agent,
        ):
            await holder.execute(HOLD_COUNTER, [counting.storage.id])  # the call will wait for it mid-transaction
            first = asyncio.create_task(agent.write(app_id, key, idempotency_key=f"idem-{key}"))
            await admin.execute("SELECT pg_terminate_backend(%s)", [await waiting_backend(admin, runner)])
            failed = await first
            await holder.rollback()
            retried = await agent.write(app_id, key, idempotency_key=f"idem-{key}")
        return failed, retried

    failed, retried = run_bounded(go())

    assert failed.ok is False and failed.structured["ok"] is False, failed
    # A retryable kind: the connection was lost before COMMIT, so nothing was written (issue 22).
    assert failed.structured["error"]["kind"] == "unavailable", failed
    assert failed.structured["error"]["details"] == {"retry_after_seconds": 5}, failed
    assert not INTERNALS.search(failed.text + repr(failed.structured)), failed
    assert retried.structured == {"ok": True, "value": {"key": key}}, retried
    assert "already ran with this idempotency key" not in retried.text  # the first call wrote nothing to replay
    assert committed(counting, "items") == committed(counting, "logs") == {key}
    assert IdempotentResult.objects.filter(key=f"idem-{key}").count() == 1
    assert seen.server_errors == []


def remembered(key: str) -> bool:
    from django.db import connections

    try:
        return IdempotentResult.objects.filter(key=key).exists()
    finally:
        connections.close_all()


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_with_the_same_key_after_the_client_disconnected_mid_call_writes_once(live, alice, counting, mode):
    runner, seen, key, app_id = runner_pid(), Seen(), f"dropped-{mode}", str(counting.id)

    async def go():
        async with (
            await psycopg.AsyncConnection.connect(admin_conninfo()) as holder,
            await psycopg.AsyncConnection.connect(admin_conninfo(), autocommit=True) as admin,
        ):
            await holder.execute(HOLD_COUNTER, [counting.storage.id])  # the call will wait for it mid-transaction
            async with Agent(live, alice.token, mode, seen) as leaving:
                first = asyncio.create_task(leaving.write(app_id, key, idempotency_key=f"idem-{key}"))
                await waiting_backend(admin, runner)
                first.cancel()  # the client goes away after sending: no answer is read, its connection closes
            await holder.rollback()  # the server's call goes on and commits, with nobody to tell
            for _ in range(400):  # until it has (bounded)
                if await asyncio.to_thread(remembered, f"idem-{key}"):
                    break
                await asyncio.sleep(0.025)
        async with Agent(live, alice.token, mode, seen) as agent:
            return await agent.write(app_id, key, idempotency_key=f"idem-{key}")

    retried = run_bounded(go())

    assert committed(counting, "items") == committed(counting, "logs") == {key}
    assert retried.structured == {"ok": True, "value": {"key": key}}, retried
    assert "already ran with this idempotency key; nothing was written again" in retried.text
    assert seen.server_errors == []
