"""Notices: what an app's notify steps tell its members, on their home page and by e-mail.

A notify step names roles (owner, editors, viewers), never addresses: the recipients are the app's members in those
roles when the mutation runs, less those who turned its notices off and deactivated accounts. The notice and each
member's receipt are written in the mutation's transaction (a mutation that fails sends nothing); the e-mails go
after it commits, only to addresses their owners confirmed. An app sends at most CHARMING_NOTICES_PER_APP_PER_DAY
notices in any 24 hours; past that its notify steps are skipped (the mutation itself goes on) and its owner gets
one notice saying so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.db import transaction
from django.utils import timezone

from apps_registry.access import app_for
from apps_registry.exceptions import NotFound
from apps_registry.links import app_page_url
from apps_registry.models import App, Membership, Notice, NoticeReceipt, Role
from apps_registry.routes.steps import NOTIFY_ROLES, NoticeDraft
from apps_registry.values import clip, parse_uuid

logger = logging.getLogger(__name__)

DAY = timedelta(hours=24)


@dataclass(frozen=True)
class NoticeSent:
    """What became of one notify step's notice: how many members it reached, or why it was not sent."""

    subject: str
    roles: tuple[str, ...]
    recipients: int
    skipped: str = ""  # why it was not sent (the app's daily bound)

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"subject": self.subject, "to": list(self.roles), "recipients": self.recipients}
        if self.skipped:
            shown["skipped"] = self.skipped
        return shown


def notices_send(
    *, app: App, drafts: list[NoticeDraft], via: str, route: str, change_id: int | None, now: datetime | None = None
) -> list[NoticeSent]:
    """Record the notices of one mutation (in its transaction) and queue their e-mails for its commit; says what
    became of each (those over the app's daily bound are not sent)."""
    now = now or timezone.now()
    bound = settings.CHARMING_NOTICES_PER_APP_PER_DAY
    sent_today = Notice.objects.filter(app=app, created_at__gte=now - DAY).exclude(route="").count()
    results: list[NoticeSent] = []
    for draft in drafts:
        if sent_today >= bound:
            _bound_reached_once(app, now=now, bound=bound)
            logger.info("app %s: a notice was not sent, %d sent in 24 hours already", app.id, bound)
            skipped = (
                f"the app sent {bound} notices in the last 24 hours, the most it may (CHARMING_NOTICES_PER_APP_PER_DAY)"
            )
            results.append(NoticeSent(subject=draft.subject, roles=draft.roles, recipients=0, skipped=skipped))
            continue
        roles = [NOTIFY_ROLES[name] for name in draft.roles]
        recipients = _send(
            app,
            subject=draft.subject,
            text=draft.text,
            roles=roles,
            label=",".join(draft.roles),
            via=via,
            route=route,
            change_id=change_id,
            now=now,
        )
        results.append(NoticeSent(subject=draft.subject, roles=draft.roles, recipients=recipients))
        sent_today += 1
    return results


def _send(
    app: App,
    *,
    subject: str,
    text: str,
    roles: list[str],
    label: str,
    via: str,
    route: str,
    change_id: int | None,
    now: datetime,
) -> int:
    """Write the notice and its receipts; returns how many members it reaches."""
    members = Membership.objects.filter(app=app, role__in=roles, notices_muted=False, user__is_active=True)
    user_ids = list(members.values_list("user_id", flat=True))
    notice = Notice.objects.create(
        app=app, subject=subject, text=text, roles=label, route=route, via=via, change_id=change_id, created_at=now
    )
    NoticeReceipt.objects.bulk_create([NoticeReceipt(notice=notice, user_id=pk) for pk in user_ids])
    notice.recipients = len(user_ids)  # type: ignore[attr-defined]  # what the caller is told
    if user_ids:
        transaction.on_commit(lambda: _mail(notice, app, user_ids))
    return len(user_ids)


