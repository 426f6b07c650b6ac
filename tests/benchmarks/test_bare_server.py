"""The bare reference server (benchmarks/bare_server.py) does what Charming's benchmark route does: its one tool,
called with the SDK client, writes the record and its storage's count, so the side-by-side run compares like work.
No figures are asserted (benchmarks print them)."""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

from apps_registry.models import Record, Storage
from apps_registry.services.definitions import app_definition_save
from tests.factories import UserFactory
from tests.mcp_tools.conftest import MODERN, live_server_running, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import mcp_calls  # noqa: E402 (a script's module, found through the path above)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_bare_tool_inserts_the_record_and_counts_it(monkeypatch):
    app = app_definition_save(actor=UserFactory(), app_id=None, definition=mcp_calls.DEFINITION)
    storage = Storage.objects.get(app=app)
    params = connection.get_connection_params()
    conninfo = " ".join(f"{key}={params[key]}" for key in ("host", "port", "dbname", "user") if params.get(key))
    monkeypatch.setenv("BARE_DATABASE_URL", conninfo)
    monkeypatch.setenv("BARE_STORAGE_ID", str(storage.id))
    bare_server = importlib.reload(importlib.import_module("bare_server"))
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
