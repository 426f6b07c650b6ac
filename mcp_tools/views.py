"""OAuth 2.0 Protected Resource Metadata (RFC 9728) for /mcp, where 401 responses point clients."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from mcp_tools.auth import resource_url


@require_GET
def protected_resource_metadata(request: HttpRequest) -> JsonResponse:
    # Tokens are Charming API tokens (manage.py create_token), sent as a bearer header; there is no
    # OAuth authorization server to name, which RFC 9728 allows.
    return JsonResponse(
        {
            "resource": resource_url(),
            "resource_name": "Charming MCP endpoint",
            "bearer_methods_supported": ["header"],
            "scopes_supported": [],
        }
    )
