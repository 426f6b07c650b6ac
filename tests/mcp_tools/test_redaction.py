"""Every secret shape through every error path of every tool (issue 12, finding 6; docs/mcp.md "Secrets in errors").

tests/mcp_tools/test_reliability.py covers fail(), unknown ops, get_app's app id and a param schema mismatch on
both protocol versions; this sweeps the rest: each tool's invalid arguments, definitions' problems, missing
records, CEL evaluation errors, output contract breaks, REST's answers to the same, and the log lines.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import OP_CHARS
from apps_registry.values import QUOTE_CHARS
from tests.factories import AdvisoryFactory
from tests.mcp_tools.conftest import MODERN, mcp_client, run, text_of
from tests.redaction_cases import LEAKY, SECRET_IDS, SECRET_PARAMS, SECRETS

# Routes whose errors quote what they were given, besides LEAKY's fail() and schema mismatch.
QUOTING = {
    **LEAKY,
    "name": "Quoting",
    "routes": {
        **LEAKY["routes"],
        "get_missing": {
            "kind": "query",
            "input": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "steps": [{"get": {"collection": "items", "id": "params.id"}, "as": "item"}, {"return": "item"}],
        },
        "cel_error": {
            "kind": "query",
            "input": {"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]},
            "steps": [{"return": "{'n': int(params.msg)}"}],
        },
        "bad_output": {
            "kind": "query",
            "input": {"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]},
            "output": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "steps": [{"return": "{'n': params.msg}"}],
        },
        "enum_param": {
            "kind": "query",
            "input": {
                "type": "object",
                "properties": {"msg": {"type": "string", "enum": ["a", "b"]}},
                "required": ["msg"],
            },
            "steps": [{"return": "{}"}],
        },
    },
}


@pytest.fixture
def quoting(alice):
    return app_definition_save(actor=alice.user, definition=QUOTING)


def broken_definition(text: str) -> dict[str, Any]:
    """A definition whose problems quote the secret: its name, a route named by it, a CEL syntax error."""
    return {
        "format": 1,
        "name": text,
        "collections": {"items": {}},
        "routes": {
            "r": {"kind": "mutation", "steps": [{"return": f"'{text}' +"}]},
            text: {"kind": "nonsense", "steps": []},
        },
    }


def error_calls(app_id: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    """(tool, arguments) pairs that each end in an error naming `text` somewhere."""
    return [
        # Each tool's invalid arguments: a malformed app id, wrong types, unknown routes, broken definitions.
        ("get_app", {"app_id": text}),
        ("query_app", {"app_id": text, "op": "x"}),
        ("mutate_app", {"app_id": text, "op": text}),
        ("send_feedback", {"app_id": text, "body": text}),
        ("delete_app", {"app_id": text, "confirm": text}),
        ("update_app", {"app_id": text, "expected_version": text}),
        ("update_app", {"app_id": app_id, "expected_version": 1, "definition": broken_definition(text)}),
        ("get_app_source", {"app_id": text, "version": text}),
        ("create_app", {"definition": broken_definition(text)}),
        ("create_app", {"definition": text}),
        ("check_app", {"definition": broken_definition(text)}),
        ("query_app", {"app_id": app_id, "op": text}),
        # Route errors: params against the schema, a missing record id, CEL errors, fail(), the output contract.
        ("mutate_app", {"app_id": app_id, "op": "wants_a_number", "params": {"n": text}}),
        ("query_app", {"app_id": app_id, "op": "enum_param", "params": {"msg": text}}),
        ("query_app", {"app_id": app_id, "op": "get_missing", "params": {"id": text}}),
        ("query_app", {"app_id": app_id, "op": "cel_error", "params": {"msg": text}}),
        ("query_app", {"app_id": app_id, "op": "bad_output", "params": {"msg": text}}),
        ("mutate_app", {"app_id": app_id, "op": "fail_with", "params": {"msg": text}}),
        ("query_app", {"app_id": app_id, "op": "fail_with", "params": {"msg": text}}),  # a kind mismatch
    ]


def shown(result) -> str:
    return text_of(result) + json.dumps(result.structured_content or {}, ensure_ascii=False)


@pytest.mark.parametrize(("text", "secret"), SECRET_PARAMS, ids=SECRET_IDS)
def test_no_tool_error_shows_a_secret(live, alice, quoting, text, secret):
    calls = error_calls(str(quoting.id), text)

    async def go():
        async with mcp_client(live, alice.token, MODERN) as client:
            return [await client.call_tool(tool, args) for tool, args in calls]

    results = run(go())

    leaks = [
        (tool, args, shown(result))
        for (tool, args), result in zip(calls, results, strict=True)
        if secret in shown(result)
    ]
    assert leaks == []
    for (tool, args), result in zip(calls, results, strict=True):
        assert result.is_error is (tool != "check_app"), (tool, args, text_of(result))  # check_app reports problems


def test_the_sweep_reaches_errors_that_quote_what_they_were_given(live, alice, quoting):
    """Without a secret in it, each path does quote the caller's text: so the sweep above tests redaction."""
    marker = "plainmarker"
    calls = error_calls(str(quoting.id), marker)

    async def go():
        async with mcp_client(live, alice.token, MODERN) as client:
            return [await client.call_tool(tool, args) for tool, args in calls]

    quoted = [(tool, args) for (tool, args), result in zip(calls, run(go()), strict=True) if marker in shown(result)]

    assert len(quoted) >= len(calls) - 4, [c for c in calls if c not in quoted]


