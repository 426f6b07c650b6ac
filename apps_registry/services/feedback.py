"""Feedback from an app's users to staff; staff answers come back with the app's next tool result."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from apps_registry.access import app_for
from apps_registry.exceptions import InvalidInput, unstorable_text_refuse
from apps_registry.models import Feedback
from apps_registry.values import type_name

FEEDBACK_MAX_CHARS = 5000


@transaction.atomic
def feedback_send(*, actor: Any, app_id: uuid.UUID | str, body: str) -> Feedback:
    """Record feedback on an app from any of its members (owner, editor or viewer).

    NotFound when the app does not exist or the actor is not a member; InvalidInput for an empty
    or overlong body.
    """
    app, _role = app_for(actor=actor, app_id=app_id, need="feedback")
    if not isinstance(body, str):
        raise InvalidInput(
            "Feedback body must be a string of text.",
            errors=[{"path": "$.body", "message": f"expected a string, got {type_name(body)}"}],
        )
    unstorable_text_refuse(body, path="$.body", what="Feedback body")
    text = body.strip()
    if not text:
        raise InvalidInput(
            "Feedback body is empty: write what you would like the app's staff to know.",
            errors=[{"path": "$.body", "message": "must contain text"}],
        )
    if len(text) > FEEDBACK_MAX_CHARS:
        raise InvalidInput(
            f"Feedback body is {len(text)} characters long; the limit is {FEEDBACK_MAX_CHARS}. Shorten it.",
            errors=[{"path": "$.body", "message": f"at most {FEEDBACK_MAX_CHARS} characters, got {len(text)}"}],
        )
    return Feedback.objects.create(app=app, author=actor, body=text)
