"""Reliability of the MCP tools (issue 12): what a caller is told always matches what was committed, what they
sent is never echoed whole, and malformed text is refused as their input."""

from __future__ import annotations

import pytest

from apps_registry.models import Record
from apps_registry.services import advisories as advisories_service
from apps_registry.services.definitions import app_definition_save
from tests.mcp_tools.conftest import MODES, call_tool_ok
from tests.mcp_tools.test_mutate_app import DEFINITION, assert_envelope, mutate


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


@pytest.fixture
def advisories_broken(monkeypatch):
    def fail(app):
        raise RuntimeError("advisory query failed")

    monkeypatch.setattr(advisories_service, "advisories_open_for", fail)


@pytest.mark.parametrize("mode", MODES)
def test_a_committed_mutation_is_reported_as_a_success_when_its_advisories_fail(
    live, alice, budget, advisories_broken, mode
):
    result = call_tool_ok(
        live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 3, "category": "t"})
    )

    record = Record.objects.get(storage__app=budget)
    assert assert_envelope(result) == {"ok": True, "value": {"id": record.record_id}}
    assert "Try again later" not in str(result.content)
