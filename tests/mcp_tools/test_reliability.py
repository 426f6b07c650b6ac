"""Reliability of the MCP tools (issue 12): what a caller is told always matches what was committed, what they
sent is never echoed whole, and malformed text is refused as their input."""

from __future__ import annotations

import json

import httpx2
import pytest

from apps_registry.models import Record
from apps_registry.services import advisories as advisories_service
from apps_registry.services.definitions import app_definition_save
from tests.mcp_tools.conftest import MODES, call_tool_error, call_tool_ok, run, text_of
from tests.mcp_tools.test_mutate_app import DEFINITION, assert_envelope, mutate
from tests.redaction_cases import LEAKY, SECRET_IDS, SECRET_PARAMS


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


@pytest.fixture
def advisories_broken(monkeypatch):
    def fail(app):
        raise RuntimeError("advisory query failed")

    monkeypatch.setattr(advisories_service, "advisories_open_for", fail)


@pytest.mark.parametrize("mode", MODES)
def test_a_committed_mutation_is_reported_as_a_success_when_its_advisories_fail(
    live, alice, budget, advisories_broken, mode
):
    result = call_tool_ok(
        live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 3, "category": "t"})
    )

    record = Record.objects.get(storage__app=budget)
    assert assert_envelope(result) == {"ok": True, "value": {"id": record.record_id}}
    assert "Try again later" not in str(result.content)


HUGE = "7" * 100_000


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("get_app", {"app_id": HUGE}),
        ("delete_app", {"app_id": HUGE}),
        ("send_feedback", {"app_id": "00000000-0000-0000-0000-000000000000", "body": HUGE}),
        ("mutate_app", {"app_id": HUGE, "op": HUGE}),
    ],
)
def test_oversized_arguments_are_not_echoed_whole(live, alice, mode, tool, args):
    result = call_tool_error(live, alice, mode, tool, args)

    text = text_of(result)
    assert "Invalid arguments for" in text
    assert len(text) < 2_000
    assert len(json.dumps(result.structured_content or {})) < 2_000


@pytest.mark.parametrize("mode", MODES)
def test_an_oversized_op_is_quoted_clipped_in_the_unknown_op_error(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "mutate_app", mutate(budget, "o" * 100_000))

    assert result.structured_content["error"]["kind"] == "unknown_op"
    assert len(text_of(result)) < 2_000


NUL = "ab\x00c"
SURROGATE = "ab\ud800c"


def unstorable_cases(budget, bad):
    return [
        ("mutate_app", mutate(budget, bad), "$.op"),
        ("mutate_app", mutate(budget, "add_expense", {"amount": 1, "category": bad}), "$.params.category"),
        ("send_feedback", {"app_id": str(budget.id), "body": bad}, "$.body"),
    ]


