"""The REST API's one translator from domain errors to responses."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from apps_registry.api.throttles import RateLimitedAuthentication
from apps_registry.exceptions import (
    AppNotFound,
    CharmingError,
    InsufficientScope,
    InternalError,
    RateLimited,
    RouteKindMismatch,
    database_unavailable,
)
from apps_registry.redaction import RedactingFilter, redact_error
from apps_registry.services.tokens import MISSING_TOKEN_MESSAGE
from apps_registry.values import clip

logger = logging.getLogger(__name__)
logger.addFilter(RedactingFilter())


def error_message(exc: CharmingError) -> str:
    """A domain error worded for REST callers: the domain's facts, naming the request that helps next."""
    if isinstance(exc, AppNotFound):
        return f"{exc.message} GET /api/apps/ lists your apps."
    if isinstance(exc, RouteKindMismatch):
        return (
            f'\'{exc.op}\' is a {exc.route_kind} route: run it with "kind": "{exc.route_kind}", '
            f'not "{exc.called_kind}".'
        )
    return exc.message


def method_refusal_message(method: str, view: Any) -> str:
    """A 405 worded with the methods the endpoint does take (the same list as its Allow header)."""
    allowed = ", ".join(getattr(view, "allowed_methods", []))
    return f"{clip(method, 20)} is not allowed on this endpoint; it takes {allowed}."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RateLimitedAuthentication):
        exc = exc.error
    if isinstance(exc, CharmingError):
        envelope_error = redact_error(exc.as_envelope_error(error_message(exc)))
        refused = Response({"ok": False, "error": envelope_error}, status=exc.http_status)
        if isinstance(exc, InsufficientScope):  # RFC 6750 §3.1, as /mcp answers it
            refused["WWW-Authenticate"] = f'Bearer realm="charming", error="insufficient_scope", scope="{exc.scope}"'
        if isinstance(exc, RateLimited):
            refused["Retry-After"] = str(exc.retry_after_seconds)
        return refused
    outage = database_unavailable(exc)
    if outage is not None:
        logger.warning("REST request answered 503: the database is unavailable (%s)", exc)
        unavailable = Response({"ok": False, "error": outage.as_envelope_error()}, status=outage.http_status)
        unavailable["Retry-After"] = str(outage.retry_after_seconds)
        return unavailable
    response = drf_exception_handler(exc, context)
    if response is not None:
        detail = response.data.get("detail") if isinstance(response.data, dict) else None
        if isinstance(exc, drf_exceptions.NotAuthenticated):  # no authenticator recognised a credential
            detail = MISSING_TOKEN_MESSAGE
        if isinstance(exc, drf_exceptions.MethodNotAllowed):  # DRF adds the Allow header to every response
            request = context.get("request")
            detail = method_refusal_message(getattr(request, "method", "") or "", context.get("view"))
        message = str(detail) if detail is not None else "The request is invalid."
        kind = getattr(exc, "default_code", "invalid_request")
        error: dict[str, Any] = {"kind": "unauthenticated" if response.status_code == 401 else kind, "message": message}
        if detail is None:
            error["errors"] = response.data
        response.data = {"ok": False, "error": redact_error(error)}
        return response
    logger.exception("Unexpected error in %s", context.get("view"))
    return Response(
        {"ok": False, "error": InternalError("Internal error; it has been logged.").as_envelope_error()},
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )
