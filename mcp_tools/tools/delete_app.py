"""delete_app: delete an app the caller owns, after the user confirmed it.

Confirmation: an elicitation prompt when the client declared the capability (authoritative;
`confirm` is then ignored) -- `elicitation/create` on the call's SSE stream on 2025-11-25, an
input-required result with sealed requestState on 2026-07-28 -- otherwise the call fails closed
until re-invoked with `confirm: true`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from apps_registry.exceptions import AccessDenied, ConfirmationRequired
from apps_registry.services.advisories import advisories_after_commit
from apps_registry.services.apps import DeletionResult, app_delete, app_delete_check, retention_days
from mcp_tools.confirmation import confirmation_state_new, confirmation_state_redeem, confirmation_ttl_seconds
from mcp_tools.results import advisories_as_contract, plain_error, plain_ok
from mcp_tools.tools import ToolCall, ToolResult, db

CONFIRM_INPUT_KEY = "confirm_delete"
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {
            "type": "boolean",
            "title": "Delete this app permanently",
            "description": "Check to delete the app. This cannot be undone.",
        }
    },
    "required": ["confirm"],
}
NOT_OWNER_MESSAGE = "Only the app's owner can delete it; you are {role}, not the owner. Nothing was deleted."


@dataclass(frozen=True)
class Target:
    app_id: str
    name: str
    created_at: datetime  # which app: an id deleted and used again names another one

    @property
    def created(self) -> str:
        return self.created_at.isoformat()


def _target(user: Any, app_id: str) -> Target:
    app = app_delete_check(actor=user, app_id=app_id)
    return Target(app_id=str(app.id), name=app.name, created_at=app.created_at)


def _not_owner(user: Any, app_id: str, refusal: AccessDenied) -> ToolResult:
    # Advisories only where the call ends without deleting; delivering them marks answers read.
    advisories = advisories_as_contract(advisories_after_commit(actor=user, app_id=app_id))
    role = "an editor" if refusal.role == "editor" else f"a {refusal.role}"
    return plain_error(refusal.as_envelope_error(NOT_OWNER_MESSAGE.format(role=role)), advisories=advisories)


def _prompt(target: Target, purge_storage: bool) -> str:
    if purge_storage:
        fate = "Its stored data will be deleted too."
    else:
        fate = f"Its stored data will be kept for {retention_days()} days (restorable by staff), then purged."
    return f"Delete the Charming app '{target.name}' permanently? {fate} This cannot be undone."


def _deleted_text(result: DeletionResult) -> str:
    text = f"Deleted the app '{result.app_name}' ({result.app_id})."
    if result.purged:
        return text + f" Its stored data was purged as well ({result.records_purged} records); nothing is retained."
    until = f"{result.retained_until:%Y-%m-%d}" if result.retained_until else "the end of the retention window"
    return text + (
        f" Its stored data was detached and is retained until {until} "
        f"({retention_days()} days), then purged; staff can restore it before then."
    )


async def _delete(call: ToolCall, target: Target, purge_storage: bool, confirmed_via: str) -> ToolResult:
    try:
        result = await db(
            app_delete,
            actor=call.user,
            app_id=target.app_id,
            purge_storage=purge_storage,
            confirmed_via=confirmed_via,
            created_at=target.created_at,
        )
    except ConfirmationRequired as refusal:
        return plain_error(refusal.as_envelope_error())
    return plain_ok({"ok": True, "id": str(result.app_id), "deleted": True}, _deleted_text(result))


def _not_deleted(target: Target, action: str) -> ToolResult:
    how = "declined" if action == "decline" else "cancelled" if action == "cancel" else "did not confirm"
    return plain_ok(
        {"ok": True, "id": target.app_id, "deleted": False, "cancelled": True},
        f"The user {how} the deletion of the app '{target.name}' ({target.app_id}); nothing was deleted.",
    )


def _refused(message: str) -> ToolResult:
    return plain_error(ConfirmationRequired(message).as_envelope_error())


def _can_elicit(call: ToolCall) -> bool:
    """Whether the client can show our form prompt: elicitation declared with form mode (an empty
    declaration means form, for clients older than modes); a URL-only client cannot."""
    capabilities = call.ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


async def handle(call: ToolCall) -> ToolResult:
    purge_storage = call.arguments.get("purge_storage") is True
    try:
        target = await db(_target, call.user, call.arguments["app_id"])
    except AccessDenied as refusal:  # the service's refusal, worded for the agent
        return await db(_not_owner, call.user, call.arguments["app_id"], refusal)

    if not _can_elicit(call):
        if call.arguments.get("confirm") is True:
            return await _delete(call, target, purge_storage, "confirm_parameter")
        return _refused(
            f"Deleting the app '{target.name}' ({target.app_id}) needs the user's confirmation, and this client "
            "cannot show a confirmation prompt. Nothing was deleted. Confirm the deletion with the user another "
            "way, then call delete_app again with confirm: true."
        )

    message = _prompt(target, purge_storage)
    if call.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (call.params.input_responses or {}).get(CONFIRM_INPUT_KEY)
        state = call.params.request_state
        if answer is None or state is None:
            return types.InputRequiredResult(
                input_requests={
                    CONFIRM_INPUT_KEY: types.ElicitRequest(
                        params=types.ElicitRequestFormParams(message=message, requested_schema=CONFIRM_SCHEMA)
                    )
                },
                request_state=confirmation_state_new(
                    user_id=call.user.pk, app_id=target.app_id, app_created=target.created, purge_storage=purge_storage
                ),
            )
        try:
            await db(
                confirmation_state_redeem,
                state,
                user_id=call.user.pk,
                app_id=target.app_id,
                app_created=target.created,
                purge_storage=purge_storage,
            )
        except ConfirmationRequired as refusal:
            return plain_error(refusal.as_envelope_error())
        if not isinstance(answer, types.ElicitResult):
            return _refused("The answer to the confirmation prompt is not an elicitation result; nothing was deleted.")
        elicited = answer
    else:
        timeout = confirmation_ttl_seconds()
        try:
            elicited = await asyncio.wait_for(
                call.ctx.session.elicit_form(
                    message=message, requested_schema=CONFIRM_SCHEMA, related_request_id=call.ctx.request_id
                ),
                timeout=timeout,
            )
        except TimeoutError:
            return _refused(
                f"The user did not answer the confirmation prompt within {timeout} seconds; nothing was deleted. "
                "Call delete_app again to ask once more."
            )
        except ValidationError:
            # The SDK checks the client's answer against ElicitResult and raises this, not an MCPError.
            return _refused(
                "The client's answer to the confirmation prompt is not an elicitation result (it needs an "
                "'action', and 'content' with 'confirm'); nothing was deleted. Call delete_app again to ask once more."
            )
        except MCPError as failure:
            return _refused(
                f"The confirmation prompt failed ({failure.error.message}); nothing was deleted. Confirm with the "
                "user another way, then call delete_app again with confirm: true."
            )

    if elicited.action == "accept" and (elicited.content or {}).get("confirm") is True:
        return await _delete(call, target, purge_storage, "elicitation")
    return _not_deleted(target, elicited.action)
