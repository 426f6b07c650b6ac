"""What a mutation's notify steps sent, in mutate_app's result (its text and `_meta`), over /mcp with the SDK."""

from __future__ import annotations

import pytest

from apps_registry.access import membership_set
from apps_registry.models import Notice
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.test_notices import CHORES
from tests.mcp_tools.conftest import MODES, call_tool_ok, make_agent, text_of

NOTICES = "io.charming/notices"


@pytest.mark.parametrize("mode", MODES)
def test_mutate_app_says_whom_its_notices_reached(live, alice, mode):
    app = app_definition_save(actor=alice.user, definition=CHORES)
    args = {"app_id": str(app.id), "op": "remind_viewers", "params": {}}

    nobody = call_tool_ok(live, alice, mode, "mutate_app", args)
    assert nobody.meta[NOTICES] == [{"subject": "Chores today", "to": ["viewers"], "recipients": 0}]
    assert "reached nobody: the app has no member among its viewers" in text_of(nobody)

    membership_set(actor=alice.user, app=app, user=make_agent("vic").user, role="viewer")
    reached = call_tool_ok(live, alice, mode, "mutate_app", args)
    assert reached.meta[NOTICES] == [{"subject": "Chores today", "to": ["viewers"], "recipients": 1}]
    assert "Notice 'Chores today' sent to 1 member (viewers)" in text_of(reached)
    assert Notice.objects.count() == 2
