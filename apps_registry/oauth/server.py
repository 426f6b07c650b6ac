"""oauthlib's server with PKCE narrowed to S256, so a "plain" (or missing) code_challenge_method is refused
on the authorization request itself, before the consent page (RFC 9700 section 2.1.1)."""

from __future__ import annotations

from typing import Any

from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749.grant_types.authorization_code import code_challenge_method_s256


class S256OnlyServer(Server):
    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        self.auth_grant._code_challenge_methods = {"S256": code_challenge_method_s256}
