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


def test_the_guides_per_app_server_example_is_what_the_server_lists(user):
    from apps_registry.services.definitions import app_definition_save
    from mcp_tools.app_server import tool_for_route

    example = re.search(r"## A complete small app\n\n```json\n(.*?)```", guide_text(), re.S)
    listed = re.search(r"## Each app is its own MCP server\n.*?```json\n(.*?)```", guide_text(), re.S)
    assert example is not None and listed is not None
    app = app_definition_save(actor=user, definition=json.loads(example.group(1)))
    served = [tool_for_route(str(app.id), route) for route in app.routes.order_by("name")]
    shown = json.loads(listed.group(1))["tools"]
    assert [{key: tool[key] for key in ("name", "description", "annotations")} for tool in served] == shown
