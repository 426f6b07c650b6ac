"""Renaming an app and handing it over, for people: the app page's forms and the home page's answers
(apps_registry/services/transfers.py)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps_registry.exceptions import AccessDenied, CharmingError, NotFound
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.services.transfers import (
    app_rename,
    app_transfer_accept,
    app_transfer_decline,
    app_transfer_offer,
    app_transfer_revoke,
)


def _back(app_id: uuid.UUID) -> HttpResponse:
    return redirect(reverse("app_page", args=[app_id]) + "#hand-over")


@login_required
@require_POST
def rename_submit(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    app, _role = app_or_404(request, app_id)
    try:
        renamed = app_rename(actor=request.user, app_id=app.id, name=request.POST.get("name", ""))
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    except CharmingError as refused:
        messages.error(request, refused.message)
        return _back(app.id)
    messages.success(request, f"Renamed to “{renamed.name}”.")
    return _back(app.id)


@login_required
@require_POST
def transfer_submit(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """The owner offers the app to someone (`do=offer`) or takes the offer back (`do=revoke`)."""
    app, _role = app_or_404(request, app_id)
    try:
        if request.POST.get("do") == "revoke":
            app_transfer_revoke(actor=request.user, app_id=app.id)
            messages.success(request, "The offer is taken back; the app stays yours.")
        else:
            offer = app_transfer_offer(actor=request.user, app_id=app.id, to=request.POST.get("user", ""))
            messages.success(
                request,
                f"Offered to {offer.to_user.get_username()}: the app stays yours until they accept it on their home "
                "page; you will then be an editor.",
            )
    except AccessDenied as refused:
        return refusal_page(request, app, refused)
    except CharmingError as refused:
        messages.error(request, refused.message)
    return _back(app.id)


@login_required
@require_POST
def transfer_answer(request: HttpRequest, transfer_id: int) -> HttpResponse:
    """The recipient accepts (`do=accept`) or declines an app offered to them."""
    try:
        if request.POST.get("do") == "accept":
            app = app_transfer_accept(actor=request.user, transfer_id=transfer_id)
            messages.success(request, f"“{app.name}” is yours now.")
            return redirect("app_page", app_id=app.id)
        app_transfer_decline(actor=request.user, transfer_id=transfer_id)
        messages.success(request, "Declined: nothing changed.")
    except NotFound:
        messages.error(request, "That offer is no longer waiting for you.")
    except CharmingError as refused:
        messages.error(request, refused.message)
    return redirect("home")
