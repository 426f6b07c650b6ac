"""Property test: whatever an agent sends, every tool answers within its contract.

Arguments come from each tool's contract inputSchema (tests/json_schema_strategies.py), route params from the
example budget app's input schemas, plus deliberately wrong values (wrong types, huge strings, NUL
bytes, lone surrogates, deep nesting). Each call must answer a tool result, never an internal error,
with no traceback or internal names in its text, and its structuredContent valid against the tool's
outputSchema. Many examples run in-process through the server's own tools/call dispatch; a few go
through the live server with the SDK client.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
from asgiref.sync import async_to_sync
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from apps_registry.services.definitions import app_definition_save
from mcp_tools import server
from mcp_tools.auth import Caller, current_caller
from mcp_tools.registry import TOOLS, tool_named
from tests.factories import UserFactory, make_app
from tests.json_schema_strategies import from_schema
from tests.mcp_tools.conftest import MODERN, call_tool, make_agent, text_of

BUDGET = json.loads((Path(__file__).resolve().parents[2] / "examples" / "budget.json").read_text())
OUTPUT_VALIDATORS = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS}
# What a reply must never show: a traceback, file paths, module or driver names, the internal error.
LEAKS = re.compile(
    r"Traceback|File \"|\.py\b|apps_registry|mcp_tools|django|psycopg|sqlite|jsonschema|celpy|"
    r"Exception|Internal error|internal_error",
    re.IGNORECASE,
)
PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"d": value}
    return value


# Values no schema asks for: each a way an agent (or an attacker) gets it wrong.
NASTY_FLAT = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "x" * 100_000,
            "nul\x00byte",
            "\x00",
            "lone \ud800 surrogate",
            "\udfff",
            "'; DROP TABLE records; --",
            "{{7*7}} ${jndi:ldap://x}",
            "00000000-0000-0000-0000-000000000000",
        ]
    ),
    st.lists(st.integers(), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
# Deeper than ~1000 levels the server's JSON parser refuses the request (-32700) before any tool runs, and
# the SDK client refuses to send more than a few hundred: in-process goes to 900, the live server to 200.
NASTY = NASTY_FLAT | st.sampled_from([20, 200, 900]).map(_nested)
NASTY_LIVE = NASTY_FLAT | st.sampled_from([20, 200]).map(_nested)


def _with_app_id(args: dict[str, Any], app_ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    if "app_id" not in args:
        return st.just(args)
    return st.sampled_from([*app_ids, args["app_id"]]).map(lambda app_id: {**args, "app_id": app_id})


def _wrong_args(
    schema: dict[str, Any], app_ids: list[str], nasty: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    names = [*schema.get("properties", {}), "extra", "_meta"]
    broken = st.dictionaries(st.sampled_from(names), nasty, max_size=len(names))
    # Most wrong calls still name a real app, so that the checks after the app lookup are reached too.
    return broken.flatmap(lambda args: st.sampled_from(app_ids).map(lambda app_id: {"app_id": app_id, **args}))


def _route_call(kind: str, app_id: str, nasty: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    routes = {name: route for name, route in BUDGET["routes"].items() if route["kind"] == kind}

    def for_route(name: str) -> st.SearchStrategy[dict[str, Any]]:
        schema = routes[name]["input"]
        fields = [*schema.get("properties", {}), "extra"]
        params = st.one_of(
            from_schema(schema),
            from_schema(schema),  # valid params twice as often as broken ones
            st.dictionaries(st.sampled_from(fields), nasty, max_size=len(fields)),
            nasty,
        )
        return params.map(lambda p: {"app_id": app_id, "op": name, "params": p})

    return st.sampled_from(sorted(routes)).flatmap(for_route)


def arguments_for(
    tool: str, apps: dict[str, str], nasty: st.SearchStrategy[Any] = NASTY
) -> st.SearchStrategy[dict[str, Any]]:
    schema = tool_named(tool).contract["inputSchema"]  # type: ignore[union-attr]
    # delete_app may really delete: it never gets the budget app, which the other tools keep using.
    app_ids = [apps["spare"], apps["bobs"]] if tool == "delete_app" else [apps["budget"], apps["bobs"]]
    strategies = [
        from_schema(schema).flatmap(lambda args: _with_app_id(args, app_ids)),
        _wrong_args(schema, app_ids, nasty),
    ]
    if tool in ("query_app", "mutate_app"):
        kind = "query" if tool == "query_app" else "mutation"
        strategies += [_route_call(kind, apps["budget"], nasty)] * 2
    return st.one_of(*strategies)


def assert_within_contract(tool: str, result: Any) -> None:
    assert isinstance(result, types.CallToolResult), result
    text = text_of(result)
    assert not LEAKS.search(text), text[:2000]
    structured = result.structured_content
    # --hypothesis-show-statistics shows how often each outcome was reached.
    event("ok" if result.is_error is not True else (structured or {}).get("error", {}).get("kind", "error"))
    if tool_named(tool).answers_envelope:  # type: ignore[union-attr]
        assert structured is not None, text[:2000]
        assert structured["ok"] is (result.is_error is not True), structured
    if structured is not None:
        errors = [e.message for e in OUTPUT_VALIDATORS[tool].iter_errors(structured)]
        assert errors == [], (errors, json.dumps(structured)[:2000])
        assert not LEAKS.search(json.dumps(structured)), json.dumps(structured)[:2000]


@pytest.fixture
def apps(db) -> dict[str, str]:
    alice = UserFactory(username="alice")
    budget = app_definition_save(actor=alice, definition=BUDGET)
    spare = make_app(owner=alice, name="Spare")
    bobs = make_app(owner=UserFactory(username="bob"), name="Bob's")
    return {"alice": str(alice.pk), "budget": str(budget.id), "spare": str(spare.id), "bobs": str(bobs.id)}


def call_in_process(user: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """tools/call as the server dispatches it, on this thread (the test's transaction), for a 2026-07-28
    client that cannot prompt."""
    ctx = SimpleNamespace(
        protocol_version=MODERN, session=SimpleNamespace(client_capabilities=None), request_id=str(uuid.uuid4())
    )
    params = types.CallToolRequestParams(name=tool, arguments=arguments)
    token = current_caller.set(Caller(user=user, token_id=None))
    try:
        return async_to_sync(server.call_tool)(ctx, params)  # type: ignore[arg-type]
    finally:
        current_caller.reset(token)


@pytest.mark.parametrize("tool", [tool.name for tool in TOOLS])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_every_tool_answers_any_arguments_within_its_contract(apps, django_user_model, tool, data):
    user = django_user_model.objects.get(pk=apps["alice"])
    arguments = data.draw(arguments_for(tool, apps), label="arguments")
    assert_within_contract(tool, call_in_process(user, tool, arguments))


@pytest.fixture
def live_budget(live) -> tuple[Any, str]:
    agent = make_agent("carol")
    return agent, str(app_definition_save(actor=agent.user, definition=BUDGET).id)


@pytest.mark.parametrize("tool", ["get_app", "query_app", "mutate_app", "send_feedback"])
@settings(PROPERTY_SETTINGS, max_examples=4)
@given(data=st.data())
def test_the_live_server_answers_generated_arguments_within_the_contract(live, live_budget, tool, data):
    """The same property over HTTP with the SDK client (any 5xx or protocol error raises in the client)."""
    agent, budget = live_budget
    apps = {"budget": budget, "bobs": str(uuid.UUID(int=0)), "spare": budget}
    arguments = data.draw(arguments_for(tool, apps, NASTY_LIVE), label="arguments")
    assert_within_contract(tool, call_tool(live, agent, MODERN, tool, arguments))


@pytest.mark.parametrize("tool", ["query_app", "mutate_app"])
@PROPERTY_SETTINGS
@given(surrogate=st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]))
def test_a_lone_surrogate_in_op_is_invalid_input_naming_the_op(apps, django_user_model, tool, surrogate):
    user = django_user_model.objects.get(pk=apps["alice"])
    result = call_in_process(user, tool, {"app_id": apps["budget"], "op": "summary" + surrogate, "params": {}})
    assert_within_contract(tool, result)
    error = result.structured_content["error"]
    assert error["kind"] == "invalid_input"
    assert error["message"].startswith("The route name (op) must be valid Unicode text without NUL characters: $.op")
