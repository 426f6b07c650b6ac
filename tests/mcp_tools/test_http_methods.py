"""/mcp is served by the MCP SDK, not Django's URLconf: a method it does not take is 405 with Allow there too."""

from __future__ import annotations

import httpx2
import pytest


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS", "TRACE", "PROPFIND"])
def test_a_method_mcp_does_not_take_is_405_with_allow_and_a_json_rpc_error(live, alice, method):
    headers = {"Authorization": f"Bearer {alice.token}", "Accept": "application/json, text/event-stream"}

    response = httpx2.request(method, live.mcp_url, headers=headers, timeout=10)

    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST, DELETE"
    assert response.json()["error"]["message"] == "Method Not Allowed"
