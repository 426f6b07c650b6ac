"""Renaming an app, and handing it over to another person.

A transfer is an offer, like an invitation: the owner names someone (a username, or an e-mail address its account
confirmed), nothing changes until they accept, and the owner can take it back meanwhile. Accepting makes them the
owner (its records, members, schedules, webhooks and template come with it) and the former owner an editor, who can
leave. One offer waits per app. The recipient's own limits apply: an app whose schedules, webhooks or declared
indexes would take them over their per-owner counts is refused with the count.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps_registry.access import app_for
from apps_registry.exceptions import InvalidInput, NotFound, OperationFailed, unstorable_text_refuse
from apps_registry.models import App, AppTransfer, Hook, InvitationStatus, Membership, Role, Schedule, Storage
from apps_registry.routes.limits import current_limits
from apps_registry.services.apps import audit_record
from apps_registry.services.collection_indexes import declared_index_keys
from apps_registry.services.sharing import user_named
from apps_registry.values import clip


@transaction.atomic
def app_rename(*, actor: Any, app_id: Any, name: Any) -> App:
    """Give the app a new name (its owner or an editor, as for its definition); its history keeps the old one."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author", for_update=True)
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("Give the app a name.", errors=[{"path": "$.name", "message": "required"}])
    unstorable_text_refuse(name, path="$.name", what="The name")
    text = " ".join(name.split())
    if len(text) > 200:
        raise InvalidInput(
            f"The name is {len(text)} characters long; at most 200.",
            errors=[{"path": "$.name", "message": "at most 200 characters"}],
        )
    before = app.name
    App.objects.filter(pk=app.pk).update(name=text)
    Storage.objects.filter(app=app).update(app_name=text)
    app.name = text
    audit_record(actor=actor, action="app.rename", app_id=app.id, details={"from": before, "to": text})
    return app


@transaction.atomic
def app_transfer_offer(*, actor: Any, app_id: Any, to: Any) -> AppTransfer:
    """The owner offers their app to someone; it is theirs once they accept."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    recipient = user_named(to)
    if recipient.pk == actor.pk:
        raise InvalidInput(
            "You own this app already: name someone else.", errors=[{"path": "$.user", "message": "is you"}]
        )
    waiting = AppTransfer.objects.filter(app=app, status=InvitationStatus.PENDING).first()
    if waiting is not None:
        raise OperationFailed(
            f"App '{app.name}' is already offered to {waiting.to_user.get_username()}; take that offer back first.",
            details={"transfer_id": waiting.pk},
        )
    transfer = AppTransfer.objects.create(app=app, from_user=actor, to_user=recipient)
    audit_record(
        actor=actor,
        action="app.transfer_offer",
        app_id=app.id,
        details={"transfer_id": transfer.pk, "to": recipient.get_username()},
    )
    return transfer


def _pending(*, transfer_id: Any, **who: Any) -> AppTransfer:
    """The offer waiting for `who`, with its app's row locked first (the order offer and revoke take them in), then
    the offer's, read again under the locks."""
    pk = _transfer_pk(transfer_id)
    found = None if pk is None else AppTransfer.objects.filter(pk=pk, status=InvitationStatus.PENDING, **who).first()
    if found is not None:
        App.objects.select_for_update(of=("self",)).filter(pk=found.app_id).first()
        rows = AppTransfer.objects.select_for_update(of=("self",)).select_related("app", "to_user", "from_user")
        found = rows.filter(pk=found.pk, status=InvitationStatus.PENDING, **who).first()
    if found is None:
        raise NotFound(f"No offer with id {clip(transfer_id)} is waiting for you.")
    return found


def _transfer_pk(value: Any) -> int | None:
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


