"""Sharing an app: invitations (invite, accept, decline, revoke) and memberships (change a role, remove,
leave). Who may do each is decided by apps_registry.access; every change is audited."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps_registry.access import (
    app_for,
    invitation_for,
    invitation_of_app,
    invitation_pending_check,
    leave_check,
    owner_membership_check,
    shareable_role_check,
)
from apps_registry.exceptions import InvalidInput, NotFound, OperationFailed
from apps_registry.models import App, Invitation, InvitationStatus, Membership, Role
from apps_registry.services.apps import audit_record
from apps_registry.values import clip_repr


def _with_article(role: str) -> str:
    return f"an {role}" if role[0] in "aeiou" else f"a {role}"


def user_named(identifier: object) -> Any:
    """The active user with this username, or else this email (case-insensitive) once its account has confirmed
    it; InvalidInput if none.

    The refusal is the same for an unknown username, an unknown email and an unconfirmed one (see docs/sharing.md):
    an address only claimed at sign-up proves nothing, so an invitation to it never reaches whoever claimed it.
    """
    if not isinstance(identifier, str) or not identifier.strip():
        raise InvalidInput(
            "Name the person to invite: their username or email.",
            errors=[{"path": "$.user", "message": "must be a username or an email"}],
        )
    name = identifier.strip()
    users = get_user_model().objects.filter(is_active=True)
    user = None
    if "@" in name:
        # An email names the account that has confirmed it (at most one: the address is unique whatever its case),
        # never an account whose username merely looks like it.
        user = users.filter(email__iexact=name, confirmed_email__email__iexact=name).first()
    else:
        user = users.filter(username=name).first()
    if user is None:
        raise InvalidInput(
            f"No Charming user has the username or confirmed email {clip_repr(name)}. "
            "Check the spelling, or ask them to sign up (and confirm their email address) first.",
            errors=[{"path": "$.user", "message": "no such user"}],
        )
    return user


def _member_of(*, app: App, username: str, for_update: bool = False) -> Membership:
    memberships = Membership.objects.select_related("user").filter(app=app, user__username=username)
    if for_update:
        memberships = memberships.select_for_update(of=("self",))
    membership = memberships.first()
    if membership is None:
        raise NotFound(f"'{username}' is not a member of app '{app.name}'.")
    return membership


@transaction.atomic
def invitation_create(*, actor: Any, app_id: uuid.UUID | str, invitee: str, role: str) -> Invitation:
    """The owner invites a user (by username or email) to the app as editor or viewer.

    Refused: a role other than editor/viewer, an unknown user, the owner, a member, or someone already
    invited (one pending invitation per app and invitee).
    """
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    shareable_role_check(role)
    user = user_named(invitee)
    if user.pk == app.owner_id:
        raise InvalidInput(
            f"You own app '{app.name}': its one owner cannot be invited to it.",
            errors=[{"path": "$.user", "message": "is the app's owner"}],
        )
    existing = Membership.objects.filter(app=app, user=user).first()
    if existing is not None:
        raise OperationFailed(
            f"'{user.get_username()}' is already {_with_article(existing.role)} of app '{app.name}'; "
            "change their role instead of inviting them.",
            details={"username": user.get_username(), "role": existing.role},
        )
    pending = Invitation.objects.filter(app=app, invitee=user, status=InvitationStatus.PENDING).first()
    if pending is not None:
        raise OperationFailed(_already_invited(app=app, username=user.get_username(), role=pending.role))
    try:
        with transaction.atomic():
            invitation = Invitation.objects.create(app=app, invitee=user, role=role, invited_by=actor)
    except IntegrityError:  # a concurrent invite won the one pending slot
        raise OperationFailed(_already_invited(app=app, username=user.get_username(), role=role)) from None
    audit_record(
        actor=actor,
        action="membership.invite",
        app_id=app.id,
        details={"app_name": app.name, "invitation_id": invitation.pk, "username": user.get_username(), "role": role},
    )
    return invitation


def _already_invited(*, app: App, username: str, role: str) -> str:
    return (
        f"'{username}' already has a pending invitation to app '{app.name}' (as {role}); "
        "revoke it before inviting them again."
    )


@transaction.atomic
def invitation_accept(*, actor: Any, invitation_id: int | str) -> Membership:
    """The invitee accepts a pending invitation and becomes a member with its role."""
    invitation = invitation_for(actor=actor, invitation_id=invitation_id, for_update=True)
    invitation_pending_check(invitation)
    app = invitation.app
    membership = Membership.objects.filter(app=app, user=actor).first()
    if membership is None:
        membership = Membership.objects.create(app=app, user=actor, role=invitation.role)
    elif membership.role != Role.OWNER:  # made a member meanwhile: the invitation's role wins
        membership.role = invitation.role
        membership.save(update_fields=["role"])
    _answer(invitation, InvitationStatus.ACCEPTED)
    audit_record(
        actor=actor,
        action="membership.accept",
        app_id=app.id,
        details={"app_name": app.name, "invitation_id": invitation.pk, "role": invitation.role},
    )
    return membership


@transaction.atomic
def invitation_decline(*, actor: Any, invitation_id: int | str) -> Invitation:
    """The invitee declines a pending invitation; they gain nothing and the owner may invite again."""
    invitation = invitation_for(actor=actor, invitation_id=invitation_id, for_update=True)
    invitation_pending_check(invitation)
    _answer(invitation, InvitationStatus.DECLINED)
    audit_record(
        actor=actor,
        action="membership.decline",
        app_id=invitation.app_id,
        details={"app_name": invitation.app.name, "invitation_id": invitation.pk, "role": invitation.role},
    )
    return invitation


@transaction.atomic
def invitation_revoke(*, actor: Any, app_id: uuid.UUID | str, invitation_id: int | str) -> Invitation:
    """The owner withdraws a pending invitation to their app."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    invitation = invitation_of_app(app=app, invitation_id=invitation_id)
    invitation_pending_check(invitation)
    _answer(invitation, InvitationStatus.REVOKED)
    audit_record(
        actor=actor,
        action="membership.revoke",
        app_id=app.id,
        details={
            "app_name": app.name,
            "invitation_id": invitation.pk,
            "username": invitation.invitee.get_username(),
            "role": invitation.role,
        },
    )
    return invitation


