"""Rate limits on /mcp, against the live server: a spent token budget is HTTP 429 with Retry-After before any tool
runs; a spent app budget is the `rate_limited` tool result; refused tokens block their client address (and no
other) before the next token is looked up."""

from __future__ import annotations

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from apps_registry.models import ApiToken, Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
from mcp_tools.throttle import RATE_LIMITED_CODE
from tests.apps_registry.test_rate_limits import limit
from tests.mcp_tools.conftest import MODES, call_tool, call_tool_ok, make_agent, mcp_client, run, text_of
from tests.mcp_tools.test_endpoint import ACCEPT, META
from tests.mcp_tools.test_mutate_app import DEFINITION, MUTATE_OUTPUT, QUERY_OUTPUT, assert_envelope, mutate


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


def add_expense_body(budget, amount: float) -> dict:
    arguments = {"app_id": str(budget.id), "op": "add_expense", "params": {"amount": amount, "category": "tea"}}
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "mutate_app", "arguments": arguments, "_meta": META},
    }


def post(live, token: str, body: dict, local_address: str | None = None) -> httpx2.Response:
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "mutate_app",
    }

    async def go() -> httpx2.Response:
        transport = httpx2.AsyncHTTPTransport(local_address=local_address)
        async with httpx2.AsyncClient(timeout=10, transport=transport) as http:
            return await http.post(live.mcp_url, json=body, headers=headers)

    return run(go())


def test_a_spent_token_budget_is_429_with_retry_after_before_the_tool_runs(live, settings, alice, budget):
    limit(settings, "token", per_minute=1, burst=2)
    for amount in (1, 2):
        assert post(live, alice.token, add_expense_body(budget, amount)).status_code == 200

    refused = post(live, alice.token, add_expense_body(budget, 3))

    assert refused.status_code == 429
    retry_after = int(refused.headers["retry-after"])
    assert retry_after >= 1
    body = refused.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == RATE_LIMITED_CODE
    assert body["error"]["message"] == (
        "This token made too many requests (its limit: 1 per minute, bursts of 2). Nothing ran; try again in "
        f"{retry_after} seconds."
    )
    assert body["error"]["data"] == {
        "error": "rate_limited",
        "limit": "token",
        "per_minute": 1,
        "burst": 2,
        "setting": "CHARMING_RATE_TOKEN_PER_MINUTE",
        "retry_after_seconds": retry_after,
    }
    assert sorted(r.data["amount"] for r in Record.objects.filter(storage__app=budget)) == [1, 2]


def test_each_token_has_its_own_budget(live, settings, alice, budget):
    limit(settings, "token", per_minute=1, burst=1)
    assert post(live, alice.token, add_expense_body(budget, 1)).status_code == 200
    assert post(live, alice.token, add_expense_body(budget, 2)).status_code == 429

    second = token_create(user=alice.user, name="second").plaintext

    assert post(live, second, add_expense_body(budget, 3)).status_code == 200


def test_the_token_budget_is_shared_by_mcp_and_rest(live, settings, alice, budget):
    limit(settings, "token", per_minute=1, burst=2)
    assert post(live, alice.token, add_expense_body(budget, 1)).status_code == 200

    async def rest() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.get(f"{live.base_url}/api/apps/", headers={"Authorization": f"Bearer {alice.token}"})

    assert run(rest()).status_code == 200
    assert run(rest()).status_code == 429
    assert post(live, alice.token, add_expense_body(budget, 2)).status_code == 429


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_surfaces_the_429_as_an_error_naming_the_limit(live, settings, alice, budget, mode):
    limit(settings, "token", per_minute=1, burst=4)

    async def scenario() -> MCPError:
        async with mcp_client(live, alice.token, mode) as client:
            for amount in range(10):
                try:
                    await client.call_tool(
                        "mutate_app", mutate(budget, "add_expense", {"amount": amount, "category": "t"})
                    )
                except MCPError as error:
                    return error
        raise AssertionError("the token budget never ran out")

    refused = run(scenario())

    assert refused.error.code == RATE_LIMITED_CODE
    assert "This token made too many requests (its limit: 1 per minute, bursts of 4)." in refused.error.message
    assert refused.error.data["retry_after_seconds"] >= 1
    assert Record.objects.filter(storage__app=budget).count() < 4  # the SDK's own requests counted too


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool, op", [("mutate_app", "add_expense"), ("query_app", "count_expenses")])
def test_a_spent_app_budget_is_the_rate_limited_envelope_for_every_caller(
    live, settings, alice, budget, mode, tool, op
):
    limit(settings, "app", per_minute=1, burst=1)
    params = {"amount": 1, "category": "tea"} if tool == "mutate_app" else {}
    call_tool_ok(live, alice, mode, tool, mutate(budget, op, params))

    result = call_tool(live, alice, mode, tool, mutate(budget, op, params))

    assert result.is_error is True
    envelope = assert_envelope(result, MUTATE_OUTPUT if tool == "mutate_app" else QUERY_OUTPUT)
    error = envelope["error"]
    assert error["kind"] == "rate_limited"
    seconds = error["details"]["retry_after_seconds"]
    assert isinstance(seconds, int) and seconds >= 1
    assert error["details"]["limit"] == "app"
    assert error["message"] == (
        "This app had too many calls (its limit, across all its callers: 1 per minute, bursts of 1). Nothing ran; "
        f"try again in {seconds} seconds."
    )
    assert text_of(result).startswith("Error (rate_limited): This app had too many calls")
    assert Record.objects.filter(storage__app=budget).count() == (1 if tool == "mutate_app" else 0)


