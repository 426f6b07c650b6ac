"""Sharing on the pages: the owner's members section (invite, change a role, remove, revoke), a member's
leaving, and the invitee's answers on the home page.

Every rule is the domain's: the views call apps_registry.services.sharing and show its refusals.
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from apps_registry.access import leave_check
from apps_registry.exceptions import AccessDenied, CharmingError, Forbidden, InvalidInput, NotFound
from apps_registry.pages.app_views import app_or_404, app_page_render, refusal_page
from apps_registry.pages.forms import InvitationCreateForm
from apps_registry.pages.views import home_page
from apps_registry.services.sharing import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_revoke,
    membership_leave,
    membership_remove,
    membership_role_change,
)

INVITE_FIELDS = {"$.user": "user", "$.role": "role"}


def _members_url(app_id: uuid.UUID) -> str:
    return reverse("app_page", args=[app_id]) + "#members"


@never_cache
@login_required
@require_POST
def member_invite(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """The owner invites someone (username or email) as editor or viewer."""
    app, role = app_or_404(request, app_id)
    form = InvitationCreateForm(request.POST)
    if form.is_valid():
        try:
            invitation = invitation_create(
                actor=request.user, app_id=app.id, invitee=form.cleaned_data["user"], role=form.cleaned_data["role"]
            )
        except AccessDenied as error:
            return refusal_page(request, app, error)
        except InvalidInput as error:
            path = str((error.errors or [{}])[0].get("path"))
            form.add_error(INVITE_FIELDS.get(path), error.message)
            return app_page_render(request, app, role, invite_form=form, status=400)
        except CharmingError as error:  # already a member, already invited
            form.add_error(None, error.message)
            return app_page_render(request, app, role, invite_form=form, status=error.http_status)
        messages.success(
            request,
            f"{invitation.invitee.get_username()} is invited as {invitation.role}; "
            "they see the invitation on their home page.",
        )
        return redirect(_members_url(app.id))
    return app_page_render(request, app, role, invite_form=form, status=400)


@never_cache
@login_required
@require_POST
def member_role_change(request: HttpRequest, app_id: uuid.UUID, username: str) -> HttpResponse:
    """The owner makes a member an editor or a viewer."""
    app, role = app_or_404(request, app_id)
    try:
        membership = membership_role_change(
            actor=request.user, app_id=app.id, username=username, role=request.POST.get("role", "")
        )
    except AccessDenied as error:
        return refusal_page(request, app, error)
    except CharmingError as error:  # an unknown role, not a member, the owner
        return app_page_render(request, app, role, member_errors={username: error.message}, status=error.http_status)
    messages.success(request, f"{username} is now {membership.role} of “{app.name}”.")
    return redirect(_members_url(app.id))


@never_cache
@login_required
@require_POST
def member_remove(request: HttpRequest, app_id: uuid.UUID, username: str) -> HttpResponse:
    """The owner removes a member: the app disappears from their listings."""
    app, role = app_or_404(request, app_id)
    try:
        membership_remove(actor=request.user, app_id=app.id, username=username)
    except AccessDenied as error:
        return refusal_page(request, app, error)
    except CharmingError as error:
        return app_page_render(request, app, role, member_errors={username: error.message}, status=error.http_status)
    messages.success(request, f"{username} was removed from “{app.name}”.")
    return redirect(_members_url(app.id))


@never_cache
@login_required
@require_POST
def invitation_revoke_view(request: HttpRequest, app_id: uuid.UUID, invitation_id: int) -> HttpResponse:
    """The owner withdraws a pending invitation."""
    app, role = app_or_404(request, app_id)
    try:
        invitation = invitation_revoke(actor=request.user, app_id=app.id, invitation_id=invitation_id)
    except AccessDenied as error:
        return refusal_page(request, app, error)
    except CharmingError as error:  # unknown, or answered meanwhile
        return app_page_render(request, app, role, invitations_error=error.message, status=error.http_status)
    messages.success(request, f"The invitation of {invitation.invitee.get_username()} is revoked.")
    return redirect(_members_url(app.id))


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def member_leave(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """A member's confirmation (GET) and leaving (POST); the owner is refused (they delete the app instead)."""
    app, role = app_or_404(request, app_id)
    try:
        if request.method == "POST":
            membership_leave(actor=request.user, app_id=app.id)
        else:
            leave_check(app=app, role=role)
    except Forbidden as error:
        return refusal_page(request, app, error)
    if request.method == "POST":
        messages.success(request, f"You left “{app.name}”; the owner can invite you again.")
        return redirect("home")
    return render(request, "apps/app_leave.html", {"app": app, "role": role})


@never_cache
@login_required
@require_POST
def invitation_accept_view(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """The invitee accepts: they become a member and go to the app's page."""
    try:
        membership = invitation_accept(actor=request.user, invitation_id=invitation_id)
    except NotFound as error:
        raise Http404(error.message) from None
    except CharmingError as error:  # answered or revoked meanwhile
        return _home_with_error(request, error)
    messages.success(request, f"You joined “{membership.app.name}” as {membership.role}.")
    return redirect("app_page", app_id=membership.app_id)


@never_cache
@login_required
@require_POST
def invitation_decline_view(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """The invitee declines: nothing is granted."""
    try:
        invitation = invitation_decline(actor=request.user, invitation_id=invitation_id)
    except NotFound as error:
        raise Http404(error.message) from None
    except CharmingError as error:
        return _home_with_error(request, error)
    messages.success(request, f"You declined the invitation to “{invitation.app.name}”.")
    return redirect("home")


def _home_with_error(request: HttpRequest, error: CharmingError) -> HttpResponse:
    return home_page(request, invitations_error=error.message, status=error.http_status)
