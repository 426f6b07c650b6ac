"""Notices for people: marking them read on the home page, and turning an app's notices off or on again from its
page (apps_registry/services/notices.py)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps_registry.exceptions import NotFound
from apps_registry.pages.app_views import app_or_404
from apps_registry.services.notices import notice_read, notices_mute_set


@login_required
@require_POST
def notice_read_submit(request: HttpRequest, receipt_id: int) -> HttpResponse:
    try:
        notice_read(actor=request.user, receipt_id=receipt_id)
    except NotFound:
        messages.error(request, "That notice is not yours, or no longer exists.")
    return redirect("home")


@login_required
@require_POST
def notices_read_all_submit(request: HttpRequest) -> HttpResponse:
    read = notice_read(actor=request.user)
    messages.success(request, f"{read} notice{'s' if read != 1 else ''} marked read.")
    return redirect("home")


@login_required
@require_POST
def notices_mute_submit(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """Any member turns the app's notices off (`muted=1`) or on again (`muted=0`), for themselves."""
    app, _role = app_or_404(request, app_id)
    muted = notices_mute_set(actor=request.user, app_id=app.id, muted=request.POST.get("muted") == "1")
    messages.success(
        request,
        f"You will no longer get notices from {app.name}." if muted else f"You will get notices from {app.name} again.",
    )
    return redirect(reverse("app_page", args=[app.id]) + "#notices")
