"""DOT's request validator with Charming's resource policy at the token endpoint too."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from apps_registry.oauth.policy import resource_problem


class CharmingOAuth2Validator(OAuth2Validator):
    def _validate_resource_uris(self, request: Any, resources: list[str]) -> None:
        # Runs on every resource a token request asks for or inherits from its grant or refresh token.
        super()._validate_resource_uris(request, resources)
        problem = resource_problem(list(resources))
        if problem:
            raise errors.CustomOAuth2Error(error="invalid_target", description=problem, request=request)
