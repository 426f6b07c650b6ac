"""A database outage is answered as one (issue 12, finding 5): 503 with Retry-After and a JSON error saying to
try again shortly, over MCP (a JSON-RPC error body) and REST alike; no plain-text 500, no traceback.

The server runs in a process of its own whose DATABASE_URL names a port nothing listens on: every connection
attempt fails at once, as it does while PostgreSQL is down or restarting. It runs with the default settings, so
the time an outage takes to answer is the default's (DATABASE_POOL_TIMEOUT: with the pool, no connection ever comes).
The pages, the admin and OAuth's endpoints are tested against the same server in
tests/apps_registry/test_pages_outage.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.mcp_tools.conftest import _free_port

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "chm_0a1b2c3d_" + "x" * 40
MESSAGE = "The database is unavailable; try again shortly."


@pytest.fixture(scope="module", params=["pool", "no-pool"])
def server_without_database(request) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    closed_port = _free_port()
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://charming:secret-password@127.0.0.1:{closed_port}/charming",
        "DATABASE_POOL": "true" if request.param == "pool" else "false",
        "LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx2.get(f"{base_url}/.well-known/oauth-protected-resource", timeout=1)
            break
        except httpx2.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"the server did not start:\n{server.communicate()[0]}") from None
            time.sleep(0.2)
    yield base_url, server
    server.terminate()
    server.wait(timeout=10)


def assert_unavailable(response: httpx2.Response) -> dict:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"].startswith("application/json")
    assert "Traceback" not in response.text and "secret-password" not in response.text
    return response.json()


def test_mcp_answers_a_json_rpc_error_with_retry_after(server_without_database):
    base_url, _ = server_without_database
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}},
    }

    response = httpx2.post(f"{base_url}/mcp", json=initialize, headers=headers, timeout=10)

    body = assert_unavailable(response)
    assert body == {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": MESSAGE}}


def test_rest_answers_the_same_error_in_its_envelope(server_without_database):
    base_url, _ = server_without_database

    response = httpx2.get(f"{base_url}/api/apps/", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)

    body = assert_unavailable(response)
    assert body == {"ok": False, "error": {"kind": "unavailable", "message": MESSAGE}}
