"""A database outage on Django's side of the site (pages, the admin, OAuth's endpoints): a 503 with Retry-After,
never Django's bare 500.

Two places catch it, so it is answered wherever it is raised: `DatabaseUnavailableMiddleware` for errors raised by
a view (the common case: the view's first query), and `server_error` (the site's handler500) for those raised in a
middleware or while rendering (the session or the user looked up). People get the site's own 503 page; OAuth's
machine endpoints (token, revoke, register, metadata) get an OAuth error object, `/api/` the REST envelope (DRF's
exception handler answers its views' own errors: apps_registry/api/errors.py). Each refusal logs one warning line,
no traceback, as /mcp and REST do.

The page renders without the request: its context processors would look the session and the user up again.
"""

from __future__ import annotations

import logging
import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults

from apps_registry.exceptions import DatabaseUnavailable, database_unavailable

logger = logging.getLogger(__name__)

# Paths whose callers are programs: they get JSON, not a page.
OAUTH_JSON_PATHS = ("/oauth/token/", "/oauth/revoke/", "/oauth/register/", "/.well-known/")
API_PATH = "/api/"


def unavailable_response(request: HttpRequest, outage: DatabaseUnavailable, error: BaseException) -> HttpResponse:
    """The 503 for `request`: a page for people, JSON for programs; Retry-After either way."""
    logger.warning("%s %s answered 503: the database is unavailable (%s)", request.method, request.path, error)
    response: HttpResponse
    if request.path.startswith(API_PATH):
        response = JsonResponse({"ok": False, "error": outage.as_envelope_error()}, status=outage.http_status)
    elif request.path.startswith(OAUTH_JSON_PATHS):
        body = {"error": "temporarily_unavailable", "error_description": outage.message}
        response = JsonResponse(body, status=outage.http_status)
    else:
        context = {"message": outage.message, "retry_after_seconds": outage.retry_after_seconds}
        response = HttpResponse(render_to_string("errors/503.html", context), status=outage.http_status)
    response["Retry-After"] = str(outage.retry_after_seconds)
    response["Cache-Control"] = "no-store"
    response._has_been_logged = True  # type: ignore[attr-defined]  # our warning above; not Django's error line
    return response


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """A view's database outage answered as one (see the module's docstring). Sync and async alike, so it adds no
    thread hop to a request under ASGI; `process_exception` runs only when a view raised."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        outage = database_unavailable(exception)
        return None if outage is None else unavailable_response(request, outage, exception)


def server_error(request: HttpRequest, template_name: str = "errors/500.html") -> HttpResponse:
    """The site's handler500: a database outage raised outside a view is a 503 too; anything else is the site's
    styled 500 page (Django calls this while handling the error, so it is the one in flight)."""
    error = sys.exc_info()[1]
    outage = database_unavailable(error) if error is not None else None
    if outage is not None and error is not None:
        return unavailable_response(request, outage, error)
    return defaults.server_error(request, template_name=template_name)
