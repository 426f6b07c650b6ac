"""Feedback on an app: members send it; staff answers come back with the app's next results."""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.access import app_for
from apps_registry.api.serializers import IsoDateTimeField, StrictInputSerializer, input_validated
from apps_registry.selectors import feedback_sent_by
from apps_registry.services.feedback import feedback_send


class FeedbackResponseSerializer(serializers.Serializer):
    body = serializers.CharField()
    created_at = IsoDateTimeField()
    read_at = IsoDateTimeField(allow_null=True)


class FeedbackSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    app_id = serializers.UUIDField()
    body = serializers.CharField()
    created_at = IsoDateTimeField()
    responses = FeedbackResponseSerializer(many=True, source="responses.all")


class AppFeedbackView(APIView):
    """POST /api/apps/<app_id>/feedback/ {"body": "..."}: send feedback (any member).
    GET: the caller's own feedback on the app, with staff answers and when each was read."""

    class InputSerializer(StrictInputSerializer):
        example = '{"body": "what you would like staff to know"}'
        takes = "feedback takes only 'body'."

        # Any JSON: the service says what a body must be (text, not empty, not too long).
        body = serializers.JSONField(
            allow_null=True, error_messages={"required": "Missing 'body': the text of your feedback."}
        )

    OutputSerializer = FeedbackSerializer
    scope_needs = {"POST": "feedback", "GET": "read"}

    def post(self, request: Request, app_id: str) -> Response:
        data = input_validated(self.InputSerializer, request.data)
        feedback = feedback_send(actor=request.user, app_id=app_id, body=data["body"])
        return Response({"ok": True, "value": self.OutputSerializer(feedback).data}, status=status.HTTP_201_CREATED)

    def get(self, request: Request, app_id: str) -> Response:
        app, _role = app_for(actor=request.user, app_id=app_id, need="read")
        items = self.OutputSerializer(feedback_sent_by(user=request.user, app=app), many=True).data
        return Response({"ok": True, "value": items})
