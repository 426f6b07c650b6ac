"""App definitions for authors: create, read, replace and clear a definition.

The body of a create or replace is the definition document itself; the domain checks it whole
(InvalidDefinition lists every problem with its path), so it has no InputSerializer here.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.models import App
from apps_registry.routes.advisories import AUTHORING_KINDS
from apps_registry.selectors import advisories_open_for, routes_of
from apps_registry.services.definitions import (
    app_definition_clear,
    app_definition_export,
    app_definition_save,
    definition_save,
)


class SavedRouteSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    version = serializers.IntegerField()


class AuthoringAdvisorySerializer(serializers.Serializer):
    kind = serializers.CharField()
    severity = serializers.CharField()
    summary = serializers.CharField()
    data = serializers.JSONField()  # type: ignore[assignment]  # a field named like Serializer.data


class SavedAppSerializer(serializers.Serializer):
    """A saved definition: the app, its routes' versions and its authoring advisories."""

    app_id = serializers.UUIDField(source="id")
    name = serializers.CharField()
    routes = serializers.SerializerMethodField()
    advisories = serializers.SerializerMethodField()

    def get_routes(self, app: App) -> Any:
        return SavedRouteSerializer(routes_of(app), many=True).data

    def get_advisories(self, app: App) -> Any:
        return AuthoringAdvisorySerializer(advisories_open_for(app).filter(kind__in=AUTHORING_KINDS), many=True).data


class DefinitionCreateView(APIView):
    """POST /api/apps/definitions/ with an app definition as the body: create an app you own."""

    OutputSerializer = SavedAppSerializer
    scope_needs = {"POST": "author"}

    def post(self, request: Request) -> Response:
        app = app_definition_save(actor=request.user, definition=request.data)
        return Response({"ok": True, "value": self.OutputSerializer(app).data}, status=status.HTTP_201_CREATED)


class DefinitionView(APIView):
    """GET/PUT/DELETE /api/apps/<app_id>/definition/: read, replace (200) or clear the routes of an app you may
    author. Clearing keeps the app and its records. PUT never creates an app (POST /api/apps/definitions/ does)."""

    OutputSerializer = SavedAppSerializer
    # Reading a definition is authoring too (the source, not the routes get_app shows).
    scope_needs = {"GET": "author", "PUT": "author", "DELETE": "author"}

    def get(self, request: Request, app_id: str) -> Response:
        # The exported document is the author format itself, as app_definition_save accepts it.
        return Response({"ok": True, "value": app_definition_export(actor=request.user, app_id=app_id)})

    def put(self, request: Request, app_id: str) -> Response:
        # Never a create: an id no app has is answered exactly like another user's or a deleted app's (404), so a
        # PUT tells nothing about which ids exist or existed (docs/authoring.md, "Client-chosen ids").
        # The body is the definition, or {"definition": ..., "migrate": ...} to migrate the records with it (a
        # definition has no key "definition", so the two cannot be confused).
        body, migrate = request.data, None
        if isinstance(body, dict) and "definition" in body and set(body) <= {"definition", "migrate"}:
            body, migrate = body["definition"], body.get("migrate")
        saved = definition_save(
            actor=request.user, definition=body, app_id=app_id, create_missing=False, migrate=migrate
        )
        value = self.OutputSerializer(saved.app).data
        if saved.migration is not None:
            value["migration"] = saved.migration.as_dict()
        return Response({"ok": True, "value": value})

    def delete(self, request: Request, app_id: str) -> Response:
        app = app_definition_clear(actor=request.user, app_id=app_id)
        return Response({"ok": True, "value": {"app_id": str(app.id), "routes": []}})
