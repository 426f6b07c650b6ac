"""DOT's request validator with Charming's resource policy at the token endpoint too, and a replayed
authorization code revoking the tokens its first exchange bought."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from apps_registry.oauth.policy import mcp_resource_url, resource_problem
from apps_registry.services.oauth import authorization_code_redeemed, authorization_code_replay_revoke


class CharmingOAuth2Validator(OAuth2Validator):
    def _validate_resource_uris(self, request: Any, resources: list[str]) -> None:
        # Runs on every resource a token request asks for or inherits from its grant or refresh token.
        super()._validate_resource_uris(request, resources)
        problem = resource_problem(list(resources))
        if problem:
            raise errors.CustomOAuth2Error(error="invalid_target", description=problem, request=request)

    def _check_and_set_request_resource(self, request: Any) -> None:
        super()._check_and_set_request_resource(request)
        if not request.resource:
            # RFC 8707 lets a client name no resource; its token is then for the MCP endpoint, the resource every
            # client of this server comes for (/mcp accepts only tokens whose audience is exactly that URL).
            request.resource = [mcp_resource_url()]

    def _create_refresh_token(
        self, request: Any, refresh_token_code: str, access_token: Any, previous_refresh_token: Any
    ) -> Any:
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        if request.grant_type == "authorization_code":
            authorization_code_redeemed(
                code=request.code, application=request.client, token_family=refresh_token.token_family
            )
        return refresh_token

    def validate_code(self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        authorization_code_replay_revoke(code=code, application=client)
        return False
