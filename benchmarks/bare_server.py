"""The bare reference server of issue 21: what a user would write instead of Charming for one app's one mutation.

A minimal MCP server with the same official SDK (its low-level `Server` and `StreamableHTTPSessionManager`, both
protocol versions on one URL, as Charming serves them), served the same way (uvicorn with Charming's HTTP
protocol class), with one tool, `add_expense`, that sends the SQL Charming's `mutate_app` sends for the
benchmark route: the record's INSERT and its storage's record count, in one transaction, through a psycopg pool.
With `--find` (mcp_calls.py), a second tool, `recent_expenses`, sends the statement Charming's find route sent
(BARE_FIND_SQL, captured by the benchmark with its parameters BARE_FIND_PARAMS) with the category asked for in
place of the captured one (BARE_FIND_CATEGORY), and answers the records as Charming does (`id` beside the data).
None of Charming's checks: no token, no rate limits, no access rules, no definition, no validation beyond the SDK's
own input schema check. benchmarks/mcp_calls.py starts it beside Charming on the same database and calls both
alternately (`--bare`).

    BARE_DATABASE_URL=postgres://... BARE_STORAGE_ID=<uuid> .venv/bin/python -m uvicorn bare_server:app \\
        --app-dir benchmarks --http charming.serving:NoDelayHttpToolsProtocol --port 8001
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

STORAGE_ID = uuid.UUID(os.environ.get("BARE_STORAGE_ID", str(uuid.UUID(int=0))))
POOL = AsyncConnectionPool(
    os.environ.get("BARE_DATABASE_URL", ""), min_size=2, max_size=10, open=False, kwargs={"autocommit": True}
)
TOOL = types.Tool(
    name="add_expense",
    description="Record one expense.",
    input_schema={
        "type": "object",
        "properties": {"amount": {"type": "number"}, "category": {"type": "string"}},
        "required": ["amount", "category"],
        "additionalProperties": False,
    },
    output_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
)
INSERT = (
    "INSERT INTO apps_registry_record (storage_id, collection, record_id, data, version, created_at, updated_at) "
    "VALUES (%s, 'expenses', %s, %s, 1, now(), now())"
)
COUNT = "UPDATE apps_registry_storage SET records_held = GREATEST(records_held + 1, 0) WHERE id = %s"
FIND_SQL = os.environ.get("BARE_FIND_SQL", "")
FIND_PARAMS: list[Any] = json.loads(os.environ.get("BARE_FIND_PARAMS", "[]"))
FIND_CATEGORY = os.environ.get("BARE_FIND_CATEGORY", "")
FIND_TOOL = types.Tool(
    name="recent_expenses",
    description="The newest 20 expenses of a category.",
    input_schema={
        "type": "object",
        "properties": {"category": {"type": "string"}},
        "required": ["category"],
        "additionalProperties": False,
    },
    output_schema={"type": "object", "properties": {"expenses": {"type": "array"}}, "required": ["expenses"]},
)


def _find_params(category: str) -> list[Any]:
    """The captured find's parameters, the category asked for in place of the captured one (as a string, or as
    the JSON text of one), the storage id as a UUID."""
    params = []
    for value in FIND_PARAMS:
        if value == FIND_CATEGORY:
            value = category
        elif value == json.dumps(FIND_CATEGORY):
            value = json.dumps(category)
        elif value == str(STORAGE_ID):
            value = STORAGE_ID
        params.append(value)
    return params


async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL, FIND_TOOL] if FIND_SQL else [TOOL])


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == FIND_TOOL.name and FIND_SQL:
        async with POOL.connection() as conn:
            rows = await (await conn.execute(FIND_SQL, _find_params(arguments["category"]))).fetchall()
        found = {"expenses": [{"id": record_id, **data} for record_id, data in rows]}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(found))], structured_content=found)
    record_id = str(uuid.uuid4())
    data = {"amount": arguments["amount"], "category": arguments["category"]}
    async with POOL.connection() as conn, conn.transaction():
        await conn.execute(INSERT, [STORAGE_ID, record_id, Jsonb(data)])
        await conn.execute(COUNT, [STORAGE_ID])
    value = {"id": record_id}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))], structured_content=value)


server: Server[Any] = Server("bare", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)
manager = StreamableHTTPSessionManager(app=server, stateless=False, json_response=False)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()  # lifespan.startup
        async with _running():
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] == "http" and scope["path"] in ("/mcp", "/mcp/"):
        await manager.handle_request(scope, receive, send)
        return
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@contextlib.asynccontextmanager
async def _running() -> AsyncIterator[None]:
    await POOL.open(wait=True)
    try:
        async with manager.run():
            yield
    finally:
        await POOL.close()