@transaction.atomic
def app_transfer_accept(*, actor: Any, transfer_id: Any) -> App:
    """The recipient takes the app over: they own it, and the former owner stays an editor."""
    transfer = _pending(transfer_id=transfer_id, to_user=actor)
    app = transfer.app
    if app.owner_id != transfer.from_user_id:  # owned by someone else since: the offer lapsed
        transfer.status, transfer.responded_at = InvitationStatus.REVOKED, timezone.now()
        transfer.save(update_fields=["status", "responded_at"])
        raise NotFound(f"No offer with id {clip(transfer_id)} is waiting for you.")
    _counts_check(app=app, recipient=actor)
    Membership.objects.filter(app=app, user_id=transfer.from_user_id).update(role=Role.EDITOR)
    Membership.objects.update_or_create(app=app, user=actor, defaults={"role": Role.OWNER})
    App.objects.filter(pk=app.pk).update(owner=actor)
    Storage.objects.filter(app=app).update(owner=actor)
    transfer.status, transfer.responded_at = InvitationStatus.ACCEPTED, timezone.now()
    transfer.save(update_fields=["status", "responded_at"])
    audit_record(
        actor=actor,
        action="app.transfer_accept",
        app_id=app.id,
        details={"transfer_id": transfer.pk, "from": transfer.from_user.get_username()},
    )
    app.owner = actor
    return app


def _counts_check(*, app: App, recipient: Any) -> None:
    coming_indexes = len(declared_index_keys(app.collections))
    if coming_indexes:  # every declared index costs the shared records table: the per-owner limit is the recipient's
        most = current_limits().indexes_per_owner
        theirs = sum(
            len(declared_index_keys(declared))
            for declared in App.objects.filter(owner=recipient).values_list("collections", flat=True)
        )
        if theirs + coming_indexes > most:
            raise OperationFailed(
                f"Taking app '{app.name}' over would give your apps {theirs + coming_indexes} declared indexes; one "
                f"owner's apps may declare {most} (CHARMING_ROUTES_MAX_INDEXES_PER_OWNER). Drop some from your apps' "
                "collections first, or ask the owner to drop this app's.",
                details={"limit": "indexes_per_owner", "max": most},
            )
    for model, setting, what in (
        (Schedule, "CHARMING_SCHEDULES_PER_OWNER", "schedules"),
        (Hook, "CHARMING_HOOKS_PER_OWNER", "webhooks"),
    ):
        most = getattr(settings, setting)
        theirs = model.objects.filter(app__owner=recipient).count()  # type: ignore[attr-defined]
        coming = model.objects.filter(app=app).count()  # type: ignore[attr-defined]
        if theirs + coming > most:
            raise OperationFailed(
                f"Taking app '{app.name}' over would give your apps {theirs + coming} {what}; one owner's apps may "
                f"have {most} ({setting}). Delete some first, or ask the owner to remove this app's.",
                details={"limit": setting.removeprefix("CHARMING_").lower(), "max": most},
            )


@transaction.atomic
def app_transfer_decline(*, actor: Any, transfer_id: Any) -> AppTransfer:
    """The recipient says no; nothing changes."""
    transfer = _pending(transfer_id=transfer_id, to_user=actor)
    transfer.status, transfer.responded_at = InvitationStatus.DECLINED, timezone.now()
    transfer.save(update_fields=["status", "responded_at"])
    audit_record(
        actor=actor, action="app.transfer_decline", app_id=transfer.app_id, details={"transfer_id": transfer.pk}
    )
    return transfer


@transaction.atomic
def app_transfer_revoke(*, actor: Any, app_id: Any) -> AppTransfer:
    """The owner takes their offer back."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    transfer = AppTransfer.objects.filter(app=app, status=InvitationStatus.PENDING).first()
    if transfer is None:
        raise NotFound(f"App '{app.name}' is not offered to anyone.")
    transfer.status, transfer.responded_at = InvitationStatus.REVOKED, timezone.now()
    transfer.save(update_fields=["status", "responded_at"])
    audit_record(actor=actor, action="app.transfer_revoke", app_id=app.id, details={"transfer_id": transfer.pk})
    return transfer


def transfers_pending_for(user: Any) -> list[AppTransfer]:
    """The offers waiting for the user's answer (from whoever still owns the app), newest first."""
    rows = AppTransfer.objects.filter(to_user=user, status=InvitationStatus.PENDING, app__owner_id=F("from_user_id"))
    return list(rows.select_related("app", "from_user"))


def transfer_pending_of(*, actor: Any, app_id: Any) -> AppTransfer | None:
    """The app's offer waiting for an answer, for its owner's page."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own")
    return AppTransfer.objects.filter(app=app, status=InvitationStatus.PENDING).select_related("to_user").first()
