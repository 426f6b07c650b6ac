"""An app's webhooks for people: each with its URL, who it runs as and its last deliveries; owners and editors add,
rotate and delete them, and see a new secret once, on the page that made it (apps_registry/services/hooks.py)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps_registry.exceptions import AccessDenied, CharmingError, NotFound
from apps_registry.models import Route, RouteKind
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.services.hooks import (
    SIGNATURE_HEADER,
    HookWithSecret,
    hook_create,
    hook_delete,
    hook_rotate,
    hooks_for,
)

OUTCOME_WORDS = {"ok": "ran", "failed": "failed"}


def _render(
    request: HttpRequest,
    app_id: uuid.UUID,
    *,
    form: dict[str, str] | None = None,
    error: CharmingError | None = None,
    shown: HookWithSecret | None = None,
) -> HttpResponse:
    """The page; with `shown`, a hook just made or rotated, whose secret it shows this once."""
    app, _role = app_or_404(request, app_id)
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
        "shown": None if shown is None else shown.as_dict(),
        "signature_header": SIGNATURE_HEADER,
    }
    # Every view of this page is never_cache: a secret shown must not stay in a cache.
    return render(request, "apps/hooks.html", context, status=400 if error else 200)


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
    return _render(request, app.id, shown=made)


@never_cache
@login_required
@require_POST
def hook_change_submit(request: HttpRequest, app_id: uuid.UUID, hook_id: uuid.UUID) -> HttpResponse:
    """Rotate the secret of one hook, or delete it (the button's `do`)."""
    app, _role = app_or_404(request, app_id)
    do = request.POST.get("do")
    try:
        if do == "rotate":
            return _render(request, app.id, shown=hook_rotate(actor=request.user, hook_id=hook_id, app_id=app.id))
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
