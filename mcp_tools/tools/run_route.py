"""mutate_app and query_app: run one of an app's routes through the engine, answer its envelope."""

from __future__ import annotations

import json
from typing import Any, Literal

from apps_registry.exceptions import CharmingError
from apps_registry.services.advisories import advisories_after_commit
from apps_registry.services.routes import route_run
from mcp_tools.results import advisories_as_contract, envelope_ok, error_result
from mcp_tools.tools import ToolCall, ToolResult, db


def _run(
    user: Any, app_id: str, op: str, params: dict[str, Any] | None, kind: Literal["query", "mutation"]
) -> tuple[Any, CharmingError | None, list[dict[str, Any]]]:
    try:
        result = route_run(actor=user, app_id=app_id, op=op, params=params, kind=kind)
    except CharmingError as error:
        return None, error, advisories_as_contract(advisories_after_commit(actor=user, app_id=app_id))
    return result.value, None, advisories_as_contract(advisories_after_commit(actor=user, app=result.app))


async def _handle(call: ToolCall, kind: Literal["query", "mutation"]) -> ToolResult:
    args = call.arguments
    value, error, advisories = await db(_run, call.user, args["app_id"], args["op"], args.get("params"), kind)
    if error is not None:
        return error_result(error, envelope=True, advisories=advisories)
    text = f"{args['op']} returned:\n" + json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return envelope_ok(value, advisories=advisories, text=text)


async def handle_mutate(call: ToolCall) -> ToolResult:
    return await _handle(call, "mutation")


async def handle_query(call: ToolCall) -> ToolResult:
    return await _handle(call, "query")
