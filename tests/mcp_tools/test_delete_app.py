from __future__ import annotations

import asyncio
import base64
import uuid

import mcp_types as types
import pytest
from django.test import override_settings
from mcp.shared.exceptions import MCPError

from apps_registry.access import membership_set
from apps_registry.models import App, AuditEvent, Record, Storage
from tests.factories import RecordFactory, make_app
from tests.mcp_tools.conftest import (
    LEGACY,
    MODERN,
    MODES,
    answer_with,
    call_tool_error,
    call_tool_ok,
    mcp_client,
    run,
    text_of,
)


@pytest.fixture
def budget(alice):
    app = make_app(owner=alice.user, name="Budget")
    RecordFactory(storage=app.storage, record_id="r1")
    RecordFactory(storage=app.storage, record_id="r2")
    return app


def audit_of(app_id) -> AuditEvent:
    return AuditEvent.objects.get(app_id=app_id, action="app.delete")


@pytest.mark.parametrize("mode", MODES)
def test_accepting_the_prompt_deletes_the_app_and_keeps_its_storage(live, alice, budget, mode):
    answer = answer_with("accept")

    result = call_tool_ok(live, alice, mode, "delete_app", {"app_id": str(budget.id)}, answer)

    assert result.structured_content == {"ok": True, "id": str(budget.id), "deleted": True}
    assert not App.objects.filter(pk=budget.id).exists()
    storage = Storage.objects.get(app_uuid=budget.id)
    assert storage.is_detached and storage.records.count() == 2
    assert "retained until" in text_of(result) and "(30 days)" in text_of(result)
    assert len(answer.prompts) == 1 and "Budget" in answer.prompts[0].message
    audit = audit_of(budget.id)
    assert audit.actor == alice.user
    assert audit.details["purge_storage"] is False and audit.details["confirmed_via"] == "elicitation"


@pytest.mark.parametrize("mode", MODES)
def test_purge_storage_deletes_the_records_with_the_app(live, alice, budget, mode):
    result = call_tool_ok(
        live, alice, mode, "delete_app", {"app_id": str(budget.id), "purge_storage": True}, answer_with("accept")
    )

    assert result.structured_content["deleted"] is True
    assert not Storage.objects.filter(app_uuid=budget.id).exists()
    assert not Record.objects.exists()
    assert "purged as well (2 records)" in text_of(result)
    assert audit_of(budget.id).details["purge_storage"] is True


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_or_cancelling_the_prompt_deletes_nothing(live, alice, budget, mode, action):
    result = call_tool_ok(live, alice, mode, "delete_app", {"app_id": str(budget.id)}, answer_with(action))

    assert result.structured_content == {"ok": True, "id": str(budget.id), "deleted": False, "cancelled": True}
    assert App.objects.filter(pk=budget.id).exists()
    assert not AuditEvent.objects.filter(action="app.delete").exists()
    assert ("declined" if action == "decline" else "cancelled") in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_the_prompt_is_authoritative_and_confirm_is_ignored_when_the_client_can_prompt(live, alice, budget, mode):
    args = {"app_id": str(budget.id), "confirm": True}

    result = call_tool_ok(live, alice, mode, "delete_app", args, answer_with("decline"))

    assert result.structured_content["deleted"] is False
    assert App.objects.filter(pk=budget.id).exists()


@pytest.mark.parametrize("mode", MODES)
def test_accepting_with_the_box_unticked_deletes_nothing(live, alice, budget, mode):
    result = call_tool_ok(live, alice, mode, "delete_app", {"app_id": str(budget.id)}, answer_with("accept", False))

    assert result.structured_content == {"ok": True, "id": str(budget.id), "deleted": False, "cancelled": True}
    assert App.objects.filter(pk=budget.id).exists()


@pytest.mark.parametrize("mode", MODES)
def test_without_a_prompt_the_call_fails_closed(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "delete_app", {"app_id": str(budget.id)})

    text = text_of(result)
    assert text.startswith("Error (confirmation_required): Deleting the app 'Budget'")
    assert "Confirm the deletion with the user another way, then call delete_app again with confirm: true." in text
    assert result.structured_content is None
    assert App.objects.filter(pk=budget.id).exists()


