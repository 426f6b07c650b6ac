"""OAuth URLs. The protocol endpoints keep django-oauth-toolkit's `oauth2_provider` namespace, which its
metadata view reverses; the RFC 8414 document sits at the root, where clients look for it."""

from __future__ import annotations

from django.urls import path
from oauth2_provider import views as dot

from apps_registry.oauth import views

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", dot.OAuthServerMetadataView.as_view(), name="oauth-server-metadata"),
    path("oauth/authorize/", views.CharmingAuthorizationView.as_view(), name="authorize"),
    path("oauth/token/", views.cors_open(dot.TokenView.as_view()), name="token"),
    path("oauth/revoke/", views.cors_open(dot.RevokeTokenView.as_view()), name="revoke-token"),
    path("oauth/register/", views.cors_open(views.RegistrationView.as_view()), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        views.RegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

# The person's own pages (outside the DOT namespace).
page_urlpatterns = [
    path("oauth/connected/", views.connected_clients, name="oauth-connected-clients"),
    path(
        "oauth/connected/<int:application_id>/disconnect/",
        views.connected_client_disconnect,
        name="oauth-connected-client-disconnect",
    ),
]
