"""The agents' guide (docs/agent-guide.md, the resource charming://guide/authoring) says what the server does."""

from __future__ import annotations

import json
import re

import pytest

from apps_registry.services.definitions import definition_dry_run
from mcp_tools.guide import guide_text

pytestmark = pytest.mark.django_db


def test_the_guides_example_app_is_valid_and_its_tests_pass(user):
    example = re.search(r"## A complete small app\n\n```json\n(.*?)```", guide_text(), re.S)
    assert example is not None
    checked = definition_dry_run(actor=user, definition=json.loads(example.group(1)))
    assert checked.problems == []
    assert [(r.name, r.passed) for r in checked.tests] == [
        ("logs a habit", True),
        ("refuses nothing", True),
        ("lists logs", True),
    ]
    assert checked.advisories == []


def test_the_guide_names_every_step_kind_and_every_authoring_tool():
    from apps_registry.routes.steps import STEP_KINDS

    text = guide_text()
    for kind in STEP_KINDS:
        assert f"| `{kind}` |" in text, kind
    for tool in ("check_app", "create_app", "get_app_source", "update_app"):
        assert tool in text


def test_the_guides_patterns_app_is_valid_and_its_tests_pass(user):
    patterns = re.search(r"## Patterns\n.*?```json\n(.*?)```", guide_text(), re.S)
    assert patterns is not None
    checked = definition_dry_run(actor=user, definition=json.loads(patterns.group(1)))
    assert checked.problems == []
    assert [(r.name, r.passed, r.failures) for r in checked.tests if not r.passed] == []
    assert len(checked.tests) == 8
    assert [a.kind for a in checked.advisories] == []


def test_the_guides_undo_example_calls_the_tools_as_their_contracts_take_them():
    from jsonschema import Draft202012Validator

    from mcp_tools.registry import TOOLS

    section = re.search(r"## Undoing a wrong mutation.*?\n(.*?)\n## ", guide_text(), re.S)
    assert section is not None
    text = section.group(1)
    contracts = {tool.name: tool.contract for tool in TOOLS}
    assert "io.charming/change-id" in text
    calls = {
        "revert_change": {"change_id": "42"},
        "list_changes": {"app_id": "16e11369-d40c-40c3-af10-adf5e28fe88b", "collection": "expenses", "record_id": "e1"},
    }
    for name, arguments in calls.items():
        assert f"`{name} {{" in text, name
        assert list(Draft202012Validator(contracts[name]["inputSchema"]).iter_errors(arguments)) == []
    value = json.loads(re.search(r'`revert_change \{change_id: "42"\}` → `(\{.*?\})`', text).group(1))
    assert (
        list(
            Draft202012Validator(contracts["revert_change"]["outputSchema"]).iter_errors(
                {"ok": True, "value": {"app_id": "16e11369-d40c-40c3-af10-adf5e28fe88b", **value}}
            )
        )
        == []
    )
    assert "force: true" in text and "conflict" in text
