"""An app's webhooks for people: each with its URL, who it runs as and its last deliveries; owners and editors add,
rotate and delete them, and see a new secret once, on the page that made it (apps_registry/services/hooks.py)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps_registry.exceptions import AccessDenied, CharmingError, NotFound
from apps_registry.models import Route, RouteKind
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.services.hooks import (
    SIGNATURE_HEADER,
    HookView,
    HookWithSecret,
    hook_create,
    hook_delete,
    hook_rotate,
    hooks_for,
)

OUTCOME_WORDS = {"ok": "ran", "failed": "failed"}
# A secret just made, kept in the session between the POST that made it and the one page that shows it (then
# dropped): a reload shows the hint only, and never makes a second secret.
NEW_SECRET_SESSION_KEY = "charming_new_hook_secret"


def _render(
    request: HttpRequest,
    app_id: uuid.UUID,
    *,
    form: dict[str, str] | None = None,
    error: CharmingError | None = None,
) -> HttpResponse:
    """The page, showing once the secret of a hook just made or rotated (from the session, for this app only)."""
    app, _role = app_or_404(request, app_id)
    fresh = request.session.pop(NEW_SECRET_SESSION_KEY, None)
    try:
        _app, views = hooks_for(actor=request.user, app_id=app.id)
    except AccessDenied as refused:  # viewers: a hook's URL is a way to change the app
        return refusal_page(request, app, refused)
    mutations = list(
        Route.objects.filter(app=app, kind=RouteKind.MUTATION).order_by("name").values_list("name", flat=True)
    )
    context = {
        "app": app,
        "hooks": [
            {
                "view": view,
                "url": view.as_dict()["url"],
                "overlap": view.as_dict()["previous_secret_valid_until"],
                "deliveries": [{"delivery": d, "words": OUTCOME_WORDS[d.outcome]} for d in view.deliveries],
            }
            for view in views
        ],
        "mutations": mutations,
        "form": form or {"route": mutations[0] if mutations else "", "description": ""},
        "error": error,
        "shown": _shown(fresh, views, app_id=app.id),
        "signature_header": SIGNATURE_HEADER,
        "overlap_minutes": settings.CHARMING_HOOK_ROTATION_OVERLAP_MINUTES,
    }
    # Every view of this page is never_cache: a secret shown must not stay in a cache.
    return render(request, "apps/hooks.html", context, status=400 if error else 200)


def _shown(fresh: Any, views: list[HookView], *, app_id: uuid.UUID) -> dict[str, Any] | None:
    """The hook just made or rotated, with its secret, if it is one of this app's."""
    if not isinstance(fresh, dict):
        return None
    view = next((v for v in views if str(v.hook.id) == fresh.get("hook_id") and v.hook.app_id == app_id), None)
    return None if view is None else {**view.as_dict(), "secret": fresh.get("secret")}


def _show_once(request: HttpRequest, made: HookWithSecret) -> HttpResponse:
    request.session[NEW_SECRET_SESSION_KEY] = {"hook_id": str(made.view.hook.id), "secret": made.secret}
    return redirect(reverse("app_hooks", args=[made.view.hook.app_id]) + "#new-secret")


@never_cache
@login_required
@require_GET
def hooks_page(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    return _render(request, app_id)


@never_cache
@login_required
@require_POST
def hook_create_submit(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    app, _role = app_or_404(request, app_id)
    form = {key: request.POST.get(key, "") for key in ("route", "description")}
    try:
        made = hook_create(actor=request.user, app_id=app.id, route=form["route"], description=form["description"])
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    except CharmingError as refused:
        return _render(request, app.id, form=form, error=refused)
    return _show_once(request, made)


@never_cache
@login_required
@require_POST
def hook_change_submit(request: HttpRequest, app_id: uuid.UUID, hook_id: uuid.UUID) -> HttpResponse:
    """Rotate the secret of one hook (keeping the old one for the default overlap, or ending it now), or delete it
    (the button's `do`)."""
    app, _role = app_or_404(request, app_id)
    do = request.POST.get("do")
    try:
        if do in ("rotate", "rotate-now"):
            keep = 0 if do == "rotate-now" else None
            made = hook_rotate(actor=request.user, hook_id=hook_id, app_id=app.id, keep_old_minutes=keep)
            return _show_once(request, made)
        if do == "delete":
            gone = hook_delete(actor=request.user, hook_id=hook_id, app_id=app.id)
            messages.success(request, f"Webhook of {gone.route} deleted: its address no longer works.")
        else:
            messages.error(request, "Unknown action: use the buttons of the page.")
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    except NotFound:
        messages.error(request, "That webhook no longer exists.")
    return redirect("app_hooks", app_id=app.id)
