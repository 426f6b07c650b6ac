"""Running an app's routes over plain REST: the same services the MCP tools call, without MCP."""

from __future__ import annotations

from typing import Any, Literal

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.access import Need
from apps_registry.api.serializers import body_shape_check, field_errors_refuse
from apps_registry.models import ChangeVia
from apps_registry.services.advisories import AdvisoryNote
from apps_registry.services.idempotency import idempotency_key_check
from apps_registry.services.routes import route_run
from apps_registry.values import json_repr, type_name

# The response header carrying a mutation's change id (the change log: GET /api/apps/<id>/changes/).
CHANGE_ID_HEADER = "Charming-Change-Id"


def advisory_shown(note: AdvisoryNote) -> dict[str, Any]:
    """An advisory as the REST API shows it: kind, severity and summary, and the optional fields when set."""
    shown: dict[str, Any] = {"kind": note.kind, "severity": note.severity, "summary": note.summary}
    for key in ("user_summary", "data", "doc_url"):
        if value := getattr(note, key):
            shown[key] = value
    return shown


def with_advisories(body: dict[str, Any], notes: list[AdvisoryNote]) -> dict[str, Any]:
    if notes:
        body["advisories"] = [advisory_shown(note) for note in notes]
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

    # The body's fields, checked by hand rather than by a DRF serializer: this is the API's busiest call, and a
    # serializer's fields are built anew for every body (about 50 µs of a call's 3 ms of server CPU).
    BODY_EXAMPLE = '{"params": {...}, "kind": "mutation"}'
    BODY_TAKES = "a run takes only 'params' and 'kind'."

    @classmethod
    def body_read(cls, data: Any) -> tuple[dict[str, Any] | None, Literal["query", "mutation"]]:
        """(params, kind) of a run's body, or InvalidInput naming each bad field with its JSON path."""
        body_shape_check(data, fields=("params", "kind"), example=cls.BODY_EXAMPLE, takes=cls.BODY_TAKES)
        params, kind = data.get("params"), data.get("kind", "mutation")
        errors = []
        if params is not None and not isinstance(params, dict):
            errors.append(
                {
                    "path": "$.params",
                    "message": "'params' must be a JSON object matching the route's input schema, "
                    f"got {type_name(params)}.",
                }
            )
        if kind not in ("mutation", "query"):  # a list or object is not equal to either, so needs no type check
            errors.append(
                {"path": "$.kind", "message": f"'kind' must be 'mutation' or 'query', got {json_repr(kind)}."}
            )
        field_errors_refuse(errors)
        return params, "query" if kind == "query" else "mutation"

    def need_for(self, request: Request) -> Need:
        """A query run reads (apps:read); anything else, a bad `kind` included, is taken as a mutation."""
        kind = request.data.get("kind") if isinstance(request.data, dict) else None
        return "query" if kind == "query" else "mutate"

    def post(self, request: Request, app_id: str, op: str) -> Response:
        params, kind = self.body_read(request.data)
        key = None
        if kind == "mutation":
            key = idempotency_key_check(request.headers.get("Idempotency-Key"), source="Idempotency-Key header")
        result = route_run(
            actor=request.user,
            app_id=app_id,
            op=op,
            params=params,
            kind=kind,
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
