"""The token's scopes on every REST request: each view declares the access need of each method, and
access.py decides the scope that need takes (the same table the MCP tools use)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apps_registry.access import ALL_SCOPES, Need, scope_check


def view_handles(view: Any, method: str) -> bool:
    """Whether `view` has a handler for `method` (DRF answers any other method 405 once permissions pass)."""
    name = method.lower()
    return name in view.http_method_names and hasattr(view, name)


def view_need(request: Request, view: Any) -> Need:
    """The need of this request: the view's `need_for(request)` when it depends on the body, else its
    `scope_needs[method]` (HEAD as GET, OPTIONS as read). A view that declares none is a mistake."""
    need_for = getattr(view, "need_for", None)
    if need_for is not None:
        return need_for(request)
    needs: dict[str, Need] | None = getattr(view, "scope_needs", None)
    if needs is None:
        raise ImproperlyConfigured(f"{type(view).__name__} declares no scope_needs: each API view must.")
    method = "GET" if request.method == "HEAD" else request.method
    if method == "OPTIONS":
        return "read"
    if method not in needs:
        raise ImproperlyConfigured(f"{type(view).__name__}.scope_needs names no need for {method}.")
    return needs[method]


class TokenScopeRequired(BasePermission):
    """InsufficientScope (403, naming the scope) unless the token's scopes allow the view's need.

    Runs after IsAuthenticated. Scopes limit credentials: a request with no credential object (a person's
    own session, were one enabled) is the person, with every scope; a credential without scopes has none.
    A method the view has no handler for is refused here with 405 (and its Allow header), before any need is
    looked up: it has none, and a view's `need_for` must not read the body of a request it will never serve."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not view_handles(view, request.method or ""):
            raise MethodNotAllowed(request.method or "")
        scopes = getattr(request, "auth_scopes", None)
        if scopes is None:
            scopes = ALL_SCOPES if request.auth is None else frozenset()
        scope_check(scopes=scopes, need=view_need(request, view))
        return True
