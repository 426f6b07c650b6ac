"""Advisory delivery: which advisories a result about an app carries, for every transport.

A result carries the app's open advisories and one `feedback-response` note per unread staff answer
to the caller's feedback on that app; delivering an answer marks it read, so it is delivered once.
Each transport shapes the notes for its own callers (mcp_tools.results for the tool contracts).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

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
        notes.extend(_feedback_response_note(response, app) for response in unread)
    return notes
