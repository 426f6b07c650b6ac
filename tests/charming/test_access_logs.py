"""No log line shows a secret a request put in its URL (issue 22): uvicorn's access log and Django's own lines both
go through the redactor (apps_registry/redaction.py), on a server started as docs/operations.md serves it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from uvicorn.logging import AccessFormatter

from apps_registry.redaction import REDACTED, RedactingFilter, redact, uvicorn_logs_redact
from tests.mcp_tools.conftest import _free_port

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "chm_0a1b2c3d_Qw3rTy7UiOp9AsDf2GhJk"
RANDOM = "Zx8Qp2Lm9Rt4Vb7Nc1Kd6Hs3Jf5Gw0Ya"
# Django's password-reset token: base-36 timestamp, a dash, 32 hex digits; valid for PASSWORD_RESET_TIMEOUT.
RESET_TOKEN = "cbx3kq-0123456789abcdef0123456789abcdef"
RESET_SECRET = RESET_TOKEN.split("-")[1]
# (path and query, the status it gets without a database or a credential, the part never to be logged)
REQUESTS = [
    (f"/api/apps/{TOKEN}/definition/", 401, TOKEN.split("_")[-1]),
    ("/api/apps/?token=tok-123-abc", 401, "tok-123-abc"),
    (f"/nothing/here/{RANDOM}/", 404, RANDOM),
    (f"/accounts/password/reset/abc/{RESET_TOKEN}/", 200, RESET_SECRET),
    (f"/mcp?access_token={RANDOM}", 401, RANDOM),
]


def access_record(path: str) -> logging.LogRecord:
    """A record as uvicorn's httptools and h11 protocols log each request."""
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", path, "1.1", 404),
        None,
    )


def test_a_reset_token_and_a_token_between_slashes_are_redacted_and_the_rest_of_the_path_stays():
    assert redact(f"/accounts/password/reset/abc/{RESET_TOKEN}/") == f"/accounts/password/reset/abc/cbx3kq-{REDACTED}/"
    assert redact("/api/apps/5b9f3f0e-2a4c-4c1e-9d6f-0f9a8b7c6d5e/run/add_expense/") == (
        "/api/apps/5b9f3f0e-2a4c-4c1e-9d6f-0f9a8b7c6d5e/run/add_expense/"
    )
    assert redact("add_expense_2024_v2_and_a_long_snake_case_name") == "add_expense_2024_v2_and_a_long_snake_case_name"


def test_an_access_record_is_redacted_and_still_formats_with_uvicorns_access_formatter():
    record = access_record(f"/api/apps/{TOKEN}/definition/?token=tok-123-abc")

    assert RedactingFilter().filter(record)
    line = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False).format(record)

    path = f"/api/apps/chm_0a1b2c3d_{REDACTED}/definition/?token={REDACTED}"
    assert line == f'127.0.0.1:5000 - "GET {path} HTTP/1.1" 404 Not Found'


def test_a_record_without_a_secret_is_left_as_it_was():
    record = access_record("/api/apps/")
    RedactingFilter().filter(record)
    assert record.args == ("127.0.0.1:5000", "GET", "/api/apps/", "1.1", 404)


def test_uvicorn_logs_redact_puts_the_filter_on_uvicorns_loggers_and_handlers_once():
    access = logging.getLogger("uvicorn.access")
    handler = logging.StreamHandler()
    access.addHandler(handler)
    try:
        uvicorn_logs_redact()
        uvicorn_logs_redact()
        for holder in (access, handler, logging.getLogger("uvicorn.error")):
            assert sum(isinstance(f, RedactingFilter) for f in holder.filters) == 1
    finally:
        access.removeHandler(handler)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """charming.asgi served by uvicorn as docs/operations.md runs it, logging as uvicorn configures it by default;
    yields a function that stops the server and returns everything it printed."""
    port = _free_port()
    database = tmp_path_factory.mktemp("access-logs") / "unused.sqlite3"  # the requests above need no table
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "DJANGO_SETTINGS"))}
    env.update(DATABASE_URL=f"sqlite:///{database}", LOG_LEVEL="INFO", CHARMING_PUBLIC_URL=f"http://127.0.0.1:{port}")
    command = [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--http", "charming.serving:NoDelayHttpToolsProtocol"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx2.get(f"{base_url}/.well-known/oauth-protected-resource", timeout=1)
            break
        except httpx2.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"the server did not start:\n{server.communicate()[0]}") from None
            time.sleep(0.2)

    def stopped() -> str:
        server.terminate()
        return server.communicate(timeout=20)[0]

    yield base_url, stopped
    if server.poll() is None:
        server.kill()
        server.wait(timeout=10)


def test_a_served_request_with_secrets_in_its_url_logs_none_of_them(served):
    base_url, stopped = served
    for path, status, _secret in REQUESTS:
        assert httpx2.get(base_url + path, timeout=10).status_code == status, path

    printed = stopped()

    for path, _status, secret in REQUESTS:
        assert secret not in printed, f"{secret} of {path} was logged:\n{printed}"
    # The access lines are there, redacted in place.
    assert f'"GET /api/apps/chm_0a1b2c3d_{REDACTED}/definition/ HTTP/1.1" 401' in printed
    assert f'"GET /api/apps/?token={REDACTED} HTTP/1.1" 401' in printed
    assert f'"GET /accounts/password/reset/abc/cbx3kq-{REDACTED}/ HTTP/1.1" 200' in printed
    assert f'"GET /mcp?access_token={REDACTED} HTTP/1.1" 401' in printed
    assert "Not Found: " in printed  # Django's own line for the 404, through the console handler's redactor
