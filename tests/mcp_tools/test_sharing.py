"""Sharing as an agent sees it, through the real SDK client: invited, accepted, then removed."""

from __future__ import annotations

import pytest

from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.sharing import invitation_accept, invitation_create, membership_leave, membership_remove
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, text_of
from tests.mcp_tools.test_mutate_app import DEFINITION, mutate
from tests.messages import app_not_found

EXPENSE = {"amount": 2, "category": "tea"}


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


def share(budget, agent, role):
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee=agent.user.username, role=role)
    return invitation_accept(actor=agent.user, invitation_id=invitation.pk)


def listed(live, agent, mode):
    return call_tool_ok(live, agent, mode, "list_apps", {}).structured_content["value"]


@pytest.mark.parametrize("mode", MODES)
def test_a_pending_invitation_shows_nothing_and_acceptance_lists_the_app_with_its_role(live, alice, bob, budget, mode):
    invitation = invitation_create(actor=alice.user, app_id=budget.id, invitee="bob", role="viewer")
    assert listed(live, bob, mode) == []
    hidden = call_tool_error(live, bob, mode, "query_app", mutate(budget, "count_expenses"))
    assert hidden.structured_content["error"]["kind"] == "not_found"

    invitation_accept(actor=bob.user, invitation_id=invitation.pk)

    result = call_tool_ok(live, bob, mode, "list_apps", {})
    assert result.structured_content["value"] == [
        {"id": str(budget.id), "name": "Budget", "description": "Monthly spending", "role": "viewer"}
    ]
    assert f"Budget (id {budget.id}, you are viewer)" in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_an_accepted_viewer_may_query_but_not_mutate(live, bob, budget, mode):
    share(budget, bob, "viewer")

    refused = call_tool_error(live, bob, mode, "mutate_app", mutate(budget, "add_expense", EXPENSE))
    allowed = call_tool_ok(live, bob, mode, "query_app", mutate(budget, "count_expenses"))

    error = refused.structured_content["error"]
    assert error["kind"] == "forbidden"
    assert error["message"].startswith("You are a viewer of app 'Budget'; viewers may only query (query_app).")
    assert allowed.structured_content["value"] == {"n": 0}
    assert not Record.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_an_accepted_editor_may_mutate(live, bob, budget, mode):
    share(budget, bob, "editor")

    result = call_tool_ok(live, bob, mode, "mutate_app", mutate(budget, "add_expense", EXPENSE))

    assert result.structured_content["ok"] is True
    assert Record.objects.filter(collection="expenses").count() == 1
    assert listed(live, bob, mode)[0]["role"] == "editor"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["removed", "left"])
def test_a_member_who_is_removed_or_leaves_no_longer_sees_the_app(live, alice, bob, budget, mode, how):
    share(budget, bob, "editor")
    assert [a["id"] for a in listed(live, bob, mode)] == [str(budget.id)]

    if how == "removed":
        membership_remove(actor=alice.user, app_id=budget.id, username="bob")
    else:
        membership_leave(actor=bob.user, app_id=budget.id)

    assert listed(live, bob, mode) == []
    refused = call_tool_error(live, bob, mode, "mutate_app", mutate(budget, "add_expense", EXPENSE))
    error = refused.structured_content["error"]
    assert error["kind"] == "not_found" and error["message"].startswith(app_not_found(budget.id))
    assert not Record.objects.exists()
    assert [a["role"] for a in listed(live, alice, mode)] == ["owner"]
