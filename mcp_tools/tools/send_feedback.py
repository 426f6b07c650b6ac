"""send_feedback: a message from the caller to Charming's staff about one of their apps."""

from __future__ import annotations

from typing import Any

from apps_registry.services.advisories import advisories_after_commit
from apps_registry.services.feedback import feedback_send
from mcp_tools.results import advisories_as_contract, envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def _send(user: Any, app_id: str, body: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    feedback = feedback_send(actor=user, app_id=app_id, body=body)
    value = {"feedback_id": str(feedback.pk), "app_id": str(feedback.app_id)}
    return value, advisories_as_contract(advisories_after_commit(actor=user, app=feedback.app))


async def handle(call: ToolCall) -> ToolResult:
    value, advisories = await db(_send, call.user, call.arguments["app_id"], call.arguments["body"])
    text = (
        f"Feedback {value['feedback_id']} was sent to Charming's staff. Their answer will appear as a "
        "feedback-response advisory in a later result of this app's tools."
    )
    return envelope_ok(value, advisories=advisories, text=text)
