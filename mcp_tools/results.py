"""Shaping tool results, and the MCP layer's one translator from domain errors to tool results.

Envelope tools (list_apps, get_app, open_app, query_app, mutate_app, send_feedback, the authoring tools) answer
`{ok, value?, error?, advisories?}` in `structuredContent`, valid against their output schema on
success and on every error, plus a text content carrying the value or the error with each
advisory's summary appended. `isError` is true exactly when `ok` is false. delete_app's contract
says errors arrive as content only, so its errors carry no `structuredContent`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types as types

from apps_registry.cursors import compact_json, tool_result_bytes
from apps_registry.exceptions import (
    AccessDenied,
    AppNotFound,
    ChangeConflict,
    CharmingError,
    InternalError,
    RouteKindMismatch,
    RouteNotFound,
    RouteRemoved,
    VersionConflict,
    connection_lost,
)
from apps_registry.redaction import RedactingFilter, redact_error
from apps_registry.services.advisories import AdvisoryNote

logger = logging.getLogger(__name__)
logger.addFilter(RedactingFilter())

INTERNAL_ERROR_MESSAGE = "Internal error: the server failed to handle this call; it has been logged. Try again later."
TOOL_FOR_KIND = {"query": "query_app", "mutation": "mutate_app"}


def error_message(exc: CharmingError) -> str:
    """A domain error worded for agents: the domain's facts, naming the tool that helps next."""
    if isinstance(exc, AppNotFound):
        return f"{exc.message} Use list_apps to see your apps."
    if isinstance(exc, RouteKindMismatch):
        return (
            f"'{exc.op}' is a {exc.route_kind} route: call it with {TOOL_FOR_KIND[exc.route_kind]}, "
            f"not {TOOL_FOR_KIND[exc.called_kind]}."
        )
    if isinstance(exc, VersionConflict):
        return (
            f"{exc.facts} Re-read it with get_app_source "
            f"and apply your change to version {exc.current_version}, then call update_app with expected_version "
            f"{exc.current_version}."
        )
    if isinstance(exc, ChangeConflict) and exc.reverted_by is not None:
        return (
            f"{exc.facts} To redo change {exc.change_id}, call revert_change with change_id '{exc.reverted_by}' "
            "(do not force this one: that would undo the revert)."
        )
    if isinstance(exc, ChangeConflict):
        return (
            f"{exc.facts} See each record's history with list_changes (app_id, collection, record_id); revert the "
            f"later changes first (newest first), or, if the user agrees to lose what they wrote to those records, "
            f"call revert_change again with change_id '{exc.change_id}' and force=true."
        )
    if isinstance(exc, RouteNotFound):
        return f"{exc.message} Use get_app to see them."
    if isinstance(exc, RouteRemoved):
        return f"{exc.message} Use get_app to see its routes."
    if isinstance(exc, AccessDenied) and exc.need == "mutate":
        return (
            f"You are a {exc.role} of app '{exc.app_name}'; {exc.role}s may only query (query_app). "
            "Ask the owner for editor access to change its data."
        )
    return exc.message


def advisory_as_contract(note: AdvisoryNote) -> dict[str, Any]:
    """An advisory in the tool contracts' shape: kind, severity, summary, and the optional fields when set."""
    shaped: dict[str, Any] = {"kind": note.kind, "severity": note.severity, "summary": note.summary}
    if note.user_summary:
        shaped["userSummary"] = note.user_summary
    if note.data:
        shaped["data"] = note.data
    if note.doc_url:
        shaped["doc_url"] = note.doc_url
    return shaped


def advisories_as_contract(notes: list[AdvisoryNote]) -> list[dict[str, Any]]:
    return [advisory_as_contract(note) for note in notes]


def advisories_text(advisories: list[dict[str, Any]]) -> str:
    if not advisories:
        return ""
    lines = [f"- [{a.get('severity', 'info')}] {a['kind']}: {a['summary']}" for a in advisories]
    return "\n\nAdvisories:\n" + "\n".join(lines)


