"""Running an app's routes over plain REST: the same services the MCP tools call, without MCP."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.access import Need
from apps_registry.api.serializers import JsonChoiceField, JsonObjectField, StrictInputSerializer, input_validated
from apps_registry.models import ChangeVia
from apps_registry.services.advisories import AdvisoryNote
from apps_registry.services.idempotency import idempotency_key_check
from apps_registry.services.routes import route_run

# The response header carrying a mutation's change id (the change log: GET /api/apps/<id>/changes/).
CHANGE_ID_HEADER = "Charming-Change-Id"


class AdvisorySerializer(serializers.Serializer):
    """An advisory as the REST API shows it; the optional fields are left out when unset."""

    kind = serializers.CharField()
    severity = serializers.CharField()
    summary = serializers.CharField()
    user_summary = serializers.CharField()
    data = serializers.JSONField()  # type: ignore[assignment]  # a field named like Serializer.data
    doc_url = serializers.CharField()

    def to_representation(self, instance: AdvisoryNote) -> dict[str, Any]:
        shaped = super().to_representation(instance)
        return {key: value for key, value in shaped.items() if value or key in ("kind", "severity", "summary")}


def with_advisories(body: dict[str, Any], notes: list[AdvisoryNote]) -> dict[str, Any]:
    if notes:
        body["advisories"] = AdvisorySerializer(notes, many=True).data
    return body


class RouteRunView(APIView):
    """POST /api/apps/<app_id>/run/<op>/ {"params": {...}, "kind": "mutation"|"query"}: run one route.

    `kind` defaults to "mutation"; `params` may be omitted when the route takes no input.
    Answers the envelope: {"ok": true, "value": ..., "advisories"?: [...]} or {"ok": false, "error": {...}}.
    A successful run carries the app's advisories, as the tools' results do (a staff answer to the caller's
    feedback is delivered once, on whichever transport comes first).
    A mutation with an `Idempotency-Key` header that already committed returns that first result (with the header
    `Idempotent-Replayed: true`) instead of writing again (docs/mcp.md, "Retries").
    """

    class InputSerializer(StrictInputSerializer):
        example = '{"params": {...}, "kind": "mutation"}'
        takes = "a run takes only 'params' and 'kind'."

        params = JsonObjectField(
            required=False,
            allow_null=True,
            error_messages={
                "not_a_dict": "'params' must be a JSON object matching the route's input schema, got {input_type}."
            },
        )
        kind = JsonChoiceField(
            choices=["mutation", "query"],
            default="mutation",
            error_messages={
                "invalid_choice": "'kind' must be 'mutation' or 'query', got {input}.",
                "null": "'kind' must be 'mutation' or 'query', got null.",
            },
        )

    def need_for(self, request: Request) -> Need:
        """A query run reads (apps:read); anything else, a bad `kind` included, is taken as a mutation."""
        kind = request.data.get("kind") if isinstance(request.data, dict) else None
        return "query" if kind == "query" else "mutate"

    def post(self, request: Request, app_id: str, op: str) -> Response:
        data = input_validated(self.InputSerializer, request.data)
        key = None
        if data["kind"] == "mutation":
            key = idempotency_key_check(request.headers.get("Idempotency-Key"), source="Idempotency-Key header")
        result = route_run(
            actor=request.user,
            app_id=app_id,
            op=op,
            params=data.get("params"),
            kind=data["kind"],
            idempotency_key=key,
            advisories=True,
            via=ChangeVia.REST,
        )
        response = Response(with_advisories({"ok": True, "value": result.value}, list(result.advisories)))
        if (
            result.change_id is not None
        ):  # the change log's id of what it wrote: revert it with POST /api/changes/<id>/revert/
            response[CHANGE_ID_HEADER] = str(result.change_id)
        if result.replayed:
            response["Idempotent-Replayed"] = "true"
        return response
