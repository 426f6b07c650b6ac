"""An app's schedules for people: each with its times, params, state and last runs; owners and editors add, pause,
resume and delete them (apps_registry/services/schedules.py)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps_registry.access import role_allows
from apps_registry.exceptions import AccessDenied, CharmingError, InvalidInput, NotFound
from apps_registry.models import Route, RouteKind
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.services.schedules import (
    PRESETS,
    schedule_app_for,
    schedule_create,
    schedule_delete,
    schedule_update,
    schedules_for,
)

OUTCOME_WORDS = {"ok": "ran", "failed": "failed", "missed": "missed"}


def _render(
    request: HttpRequest, app_id: uuid.UUID, *, form: dict[str, Any] | None = None, error: CharmingError | None = None
) -> HttpResponse:
    app, role = app_or_404(request, app_id)
    _app, views = schedules_for(actor=request.user, app_id=app.id)
    mutations = list(
        Route.objects.filter(app=app, kind=RouteKind.MUTATION).order_by("name").values_list("name", flat=True)
    )
    context = {
        "app": app,
        "can_manage": role_allows(role, "author"),
        "schedules": [
            {
                "view": view,
                "params_text": json.dumps(view.schedule.params, ensure_ascii=False),
                "runs": [{"run": run, "words": OUTCOME_WORDS[run.outcome]} for run in view.runs],
            }
            for view in views
        ],
        "mutations": mutations,
        "presets": PRESETS,
        "form": form
        or {"route": mutations[0] if mutations else "", "cron": "daily", "timezone": "UTC", "params": "{}"},
        "error": error,
    }
    return render(request, "apps/schedules.html", context, status=400 if error else 200)


@never_cache
@login_required
@require_GET
def schedules_page(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    return _render(request, app_id)


@login_required
@require_POST
def schedule_create_submit(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    app, _role = app_or_404(request, app_id)
    try:
        schedule_app_for(actor=request.user, app_id=app.id)
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    form = {key: request.POST.get(key, "") for key in ("route", "cron", "timezone", "params")}
    try:
        params = json.loads(form["params"] or "{}")
    except (ValueError, RecursionError) as bad:
        where = f" ({bad.msg} at character {bad.pos})" if isinstance(bad, json.JSONDecodeError) else ""
        error = InvalidInput(
            f'The values to send are not JSON{where}: write an object such as {{"by": 1}}.',
            errors=[{"path": "$.params", "message": "not JSON"}],
        )
        return _render(request, app.id, form=form, error=error)
    try:
        view = schedule_create(
            actor=request.user,
            app_id=app.id,
            route=form["route"],
            cron=form["cron"],
            time_zone=form["timezone"].strip() or "UTC",
            params=params,
        )
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    except CharmingError as refused:
        return _render(request, app.id, form=form, error=refused)
    messages.success(request, f"Schedule added: {view.schedule.route} at '{view.schedule.cron}'.")
    return redirect("app_schedules", app_id=app.id)


@login_required
@require_POST
def schedule_change_submit(request: HttpRequest, app_id: uuid.UUID, schedule_id: uuid.UUID) -> HttpResponse:
    """Pause, resume or delete one schedule (the button's `do`)."""
    app, _role = app_or_404(request, app_id)
    do = request.POST.get("do")
    try:
        if do == "delete":
            gone = schedule_delete(actor=request.user, schedule_id=schedule_id, app_id=app.id)
            messages.success(request, f"Schedule of {gone.route} at '{gone.cron}' deleted.")
        elif do in ("pause", "resume"):
            view = schedule_update(actor=request.user, schedule_id=schedule_id, active=do == "resume", app_id=app.id)
            messages.success(request, f"Schedule of {view.schedule.route} {'resumed' if do == 'resume' else 'paused'}.")
        else:
            messages.error(request, "Unknown action: use the buttons of the page.")
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    except NotFound:
        messages.error(request, "That schedule no longer exists.")
    except CharmingError as refused:  # the route is gone or its params no longer fit
        messages.error(request, refused.message)
    return redirect("app_schedules", app_id=app.id)
