"""Author schemas are self-contained: no $ref can make the server read a file or fetch a URL."""

from __future__ import annotations

import http.server
import threading

import pytest

from apps_registry.exceptions import InvalidDefinition
from apps_registry.routes.schemas import SchemaValidator
from apps_registry.services.definitions import app_definition_save

pytestmark = pytest.mark.django_db


def definition_with_input(schema) -> dict:
    return {"name": "Probe", "routes": {"q": {"kind": "query", "input": schema, "steps": [{"return": "{}"}]}}}


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret.json"
    path.write_text('{"db": {"password": "hunter2-SECRET"}}')
    return path


@pytest.fixture
def listener():
    """A local HTTP server that records every path it is asked for."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def test_a_file_reference_is_refused_without_reading_the_file(user, secret_file):
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(
            actor=user, definition=definition_with_input({"$ref": f"file://{secret_file}#/db/password"})
        )
    problems = " ".join(e["message"] for e in exc.value.errors or [])
    assert "refers outside this schema; only '#/...' references are allowed" in problems
    assert "hunter2" not in str(exc.value.errors)


def test_a_url_reference_is_refused_and_never_fetched(user, listener):
    base, seen = listener
    nested = {"type": "object", "properties": {"a": {"$ref": f"{base}/internal.json"}}}
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition_with_input(nested))
    assert exc.value.errors and exc.value.errors[0]["path"].startswith("routes.q.input")
    assert seen == []


def test_an_id_that_would_rebase_references_is_refused(user):
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(
            actor=user, definition=definition_with_input({"$id": "http://elsewhere/", "type": "object"})
        )
    assert "$id is not allowed" in " ".join(e["message"] for e in exc.value.errors or [])


def test_local_references_still_work(user):
    schema = {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"type": "number"}}}
    app_definition_save(actor=user, definition=definition_with_input(schema))
    assert SchemaValidator(schema).errors({"n": "x"}) == [{"path": "$.n", "message": '"x" is not of type "number"'}]


def test_the_validator_itself_never_retrieves(listener, secret_file):
    """Defence in depth: even a schema that skipped the save-time check cannot fetch anything."""
    base, seen = listener
    for ref in (f"{base}/x.json", f"file://{secret_file}"):
        with pytest.raises(ValueError, match="external schema references are not allowed"):
            SchemaValidator({"$ref": ref})
    assert seen == []
