"""OAuth 2.0 Protected Resource Metadata (RFC 9728) for /mcp, where 401 responses point clients."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from apps_registry.oauth.scopes import SCOPES
from mcp_tools.auth import resource_url


@require_GET
def protected_resource_metadata(request: HttpRequest) -> JsonResponse:
    # Charming is its own authorization server (apps_registry/oauth); personal API tokens are accepted too.
    response = JsonResponse(
        {
            "resource": resource_url(),
            "resource_name": "Charming MCP endpoint",
            "authorization_servers": [settings.CHARMING_PUBLIC_URL],
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
        }
    )
    response["Access-Control-Allow-Origin"] = "*"
    return response
