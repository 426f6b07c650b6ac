"""The bare reference server (benchmarks/bare_server.py) does what Charming's benchmark routes do: its insert tool,
called with the SDK client, writes the record and its storage's count, and its find tool (--find) answers the
records Charming's find route answers, so the side-by-side run compares like work. No figures are asserted
(benchmarks print them)."""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

from apps_registry.models import Record, Storage
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from tests.factories import UserFactory
from tests.mcp_tools.conftest import MODERN, live_server_running, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import find_order  # noqa: E402 (scripts' modules, found through the path above)
import mcp_calls  # noqa: E402

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _bare_server(monkeypatch, storage, **env):
    """bare_server, imported afresh with its settings for this database and `storage`."""
    params = connection.get_connection_params()
    conninfo = " ".join(f"{key}={params[key]}" for key in ("host", "port", "dbname", "user") if params.get(key))
    monkeypatch.setenv("BARE_DATABASE_URL", conninfo)
    monkeypatch.setenv("BARE_STORAGE_ID", str(storage.id))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return importlib.reload(importlib.import_module("bare_server"))


def test_the_bare_tool_inserts_the_record_and_counts_it(monkeypatch):
    app = app_definition_save(actor=UserFactory(), app_id=None, definition=mcp_calls.DEFINITION)
    storage = Storage.objects.get(app=app)
    bare_server = _bare_server(monkeypatch, storage)
    from mcp import Client

    async def call() -> dict:
        async with Client(f"{server.base_url}/mcp", mode=MODERN) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["add_expense"]
            result = await client.call_tool("add_expense", mcp_calls.PARAMS)
            assert result.is_error is not True
            return dict(result.structured_content or {})

    with live_server_running(bare_server.app) as server:
        value = run(call())

    record = Record.objects.get(storage=storage, record_id=value["id"])
    assert uuid.UUID(value["id"])
    assert record.collection == "expenses"
    assert record.data == mcp_calls.PARAMS
    storage.refresh_from_db()
    assert storage.records_held == 1


def test_the_bare_find_answers_the_records_charmings_find_route_answers(monkeypatch):
    user = UserFactory()
    app = app_definition_save(actor=user, app_id=None, definition=mcp_calls.find_definition())
    storage = Storage.objects.get(app=app)
    find_order.bulk_load(connection, storage.id, 0, 1000, collection="expenses", data=mcp_calls.expense_data)
    sql, params = mcp_calls.find_statement(user, app.id)
    env = {"BARE_FIND_SQL": sql, "BARE_FIND_PARAMS": params, "BARE_FIND_CATEGORY": mcp_calls.FIND_CATEGORY}
    bare_server = _bare_server(monkeypatch, storage, **env)
    from mcp import Client

    async def find(category: str) -> list[dict]:
        async with Client(f"{server.base_url}/mcp", mode=MODERN) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["add_expense", "recent_expenses"]
            result = await client.call_tool("recent_expenses", {"category": category})
            assert result.is_error is not True
            return list((result.structured_content or {})["expenses"])

    with live_server_running(bare_server.app) as server:
        found = {category: run(find(category)) for category in (mcp_calls.FIND_CATEGORY, "category-3")}

    for category, records in found.items():
        charming = route_run(
            actor=user, app_id=app.id, op=mcp_calls.FIND_ROUTE, params={"category": category}, kind="query"
        )
        assert records == charming.value  # the same 20 records, in the same order, as Charming answers them
        assert len(records) == 20 and {record["category"] for record in records} == {category}
