"""search_templates and remix_app over /mcp with the SDK client."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from apps_registry.models import App
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.templates import template_publish
from mcp_tools.registry import TOOLS
from tests.apps_registry.route_helpers import example, records
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, make_agent, text_of

OUTPUT = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS}


def checked(name, result):
    assert list(OUTPUT[name].iter_errors(result.structured_content)) == []
    return result.structured_content


@pytest.fixture
def published(alice):
    app = app_definition_save(actor=alice.user, definition=example("budget"))
    return template_publish(
        actor=alice.user, app_id=app.id, title="Monthly budget", starter_prompt="Set my budget to 400."
    ).template


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_finds_a_template_and_remixes_it_for_another_person(live, published, mode):
    sam = make_agent("sam")

    found = checked("search_templates", call_tool_ok(live, sam, mode, "search_templates", {"query": "budget"}))
    [template] = found["value"]
    assert (template["id"], template["title"], template["author"]) == (str(published.id), "Monthly budget", "alice")
    assert "add_expense" in {r["name"] for r in template["routes"]}

    made = call_tool_ok(live, sam, mode, "remix_app", {"template_id": template["id"], "name": "Sam's budget"})
    value = checked("remix_app", made)["value"]
    app = App.objects.get(pk=value["id"])
    assert (app.owner, app.name, app.remixed_from_id) == (sam.user, "Sam's budget", published.id)
    assert records(app) == {}
    assert "The template suggests asking next: Set my budget to 400." in text_of(made)
    none = checked("search_templates", call_tool_ok(live, sam, mode, "search_templates", {"query": "zebra"}))
    assert none["value"] == [] and "No template matches" in text_of(
        call_tool_ok(live, sam, mode, "search_templates", {"query": "zebra"})
    )


@pytest.mark.parametrize("mode", MODES)
def test_remixing_an_unknown_template_is_not_found(live, alice, mode):
    refused = call_tool_error(live, alice, mode, "remix_app", {"template_id": "16e11369-d40c-40c3-af10-adf5e28fe88b"})

    envelope = checked("remix_app", refused)
    assert envelope["error"]["kind"] == "not_found" and "search_templates lists them" in envelope["error"]["message"]
