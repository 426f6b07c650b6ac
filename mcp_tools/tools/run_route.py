"""mutate_app and query_app: run one of an app's routes through the engine, answer its envelope."""

from __future__ import annotations

from typing import Any, Literal

from apps_registry.cursors import compact_json
from apps_registry.exceptions import CharmingError
from apps_registry.models import ChangeVia
from apps_registry.services.advisories import advisories_after_commit
from apps_registry.services.idempotency import idempotency_key_check
from apps_registry.services.notices import NoticeSent
from apps_registry.services.routes import route_run
from mcp_tools.results import advisories_as_contract, envelope_ok, error_result
from mcp_tools.tools import ToolCall, ToolResult, db

IDEMPOTENCY_META_KEY = "io.charming/idempotency-key"
# The result's _meta key carrying a mutation's change id (list_changes, revert_change); the output schema is unchanged.
CHANGE_ID_META_KEY = "io.charming/change-id"
# What a mutation's notify steps sent (each: subject, to, recipients, skipped?), beside the result as the change id is.
NOTICES_META_KEY = "io.charming/notices"


def _run(
    user: Any,
    app_id: str,
    op: str,
    params: dict[str, Any] | None,
    kind: Literal["query", "mutation"],
    meta: dict[str, Any],
) -> tuple[Any, CharmingError | None, list[dict[str, Any]], bool, int | None, tuple[NoticeSent, ...]]:
    try:
        key = None
        if kind == "mutation":
            key = idempotency_key_check(meta.get(IDEMPOTENCY_META_KEY), source=f"_meta.{IDEMPOTENCY_META_KEY}")
        result = route_run(
            actor=user,
            app_id=app_id,
            op=op,
            params=params,
            kind=kind,
            idempotency_key=key,
            advisories=True,
            via=ChangeVia.MCP,
        )
    except CharmingError as error:
        return None, error, advisories_as_contract(advisories_after_commit(actor=user, app_id=app_id)), False, None, ()
    advisories = advisories_as_contract(list(result.advisories))
    return result.value, None, advisories, result.replayed, result.change_id, result.notices


async def _handle(call: ToolCall, kind: Literal["query", "mutation"]) -> ToolResult:
    args = call.arguments
    meta = dict(call.params.meta or {})
    value, error, advisories, replayed, change_id, notices = await db(
        _run, call.user, args["app_id"], args["op"], args.get("params"), kind, meta
    )
    if error is not None:
        return error_result(error, envelope=True, advisories=advisories)
    head = f"{args['op']} returned:\n"
    if replayed:
        head = f"{args['op']} already ran with this idempotency key; nothing was written again. Its result was:\n"
    value_json = compact_json(value)
    text = head + value_json
    result_meta: dict[str, Any] | None = None
    if change_id is not None:
        result_meta = {CHANGE_ID_META_KEY: str(change_id)}
        text += (
            f"\n\nRecorded as change {change_id}: if this was a mistake, revert_change with change_id "
            f"'{change_id}' puts the records back as they were."
        )
    if notices:
        result_meta = {**(result_meta or {}), NOTICES_META_KEY: [notice.as_dict() for notice in notices]}
        text += "\n\n" + "\n".join(_notice_line(notice) for notice in notices)
    return envelope_ok(value, advisories=advisories, text=text, value_json=value_json, meta=result_meta)


def _notice_line(notice: NoticeSent) -> str:
    to = " and ".join(notice.roles)
    if notice.skipped:
        return f"Notice '{notice.subject}' was not sent: {notice.skipped}."
    if not notice.recipients:
        return (
            f"Notice '{notice.subject}' reached nobody: the app has no member among its {to} who gets notices "
            "(members are invited on the app's page; each can turn notices off there)."
        )
    people = f"{notice.recipients} member{'s' if notice.recipients != 1 else ''}"
    return f"Notice '{notice.subject}' sent to {people} ({to}): on their home page, and by e-mail if confirmed."


async def handle_mutate(call: ToolCall) -> ToolResult:
    return await _handle(call, "mutation")


async def handle_query(call: ToolCall) -> ToolResult:
    return await _handle(call, "query")
