"""Token-authenticated REST API for callers and app authors."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.selectors import app_listings_for


class AppListView(APIView):
    """GET /api/apps/: the caller's apps with their role (the listing list_apps shows)."""

    scope_needs = {"GET": "read"}

    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        name = serializers.CharField()
        description = serializers.CharField()
        role = serializers.CharField()

    def get(self, request: Request) -> Response:
        apps = self.OutputSerializer(app_listings_for(request.user), many=True).data
        return Response({"ok": True, "value": apps})
