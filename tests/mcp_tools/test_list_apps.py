from __future__ import annotations

import pytest

from apps_registry.access import membership_set
from tests.factories import make_app
from tests.mcp_tools.conftest import MODES, call_tool_ok, text_of


@pytest.mark.parametrize("mode", MODES)
def test_list_apps_returns_only_the_callers_apps_with_their_role(live, alice, bob, mode):
    budget = make_app(owner=alice.user, name="Budget", description="Monthly spending")
    shared = make_app(owner=bob.user, name="Chores")
    membership_set(actor=bob.user, app=shared, user=alice.user, role="viewer")
    make_app(owner=bob.user, name="Bob's secret diary")

    result = call_tool_ok(live, alice, mode, "list_apps", {})

    assert result.structured_content == {
        "ok": True,
        "value": [
            {"id": str(budget.id), "name": "Budget", "description": "Monthly spending", "role": "owner"},
            {"id": str(shared.id), "name": "Chores", "description": "", "role": "viewer"},
        ],
    }
    assert "Budget" in text_of(result) and "diary" not in text_of(result)
