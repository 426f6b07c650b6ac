from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from apps_registry.api.hooks import HookDeliveryView
from apps_registry.oauth import urls as oauth_urls
from mcp_tools.views import protected_resource_metadata

# A database outage raised outside a view is a 503 page too (apps_registry/pages/outage.py); others a styled 500.
handler500 = "apps_registry.pages.outage.server_error"

admin.site.site_header = "Charming staff console"
admin.site.site_title = "Charming"
admin.site.index_title = "Apps, advisories and feedback"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("apps_registry.api.urls")),
    # Webhooks in: signed deliveries, no token (apps_registry/api/hooks.py).
    path("hooks/<str:hook_id>/", HookDeliveryView.as_view(), name="hook_deliver"),
    # Without the slash too: a redirect would turn a sender's POST into a GET (301) or be refused by it.
    path("hooks/<str:hook_id>", HookDeliveryView.as_view(), name="hook_deliver_no_slash"),
    # RFC 9728 metadata for the MCP endpoint, at the root and at the /mcp-suffixed location.
    path(".well-known/oauth-protected-resource", protected_resource_metadata, name="oauth-protected-resource"),
    path(".well-known/oauth-protected-resource/mcp", protected_resource_metadata, name="oauth-protected-resource-mcp"),
    # --- OAuth 2.1 authorization server (apps_registry/oauth): metadata, authorize, token, revoke, register ---
    path("", include(oauth_urls)),
    *oauth_urls.page_urlpatterns,
    # --- Pages for people: home, accounts (Django's auth URL names), connect an agent (apps_registry/pages) ---
    path("", include("apps_registry.pages.urls")),
]