def _bound_reached_once(app: App, *, now: datetime, bound: int) -> None:
    """Tell the owner, once per 24 hours, that the app's notices stopped for now."""
    if Notice.objects.filter(app=app, route="", created_at__gte=now - DAY).exists():
        return
    _send(
        app,
        subject=f"'{clip(app.name, 80)}' sent its notices for today",
        text=(
            f"App '{app.name}' sent {bound} notices in the last 24 hours, the most an app may send "
            "(CHARMING_NOTICES_PER_APP_PER_DAY). Its notify steps are skipped until fewer were sent in the last 24 "
            "hours; its actions still run. If that is more than you want, change the route that notifies."
        ),
        roles=[Role.OWNER],
        label="owner",
        via="internal",
        route="",
        change_id=None,
        now=now,
    )


def _mail(notice: Notice, app: App, user_ids: list[Any]) -> None:
    """E-mail the notice to the recipients whose address is confirmed (an unconfirmed one may be someone else's)."""
    page = app_page_url(app.id)
    body = (
        f"{notice.text}\n\n"
        f"-- Sent by your app '{app.name}' on Charming: {page}\n"
        f"To stop these, turn off this app's notices on its page: {page}#notices\n"
    )
    people = get_user_model().objects.filter(pk__in=user_ids, is_active=True).select_related("confirmed_email")
    addresses = []
    for person in people:
        confirmed = getattr(person, "confirmed_email", None)
        if confirmed is not None and person.email and confirmed.email.lower() == person.email.lower():
            addresses.append(person.email)
    if not addresses:
        return
    subject = f"{app.name}: {notice.subject}"
    try:  # one connection for all of them, bounded by EMAIL_TIMEOUT
        send_mass_mail([(subject, body, None, [address]) for address in addresses], fail_silently=False)
    except Exception:  # the notice stands on the home pages whether or not the mail went
        logger.exception("notice %s: could not e-mail %d recipients", notice.id, len(addresses))


# --- reading and answering them ---


@dataclass(frozen=True)
class UnreadNotices:
    receipts: list[NoticeReceipt]  # the newest first, with their notice and its app
    total: int


def notices_unread_for(user: Any, *, limit: int = 20) -> UnreadNotices:
    """The user's unread notices (of apps they can still see), newest first."""
    unread = NoticeReceipt.objects.filter(user=user, read_at__isnull=True, notice__app__memberships__user=user)
    receipts = list(unread.select_related("notice", "notice__app").order_by("-notice__created_at", "-id")[:limit])
    return UnreadNotices(receipts=receipts, total=unread.count() if len(receipts) == limit else len(receipts))


def notice_read(*, actor: Any, receipt_id: Any = None) -> int:
    """Mark one of the actor's notices read, or all of them (no `receipt_id`); returns how many."""
    unread = NoticeReceipt.objects.filter(user=actor, read_at__isnull=True)
    if receipt_id is not None:
        pk = receipt_id if isinstance(receipt_id, int) else _int(receipt_id)
        if pk is None or not NoticeReceipt.objects.filter(user=actor, pk=pk).exists():
            raise NotFound(f"No notice with id {clip(receipt_id)} is yours.")
        unread = unread.filter(pk=pk)
    return unread.update(read_at=timezone.now())


def _int(value: Any) -> int | None:
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


@transaction.atomic
def notices_mute_set(*, actor: Any, app_id: Any, muted: bool) -> bool:
    """Turn the actor's notices from an app off (`muted`) or on again (any member, for themselves)."""
    app, _role = app_for(actor=actor, app_id=app_id, need="read")
    Membership.objects.filter(app=app, user=actor).update(notices_muted=muted)
    return muted


def notices_muted(*, user: Any, app_id: Any) -> bool:
    """Whether the user turned the app's notices off."""
    pk = parse_uuid(app_id)
    return bool(pk and Membership.objects.filter(app_id=pk, user=user, notices_muted=True).exists())
