"""Advisory delivery: which advisories a result about an app carries, for every transport.

A result carries the app's open advisories and one `feedback-response` note per unread staff answer
to the caller's feedback on that app; delivering an answer marks it read, so it is delivered once.
Each transport shapes the notes for its own callers (mcp_tools.results for the tool contracts).

A route call reads what it needs to know about them in its own lookup query (`AdvisoryState`, see
services.routes), so a result costs no second transaction: the open advisories come from a per-process
snapshot of each app's, kept while the state the call read still matches it (the open advisories' count,
newest id and latest change, read by every call: exact in every process), and answers are read only when
the lookup found one unread.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps_registry.access import app_for
from apps_registry.exceptions import NotFound
from apps_registry.models import Advisory, App, FeedbackResponse
from apps_registry.selectors import advisories_open_for
from apps_registry.values import clip

logger = logging.getLogger(__name__)

FEEDBACK_RESPONSE_KIND = "feedback-response"


@dataclass(frozen=True)
class AdvisoryNote:
    """One advisory as a result carries it; `user_summary`, `data` and `doc_url` are empty when unset."""

    kind: str
    severity: str
    summary: str
    user_summary: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    doc_url: str = ""


def _stored_note(advisory: Advisory) -> AdvisoryNote:
    return AdvisoryNote(
        kind=advisory.kind,
        severity=advisory.severity,
        summary=advisory.summary,
        user_summary=advisory.user_summary,
        data=advisory.data or {},
        doc_url=advisory.doc_url,
    )


def _feedback_response_note(response: FeedbackResponse, app: App) -> AdvisoryNote:
    feedback = response.feedback
    excerpt = clip(feedback.body, 120)
    sent = f"{feedback.created_at:%Y-%m-%d}"
    return AdvisoryNote(
        kind=FEEDBACK_RESPONSE_KIND,
        severity="info",
        summary=(
            f"Charming staff answered the feedback the user sent on {sent} about the app '{app.name}' "
            f'("{excerpt}"): {response.body} -- Pass this answer on to the user.'
        ),
        user_summary=f"Charming staff answered your feedback about '{app.name}': {response.body}",
        data={
            "feedback_id": str(feedback.pk),
            "response_id": str(response.pk),
            "feedback_excerpt": excerpt,
            "responded_at": response.created_at.isoformat(),
        },
    )


@dataclass(frozen=True)
class AdvisoryState:
    """What a call's lookup read about the app's advisories for its caller (services.routes)."""

    open_count: int  # the open advisories: how many, the newest id, the latest change
    newest_id: int | None
    changed_at: datetime | None
    answers_unread: bool  # a staff answer to the caller's feedback on this app waits to be delivered

    @staticmethod
    def read(*, open_count: Any, newest_id: Any, changed_at: Any, answers_unread: Any) -> AdvisoryState:
        """From the lookup's raw columns (SQLite answers a timestamp as text and a boolean as 0 or 1)."""
        moment = parse_datetime(changed_at) if isinstance(changed_at, str) else changed_at
        if moment is not None and timezone.is_naive(moment):
            moment = timezone.make_aware(moment, UTC)
        return AdvisoryState(
            open_count=int(open_count or 0),
            newest_id=None if newest_id is None else int(newest_id),
            changed_at=moment,
            answers_unread=bool(answers_unread),
        )

    @property
    def fingerprint(self) -> tuple[int, int | None, datetime | None]:
        return (self.open_count, self.newest_id, self.changed_at)


# app id -> (fingerprint, notes): the open advisories as last read in this process. Bounded; a stale entry is
# never used (every call compares the fingerprint it read), only replaced.
_SNAPSHOTS: dict[uuid.UUID, tuple[tuple[int, int | None, datetime | None], tuple[AdvisoryNote, ...]]] = {}
SNAPSHOT_APPS = 2048


