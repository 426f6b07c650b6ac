"""Drive the OAuth flow as a client would: register, authorize (as a signed-in person), exchange, refresh.

The Django test client plays both the person's browser and the client, so each protocol step can be
tampered with on its own. The live end-to-end flow with the SDK and Chromium is in
tests/mcp_tools/test_oauth_flow.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from django.conf import settings
from django.test import Client

REDIRECT_URI = "http://127.0.0.1:33418/callback"


def mcp_resource() -> str:
    return f"{settings.CHARMING_PUBLIC_URL}/mcp"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def register(client: Client, **overrides: Any) -> Any:
    metadata = {
        "client_name": "Test host",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **overrides,
    }
    metadata = {key: value for key, value in metadata.items() if value is not None}
    return client.post("/oauth/register/", data=json.dumps(metadata), content_type="application/json")


def register_ok(client: Client, **overrides: Any) -> dict[str, Any]:
    response = register(client, **overrides)
    assert response.status_code == 201, response.content
    return response.json()


@dataclass
class Authorization:
    code: str
    verifier: str
    state: str
    iss: str | None
    redirect: str


def authorize_params(client_id: str, challenge: str, state: str, **overrides: Any) -> dict[str, str]:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": "apps:read apps:write",
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": mcp_resource(),
        **overrides,
    }
    return {key: value for key, value in params.items() if value is not None}


def consent_page(browser: Client, client_id: str, **overrides: Any) -> Any:
    verifier, challenge = pkce_pair()
    params = authorize_params(client_id, challenge, "st-1", **overrides)
    return browser.get("/oauth/authorize/?" + urlencode(params))


def authorize(browser: Client, client_id: str, *, allow: bool = True, **overrides: Any) -> Authorization:
    """GET the consent page, then answer it as the person would; returns what reached the redirect URI."""
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(8)
    params = authorize_params(client_id, challenge, state, **overrides)
    page = browser.get("/oauth/authorize/?" + urlencode(params))
    assert page.status_code == 200, page.content
    form = page.context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None}
    if allow:
        data["allow"] = "on"
    response = browser.post("/oauth/authorize/?" + urlencode(params), data)
    assert response.status_code == 302, response.content
    location = response["Location"]
    query = parse_qs(urlsplit(location).query)
    return Authorization(
        code=query.get("code", [""])[0],
        verifier=verifier,
        state=query.get("state", [""])[0],
        iss=query.get("iss", [None])[0],
        redirect=location,
    )


def basic_auth(client_id: str, secret: str) -> dict[str, str]:
    """client_secret_basic (RFC 6749 section 2.3.1): the form-encoded id and secret as HTTP Basic credentials."""
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
    return {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(pair).decode()}


def exchange(
    client: Client,
    client_id: str,
    authorization: Authorization,
    headers: dict[str, str] | None = None,
    **overrides: Any,
) -> Any:
    data = {
        "grant_type": "authorization_code",
        "code": authorization.code,
        "redirect_uri": REDIRECT_URI,
        "client_id": client_id,
        "code_verifier": authorization.verifier,
        "resource": mcp_resource(),
        **overrides,
    }
    return client.post(
        "/oauth/token/", {key: value for key, value in data.items() if value is not None}, **(headers or {})
    )


def refresh(client: Client, client_id: str, refresh_token: str, **overrides: Any) -> Any:
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **overrides}
    return client.post("/oauth/token/", {key: value for key, value in data.items() if value is not None})


def tokens_for(browser: Client, client_id: str, **overrides: Any) -> dict[str, Any]:
    """A full, untampered flow: the token response."""
    resource = overrides.pop("resource", mcp_resource())
    authorization = authorize(browser, client_id, resource=resource, **overrides)
    response = exchange(Client(), client_id, authorization, resource=resource)
    assert response.status_code == 200, response.content
    return response.json()
