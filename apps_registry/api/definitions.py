"""App definitions for authors (owner only): create, read, replace and clear a definition."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.models import App
from apps_registry.routes.advisories import AUTHORING_KINDS
from apps_registry.selectors import advisories_open_for, routes_of
from apps_registry.services.definitions import app_definition_clear, app_definition_export, app_definition_save


def _saved(app: App) -> dict[str, Any]:
    return {
        "app_id": str(app.id),
        "name": app.name,
        "routes": [{"name": r.name, "kind": r.kind, "version": r.version} for r in routes_of(app)],
        "advisories": [
            {"kind": a.kind, "severity": a.severity, "summary": a.summary, "data": a.data}
            for a in advisories_open_for(app).filter(kind__in=AUTHORING_KINDS)
        ],
    }


class DefinitionCreateView(APIView):
    """POST /api/apps/definitions/ with an app definition as the body: create an app you own."""

    def post(self, request: Request) -> Response:
        app = app_definition_save(actor=request.user, definition=request.data)
        return Response({"ok": True, "value": _saved(app)}, status=status.HTTP_201_CREATED)


class DefinitionView(APIView):
    """GET/PUT/DELETE /api/apps/<app_id>/definition/: read, replace (or create with this id), or
    clear the routes of an app you own. Clearing keeps the app and its records."""

    def get(self, request: Request, app_id: str) -> Response:
        return Response({"ok": True, "value": app_definition_export(actor=request.user, app_id=app_id)})

    def put(self, request: Request, app_id: str) -> Response:
        app = app_definition_save(actor=request.user, definition=request.data, app_id=app_id)
        return Response({"ok": True, "value": _saved(app)})

    def delete(self, request: Request, app_id: str) -> Response:
        app = app_definition_clear(actor=request.user, app_id=app_id)
        return Response({"ok": True, "value": {"app_id": str(app.id), "routes": []}})
