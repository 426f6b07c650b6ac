"""Webhooks over REST: an app's hooks (list, create, rotate a secret, delete) and the deliveries themselves, POSTed
to `/hooks/<id>/` by senders that carry no token, only the signature (apps_registry/services/hooks.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.api.runs import CHANGE_ID_HEADER
from apps_registry.api.serializers import StrictInputSerializer, input_validated
from apps_registry.services.hooks import (
    SIGNATURE_HEADER,
    body_too_large,
    hook_create,
    hook_delete,
    hook_deliver,
    hook_rotate,
    hooks_for,
)


class AppHooksView(APIView):
    """GET /api/apps/<app_id>/hooks/: the app's webhooks with their last deliveries (owner and editors).
    POST {"route": "add_expense", "description": "bank export"}: a new webhook; the answer (201) holds its URL and
    its secret, shown this once."""

    class InputSerializer(StrictInputSerializer):
        example = '{"route": "add_expense", "description": "bank export"}'
        takes = "a webhook takes only 'route' (a mutation route of the app) and 'description'."

        route = serializers.JSONField(error_messages={"required": "Missing 'route': the mutation route to run."})
        description = serializers.JSONField(required=False)

    scope_needs = {"GET": "author", "POST": "author"}

    def get(self, request: Request, app_id: str) -> Response:
        _app, views = hooks_for(actor=request.user, app_id=app_id)
        return Response({"ok": True, "value": [view.as_dict() for view in views]})

    def post(self, request: Request, app_id: str) -> Response:
        data = input_validated(self.InputSerializer, request.data)
        created = hook_create(
            actor=request.user, app_id=app_id, route=data["route"], description=data.get("description", "")
        )
        return Response({"ok": True, "value": created.as_dict()}, status=status.HTTP_201_CREATED)


class AppHookView(APIView):
    """DELETE /api/apps/<app_id>/hooks/<hook_id>/: delete the webhook; its URL answers 404 from then on."""

    scope_needs = {"DELETE": "author"}

    def delete(self, request: Request, app_id: str, hook_id: str) -> Response:
        gone = hook_delete(actor=request.user, hook_id=hook_id, app_id=app_id)
        return Response({"ok": True, "value": {"id": str(gone.id), "app_id": str(gone.app_id), "route": gone.route}})


class AppHookRotateView(APIView):
    """POST /api/apps/<app_id>/hooks/<hook_id>/rotate/ {"keep_old_minutes": 60}: a new secret (in the answer, shown
    this once); the old one still signs for `keep_old_minutes` (default CHARMING_HOOK_ROTATION_OVERLAP_MINUTES)."""

    class InputSerializer(StrictInputSerializer):
        example = '{"keep_old_minutes": 60}'
        takes = "a rotation takes only 'keep_old_minutes'."

        keep_old_minutes = serializers.JSONField(required=False)

    scope_needs = {"POST": "author"}

    def post(self, request: Request, app_id: str, hook_id: str) -> Response:
        data = input_validated(self.InputSerializer, request.data)
        rotated = hook_rotate(
            actor=request.user, hook_id=hook_id, app_id=app_id, keep_old_minutes=data.get("keep_old_minutes")
        )
        return Response({"ok": True, "value": rotated.as_dict()})


class HookDeliveryView(APIView):
    """POST /hooks/<hook_id>/ with `Charming-Signature: t=…,v1=…` and the route's params as the JSON body: run the
    route. Answers its envelope, {"ok": true, "value": …} (with the Charming-Change-Id header) or {"ok": false,
    "error": …}, with the error's status (400, 401, 404, 409 for a replay, 413, 429)."""

    # No token: the signature is the credential, checked by the service on the raw body.
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes: list[Any] = []

    def post(self, request: Request, hook_id: str) -> Response:
        limit = settings.CHARMING_HOOK_BODY_BYTES
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > limit:
            raise body_too_large()
        # The bytes as sent (DRF's parsers never run: request.data is not read), at most one more than the bound.
        body = request._request.read(limit + 1)
        delivered = hook_deliver(
            hook_id=hook_id,
            signature_header=request.headers.get(SIGNATURE_HEADER),
            body=body,
            address=request.META.get("REMOTE_ADDR"),
        )
        response = Response({"ok": True, "value": delivered.value})
        if delivered.change_id is not None:
            response[CHANGE_ID_HEADER] = str(delivered.change_id)
        return response
