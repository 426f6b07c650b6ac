"""OAuth endpoints with Charming's policy on top of django-oauth-toolkit's views, and the page where a
person sees and disconnects the clients they authorized."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import (
    AuthorizationView,
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from apps_registry.exceptions import Forbidden
from apps_registry.oauth.policy import redirect_uris_problem, resource_problem
from apps_registry.oauth.scopes import SCOPES
from apps_registry.selectors import email_status_of, oauth_clients_connected_to
from apps_registry.services.email_confirmation import confirmed_email_require
from apps_registry.services.oauth import (
    client_registration_of,
    oauth_client_disconnect,
    registration_allowed,
    registration_record,
)

ALLOWED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "600",
}


def cors_open(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Let browser-based clients (the MCP Inspector's web UI) call a token, revocation or registration
    endpoint. Safe because these endpoints never read cookies: they authenticate nothing but what the
    request itself carries."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = HttpResponse(status=204) if request.method == "OPTIONS" else view(request, *args, **kwargs)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response

    return wrapped


def _registration_error(error: str, description: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


def _auth_methods() -> tuple[str, ...]:
    """The token endpoint's client authentication methods: what the RFC 8414 metadata advertises is exactly what
    registration accepts (DOT authenticates a confidential client by either secret method)."""
    return tuple(oauth2_settings.OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED)


def requested_auth_method(data: dict[str, Any], *, registered: str | None = None) -> object:
    """The token_endpoint_auth_method a registration asks for: RFC 7591's default, client_secret_basic, when it
    names none; on an update (RFC 7592), the one the client registered with."""
    return data.get("token_endpoint_auth_method", registered or "client_secret_basic")


def registration_metadata_problem(data: Any, *, registered_auth_method: str | None = None) -> JsonResponse | None:
    """Charming's registration policy (RFC 7591 error codes), checked before DOT registers the client."""
    if not isinstance(data, dict):
        return None  # DOT answers malformed bodies itself
    auth_method = requested_auth_method(data, registered=registered_auth_method)
    if auth_method not in _auth_methods():
        return _registration_error(
            "invalid_client_metadata",
            f"token_endpoint_auth_method {auth_method!r} is not supported; use one of {', '.join(_auth_methods())} "
            '("none" for a public client, which PKCE protects; a secret method for a confidential one).',
        )
    if registered_auth_method is not None and auth_method != registered_auth_method:
        return _registration_error(
            "invalid_client_metadata",
            f"token_endpoint_auth_method cannot change from {registered_auth_method!r} to {auth_method!r} after "
            "registration: register a new client instead.",
        )
    grant_types = data.get("grant_types", ["authorization_code"])
    if isinstance(grant_types, list):
        unsupported = sorted(str(grant) for grant in grant_types if grant not in ALLOWED_GRANT_TYPES)
        if unsupported:
            return _registration_error(
                "invalid_client_metadata",
                f"grant_types {unsupported} are not supported; use authorization_code and refresh_token.",
            )
    response_types = data.get("response_types", ["code"])
    if isinstance(response_types, list) and any(kind != "code" for kind in response_types):
        return _registration_error("invalid_client_metadata", 'response_types must be ["code"].')
    if "scope" in data and not isinstance(data["scope"], str):
        message = 'scope must be a space-separated string, e.g. "apps:read apps:write".'
        return _registration_error("invalid_client_metadata", message)
    problem = redirect_uris_problem(data.get("redirect_uris"))
    if problem:
        return _registration_error("invalid_redirect_uri", f"{problem}.")
    return None


def registration_answer(response: HttpResponseBase, *, auth_method: str, issued_at: datetime) -> HttpResponseBase:
    """DOT's RFC 7591/7592 answer made complete: the auth method as registered (DOT says client_secret_basic for
    every confidential client), response_types, the scopes the client may ask for (every client may ask for
    each; the person decides on the consent page), when its id was issued, and that a secret never expires."""
    if response.status_code not in (200, 201):
        return response
    answer = json.loads(response.content)  # type: ignore[attr-defined]
    answer["token_endpoint_auth_method"] = auth_method
    answer["response_types"] = ["code"]
    answer["scope"] = " ".join(SCOPES)
    answer["client_id_issued_at"] = int(issued_at.timestamp())
    if auth_method != "none":
        answer["client_secret_expires_at"] = 0
    return JsonResponse(answer, status=response.status_code)


