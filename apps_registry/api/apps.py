"""Token-authenticated REST API for callers and app authors."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.selectors import app_listings_page_for


class AppListView(APIView):
    """GET /api/apps/: the caller's apps with their role (the listing list_apps shows)."""

    scope_needs = {"GET": "read"}

    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        name = serializers.CharField()
        description = serializers.CharField()
        role = serializers.CharField()

    def get(self, request: Request) -> Response:
        """A page of the caller's apps by name; `next_cursor`, when present, goes back as `?cursor=`."""
        page = app_listings_page_for(request.user, cursor=request.query_params.get("cursor"))
        body: dict[str, Any] = {"ok": True, "value": self.OutputSerializer(page.apps, many=True).data}
        if page.next_cursor is not None:
            body["next_cursor"] = page.next_cursor
        if page.truncated:
            body["truncated"] = True
        return Response(body)