@pytest.mark.parametrize("mode", MODES)
def test_without_a_prompt_confirm_true_deletes_and_is_audited_as_such(live, alice, budget, mode):
    result = call_tool_ok(live, alice, mode, "delete_app", {"app_id": str(budget.id), "confirm": True})

    assert result.structured_content == {"ok": True, "id": str(budget.id), "deleted": True}
    assert not App.objects.filter(pk=budget.id).exists()
    assert audit_of(budget.id).details["confirmed_via"] == "confirm_parameter"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_only_the_owner_may_delete(live, alice, bob, budget, mode, role):
    membership_set(actor=alice.user, app=budget, user=bob.user, role=role)
    answer = answer_with("accept")

    result = call_tool_error(live, bob, mode, "delete_app", {"app_id": str(budget.id), "confirm": True}, answer)

    article = "an" if role == "editor" else "a"
    assert text_of(result).startswith(
        f"Error (forbidden): Only the app's owner can delete it; you are {article} {role}, not the owner."
    )
    assert answer.prompts == []
    assert App.objects.filter(pk=budget.id).exists()


@pytest.mark.parametrize("mode", MODES)
def test_an_invisible_app_and_a_missing_app_get_the_same_answer(live, alice, bob, budget, mode):
    invisible = call_tool_error(live, bob, mode, "delete_app", {"app_id": str(budget.id), "confirm": True})
    missing_id = uuid.uuid4()
    missing = call_tool_error(live, bob, mode, "delete_app", {"app_id": str(missing_id), "confirm": True})

    assert text_of(invisible) == text_of(missing).replace(str(missing_id), str(budget.id))
    assert text_of(invisible).startswith(f"Error (not_found): No app with id {budget.id} exists or is visible to you.")
    assert App.objects.filter(pk=budget.id).exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_malformed_app_id_is_a_clear_error(live, alice, mode):
    result = call_tool_error(live, alice, mode, "delete_app", {"app_id": "budget", "confirm": True})

    assert text_of(result).startswith("Error (invalid_input): Invalid arguments for delete_app: $.app_id must be")
    assert "got 'budget'" in text_of(result)


# --- 2026-07-28: the sealed requestState, driven by hand ---


async def _first_round(live, agent, args):
    async with mcp_client(live, agent.token, MODERN, answer_with("accept")) as c:
        return await c.session.call_tool("delete_app", args, allow_input_required=True)


async def _retry(live, agent, args, request_state, action="accept"):
    content = {"confirm": True} if action == "accept" else None
    responses = {"confirm_delete": types.ElicitResult(action=action, content=content)}
    async with mcp_client(live, agent.token, MODERN, answer_with("accept")) as c:
        return await c.session.call_tool(
            "delete_app", args, input_responses=responses, request_state=request_state, allow_input_required=True
        )


def protocol_error(coro) -> MCPError:
    """The MCPError a client call raised (the client's task group may wrap it in an exception group)."""
    try:
        run(coro)
    except BaseException as raised:  # noqa: BLE001
        error = raised
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        assert isinstance(error, MCPError), repr(raised)
        return error
    raise AssertionError("the call was not refused")


def test_2026_the_prompt_comes_back_as_input_required_with_sealed_state(live, alice, budget):
    first = run(_first_round(live, alice, {"app_id": str(budget.id)}))

    assert isinstance(first, types.InputRequiredResult)
    prompt = first.input_requests["confirm_delete"]
    assert "Delete the Charming app 'Budget' permanently?" in prompt.params.message
    assert first.request_state.startswith("v1.")
    assert str(budget.id) not in first.request_state
    # Sealed, not merely encoded: the claims cannot be read back out of the state.
    sealed = first.request_state.removeprefix("v1.")
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    assert b'"uid"' not in raw and b'"nonce"' not in raw and str(budget.id).encode() not in raw


def test_2026_a_tampered_state_is_refused(live, alice, budget):
    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))
    tampered = first.request_state[:-4] + ("AAAA" if not first.request_state.endswith("AAAA") else "BBBB")

    refused = protocol_error(_retry(live, alice, args, tampered))

    assert refused.error.code == types.INVALID_PARAMS
    assert refused.error.message == "Invalid or expired requestState"
    assert App.objects.filter(pk=budget.id).exists()