def test_an_app_budget_is_not_spent_by_someone_who_cannot_see_the_app(live, settings, alice, bob, budget):
    limit(settings, "app", per_minute=1, burst=1)
    for _ in range(3):
        result = call_tool(live, bob, "2026-07-28", "query_app", mutate(budget, "count_expenses", {}))
        assert result.structured_content["error"]["kind"] == "not_found"

    call_tool_ok(live, alice, "2026-07-28", "query_app", mutate(budget, "count_expenses", {}))


def test_refused_tokens_block_their_address_before_the_lookup_and_not_another(live, settings, alice, budget):
    limit(settings, "auth_failures", per_minute=1, burst=3)
    for amount in range(3):
        refused = post(live, "chm_not-a-real-token", add_expense_body(budget, amount), local_address="127.0.0.2")
        assert refused.status_code == 401
    fresh = make_agent("carol")  # a valid token never used: its lookup would stamp last_used_at

    blocked = post(live, fresh.token, add_expense_body(budget, 9), local_address="127.0.0.2")

    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) >= 1
    assert blocked.json()["error"]["data"]["limit"] == "auth_failures"
    assert blocked.json()["error"]["message"].startswith("Too many refused tokens from your address")
    assert ApiToken.objects.get(user=fresh.user).last_used_at is None
    # Another address is not throttled: its refused token is looked up and refused (401), a good one runs.
    assert post(live, "chm_not-a-real-token", add_expense_body(budget, 1), local_address="127.0.0.3").status_code == 401
    assert post(live, alice.token, add_expense_body(budget, 1), local_address="127.0.0.1").status_code == 200


def test_successful_authentications_and_requests_without_a_token_do_not_count(live, settings, alice, budget):
    limit(settings, "auth_failures", per_minute=1, burst=1)

    async def without_token() -> int:
        async with httpx2.AsyncClient(timeout=10) as http:
            return (await http.post(live.mcp_url, json=add_expense_body(budget, 1), headers=ACCEPT)).status_code

    for _ in range(3):
        assert run(without_token()) == 401
    for amount in range(3):
        assert post(live, alice.token, add_expense_body(budget, amount)).status_code == 200


def test_ending_a_session_is_never_refused(live, settings, alice):
    from tests.mcp_tools.test_endpoint import INIT_2025

    limit(settings, "token", per_minute=1, burst=2)
    auth = {**ACCEPT, "Authorization": f"Bearer {alice.token}"}

    async def scenario() -> tuple[int, int]:
        async with httpx2.AsyncClient(timeout=10) as http:
            opened = await http.post(live.mcp_url, json=INIT_2025, headers=auth)
            assert opened.status_code == 200, opened.text
            session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(live.mcp_url, json=initialized, headers=session)).status_code == 202
            listed = await http.post(
                live.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session
            )
            ended = await http.delete(live.mcp_url, headers=session)
            return listed.status_code, ended.status_code

    assert run(scenario()) == (429, 200)
