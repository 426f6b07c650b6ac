"""list_hooks, create_hook, rotate_hook_secret and delete_hook over /mcp with the SDK client, and a delivery to the
URL create_hook gives, over HTTP to the live server."""

from __future__ import annotations

import json
import time

import httpx2
import pytest
from jsonschema import Draft202012Validator

from apps_registry.access import membership_set
from apps_registry.models import Hook
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import signature_make
from mcp_tools.registry import TOOLS
from tests.apps_registry.route_helpers import records
from tests.apps_registry.test_hooks import BUDGET
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, make_agent, text_of

NAMES = ("list_hooks", "create_hook", "rotate_hook_secret", "delete_hook")
OUTPUT = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS if tool.name in NAMES}


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=BUDGET)


def checked(name, result):
    assert list(OUTPUT[name].iter_errors(result.structured_content)) == []
    return result.structured_content


def post(live, hook, body: dict, secret: str) -> httpx2.Response:
    raw = json.dumps(body).encode()
    header = signature_make(secret=secret, timestamp=int(time.time()), body=raw)
    path = "/hooks/" + hook["url"].rsplit("/hooks/", 1)[1]
    return httpx2.post(
        live.base_url + path,
        content=raw,
        headers={"Charming-Signature": header, "Content-Type": "application/json"},
        timeout=20,
    )


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_makes_a_hook_a_sender_uses_it_and_the_agent_rotates_and_deletes_it(live, alice, budget, mode):
    created = call_tool_ok(
        live, alice, mode, "create_hook", {"app_id": str(budget.id), "route": "add_expense", "description": "bank"}
    )
    hook = checked("create_hook", created)["value"]
    assert hook["secret"].startswith("whsec_") and hook["url"].endswith(f"/hooks/{hook['id']}/")
    assert f"Secret: {hook['secret']}" in text_of(created) and "not shown again" in text_of(created)

    delivered = post(live, hook, {"amount": 20}, hook["secret"])
    assert delivered.status_code == 200, delivered.text
    assert delivered.json()["value"]["amount"] == 20
    assert [r["amount"] for r in records(budget, "expenses").values()] == [20]

    listed = call_tool_ok(live, alice, mode, "list_hooks", {"app_id": str(budget.id)})
    [shown] = checked("list_hooks", listed)["value"]
    assert "secret" not in shown and hook["secret"] not in json.dumps(listed.structured_content)
    assert hook["secret"] not in text_of(listed)
    assert [(d["outcome"], d["status"], d["change_id"]) for d in shown["deliveries"]] == [
        ("ok", 200, delivered.headers["Charming-Change-Id"])
    ]
    assert f"webhook {hook['id']} (bank): runs route add_expense as alice" in text_of(listed)

    rotated = checked(
        "rotate_hook_secret",
        call_tool_ok(live, alice, mode, "rotate_hook_secret", {"hook_id": hook["id"], "keep_old_minutes": 0}),
    )["value"]
    assert rotated["secret"] != hook["secret"] and rotated["url"] == hook["url"]
    assert post(live, hook, {"amount": 1}, hook["secret"]).status_code == 401
    assert post(live, hook, {"amount": 2}, rotated["secret"]).status_code == 200

    deleted = checked("delete_hook", call_tool_ok(live, alice, mode, "delete_hook", {"hook_id": hook["id"]}))
    assert deleted["value"] == {"id": hook["id"], "app_id": str(budget.id), "route": "add_expense"}
    assert post(live, hook, {"amount": 3}, rotated["secret"]).status_code == 404
    assert sorted(r["amount"] for r in records(budget, "expenses").values()) == [2, 20]


@pytest.mark.parametrize("mode", MODES)
def test_a_hook_on_a_query_or_unknown_route_is_refused_naming_the_mutations(live, alice, budget, mode):
    refused = call_tool_error(live, alice, mode, "create_hook", {"app_id": str(budget.id), "route": "total"})

    envelope = checked("create_hook", refused)
    assert envelope["error"]["kind"] == "invalid_input"
    assert envelope["error"]["errors"] == [
        {
            "path": "$.route",
            "message": "'total' is a query; webhooks run mutations. Its mutation routes: add_expense, refuse",
        }
    ]
    assert not Hook.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_viewer_and_a_stranger_cannot_see_or_touch_an_apps_hooks(live, alice, budget, mode):
    viewer, stranger = make_agent("vic"), make_agent("mallory")
    membership_set(actor=alice.user, app=budget, user=viewer.user, role="viewer")
    mine = call_tool_ok(
        live, alice, mode, "create_hook", {"app_id": str(budget.id), "route": "add_expense"}
    ).structured_content["value"]
    for name, arguments in (
        ("list_hooks", {"app_id": str(budget.id)}),
        ("create_hook", {"app_id": str(budget.id), "route": "add_expense"}),
        ("rotate_hook_secret", {"hook_id": mine["id"]}),
        ("delete_hook", {"hook_id": mine["id"]}),
    ):
        as_viewer = call_tool_error(live, viewer, mode, name, arguments).structured_content
        assert as_viewer["error"]["kind"] == "forbidden", (name, as_viewer)
        assert "manage the webhooks of app 'Budget'; you are a viewer" in as_viewer["error"]["message"]
        as_stranger = call_tool_error(live, stranger, mode, name, arguments).structured_content
        assert as_stranger["error"]["kind"] == "not_found", (name, as_stranger)
        assert mine["secret"] not in json.dumps(as_viewer) + json.dumps(as_stranger)
    assert Hook.objects.count() == 1 and Hook.objects.get().secret_hint == mine["secret_hint"].rstrip("…")