class CharmingAuthorizationView(AuthorizationView):
    """DOT's consent flow, refusing resources this server does not serve before the person is asked, and people
    who have not confirmed their e-mail address (they are told how, and come back to the same request after)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not email_status_of(request.user).confirmed:
            return _email_unconfirmed(request)
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        problem = resource_problem(request.GET.getlist("resource"))
        if problem:
            return self._invalid_target(request, problem)
        response = super().get(request, *args, **kwargs)
        _allow_consent_redirect(response)
        return response

    def form_valid(self, form: Any) -> HttpResponseBase:
        # The resource travels in a hidden field between the consent page and its POST: check it again.
        problem = resource_problem((form.cleaned_data.get("resource") or "").split())
        if problem:
            error = {"error": "invalid_target", "description": problem}
            return self.render_to_response({"error": error}, status=400)
        return super().form_valid(form)

    def _invalid_target(self, request: HttpRequest, problem: str) -> HttpResponseBase:
        """RFC 8707's invalid_target, redirected to the client when its request is otherwise valid (client and
        redirect URI checked first, so this never redirects anywhere unregistered); else shown to the person."""
        try:
            _scopes, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError:
            credentials = None
        if credentials is None or not credentials.get("redirect_uri"):
            return self.render_to_response({"error": {"error": "invalid_target", "description": problem}}, status=400)
        answer = {"error": "invalid_target", "error_description": problem}
        if credentials.get("state"):
            answer["state"] = credentials["state"]
        redirect_uri = credentials["redirect_uri"]
        separator = "&" if "?" in redirect_uri else "?"
        application = get_application_model().objects.filter(client_id=credentials["client_id"]).first()
        return self.redirect(redirect_uri + separator + urlencode(answer), application)

    def redirect(self, redirect_to: str, application: Any) -> HttpResponseBase:
        # RFC 9207: every authorization response names the issuer, errors included. DOT adds `iss` only to the
        # responses oauthlib builds (approval); its error redirects (denied, bad scope, missing PKCE) are built
        # by the view and all leave through here. DOT's helper replaces an `iss` already present, so the
        # approval's stays single.
        issuer = oauth2_settings.oauth2_authorization_server_issuer(self.request)
        return super().redirect(_add_iss_to_redirect(redirect_to, issuer), application)


def _email_unconfirmed(request: HttpRequest) -> HttpResponse:
    """A signed-in person whose address is not confirmed cannot connect a client yet: what to do, and a link back to
    this very authorization request for when they have."""
    try:
        confirmed_email_require(user=request.user, to="connect a client")
    except Forbidden as refusal:
        message = refusal.message
    context = {"message": message, "email": email_status_of(request.user), "retry_url": request.get_full_path()}
    return render(request, "oauth/email_unconfirmed.html", context, status=403)


def _allow_consent_redirect(response: HttpResponseBase) -> None:
    """Let the consent form's answer redirect to the client: CSP's form-action covers the redirect a form
    POST leads to, and the site's policy allows only 'self'. Added only when the consent form is shown,
    i.e. after DOT has checked the redirect URI against the client's registered ones."""
    context = getattr(response, "context_data", None) or {}
    form = context.get("form")
    if context.get("error") or form is None:
        return
    target = urlsplit(str(form.initial.get("redirect_uri") or ""))
    if target.scheme in ("http", "https") and target.netloc:
        response._csp_update = {"form-action": [f"{target.scheme}://{target.netloc}"]}  # type: ignore[attr-defined]


class RegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration for anonymous clients, public ("none") or confidential (a client secret, sent by either
    method the metadata advertises), limited per client address."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        client_ip = request.META.get("REMOTE_ADDR") or "0.0.0.0"
        if not registration_allowed(client_ip=client_ip):
            response = _registration_error(
                "rate_limited",
                "Too many client registrations from this address in the last hour; reuse the client you "
                "registered, or try again later.",
                status=429,
            )
            response["Retry-After"] = "3600"
            return response
        try:
            data = json.loads(request.body)
        except ValueError:
            data = None
        refusal = registration_metadata_problem(data)
        if refusal is not None:
            return refusal
        # A body that is not a JSON object is DOT's to refuse (it answers 400 below, and no client is made).
        auth_method = str(requested_auth_method(data)) if isinstance(data, dict) else "client_secret_basic"
        with transaction.atomic():  # the client and the record of its registration, or neither
            response = super().post(request, *args, **kwargs)
            if response.status_code != 201:
                return response
            client_id = json.loads(response.content)["client_id"]
            registration = registration_record(client_id=client_id, client_ip=client_ip, auth_method=auth_method)
        return registration_answer(response, auth_method=auth_method, issued_at=registration.created_at)


class RegistrationManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592 reads, updates and deletes; an update must meet the same policy as a registration and keeps the
    client's token_endpoint_auth_method (its secret was shown once, at registration)."""

    def get(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, client_id, *args, **kwargs)
        return self._answer(response, client_id)  # type: ignore[return-value]

    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        registration = client_registration_of(client_id=client_id)
        registered = registration.token_endpoint_auth_method if registration else None
        try:
            data = json.loads(request.body)
        except ValueError:
            data = None
        refusal = registration_metadata_problem(data, registered_auth_method=registered)
        if refusal is not None:
            return refusal
        if isinstance(data, dict) and registered is not None and "token_endpoint_auth_method" not in data:
            # DOT reads the body itself and would take RFC 7591's default (a confidential client) for the omitted
            # method: hand it the registered one, so an update never turns a public client confidential.
            request._body = json.dumps({**data, "token_endpoint_auth_method": registered}).encode()
        response = super().put(request, client_id, *args, **kwargs)
        return self._answer(response, client_id)  # type: ignore[return-value]

    def _answer(self, response: HttpResponseBase, client_id: str) -> HttpResponseBase:
        registration = client_registration_of(client_id=client_id)
        if registration is None:
            return response
        return registration_answer(
            response, auth_method=registration.token_endpoint_auth_method, issued_at=registration.created_at
        )


@login_required
@require_http_methods(["GET"])
def connected_clients(request: HttpRequest) -> HttpResponse:
    """The clients (Claude, ChatGPT, ...) holding tokens the user granted, each with a Disconnect button."""
    return render(request, "oauth/connected_clients.html", {"clients": oauth_clients_connected_to(request.user)})


@login_required
@require_POST
def connected_client_disconnect(request: HttpRequest, application_id: int) -> HttpResponse:
    oauth_client_disconnect(user=request.user, application_id=application_id)
    return redirect("oauth-connected-clients")
