"""Advisories attached to an app's tool results, including delivery of staff answers to feedback."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from apps_registry.models import Advisory, App, FeedbackResponse
from apps_registry.selectors import advisories_open_for

FEEDBACK_RESPONSE_KIND = "feedback-response"


def advisory_as_contract(advisory: Advisory) -> dict[str, Any]:
    """An advisory in the tool contract's shape: kind, severity, summary and the optional fields when set."""
    shaped: dict[str, Any] = {"kind": advisory.kind, "severity": advisory.severity, "summary": advisory.summary}
    if advisory.user_summary:
        shaped["userSummary"] = advisory.user_summary
    if advisory.data:
        shaped["data"] = advisory.data
    if advisory.doc_url:
        shaped["doc_url"] = advisory.doc_url
    return shaped


def _feedback_response_advisory(response: FeedbackResponse, app: App) -> dict[str, Any]:
    feedback = response.feedback
    excerpt = feedback.body if len(feedback.body) <= 120 else feedback.body[:117] + "..."
    sent = f"{feedback.created_at:%Y-%m-%d}"
    return {
        "kind": FEEDBACK_RESPONSE_KIND,
        "severity": "info",
        "summary": (
            f"Charming staff answered the feedback the user sent on {sent} about the app '{app.name}' "
            f'("{excerpt}"): {response.body} -- Pass this answer on to the user.'
        ),
        "userSummary": f"Charming staff answered your feedback about '{app.name}': {response.body}",
        "data": {
            "feedback_id": str(feedback.pk),
            "response_id": str(response.pk),
            "feedback_excerpt": excerpt,
            "responded_at": response.created_at.isoformat(),
        },
    }


@transaction.atomic
def advisories_for_result(*, actor: Any, app: App) -> list[dict[str, Any]]:
    """Open advisories of the app in the contract's shape, plus one `feedback-response` advisory per
    unread staff response to the actor's feedback on this app; those responses are marked read here."""
    shaped = [advisory_as_contract(advisory) for advisory in advisories_open_for(app)]
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
        shaped.extend(_feedback_response_advisory(response, app) for response in unread)
    return shaped
