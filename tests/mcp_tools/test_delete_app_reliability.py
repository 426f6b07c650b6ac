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
