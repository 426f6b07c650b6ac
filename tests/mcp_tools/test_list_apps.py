from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from apps_registry import selectors
from apps_registry.access import membership_set
from mcp_tools.registry import TOOLS
from tests.factories import make_app
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, text_of


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


# --- paging -------------------------------------------------------------------------------------

LIST_OUTPUT = Draft202012Validator(next(t for t in TOOLS if t.name == "list_apps").contract["outputSchema"])


def list_page(live, agent, mode, cursor=None):
    result = call_tool_ok(live, agent, mode, "list_apps", {} if cursor is None else {"cursor": cursor})
    assert list(LIST_OUTPUT.iter_errors(result.structured_content)) == []
    return result


def every_app(live, agent, mode, between=None) -> list[str]:
    names: list[str] = []
    cursor = None
    for n in range(50):
        got = list_page(live, agent, mode, cursor).structured_content
        names += [app["name"] for app in got["value"]]
        cursor = got.get("next_cursor")
        if cursor is None:
            return names
        if between is not None:
            between(n)
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("mode", MODES)
def test_list_apps_pages_by_name_with_a_cursor_and_apps_added_meanwhile_never_repeat(live, alice, mode, monkeypatch):
    monkeypatch.setattr(selectors, "APP_PAGE_SIZE", 2)
    for name in ("b", "d", "f", "h", "j"):
        make_app(owner=alice.user, name=name)
    first = list_page(live, alice, mode)
    assert [a["name"] for a in first.structured_content["value"]] == ["b", "d"]
    assert "truncated" not in first.structured_content
    assert "call list_apps with cursor" in text_of(first)

    def add(n: int) -> None:
        make_app(owner=alice.user, name=f"a{n}")  # before the position: not in later pages
        make_app(owner=alice.user, name=f"z{n}")  # after it: in a later page

    names = every_app(live, alice, mode, between=add)
    assert [n for n in names if n in "bdfhj"] == ["b", "d", "f", "h", "j"]
    assert len(names) == len(set(names))
    assert "z0" in names and "a0" not in names


@pytest.mark.parametrize("mode", MODES)
def test_list_apps_over_the_result_budget_is_cut_at_an_app_with_truncated_and_a_cursor(live, alice, mode, settings):
    for n in range(6):
        make_app(owner=alice.user, name=f"app{n}", description="d" * 300)
    settings.CHARMING_TOOL_RESULT_BYTES = 1000
    first = list_page(live, alice, mode).structured_content
    assert first["truncated"] is True and 1 <= len(first["value"]) < 6 and first["next_cursor"]
    assert len(json.dumps(first["value"], separators=(",", ":"))) <= 1000
    assert every_app(live, alice, mode) == [f"app{n}" for n in range(6)]


@pytest.mark.parametrize("mode", MODES)
def test_list_apps_refuses_an_altered_cursor_or_another_callers(live, alice, bob, mode, monkeypatch):
    monkeypatch.setattr(selectors, "APP_PAGE_SIZE", 1)
    for name in ("x", "y"):
        make_app(owner=alice.user, name=name)
        make_app(owner=bob.user, name=name)
    cursor = list_page(live, alice, mode).structured_content["next_cursor"]
    bobs = list_page(live, bob, mode).structured_content["next_cursor"]
    for wrong in (cursor[:-2] + "xx", bobs):
        result = call_tool_error(live, alice, mode, "list_apps", {"cursor": wrong})
        assert list(LIST_OUTPUT.iter_errors(result.structured_content)) == []
        error = result.structured_content["error"]
        assert error["kind"] == "invalid_input"
        assert error["message"].startswith("The cursor given to list_apps is not valid for this query")
        assert error["message"].endswith("Start again without a cursor to get the first page.")
        assert error["errors"][0]["path"] == "$.cursor"