def _answer(invitation: Invitation, status: InvitationStatus) -> None:
    invitation.status = status
    invitation.responded_at = timezone.now()
    invitation.save(update_fields=["status", "responded_at"])


@transaction.atomic
def membership_role_change(*, actor: Any, app_id: uuid.UUID | str, username: str, role: str) -> Membership:
    """The owner changes a member's role (editor or viewer); the owner's own role never changes."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    shareable_role_check(role)
    membership = _member_of(app=app, username=username, for_update=True)
    owner_membership_check(app=app, user=membership.user)
    previous = membership.role
    if previous != role:
        membership.role = role
        membership.save(update_fields=["role"])
        audit_record(
            actor=actor,
            action="membership.role_change",
            app_id=app.id,
            details={"app_name": app.name, "username": username, "from": previous, "to": role},
        )
    return membership


@transaction.atomic
def membership_remove(*, actor: Any, app_id: uuid.UUID | str, username: str) -> None:
    """The owner removes a member (not themselves): the app disappears from that member's listings."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    membership = _member_of(app=app, username=username, for_update=True)
    if membership.user_id == app.owner_id:
        raise InvalidInput(
            f"The owner cannot be removed from app '{app.name}': an app has exactly one owner.",
            errors=[{"path": "$.user", "message": "is the app's owner"}],
        )
    role = membership.role
    membership.delete()
    audit_record(
        actor=actor,
        action="membership.remove",
        app_id=app.id,
        details={"app_name": app.name, "username": username, "role": role},
    )


@transaction.atomic
def membership_leave(*, actor: Any, app_id: uuid.UUID | str) -> None:
    """A member (editor or viewer) leaves an app; the owner cannot."""
    app, role = app_for(actor=actor, app_id=app_id, need="read", for_update=True)
    leave_check(app=app, role=role)
    Membership.objects.filter(app=app, user=actor).delete()
    audit_record(actor=actor, action="membership.leave", app_id=app.id, details={"app_name": app.name, "role": role})