# --- REST: the same route errors, and the definitions endpoints ---


@pytest.fixture
def api(alice):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    return client


@pytest.mark.parametrize(("text", "secret"), SECRET_PARAMS, ids=SECRET_IDS)
def test_no_rest_error_shows_a_secret(api, quoting, text, secret):
    run_url = f"/api/apps/{quoting.id}/run"
    responses = [
        api.post(f"{run_url}/get_missing/", {"kind": "query", "params": {"id": text}}, format="json"),
        api.post(f"{run_url}/cel_error/", {"kind": "query", "params": {"msg": text}}, format="json"),
        api.post(f"{run_url}/bad_output/", {"kind": "query", "params": {"msg": text}}, format="json"),
        api.post(f"{run_url}/enum_param/", {"kind": "query", "params": {"msg": text}}, format="json"),
        api.post(f"{run_url}/fail_with/", {"kind": "query", "params": {"msg": text}}, format="json"),
        api.post("/api/apps/definitions/", broken_definition(text), format="json"),
        api.put(f"/api/apps/{quoting.id}/definition/", broken_definition(text), format="json"),
        api.post(f"/api/apps/{quoting.id}/feedback/", {"body": {"x": text}}, format="json"),
        api.post(f"{run_url}/fail_with/", {"params": {"msg": text}}, format="json", HTTP_IDEMPOTENCY_KEY=text),
    ]

    for response in responses:
        assert 400 <= response.status_code < 500, (response.status_code, response.content)
        assert secret not in response.content.decode(), response.content.decode()


# --- log lines ---


def test_secrets_in_unexpected_errors_are_redacted_in_every_log_line(api, live, alice, quoting, monkeypatch, caplog):
    from apps_registry.api import runs
    from apps_registry.services import advisories
    from mcp_tools.tools import run_route

    def broken(**kwargs):  # every secret shape at once, in the message and so in the traceback
        raise RuntimeError("could not reach the database with " + " ; ".join(text for text, _secret in SECRET_PARAMS))

    app_id = str(quoting.id)
    with monkeypatch.context() as patched:  # an unexpected error in the tool (logged by the MCP translator)
        patched.setattr(run_route, "route_run", broken)
        failed = run(call_modern(live, alice, "mutate_app", {"app_id": app_id, "op": "fail_with"}))
    AdvisoryFactory(app=quoting, summary="A note the call reads with its result")
    with monkeypatch.context() as patched:  # advisories that fail to be read with a call (logged, result kept)
        patched.setattr(advisories, "advisories_open_for", broken)
        kept = run(
            call_modern(live, alice, "mutate_app", {"app_id": app_id, "op": "wants_a_number", "params": {"n": 1}})
        )
    with monkeypatch.context() as patched:  # an unexpected error behind REST (logged by the REST translator)
        patched.setattr(runs, "route_run", broken)
        rest = api.post(f"/api/apps/{app_id}/run/fail_with/", {"params": {"msg": "x"}}, format="json")

    assert failed.structured_content["error"]["kind"] == "internal_error"
    assert kept.structured_content["ok"] is True
    assert rest.status_code == 500
    logged = {r.name for r in caplog.records if r.levelno >= logging.ERROR}
    assert logged >= {"mcp_tools.results", "apps_registry.services.advisories", "apps_registry.api.errors"}
    assert [secret for _text, secret in SECRET_PARAMS if secret in caplog.text] == []
    assert "[REDACTED]" in caplog.text


async def call_modern(live, agent, tool: str, args: dict[str, Any]):
    async with mcp_client(live, agent.token, MODERN) as client:
        return await client.call_tool(tool, args)


# A secret cut in two by a message's clip is no longer recognised by the redactor: the part before the cut showed.
STRADDLING = [(name, text, secret) for name, text, secret in SECRETS if name != "password"]


def test_a_secret_cut_by_a_clipped_quote_shows_no_part_of_it(live, alice, quoting):
    calls = []
    for _name, text, secret in STRADDLING:
        start = text.index(secret)
        # Each clip (QUOTE_CHARS for arguments, OP_CHARS for op names) falls a few characters into the secret.
        padded = [(" " * (limit - start - cut)) + text for limit in (QUOTE_CHARS, OP_CHARS) for cut in (2, 6)]
        calls += [("get_app", {"app_id": value}, secret) for value in padded]
        calls += [("mutate_app", {"app_id": str(quoting.id), "op": value}, secret) for value in padded]

    async def go():
        async with mcp_client(live, alice.token, MODERN) as client:
            return [await client.call_tool(tool, args) for tool, args, _secret in calls]

    for (tool, _args, secret), result in zip(calls, run(go()), strict=True):
        assert result.is_error is True
        assert secret[:4] not in shown(result), (tool, shown(result))
