"""How many statements one MCP call sends to the database (issue 21: fixed costs per call).

Counted at the driver, from every thread of the process (the live server's database units run on worker
threads), so nothing hides: the pool's health checks, transaction control (BEGIN, COMMIT) and every query.
Counts are deterministic, unlike times: the benchmarks time calls, these tests hold the count.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from tests.mcp_tools.conftest import MODERN, call_tool_ok, mcp_client, run
from tests.mcp_tools.test_mutate_app import DEFINITION

pytestmark = pytest.mark.django_db(transaction=True)


class StatementLog:
    """Every statement the database was sent while `counting`, from any thread."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.counting = False
        self._lock = threading.Lock()

    def add(self, sql: Any) -> None:
        if self.counting:
            text = sql.decode() if isinstance(sql, bytes) else str(sql)
            with self._lock:
                self.statements.append(text)


@contextlib.contextmanager
def statements_sent() -> Iterator[StatementLog]:
    log = StatementLog()
    if connection.vendor == "sqlite":
        # Each unit of work opens its own SQLite connection: trace every statement it runs, BEGIN and COMMIT too.
        def traced(sender: Any, connection: Any, **kwargs: Any) -> None:
            connection.connection.set_trace_callback(log.add)

        connection_created.connect(traced, weak=False)
        try:
            yield log
        finally:
            connection_created.disconnect(traced)
        return
    import psycopg

    execute, exec_command = psycopg.Cursor.execute, psycopg.Connection._exec_command

    def cursor_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        log.add(query)
        return execute(self, query, *args, **kwargs)

    def connection_command(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        log.add(command)  # BEGIN, COMMIT, ROLLBACK, SAVEPOINT
        return exec_command(self, command, *args, **kwargs)

    psycopg.Cursor.execute = cursor_execute  # type: ignore[method-assign]
    psycopg.Connection._exec_command = connection_command  # type: ignore[method-assign]
    try:
        yield log
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Connection._exec_command = exec_command  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _shortcuts_outlast_the_test(monkeypatch):
    """The token's batches and a clean address are kept for a second of wall time (services/rate_limits.py); on a
    loaded machine a few calls can take that long, so the count would depend on the load. Kept for a minute
    here, the count is the code's."""
    from apps_registry.services import rate_limits

    monkeypatch.setattr(rate_limits, "CLEAN_ADDRESS_SECONDS", 60.0)
    monkeypatch.setattr(rate_limits._LocalBatches, "BATCH_SECONDS", 60.0)


@pytest.fixture
def budget(alice):
    app = app_definition_save(actor=alice.user, app_id=None, definition=DEFINITION)
    return app


def _mutate_counted(live, alice, budget, calls: int, *, warm: int, then: Callable[[], None]) -> list[list[str]]:
    """Statements of each of `calls` single-insert mutate_app calls, over one 2026-07-28 client, after `warm` calls
    on the same client (its first also lists the tools, for their output schemas) and then `then()`."""
    arguments = {"app_id": str(budget.id), "op": "add_expense", "params": {"amount": 3.5, "category": "food"}}
    per_call: list[list[str]] = []

    async def go() -> None:
        async with mcp_client(live, alice.token, MODERN) as client:
            with statements_sent() as log:
                for n in range(warm + calls):
                    if n == warm:
                        then()
                    log.statements.clear()
                    log.counting = True
                    result = await client.call_tool("mutate_app", arguments)
                    log.counting = False
                    assert result.is_error is not True
                    per_call.append(list(log.statements))

    run(go())
    return per_call[warm:]


TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _queries(statements: list[str]) -> list[str]:
    """The call's queries, less transaction control and the change log's own writes (counted apart:
    _change_log_writes)."""
    return [
        sql
        for sql in statements
        if not sql.lstrip().upper().startswith(TRANSACTION_CONTROL) and not _writes_change_log(sql)
    ]


def _writes_change_log(sql: str) -> bool:
    return '"apps_registry_change' in sql


def _change_log_writes(statements: list[str]) -> int:
    """The change log's statements (issue 23, services/changes.py): on PostgreSQL one (the change and its entries
    in one data-modifying CTE); on SQLite two (the change, then one multi-row INSERT of its entries)."""
    return sum(_writes_change_log(sql) for sql in statements)


def _takes_token_budget(sql: str) -> bool:
    return "ratebudget" in sql and "membership" not in sql and not _sweeps_budgets(sql)


def _takes_app_budget(sql: str) -> bool:
    return "ratebudget" in sql and "membership" in sql  # gated: only a member's runs count


def _sweeps_budgets(sql: str) -> bool:
    """The deletion of budget rows whose time has passed: at most once a minute per process, on a refill."""
    return sql.lstrip().upper().startswith("DELETE") and "ratebudget" in sql


def test_a_single_insert_mutate_app_sends_at_most_five_statements(live, alice, budget, monkeypatch):
    """Four queries in one transaction: the token with its user, the route's lookup, the record's insert and its
    app's record count; besides them, the change log's record of the call (one statement on PostgreSQL, two on
    SQLite): five on PostgreSQL. The token's budget and the app's are drawn a batch at a time
    (services/rate_limits.py _LocalBatches): on the one call in several that refills one, a query more, and once
    a minute per process one more on a refill, the sweep of budget rows whose time has passed. No pool
    health check (charming/postgres.py IdleConnectionCheck) and no read of the address's failed authentications
    (trusted for a second)."""
    from apps_registry.services import rate_limits

    call_tool_ok(live, alice, MODERN, "list_apps", {})  # a warm server: the pool and the process caches filled
    warm, counted = 8, 24

    def a_minute_passes() -> None:  # since the last sweep: the next refill sweeps
        monkeypatch.setattr(rate_limits, "_last_sweep", 0.0)

    per_call = _mutate_counted(live, alice, budget, calls=counted, warm=warm, then=a_minute_passes)
    assert Record.objects.filter(storage__app=budget).count() == warm + counted
    token_refills = app_refills = sweeps = 0
    for statements in per_call:
        queries = _queries(statements)
        transaction_control = len(statements) - len(queries) - _change_log_writes(statements)
        assert transaction_control <= 2, "\n".join(statements)  # one transaction: BEGIN and COMMIT
        token_refill = any(_takes_token_budget(sql) for sql in queries)
        app_refill = any(_takes_app_budget(sql) for sql in queries)
        sweep = any(_sweeps_budgets(sql) for sql in queries)
        token_refills += token_refill
        app_refills += app_refill
        sweeps += sweep
        assert len(queries) <= 4 + token_refill + app_refill + sweep, "\n".join(statements)
        assert _change_log_writes(statements) == (1 if connection.vendor == "postgresql" else 2), statements
    # A batch of 8 calls per refill, once it has grown: most calls send neither budget's statement.
    assert token_refills <= counted // 4, token_refills
    assert app_refills <= counted // 4, app_refills
    assert sweeps == 1, sweeps  # one statement, in no transaction of its own (transaction_control above)


def test_a_rest_run_of_the_same_route_sends_no_more_statements_than_mcp(live, alice, budget, monkeypatch):
    """REST is served in one thread hop (charming/one_hop.py), through the same services: the same statements."""
    import time

    import httpx2

    from apps_registry.services import rate_limits

    monkeypatch.setattr(rate_limits, "_last_sweep", time.time())  # no sweep among these calls (priced above)
    url = f"{live.base_url}/api/apps/{budget.id}/run/add_expense/"
    per_call: list[list[str]] = []

    async def go() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice.token}"}, timeout=30) as http:
            with statements_sent() as log:
                for _ in range(16):
                    log.statements.clear()
                    log.counting = True
                    response = await http.post(url, json={"params": {"amount": 2.0, "category": "tea"}})
                    log.counting = False
                    assert response.status_code == 200, response.text
                    assert response.json()["ok"] is True
                    per_call.append(list(log.statements))
            missing = await http.post(f"{live.base_url}/api/apps/{budget.id}/run/nope/", json={})
            assert missing.status_code == 404
            assert missing.json()["error"]["kind"] == "unknown_op"

    run(go())
    assert Record.objects.filter(storage__app=budget, data__category="tea").count() == 16
    steady = [_queries(statements) for statements in per_call[8:]]
    assert all(len(queries) <= 6 for queries in steady), steady
    assert sum(len(queries) <= 4 for queries in steady) >= len(steady) - 3, steady