def advisories_for_call(*, actor: Any, app: App, state: AdvisoryState) -> list[AdvisoryNote]:
    """The advisories a route call's result carries, given the `state` its lookup read, in the caller's own
    transaction (a mutation's: answers are marked read exactly when it commits). Nothing is queried while the
    app's snapshot matches and no answer waits. A failure to read them is logged and answered with none (in a
    savepoint, so the call's own work still commits): reporting a committed write as failed would invite a
    second write."""
    notes = list(_open_notes(app, state))
    if not state.answers_unread:
        return notes
    try:
        with transaction.atomic():
            notes.extend(_answers_deliver(actor=actor, app=app))
    except Exception:
        logger.exception("Feedback answers for app %s could not be delivered; the result goes without them", app)
    return notes


def _open_notes(app: App, state: AdvisoryState) -> tuple[AdvisoryNote, ...]:
    if state.open_count == 0:
        return ()
    cached = _SNAPSHOTS.get(app.pk)
    if cached is not None and cached[0] == state.fingerprint:
        return cached[1]
    try:
        with transaction.atomic():
            advisories = list(advisories_open_for(app))
    except Exception:
        logger.exception("Advisories for app %s could not be read; the result goes without them", app)
        return ()
    notes = tuple(_stored_note(advisory) for advisory in advisories)
    read = AdvisoryState(
        open_count=len(advisories),
        newest_id=max((advisory.pk for advisory in advisories), default=None),
        changed_at=max((advisory.updated_at for advisory in advisories), default=None),
        answers_unread=state.answers_unread,
    )
    # Kept only when the rows are those the lookup saw: a change committed in between is read now, and
    # the next call's lookup (which sees it too) finds no snapshot to match and reads again.
    if read.fingerprint == state.fingerprint:
        if len(_SNAPSHOTS) >= SNAPSHOT_APPS:
            # Start over rather than evict one: clear() is one atomic step for the threads sharing the dict,
            # where iterating it to find the oldest could meet another thread's insert mid-way.
            _SNAPSHOTS.clear()
        _SNAPSHOTS[app.pk] = (state.fingerprint, notes)
    return notes


def advisories_after_commit(
    *, actor: Any, app: App | None = None, app_id: uuid.UUID | str | None = None
) -> list[AdvisoryNote]:
    """advisories_deliver for a result whose work is done (committed, or failed on its own): a failure to read
    the advisories is logged and answered with none, so it never turns that result into another one."""
    try:
        return advisories_deliver(actor=actor, app=app, app_id=app_id)
    except Exception:
        # The caller's write has committed: reporting it as failed would invite a second write.
        logger.exception("Advisories for app %s could not be delivered; the result goes without them", app or app_id)
        return []


@transaction.atomic
def advisories_deliver(
    *, actor: Any, app: App | None = None, app_id: uuid.UUID | str | None = None
) -> list[AdvisoryNote]:
    """The advisories a result about an app carries for `actor`, marking delivered feedback answers read.

    Pass `app` when the call reached it (through apps_registry.access), else `app_id`: an app the
    actor cannot see (or a missing one) carries none.
    """
    if app is None:
        try:
            app, _role = app_for(actor=actor, app_id=str(app_id), need="read")
        except NotFound:
            return []
    notes = [_stored_note(advisory) for advisory in advisories_open_for(app)]
    notes.extend(_answers_deliver(actor=actor, app=app))
    return notes


def _answers_deliver(*, actor: Any, app: App) -> list[AdvisoryNote]:
    # Locked so two concurrent calls cannot both deliver (or both miss) the same answer.
    unread = list(
        FeedbackResponse.objects.select_for_update(of=("self",))
        .select_related("feedback")
        .filter(feedback__app=app, feedback__author=actor, read_at__isnull=True)
        .order_by("created_at", "id")
    )
    if unread:
        FeedbackResponse.objects.filter(pk__in=[r.pk for r in unread], read_at__isnull=True).update(
            read_at=timezone.now()
        )
    return [_feedback_response_note(response, app) for response in unread]
