"""Staff work done from the admin: resolving advisories and answering feedback."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps_registry.exceptions import Forbidden, InvalidInput
from apps_registry.models import Advisory, Feedback, FeedbackResponse


def advisories_resolve(*, advisories: QuerySet[Advisory]) -> int:
    """Mark advisories resolved; returns how many changed."""
    return advisories.filter(resolved=False).update(resolved=True, resolved_at=timezone.now())


@transaction.atomic
def feedback_respond(*, staff: Any, feedback: Feedback, body: str) -> FeedbackResponse:
    """Answer a user's feedback. The answer reaches the user's agent with the app's next tool result."""
    if not staff.is_staff:
        raise Forbidden("Only staff can answer feedback.")
    if not body.strip():
        raise InvalidInput(
            "A response needs a body: write the answer to the user's feedback.",
            errors=[{"path": "$.body", "message": "must contain text"}],
        )
    return FeedbackResponse.objects.create(feedback=feedback, staff_author=staff, body=body)
