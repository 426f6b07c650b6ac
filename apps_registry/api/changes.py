"""An app's change log over REST: its changes (or one record's), newest first, and reverting one."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.api.serializers import StrictInputSerializer, input_validated
from apps_registry.exceptions import InvalidInput
from apps_registry.models import ChangeVia
from apps_registry.selectors import CHANGE_PAGE_MAX, CHANGE_PAGE_SIZE, change_moment_read, changes_page_for
from apps_registry.services.changes import change_revert


def _limit(raw: str | None) -> int:
    if raw is None:
        return CHANGE_PAGE_SIZE
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= CHANGE_PAGE_MAX:
        raise InvalidInput(
            f"'limit' must be a whole number from 1 to {CHANGE_PAGE_MAX}, got {raw[:20]!r}.",
            errors=[{"path": "limit", "message": f"must be 1 to {CHANGE_PAGE_MAX}"}],
        )
    return int(raw)


class AppChangesView(APIView):
    """GET /api/apps/<app_id>/changes/[?collection=&record_id=&since=&until=&cursor=&limit=]: the app's changes,
    newest first, each with its records before and after (any member); with collection and record_id, that record's
    history; with since and/or until (ISO 8601), the changes made from since to before until."""

    scope_needs = {"GET": "read"}

    def get(self, request: Request, app_id: str) -> Response:
        query = request.query_params
        collection, record_id = query.get("collection"), query.get("record_id")
        if (collection is None) != (record_id is None):
            raise InvalidInput(
                "A record's history takes both 'collection' and 'record_id'; give both, or neither for the whole app.",
                errors=[{"path": "record_id" if record_id is None else "collection", "message": "is required"}],
            )
        page = changes_page_for(
            request.user,
            app_id=app_id,
            collection=collection,
            record_id=record_id,
            since=change_moment_read(query.get("since"), name="since"),
            until=change_moment_read(query.get("until"), name="until"),
            cursor=query.get("cursor"),
            limit=_limit(query.get("limit")),
        )
        body: dict[str, Any] = {"ok": True, "value": [change.as_dict() for change in page.changes]}
        if page.next_cursor is not None:
            body["next_cursor"] = page.next_cursor
        if page.truncated:
            body["truncated"] = True
        return Response(body)


class ChangeRevertView(APIView):
    """POST /api/changes/<change_id>/revert/ {"force": false}: put the change's records back as they were before
    it, as a new change (owner or editor); 409 conflict naming the records later changes touched, unless force."""

    class InputSerializer(StrictInputSerializer):
        example = '{"force": false}'
        takes = "revert takes only 'force'."

        force = serializers.BooleanField(default=False, error_messages={"invalid": "'force' must be true or false."})

    scope_needs = {"POST": "mutate"}

    def post(self, request: Request, change_id: str) -> Response:
        data = input_validated(self.InputSerializer, request.data or {})
        result = change_revert(actor=request.user, change_id=change_id, force=data["force"], via=ChangeVia.REST)
        value: dict[str, Any] = {
            "app_id": str(result.app.id),
            "reverted": str(result.reverted_id),
            "change_id": None if result.change_id is None else str(result.change_id),
            "records": result.restored,
        }
        if result.forced_over:
            value["forced_over"] = result.forced_over
        return Response({"ok": True, "value": value})