def raw_call_2026(live, agent, tool, args):
    """A tools/call of the 2026-07-28 protocol as raw JSON with \\u escapes (the SDK client cannot encode a lone
    surrogate; a raw client can)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": meta},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
        "Authorization": f"Bearer {agent.token}",
    }

    async def go():
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.post(live.mcp_url, content=json.dumps(body).encode(), headers=headers)

    response = run(go())
    assert response.status_code == 200, response.text
    text = response.text
    if text.startswith("event:") or "\ndata: " in text:
        text = next(line[len("data: ") :] for line in text.splitlines() if line.startswith("data: "))
    return json.loads(text)["result"]


def assert_unstorable_refused(error, path):
    assert error["kind"] == "invalid_input", error
    assert "must be valid Unicode text without NUL characters" in error["message"]
    assert [problem["path"] for problem in error["errors"]] == [path]


@pytest.mark.parametrize("mode", MODES)
def test_nul_in_op_params_and_feedback_is_invalid_input(live, alice, budget, mode):
    for tool, args, path in unstorable_cases(budget, NUL):
        result = call_tool_error(live, alice, mode, tool, args)

        assert_unstorable_refused(result.structured_content["error"], path)
    assert Record.objects.count() == 0


def test_lone_surrogates_in_op_params_and_feedback_are_invalid_input(live, alice, budget):
    for tool, args, path in unstorable_cases(budget, SURROGATE):
        result = raw_call_2026(live, alice, tool, args)

        assert result["isError"] is True
        assert_unstorable_refused(result["structuredContent"]["error"], path)
    assert Record.objects.count() == 0


# --- finding 6: secrets are redacted in every error, on every path ---


@pytest.fixture
def leaky(alice):
    return app_definition_save(actor=alice.user, definition=LEAKY)


def whole(result) -> str:
    return text_of(result) + json.dumps(result.structured_content or {})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("text", "secret"), SECRET_PARAMS, ids=SECRET_IDS)
def test_secrets_are_redacted_in_every_error_path(live, alice, leaky, mode, text, secret):
    failed = call_tool_error(live, alice, mode, "mutate_app", mutate(leaky, "fail_with", {"msg": text}))
    unknown = call_tool_error(live, alice, mode, "mutate_app", mutate(leaky, text))
    bad_id = call_tool_error(live, alice, mode, "get_app", {"app_id": text})
    bad_value = call_tool_error(live, alice, mode, "mutate_app", mutate(leaky, "wants_a_number", {"n": text}))

    error = failed.structured_content["error"]
    assert error["kind"] == "handler_error" and "[REDACTED]" in error["message"]
    assert "[REDACTED]" in error["details"]["note"]
    assert unknown.structured_content["error"]["kind"] == "unknown_op"
    assert bad_id.structured_content["error"]["kind"] == "invalid_input"
    assert bad_value.structured_content["error"]["kind"] == "invalid_input"
    for result in (failed, unknown, bad_id, bad_value):
        assert secret not in whole(result)
        assert "[REDACTED]" in whole(result)


def test_secrets_in_an_unexpected_error_are_redacted_in_the_mcp_log_line(live, alice, leaky, monkeypatch, caplog):
    from mcp_tools.tools import run_route

    def broken(**kwargs):
        raise RuntimeError("could not connect to postgres://app:hunter2pass@db.internal/x")

    monkeypatch.setattr(run_route, "route_run", broken)

    result = call_tool_error(live, alice, MODES[0].values[0], "mutate_app", mutate(leaky, "fail_with", {"msg": "x"}))

    assert result.structured_content["error"]["kind"] == "internal_error"
    assert "postgres://app:[REDACTED]@db.internal/x" in caplog.text
    assert "hunter2pass" not in caplog.text


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_unstorable_text_in_a_definition_is_invalid_input_for_every_authoring_tool(live, alice, budget, bad):
    from apps_registry.models import App

    broken = {**DEFINITION, "description": bad}
    calls = [
        ("create_app", {"definition": broken}),
        ("check_app", {"definition": broken}),
        ("update_app", {"app_id": str(budget.id), "expected_version": budget.version, "definition": broken}),
    ]

    for tool, args in calls:
        result = raw_call_2026(live, alice, tool, args)

        assert result["isError"] is True, (tool, result)
        error = result["structuredContent"]["error"]
        assert error["kind"] == "invalid_input", (tool, error)
        assert "must be valid Unicode text without NUL characters" in error["message"], (tool, error)
    assert App.objects.count() == 1
    assert App.objects.get().version == budget.version


# --- a mutation whose COMMIT was carried out but whose answer was lost (the connection dropped then) ---


@pytest.mark.parametrize("mode", MODES)
def test_a_mutation_whose_commit_answer_was_lost_is_not_told_to_try_again(
    live, alice, budget, commit_answer_lost, mode
):
    result = call_tool_error(
        live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 3, "category": "t"})
    )

    error = result.structured_content["error"]
    assert Record.objects.filter(storage__app=budget).count() == 1  # it did commit
    assert error["kind"] == "internal_error"
    assert error["message"] == (
        "The connection to the database was lost while this change was being committed, so whether it was saved "
        "is unknown. Read the app's data to see before calling again; a call with an idempotency key can be "
        "retried safely with the same key."
    )
    assert "Try again later" not in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_a_mutation_with_a_key_whose_commit_answer_was_lost_finds_its_commit_and_succeeds(
    live, alice, budget, commit_answer_lost, mode
):
    from tests.mcp_tools.test_idempotency import call_with_key

    result = call_with_key(live, alice, mode, mutate(budget, "add_expense", {"amount": 3, "category": "t"}), "lost-1")

    record = Record.objects.get(storage__app=budget)
    assert result.is_error is not True, text_of(result)
    assert assert_envelope(result) == {"ok": True, "value": {"id": record.record_id}}


@pytest.fixture
def connection_lost_mid_call(monkeypatch):
    """The mutation's first record write finds its connection gone (a restart or an outage cut it short)."""
    from django.db import OperationalError

    from apps_registry.routes.storage import SqlStore

    def lost(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(SqlStore, "insert", lost)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_whose_connection_was_lost_mid_call_answers_a_retryable_kind(
    live, alice, budget, connection_lost_mid_call, mode, caplog
):
    import logging

    with caplog.at_level(logging.WARNING, logger="mcp_tools.results"):
        result = call_tool_error(
            live, alice, mode, "mutate_app", mutate(budget, "add_expense", {"amount": 3, "category": "t"})
        )

    assert result.structured_content["error"] == {
        "kind": "unavailable",
        "message": "The connection to the database was lost before this call finished; try again in 5 seconds (a "
        "mutate_app call with an idempotency key can be retried with the same key).",
        "details": {"retry_after_seconds": 5},
    }
    assert Record.objects.filter(storage__app=budget).count() == 0
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_tools.results"] == [
        "MCP tool mutate_app answered unavailable: the database connection was lost "
        "(server closed the connection unexpectedly)"
    ]
    assert not any(r.exc_info for r in caplog.records if r.name == "mcp_tools.results")  # no traceback
