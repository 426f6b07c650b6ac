"""The tool-argument check's fast path (jsonschema-rs) agrees with jsonschema on what is valid, so the fast
path never accepts what the full check (and its messages) would refuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps_registry.exceptions import InvalidInput
from mcp_tools import arguments
from mcp_tools.registry import TOOLS
from tests.mcp_tools.test_tool_properties import NASTY, PROPERTY_SETTINGS, arguments_for

APPS = {
    "budget": "123e4567-e89b-42d3-a456-426614174000",
    "bobs": "00000000-0000-0000-0000-000000000000",
    "spare": "not-a-uuid",
}
CASES = st.sampled_from([tool.name for tool in TOOLS]).flatmap(
    lambda tool: arguments_for(tool, APPS, NASTY).map(lambda args: (tool, args))
)


@PROPERTY_SETTINGS
@given(CASES)
def test_the_fast_validator_agrees_with_jsonschema(case):
    tool, args = case
    slow_valid = not any(True for _ in arguments._VALIDATORS[tool].iter_errors(args))
    try:
        fast_valid = bool(arguments._FAST_VALIDATORS[tool].is_valid(args))
    except Exception:  # arguments it cannot take: the full check decides (below)
        fast_valid = slow_valid
    assert fast_valid == slow_valid, (tool, args)
    if slow_valid:
        assert arguments.arguments_check(tool, args) == args
    else:
        with pytest.raises(InvalidInput, match=f"^Invalid arguments for {tool}: "):
            arguments.arguments_check(tool, args)


def test_arguments_the_fast_validator_cannot_take_get_the_full_check():
    with pytest.raises(InvalidInput) as error:
        arguments.arguments_check("get_app", {"app_id": "lone \ud800 surrogate"})
    assert error.value.errors[0]["path"] == "$.app_id"