def test_2026_a_state_is_bound_to_the_purge_flag(live, alice, budget):
    first = run(_first_round(live, alice, {"app_id": str(budget.id)}))

    purging = {"app_id": str(budget.id), "purge_storage": True}
    refused = protocol_error(_retry(live, alice, purging, first.request_state))

    assert refused.error.code == types.INVALID_PARAMS
    assert refused.error.message == "Invalid or expired requestState"
    assert App.objects.filter(pk=budget.id).exists()


def test_2026_a_state_is_bound_to_the_app(live, alice, budget):
    other = make_app(owner=alice.user, name="Other")
    first = run(_first_round(live, alice, {"app_id": str(budget.id)}))

    refused = protocol_error(_retry(live, alice, {"app_id": str(other.id)}, first.request_state))

    assert refused.error.code == types.INVALID_PARAMS
    assert refused.error.message == "Invalid or expired requestState"
    assert App.objects.filter(pk=other.id).exists() and App.objects.filter(pk=budget.id).exists()


def test_2026_another_user_cannot_redeem_the_owners_state(live, alice, bob, budget):
    membership_set(actor=alice.user, app=budget, user=bob.user, role="editor")
    first = run(_first_round(live, alice, {"app_id": str(budget.id)}))

    refused = protocol_error(_retry(live, bob, {"app_id": str(budget.id)}, first.request_state))

    assert refused.error.code == types.INVALID_PARAMS
    assert refused.error.message == "Invalid or expired requestState"
    assert App.objects.filter(pk=budget.id).exists()


def test_2026_a_replayed_answer_is_refused(live, alice, budget):
    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))
    declined = run(_retry(live, alice, args, first.request_state, action="decline"))

    replayed = run(_retry(live, alice, args, first.request_state, action="accept"))

    assert declined.structured_content["cancelled"] is True
    assert replayed.is_error is True
    assert text_of(replayed).startswith("Error (confirmation_required): This confirmation was already used.")
    assert App.objects.filter(pk=budget.id).exists()


def test_2026_an_expired_state_is_refused(live, alice, budget):
    args = {"app_id": str(budget.id)}
    with override_settings(CHARMING_MCP_CONFIRM_TTL_SECONDS=0):
        first = run(_first_round(live, alice, args))

    expired = run(_retry(live, alice, args, first.request_state))

    assert expired.is_error is True
    assert text_of(expired).startswith("Error (confirmation_required): The confirmation prompt has expired.")
    assert App.objects.filter(pk=budget.id).exists()


def test_2026_input_responses_without_state_only_prompt_again(live, alice, budget):
    result = run(_retry(live, alice, {"app_id": str(budget.id)}, None))

    assert isinstance(result, types.InputRequiredResult)
    assert App.objects.filter(pk=budget.id).exists()


def test_2025_the_prompt_travels_on_the_calls_own_stream(live, alice, budget):
    answer = answer_with("accept")

    async def go():
        async with mcp_client(live, alice.token, LEGACY, answer) as c:
            assert c.protocol_version == "2025-11-25"
            return await c.call_tool("delete_app", {"app_id": str(budget.id)})

    result = run(go())
    assert result.structured_content["deleted"] is True
    assert answer.prompts[0].requested_schema["required"] == ["confirm"]


def test_2026_a_replay_is_refused_even_with_a_cold_cache(live, alice, budget):
    """Used nonces live in the database, so another worker (with its own cache) refuses a replay too."""
    from django.core.cache import cache

    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))
    run(_retry(live, alice, args, first.request_state, action="decline"))
    cache.clear()

    replayed = run(_retry(live, alice, args, first.request_state, action="accept"))

    assert text_of(replayed).startswith("Error (confirmation_required): This confirmation was already used.")
    assert App.objects.filter(pk=budget.id).exists()


def test_2025_an_unanswered_prompt_times_out_and_deletes_nothing(live, alice, budget):
    async def never_answers(ctx, params):
        await asyncio.sleep(5)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with override_settings(CHARMING_MCP_CONFIRM_TTL_SECONDS=1):
        result = run(_call_with(live, alice, LEGACY, never_answers, {"app_id": str(budget.id)}))

    assert result.is_error is True
    assert text_of(result).startswith(
        "Error (confirmation_required): The user did not answer the confirmation prompt within 1 seconds"
    )
    assert App.objects.filter(pk=budget.id).exists()


async def _call_with(live, who, mode, callback, args):
    async with mcp_client(live, who.token, mode, callback) as c:
        return await c.call_tool("delete_app", args)
