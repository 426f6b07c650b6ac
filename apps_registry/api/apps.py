"""Token-authenticated REST API for callers and app authors."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.selectors import app_listings_for


class AppListView(APIView):
    """GET /api/apps/: the caller's apps with their role."""

    def get(self, request: Request) -> Response:
        apps = [
            {"id": str(a.id), "name": a.name, "description": a.description, "role": a.role}
            for a in app_listings_for(request.user)
        ]
        return Response({"ok": True, "value": apps})
