"""DOT's hardened Client ID Metadata Document fetcher (under Charming's policy) against a real https server.

The server listens on 127.0.0.1 with a certificate made here; the tests let the fetcher trust that
certificate and reach loopback (which it refuses in production, see test_oauth_registration.py).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from oauth2_provider import cimd

from apps_registry.oauth.cimd import PolicyMetadataFetcher

ROUTES: dict[str, tuple[int, dict[str, str], bytes, float]] = {}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        status, headers, body, delay = ROUTES.get(self.path, (404, {}, b"", 0.0))
        time.sleep(delay)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def https_server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    cert_path, key_path = _certificate(tmp_path_factory.mktemp("tls"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://localhost:{server.server_address[1]}", cert_path
    server.shutdown()


@pytest.fixture
def base(https_server, monkeypatch, settings) -> str:
    url, cert_path = https_server
    real_context = ssl.create_default_context
    monkeypatch.setattr(cimd.ssl, "create_default_context", lambda *a, **k: real_context(cafile=str(cert_path)))
    monkeypatch.setattr(cimd, "_ip_is_public", lambda ip: ipaddress.ip_address(ip).is_loopback)
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 1}
    ROUTES.clear()
    return url


def _serve(path: str, document: object, *, status: int = 200, headers: dict[str, str] | None = None, delay=0.0):
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    ROUTES[path] = (status, {"Content-Type": "application/json", **(headers or {})}, body, delay)


def _document(client_id: str, **overrides: object) -> dict[str, object]:
    return {
        "client_id": client_id,
        "client_name": "Hosted agent",
        "redirect_uris": ["https://agent.example/callback"],
        "token_endpoint_auth_method": "none",
        **overrides,
    }


def test_a_document_is_fetched_and_its_cache_lifetime_read(base):
    client_id = f"{base}/client.json"
    _serve("/client.json", _document(client_id), headers={"Cache-Control": "max-age=600"})

    metadata, max_age = PolicyMetadataFetcher().fetch(client_id)

    assert metadata["client_name"] == "Hosted agent"
    assert max_age == 600


def test_a_redirect_is_not_followed(base):
    _serve("/moved.json", b"", status=302, headers={"Location": f"{base}/client.json"})

    with pytest.raises(cimd.CIMDError, match="returned HTTP 302"):
        PolicyMetadataFetcher().fetch(f"{base}/moved.json")


def test_an_oversized_document_is_refused(base, settings):
    client_id = f"{base}/big.json"
    _serve("/big.json", _document(client_id, client_name="x" * 20_000))

    with pytest.raises(cimd.CIMDError, match="exceeds the maximum allowed size"):
        PolicyMetadataFetcher().fetch(client_id)


def test_a_slow_server_is_given_up_on(base):
    client_id = f"{base}/slow.json"
    _serve("/slow.json", _document(client_id), delay=2.5)

    started = time.monotonic()
    with pytest.raises(cimd.CIMDError, match="could not fetch"):
        PolicyMetadataFetcher().fetch(client_id)
    assert time.monotonic() - started < 2.4


def test_a_document_with_a_non_loopback_http_redirect_uri_is_refused(base):
    client_id = f"{base}/client.json"
    _serve("/client.json", _document(client_id, redirect_uris=["http://agent.example/callback"]))

    with pytest.raises(cimd.CIMDError, match="invalid_redirect_uri: redirect URI 'http://agent.example/callback'"):
        PolicyMetadataFetcher().fetch(client_id)


def test_a_certificate_the_fetcher_does_not_trust_is_refused(https_server, monkeypatch):
    url, _ = https_server
    monkeypatch.setattr(cimd, "_ip_is_public", lambda ip: ipaddress.ip_address(ip).is_loopback)

    with pytest.raises(cimd.CIMDError, match="could not fetch"):
        PolicyMetadataFetcher().fetch(f"{url}/client.json")
