"""Schemas over the engine's bounds through MCP (issue 22): a clear invalid_definition, never internal_error."""

from __future__ import annotations

import logging

import pytest

from apps_registry.models import App
from tests.apps_registry.test_route_schema_bounds import NESTED_PATTERN, doubling_chain, string_property, with_input
from tests.mcp_tools.conftest import MODES, call_tool
from tests.mcp_tools.test_authoring_session import checked


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (string_property(NESTED_PATTERN), "nests groups 3000 deep; the limit is 32"),
        (doubling_chain(20), "is too large with its $refs expanded"),
    ],
    ids=["nested-pattern", "doubling-refs"],
)
def test_create_app_with_a_schema_over_the_bounds_is_invalid_definition(live, alice, mode, schema, reason, caplog):
    with caplog.at_level(logging.ERROR):
        result = checked("create_app", call_tool(live, alice, mode, "create_app", {"definition": with_input(schema)}))

    assert result["error"]["kind"] == "invalid_definition"
    (problem,) = result["error"]["errors"]
    assert problem["path"] == "routes.q.input" and reason in problem["message"]
    assert not App.objects.exists()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
