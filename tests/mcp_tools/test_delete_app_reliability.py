"""delete_app under malformed answers and stale confirmations (issue 12)."""

from __future__ import annotations

import types as pytypes

import mcp.client.session
import pytest

from apps_registry.models import App
from tests.factories import make_app
from tests.mcp_tools.conftest import LEGACY, call_tool_error, run, text_of


@pytest.fixture
def budget(alice):
    return make_app(owner=alice.user, name="Budget")


class Shapeless:
    """What a client may answer instead of an ElicitResult: `{"foo": "bar"}`."""

    def model_dump(self, **kwargs):
        return {"foo": "bar"}


@pytest.fixture
def client_sends_any_answer(monkeypatch):
    """The SDK client refuses to send a malformed answer; other clients do not. Let it through, to the server."""
    methods = mcp.client.session._methods
    public = {name: getattr(methods, name) for name in dir(methods) if not name.startswith("__")}
    lenient = pytypes.SimpleNamespace(**public)
    lenient.validate_client_result = lambda *args, **kwargs: None
    monkeypatch.setattr(mcp.client.session, "_methods", lenient)
    monkeypatch.setattr(mcp.client.session, "ClientResponse", pytypes.SimpleNamespace(validate_python=lambda r: r))


def test_2025_a_wrongly_shaped_elicitation_answer_is_confirmation_required(
    live, alice, budget, client_sends_any_answer
):
    async def answer(ctx, params):
        return Shapeless()

    result = call_tool_error(live, alice, LEGACY, "delete_app", {"app_id": str(budget.id)}, answer)

    assert text_of(result).startswith(
        "Error (confirmation_required): The client's answer to the confirmation prompt is not an elicitation result"
    )
    assert App.objects.filter(pk=budget.id).exists()


@pytest.fixture
def later(monkeypatch):
    """Move the server's clocks (the SDK's seal and Charming's claims) forward by `seconds`."""
    import time

    import mcp.server.request_state

    import mcp_tools.confirmation

    def move(seconds: float) -> None:
        clock = pytypes.SimpleNamespace(time=lambda: time.time() + seconds)
        monkeypatch.setattr(mcp.server.request_state, "time", clock)
        monkeypatch.setattr(mcp_tools.confirmation, "time", clock)

    return move


def test_2026_a_prompt_answered_after_it_expired_gets_confirmation_required(live, alice, budget, later, settings):
    from tests.mcp_tools.test_delete_app import _first_round, _retry

    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))
    later(settings.CHARMING_MCP_CONFIRM_TTL_SECONDS + 1)

    expired = run(_retry(live, alice, args, first.request_state))

    assert expired.is_error is True
    assert text_of(expired).startswith("Error (confirmation_required): The confirmation prompt has expired.")
    assert App.objects.filter(pk=budget.id).exists()


def test_2026_a_prompt_for_a_deleted_app_does_not_delete_the_app_created_again_at_its_id(live, alice, budget):
    from apps_registry.services.apps import app_create, app_delete
    from tests.mcp_tools.test_delete_app import _first_round, _retry

    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))
    app_delete(actor=alice.user, app_id=budget.id, purge_storage=True, confirmed_via="confirm_parameter")
    again = app_create(owner=alice.user, name="Budget 2", app_id=budget.id)

    stale = run(_retry(live, alice, args, first.request_state))

    assert stale.is_error is True
    assert text_of(stale).startswith(
        "Error (confirmation_required): The confirmation was given for an app that has since been deleted"
    )
    assert App.objects.get(pk=again.id).name == "Budget 2"


def test_app_delete_refuses_an_app_other_than_the_one_confirmed(db, user):
    from datetime import timedelta

    from apps_registry.exceptions import ConfirmationRequired
    from apps_registry.services.apps import app_delete

    app = make_app(owner=user, name="Budget")

    with pytest.raises(ConfirmationRequired, match="not the one the user confirmed deleting"):
        app_delete(
            actor=user,
            app_id=app.id,
            purge_storage=False,
            confirmed_via="elicitation",
            created_at=app.created_at - timedelta(seconds=1),
        )
    assert App.objects.filter(pk=app.id).exists()


def test_2026_a_wrongly_shaped_input_response_is_refused_without_an_internal_error(live, alice, budget):
    """Finding 12 on 2026-07-28: an answer to the prompt that is no elicitation result (`{"foo": "bar"}`), sent
    with the sealed state, deletes nothing and says what went wrong (no internal_error)."""
    import json

    import httpx2

    from tests.mcp_tools.test_delete_app import _first_round

    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    params = {
        "name": "delete_app",
        "arguments": args,
        "inputResponses": {"confirm_delete": {"foo": "bar"}},
        "requestState": first.request_state,
        "_meta": {**meta, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "delete_app",
        "Authorization": f"Bearer {alice.token}",
    }

    async def go():
        async with httpx2.AsyncClient(timeout=10) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            return await http.post(live.mcp_url, content=json.dumps(body).encode(), headers=headers)

    response = run(go())

    assert response.status_code < 500, response.text
    text = response.text
    if "\ndata: " in text or text.startswith("event:"):
        text = next(line[len("data: ") :] for line in text.splitlines() if line.startswith("data: "))
    answer = json.loads(text)
    assert "internal_error" not in text and "Internal error" not in text, answer
    if "result" in answer:  # answered as a tool result: a clear confirmation_required
        assert answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"].startswith("Error (confirmation_required):"), answer
    else:  # or refused by the SDK as invalid params, before any tool ran
        assert answer["error"]["code"] == -32602, answer
    assert App.objects.filter(pk=budget.id).exists()


@pytest.mark.parametrize("content", [{"foo": "bar"}, {"confirm": "yes"}, {}], ids=["foreign-key", "string", "empty"])
def test_2026_an_accepted_answer_with_wrongly_shaped_content_deletes_nothing(live, alice, budget, content):
    """Anything but `{"confirm": true}` is not a confirmation: answered like the unticked box, never an error."""
    import mcp_types as types

    from tests.mcp_tools.conftest import MODERN, answer_with, mcp_client
    from tests.mcp_tools.test_delete_app import _first_round

    args = {"app_id": str(budget.id)}
    first = run(_first_round(live, alice, args))

    async def retry():
        responses = {"confirm_delete": types.ElicitResult(action="accept", content=content)}
        async with mcp_client(live, alice.token, MODERN, answer_with("accept")) as c:
            return await c.session.call_tool(
                "delete_app",
                args,
                input_responses=responses,
                request_state=first.request_state,
                allow_input_required=True,
            )

    result = run(retry())

    assert result.structured_content == {"ok": True, "id": str(budget.id), "deleted": False, "cancelled": True}
    assert App.objects.filter(pk=budget.id).exists()
