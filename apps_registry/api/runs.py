"""Running an app's routes over plain REST: the same service the MCP tools call, without MCP."""

from __future__ import annotations

from typing import Any, Literal

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.exceptions import InvalidInput
from apps_registry.services.routes import route_run


class RouteRunView(APIView):
    """POST /api/apps/<app_id>/run/<op>/ {"params": {...}, "kind": "mutation"|"query"}: run one route.

    `kind` defaults to "mutation"; `params` may be omitted when the route takes no input.
    Answers the tools' envelope: {"ok": true, "value": ...} or {"ok": false, "error": {...}}.
    """

    def post(self, request: Request, app_id: str, op: str) -> Response:
        params, kind = _parse(request.data)
        result = route_run(actor=request.user, app_id=app_id, op=op, params=params, kind=kind)
        return Response({"ok": True, "value": result.value})


def _parse(data: Any) -> tuple[dict[str, Any] | None, Literal["query", "mutation"]]:
    if not isinstance(data, dict):
        raise InvalidInput(
            'Send a JSON object like {"params": {...}, "kind": "mutation"}.',
            errors=[{"path": "$", "message": f"expected an object, got {type(data).__name__}"}],
        )
    unknown = sorted(set(data) - {"params", "kind"})
    if unknown:
        raise InvalidInput(
            f"Unknown field(s) {', '.join(repr(k) for k in unknown)}: a run takes only 'params' and 'kind'.",
            errors=[{"path": f"$.{key}", "message": "unknown field"} for key in unknown],
        )
    params = data.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidInput(
            "'params' must be a JSON object matching the route's input schema.",
            errors=[{"path": "$.params", "message": f"expected an object, got {type(params).__name__}"}],
        )
    kind = data.get("kind", "mutation")
    if kind == "query":
        return params, "query"
    if kind == "mutation":
        return params, "mutation"
    raise InvalidInput(
        f"'kind' must be 'mutation' or 'query', got {kind!r}.",
        errors=[{"path": "$.kind", "message": "must be 'mutation' or 'query'"}],
    )
