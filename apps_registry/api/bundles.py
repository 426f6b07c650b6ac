"""Bundles over REST: an app as one streamed JSON file (definition, history, records), and a bundle imported as a
new app of the caller (apps_registry/services/bundles.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.exceptions import BodyTooLarge
from apps_registry.pages.bundle_views import bundle_response
from apps_registry.services.bundles import bundle_export, bundle_import, bundle_parse


class AppBundleView(APIView):
    """GET /api/apps/<app_id>/bundle/: the app as one JSON file, streamed (owner and editors)."""

    scope_needs = {"GET": "author"}

    def get(self, request: Request, app_id: str) -> StreamingHttpResponse:
        app, chunks = bundle_export(actor=request.user, app_id=app_id)
        return bundle_response(request._request, app, chunks)


class BundleImportView(APIView):
    """POST /api/apps/bundles/[?name=...] with a bundle as the body: a new app of the caller, with its definition,
    history and records (201), whole or not at all."""

    scope_needs = {"POST": "author"}
    parser_classes: list[Any] = []  # the body is read here, bounded by CHARMING_BUNDLE_IMPORT_BYTES

    def post(self, request: Request) -> Response:
        limit = settings.CHARMING_BUNDLE_IMPORT_BYTES
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        body = b"" if declared > limit else request._request.read(limit + 1)
        if declared > limit or len(body) > limit:
            raise BodyTooLarge(
                f"The bundle is larger than {limit} bytes (CHARMING_BUNDLE_IMPORT_BYTES).",
                errors=[{"path": "$", "message": f"over {limit} bytes"}],
            )
        bundle = bundle_parse(body)
        imported = bundle_import(actor=request.user, bundle=bundle, name=request.query_params.get("name"))
        value = {
            "id": str(imported.app.id),
            "name": imported.app.name,
            "version": imported.app.version,
            "records": imported.records,
            "versions": imported.versions,
        }
        return Response({"ok": True, "value": value}, status=status.HTTP_201_CREATED)
