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


def test_the_guides_look_good_example_is_valid_and_its_page_has_every_hint(user, client):
    from django.urls import reverse

    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    found = re.search(r"## Make your app look good\n.*?```json\n(.*?)```", guide_text(), re.S)
    assert found is not None
    definition = json.loads(found.group(1))
    checked = definition_dry_run(actor=user, definition=definition)
    assert checked.problems == []
    assert [(r.name, r.passed, r.failures) for r in checked.tests if not r.passed] == []
    assert len(checked.tests) == 5
    assert checked.advisories == []

    app = app_definition_save(actor=user, definition=definition)
    for amount, category, day in ((12.5, "food", "2026-10-03"), (700, "rent", "2026-11-01")):
        route_run(
            actor=user,
            app_id=app.id,
            op="add_expense",
            params={"amount": amount, "category": category, "day": day},
            kind="mutation",
        )
    client.force_login(user)
    html = client.get(reverse("app_page", args=[app.id])).content.decode()
    start = html.index('id="view-recent"')
    assert start < html.index('id="view-by_month"')  # the start view first
    assert "The newest first." in html  # help
    assert "€700.00" in html and "1 Nov 2026" in html  # a unit, a date
    assert html.count("Yes, delete") == 2  # a row action on each row, confirming a delete
    assert '<figure class="chart' in html  # the chart
    assert re.search(r'<select id="m-tag_expense-expense" name="expense" class="picker"', html)  # a picker
    assert "Expense tags" not in html and "expense_tags" not in html  # hidden


def test_the_guides_open_app_examples_are_valid_calls():
    from jsonschema import Draft202012Validator

    from mcp_tools.registry import tool_named

    section = re.search(r"## Show the app to the person: `open_app`\n(.*?)\n## ", guide_text(), re.S)
    assert section is not None
    block = re.search(r"```json\n(.*?)```", section.group(1), re.S).group(1)
    calls = [json.loads(text) for text in re.findall(r"^\{.*?\}\}$", block, re.S | re.M)]
    assert [call["name"] for call in calls] == ["open_app", "open_app"]
    validator = Draft202012Validator(tool_named("open_app").contract["inputSchema"])
    for call in calls:
        assert list(validator.iter_errors(call["arguments"])) == []
    assert calls[1]["arguments"]["view"] == "list_expenses"


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


def test_the_guides_schedule_example_calls_the_tools_as_their_contracts_take_them():
    from jsonschema import Draft202012Validator

    from apps_registry.services.schedules import cron_checked, zone_checked
    from mcp_tools.registry import TOOLS

    section = re.search(r"## Running a route on its own: schedules\n(.*?)\n## ", guide_text(), re.S)
    assert section is not None
    text = section.group(1)
    contracts = {tool.name: tool.contract for tool in TOOLS}
    app_id = "16e11369-d40c-40c3-af10-adf5e28fe88b"
    created = {"app_id": app_id, "route": "mark_overdue", "cron": "0 0 * * *", "timezone": "Europe/Berlin"}
    assert (
        f'`create_schedule {{app_id: "{app_id}", route: "mark_overdue", cron: "0 0 * * *", timezone: "Europe/Berlin"}}`'
        in text
    )
    cron_checked(created["cron"])  # both raise InvalidInput if the guide's example would be refused
    zone_checked(created["timezone"])
    for name in ("create_schedule", "list_schedules", "update_schedule", "delete_schedule"):
        assert f"`{name} {{" in text, name
    calls = {
        "create_schedule": created,
        "list_schedules": {"app_id": app_id},
        "update_schedule": {"schedule_id": app_id, "active": False},
        "delete_schedule": {"schedule_id": app_id},
    }
    for name, arguments in calls.items():
        assert list(Draft202012Validator(contracts[name]["inputSchema"]).iter_errors(arguments)) == [], name
    for preset in ("hourly", "daily", "weekly", "monthly"):
        assert f"`{preset}`" in text
        cron_checked(preset)


def test_the_guides_webhook_example_calls_the_tools_as_their_contracts_take_them():
    from jsonschema import Draft202012Validator

    from mcp_tools.registry import TOOLS

    section = re.search(r"## Letting something outside feed an app: webhooks\n(.*?)\n## ", guide_text(), re.S)
    assert section is not None
    text = section.group(1)
    contracts = {tool.name: tool.contract for tool in TOOLS}
    app_id = "16e11369-d40c-40c3-af10-adf5e28fe88b"
    calls = {
        "create_hook": {"app_id": app_id, "route": "add_expense", "description": "bank export"},
        "list_hooks": {"app_id": app_id},
        "rotate_hook_secret": {"hook_id": app_id, "keep_old_minutes": 60},
        "delete_hook": {"hook_id": app_id},
    }
    for name, arguments in calls.items():
        assert f"`{name} {{" in text, name
        assert list(Draft202012Validator(contracts[name]["inputSchema"]).iter_errors(arguments)) == [], name
    assert "Charming-Signature: t=<unix seconds>,v1=<hex" in text and "not shown again" in text


def test_the_guides_template_example_calls_the_tools_as_their_contracts_take_them():
    from jsonschema import Draft202012Validator

    from mcp_tools.registry import TOOLS

    section = re.search(r"## Start from a template\n(.*?)\n## ", guide_text(), re.S)
    assert section is not None
    contracts = {tool.name: tool.contract for tool in TOOLS}
    calls = {
        "search_templates": {"query": "chores"},
        "remix_app": {"template_id": "16e11369-d40c-40c3-af10-adf5e28fe88b", "name": "Our chores"},
    }
    for name, arguments in calls.items():
        assert f"`{name} {{" in section.group(1), name
        assert list(Draft202012Validator(contracts[name]["inputSchema"]).iter_errors(arguments)) == [], name


def test_the_guides_export_example_calls_the_tool_as_its_contract_takes_it():
    from jsonschema import Draft202012Validator

    from mcp_tools.registry import tool_named

    section = re.search(r"## Taking an app out: `export_app`\n(.*?)\n## ", guide_text(), re.S)
    assert section is not None and "`export_app {app_id:" in section.group(1)
    schema = tool_named("export_app").contract["inputSchema"]
    assert list(Draft202012Validator(schema).iter_errors({"app_id": "16e11369-d40c-40c3-af10-adf5e28fe88b"})) == []


def test_the_guides_public_pages_example_lets_each_visitor_vote_once(user):
    from apps_registry.exceptions import HandlerError
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.public_apps import public_app_set, public_route_run, public_visit

    block = re.search(r"## Public pages: a guest book, a poll\n.*?```json\n(.*?)```", guide_text(), re.S).group(1)
    routes = json.loads("{" + block + "}")
    app = app_definition_save(actor=user, definition={"name": "Poll", "collections": {"votes": {}}, "routes": routes})
    public_app_set(actor=user, app_id=app.id, handle="first-dance", mutations=["vote"])
    visit = public_visit(handle="first-dance", address="203.0.113.5")
    public_route_run(visit=visit, op="vote", params={"song": "At Last"}, kind="mutation")
    with pytest.raises(HandlerError, match="You have voted already."):
        public_route_run(visit=visit, op="vote", params={"song": "Moon River"}, kind="mutation")
    other = public_visit(handle="first-dance", address="198.51.100.7")
    public_route_run(visit=other, op="vote", params={"song": "Moon River"}, kind="mutation")
