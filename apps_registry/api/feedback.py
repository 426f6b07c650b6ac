"""Feedback on an app: members send it; staff answers come back with the app's next tool result."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.access import app_for
from apps_registry.exceptions import InvalidInput
from apps_registry.models import Feedback
from apps_registry.selectors import feedback_sent_by
from apps_registry.services.feedback import feedback_send


class AppFeedbackView(APIView):
    """POST /api/apps/<app_id>/feedback/ {"body": "..."}: send feedback (any member).
    GET: the caller's own feedback on the app, with staff answers and when each was read."""

    def post(self, request: Request, app_id: str) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise InvalidInput(
                'Send a JSON object like {"body": "what you would like staff to know"}.',
                errors=[{"path": "$", "message": f"expected an object, got {type(data).__name__}"}],
            )
        unknown = sorted(set(data) - {"body"})
        if unknown:
            raise InvalidInput(
                f"Unknown field(s) {', '.join(repr(k) for k in unknown)}: feedback takes only 'body'.",
                errors=[{"path": f"$.{key}", "message": "unknown field"} for key in unknown],
            )
        if "body" not in data:
            raise InvalidInput(
                "Missing 'body': the text of your feedback.",
                errors=[{"path": "$.body", "message": "required"}],
            )
        feedback = feedback_send(actor=request.user, app_id=app_id, body=data["body"])
        return Response({"ok": True, "value": _feedback_json(feedback)}, status=status.HTTP_201_CREATED)

    def get(self, request: Request, app_id: str) -> Response:
        app, _role = app_for(actor=request.user, app_id=app_id, need="read")
        items = [_feedback_json(f) for f in feedback_sent_by(user=request.user, app=app)]
        return Response({"ok": True, "value": items})


def _feedback_json(feedback: Feedback) -> dict[str, Any]:
    return {
        "id": feedback.pk,
        "app_id": str(feedback.app_id),
        "body": feedback.body,
        "created_at": feedback.created_at.isoformat(),
        "responses": [
            {
                "body": response.body,
                "created_at": response.created_at.isoformat(),
                "read_at": response.read_at.isoformat() if response.read_at else None,
            }
            for response in feedback.responses.all()
        ],
    }