def error_text(error: dict[str, Any]) -> str:
    text = f"Error ({error['kind']}): {error['message']}"
    for problem in error.get("errors") or []:
        if isinstance(problem, dict) and "message" in problem:
            text += f"\n- {problem.get('path', '$')}: {problem['message']}"
        else:
            text += f"\n- {problem}"
    if error.get("details"):
        text += "\nDetails: " + json.dumps(error["details"], ensure_ascii=False, default=str)
    return text


def _result(
    text: str, structured: dict[str, Any] | None, *, is_error: bool, meta: dict[str, Any] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=is_error,
        _meta=meta,
    )


def envelope_ok(
    value: Any,
    *,
    advisories: list[dict[str, Any]] | None = None,
    text: str | None = None,
    value_json: str | None = None,
    paging: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> types.CallToolResult:
    """A successful envelope: `{ok: true, value, advisories?}` (plus `next_cursor`/`truncated` from `paging`,
    for the tools whose contract pages); the text is the value as compact JSON unless given (`value_json`: the
    value's compact JSON when the caller already wrote it, into its `text`). `meta` is the result's `_meta`
    (mutate_app's `io.charming/change-id`), outside the output schema."""
    structured: dict[str, Any] = {"ok": True, "value": value, **(paging or {})}
    if advisories:
        structured["advisories"] = advisories
    encoded = value_json if value_json is not None else compact_json(value)
    body = text if text is not None else encoded
    return _result(
        body + over_budget_text(len(encoded.encode())) + advisories_text(advisories or []),
        structured,
        is_error=False,
        meta=meta,
    )


def over_budget_text(size: int) -> str:
    """A note for a value of `size` bytes of compact JSON over the tool result budget that no cursor cut (a route's
    own output is never cut: its output schema governs it), so an agent whose host clipped the result knows why
    and what to ask for."""
    budget = tool_result_bytes()
    if size <= budget:
        return ""
    return (
        f"\n\nNote: this result is {size} bytes of JSON, over this server's result budget of {budget} bytes; "
        "some hosts cut results this large. Ask for less: a smaller limit, or a cursor if the route takes one."
    )


def envelope_error(error: dict[str, Any], *, advisories: list[dict[str, Any]] | None = None) -> types.CallToolResult:
    """An error envelope; secrets in the error (message, errors[], details) are redacted here, for every tool."""
    error = redact_error(error)
    structured: dict[str, Any] = {"ok": False, "error": error}
    if advisories:
        structured["advisories"] = advisories
    return _result(error_text(error) + advisories_text(advisories or []), structured, is_error=True)


def plain_ok(structured: dict[str, Any], text: str) -> types.CallToolResult:
    return _result(text, structured, is_error=False)


def plain_error(error: dict[str, Any], *, advisories: list[dict[str, Any]] | None = None) -> types.CallToolResult:
    """An error result carried by content alone (delete_app: its output schema describes success only)."""
    error = redact_error(error)
    return _result(error_text(error) + advisories_text(advisories or []), None, is_error=True)


def error_result(
    exc: BaseException, *, envelope: bool, advisories: list[dict[str, Any]] | None = None, tool: str = "?"
) -> types.CallToolResult:
    """The one translator: a domain error becomes its envelope error; anything else a generic internal error."""
    lost = None if isinstance(exc, CharmingError) else connection_lost(exc)
    if isinstance(exc, CharmingError):
        error = exc.as_envelope_error(error_message(exc))
    elif lost is not None:
        # A restart or an outage cut the call short: retryable, and said so (one warning line, no traceback).
        logger.warning("MCP tool %s answered unavailable: the database connection was lost (%s)", tool, exc)
        error = lost.as_envelope_error()
    else:
        logger.error("Unexpected error in MCP tool %s", tool, exc_info=exc)
        error = InternalError(INTERNAL_ERROR_MESSAGE).as_envelope_error()
        advisories = None
    if envelope:
        return envelope_error(error, advisories=advisories)
    return plain_error(error, advisories=advisories)
