"""2025-11-25 sessions under abuse (issue 22): one address cannot fill the process's sessions, a full process ends
its longest-idle session for a newcomer instead of refusing them, and a request id reused while a request of the
session is in flight is refused, never cross-answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx2
import pytest

from tests.factories import make_app
from tests.mcp_tools.conftest import Agent, LiveServer, live_server_running, make_agent, run
from tests.mcp_tools.test_capacity import ACCEPT, event_stream, initialize, session_close, session_open


def http_client(agent: Agent, address: str = "127.0.0.1") -> httpx2.AsyncClient:
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=0)
    transport = httpx2.AsyncHTTPTransport(local_address=address, limits=limits)
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent.token}"}, timeout=20, transport=transport)


def messages_of(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST's answer: a JSON body, or the data lines of an SSE stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[len("data: ") :]) for line in response.text.splitlines() if line.startswith("data: {")]


def tool_call(request_id: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


# --- per-address cap ---


def fresh_app():
    from django.core.asgi import get_asgi_application

    from mcp_tools.asgi import application_build

    return application_build(get_asgi_application())


def test_one_address_cannot_hold_more_sessions_than_its_cap_whatever_the_accounts(live, settings):
    settings.CHARMING_MCP_SESSIONS_PER_ADDRESS = 3
    agents = [make_agent(name) for name in ("ann", "ben", "cid")]
    app = fresh_app()  # a server of its own: no other test's sessions from this address

    async def go(live: LiveServer) -> tuple[list[int], httpx2.Response, int, int]:
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(http_client(agent)) for agent in agents]
            opened = [await session_open(clients[0], live), await session_open(clients[0], live)]
            opened.append(await session_open(clients[1], live))
            refused = await clients[2].post(live.mcp_url, json=initialize(), headers=ACCEPT)
            statuses = [refused.status_code]
            elsewhere = await stack.enter_async_context(http_client(agents[2], address="127.0.0.2"))
            other_address = await elsewhere.post(live.mcp_url, json=initialize(), headers=ACCEPT)
            # A session that ends gives its address's place back.
            await session_close(clients[0], live, opened[0])
            reopened = await clients[2].post(live.mcp_url, json=initialize(), headers=ACCEPT)
            for client, session in ((clients[0], opened[1]), (clients[1], opened[2])):
                await session_close(client, live, session)
            for client, response in ((elsewhere, other_address), (clients[2], reopened)):
                if "mcp-session-id" in response.headers:
                    await session_close(client, live, {**ACCEPT, "Mcp-Session-Id": response.headers["mcp-session-id"]})
            return statuses, refused, other_address.status_code, reopened.status_code

    with live_server_running(app) as server:
        statuses, refused, other_address, reopened = run(go(server))

    assert statuses == [429]
    error = refused.json()["error"]
    assert error["code"] == -32600
    assert error["message"].startswith(
        "Too many open MCP sessions from your network address: 3, the most one address may keep open "
        "(all accounts together)."
    )
    assert other_address == 200
    assert reopened == 200


# --- eviction at the ceiling ---


def test_a_full_process_ends_its_longest_idle_session_for_a_newcomer(live, settings):
    settings.CHARMING_MCP_SESSIONS_MAX = 3
    flooder, newcomer = make_agent("flooder"), make_agent("newcomer")
    app = fresh_app()
    tools_list = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}

    async def go(server: LiveServer) -> tuple[int, list[int], int]:
        async with http_client(flooder) as flood, http_client(newcomer) as new:
            sessions = [await session_open(flood, server) for _ in range(3)]
            await asyncio.sleep(0.05)
            # The first is used again: the second is now the one idle longest.
            assert (await flood.post(server.mcp_url, json=tools_list, headers=sessions[0])).status_code == 200
            admitted = await new.post(server.mcp_url, json=initialize(), headers=ACCEPT)
            after = [(await flood.post(server.mcp_url, json=tools_list, headers=s)).status_code for s in sessions]
            await session_close(new, server, {**ACCEPT, "Mcp-Session-Id": admitted.headers["mcp-session-id"]})
            for session in (sessions[0], sessions[2]):
                await session_close(flood, server, session)
            return admitted.status_code, after, len(app.session_manager._server_instances)

    with live_server_running(app) as server:
        admitted, after, left = run(go(server))

    assert admitted == 200
    assert after == [200, 404, 200]  # the evicted session's id is gone, as after an idle expiry
    assert left == 0


def test_a_full_process_whose_sessions_are_all_busy_answers_503_with_retry_after(live, settings):
    settings.CHARMING_MCP_SESSIONS_MAX = 2
    flooder, newcomer = make_agent("flooder"), make_agent("newcomer")
    app = fresh_app()

    async def go(server: LiveServer) -> httpx2.Response:
        async with http_client(flooder) as flood, http_client(newcomer) as new, contextlib.AsyncExitStack() as held:
            sessions = [await session_open(flood, server) for _ in range(2)]
            for session in sessions:  # an open GET stream keeps a session busy: it is never evicted
                await held.enter_async_context(event_stream(flood, server, session))
            refused = await new.post(server.mcp_url, json=initialize(), headers=ACCEPT)
            await held.aclose()
            for session in sessions:
                await session_close(flood, server, session)
            return refused

    with live_server_running(app) as server:
        refused = run(go(server))

    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "5"
    assert refused.json()["error"]["message"] == (
        "Too many open MCP sessions: this server holds 2, all of them busy. Try again shortly."
    )


# --- request ids in flight ---


@pytest.mark.parametrize("reused", [2, "2"], ids=["same-id", "same-id-as-string"])
def test_a_request_reusing_the_id_of_one_in_flight_is_refused_and_the_first_gets_its_own_answer(live, alice, reused):
    app = make_app(owner=alice.user, name="Keep")

    async def go() -> tuple[httpx2.Response, httpx2.Response, list[dict[str, Any]], httpx2.Response]:
        async with http_client(alice) as http:
            session = await session_open(http, live, elicitation=True)
            # A round trip first: the server may still be reading notifications/initialized (the client's
            # capabilities) when the next request arrives.
            await http.post(live.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=session)
            call = tool_call(2, "delete_app", {"app_id": str(app.id)})
            async with http.stream("POST", live.mcp_url, json=call, headers=session) as first:
                lines = first.aiter_lines()
                async for line in lines:  # the delete's prompt reached the client: the call is in flight
                    if line.startswith("data: {"):
                        prompt = json.loads(line[len("data: ") :])
                        if prompt.get("method") == "elicitation/create":
                            break
                duplicate = await http.post(live.mcp_url, json=tool_call(reused, "list_apps", {}), headers=session)
                other = await http.post(live.mcp_url, json=tool_call(3, "list_apps", {}), headers=session)
                answer = {"jsonrpc": "2.0", "id": prompt["id"], "result": {"action": "decline"}}
                assert (await http.post(live.mcp_url, json=answer, headers=session)).status_code == 202
                answered = [json.loads(line[len("data: ") :]) async for line in lines if line.startswith("data: {")]
            again = await http.post(live.mcp_url, json=tool_call(reused, "list_apps", {}), headers=session)
            await session_close(http, live, session)
            return duplicate, other, answered, again

    duplicate, other, answered, again = run(go())

    assert duplicate.status_code == 400
    assert duplicate.json() == {
        "jsonrpc": "2.0",
        "id": reused,
        "error": {
            "code": -32600,
            "message": f"Request id {json.dumps(reused)} is already used by a request of this session that has not "
            "been answered yet; JSON-RPC ids must be unique among a session's requests in flight. Nothing ran: "
            "send this request again with an id of its own.",
        },
    }
    assert [m["id"] for m in messages_of(other)] == [3]
    (first_answer,) = [m for m in answered if "result" in m or "error" in m]
    assert first_answer["id"] == 2
    # delete_app's own answer (the user declined), not list_apps'
    assert first_answer["result"]["structuredContent"] == {
        "ok": True,
        "id": str(app.id),
        "deleted": False,
        "cancelled": True,
    }
    assert [m["id"] for m in messages_of(again)] == [reused]  # answered once the first was: the id is free again


def test_ten_pairs_of_concurrent_calls_sharing_an_id_are_each_answered_right_or_refused(live, alice):
    app = make_app(owner=alice.user, name="Pairs")

    async def go() -> list[tuple[str, httpx2.Response]]:
        async with http_client(alice) as http:
            session = await session_open(http, live)
            sent: list[tuple[str, Any]] = []
            for pair in range(10):
                request_id = 100 + pair
                sent.append(
                    ("list_apps", http.post(live.mcp_url, json=tool_call(request_id, "list_apps", {}), headers=session))
                )
                sent.append(
                    (
                        "get_app",
                        http.post(
                            live.mcp_url,
                            json=tool_call(request_id, "get_app", {"app_id": str(app.id)}),
                            headers=session,
                        ),
                    )
                )
            responses = await asyncio.gather(*(call for _name, call in sent))
            await session_close(http, live, session)
            return [(name, response) for (name, _call), response in zip(sent, responses, strict=True)]

    answers = run(go())

    refused = 0
    for index, (name, response) in enumerate(answers):
        request_id = 100 + index // 2
        (message,) = [m for m in messages_of(response) if "result" in m or "error" in m]
        assert message["id"] == request_id
        if "error" in message:
            assert response.status_code == 400 and message["error"]["code"] == -32600
            refused += 1
            continue
        content = message["result"]["structuredContent"]
        # Its own tool's answer: list_apps lists apps, get_app describes the one app.
        assert isinstance(content["value"], list) == (name == "list_apps"), (name, content)
    assert refused <= 10  # at most one of each pair
