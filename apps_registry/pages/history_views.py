"""An app's activity (every change, newest first) and a record's history, with a Revert button for owners and
editors: the change log (services/changes.py) for people."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps_registry.access import role_allows
from apps_registry.exceptions import AccessDenied, ChangeConflict, CharmingError, InvalidInput, NotFound
from apps_registry.models import ChangeVia
from apps_registry.pages.app_views import app_or_404, refusal_page
from apps_registry.selectors import ChangeListing, changes_page_for
from apps_registry.services.changes import change_revert

VIA_WORDS = {
    "mcp": "an AI agent",
    "rest": "the API",
    "page": "this page",
    "schedule": "a schedule",
    "hook": "a webhook",
    "public": "its public page",
    "migration": "a definition save",
    "internal": "the server",
}
ACTION_WORDS = {"restored": "put back", "recreated": "brought back", "deleted": "removed again"}


def _shown(data: dict[str, Any] | None) -> str:
    return "—" if data is None else json.dumps(data, ensure_ascii=False, sort_keys=True)


def _entry_rows(change: ChangeListing) -> list[dict[str, Any]]:
    rows = []
    for entry in change.entries:
        kind = "added" if entry["before"] is None else "deleted" if entry["after"] is None else "changed"
        rows.append(
            {**entry, "kind": kind, "before_text": _shown(entry["before"]), "after_text": _shown(entry["after"])}
        )
    return rows


def _render(
    request: HttpRequest,
    app_id: uuid.UUID,
    *,
    collection: str | None = None,
    record_id: str | None = None,
    conflict: ChangeConflict | None = None,
) -> HttpResponse:
    app, role = app_or_404(request, app_id)
    try:
        page = changes_page_for(
            request.user, app_id=app.id, collection=collection, record_id=record_id, cursor=request.GET.get("cursor")
        )
    except InvalidInput:  # an altered or outdated "Older" link: start again from the newest
        return redirect(request.path)
    changes = [
        {
            "listing": change,
            "via_words": VIA_WORDS.get(change.via, change.via),
            "migration": change.via == ChangeVia.MIGRATION,
            "rows": _entry_rows(change),
            "more": change.records - len(change.entries),
        }
        for change in page.changes
    ]
    context = {
        "app": app,
        "role": role,
        "can_revert": role_allows(role, "mutate"),
        "collection": collection,
        "record_id": record_id,
        "changes": changes,
        "next_cursor": page.next_cursor,
        "conflict": conflict,
        "here": request.get_full_path(),
    }
    return render(request, "apps/activity.html", context, status=409 if conflict else 200)


@never_cache
@login_required
@require_GET
def activity_page(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """Every change of the app, newest first: who, when, through what, each record before and after."""
    return _render(request, app_id)


@never_cache
@login_required
@require_GET
def record_history_page(request: HttpRequest, app_id: uuid.UUID, collection: str, record_id: str) -> HttpResponse:
    """The changes of one record, newest first (also of a record since deleted: it can be brought back)."""
    return _render(request, app_id, collection=collection, record_id=record_id)


def _revert_refusal_words(error: CharmingError) -> str:
    """A refused revert in a person's words: the record migration ones name the tools an agent would use."""
    details = error.details or {}
    if details.get("migration"):
        return (
            f"Change {details['change_id']} changed the app's stored records when its design was changed, and is "
            "not reverted: the app now expects its records as it left them. Nothing was changed."
        )
    if details.get("migrations"):
        since = ", ".join(details["migrations"])
        return (
            f"Change {details['change_id']} was not reverted: the app's records were reshaped since, when its design "
            f"was changed (change {since}), and reverting would put back data the app no longer expects. Nothing was "
            "changed; edit those records with the app's own actions instead."
        )
    return error.message


@login_required
@require_POST
def change_revert_submit(request: HttpRequest, app_id: uuid.UUID, change_id: str) -> HttpResponse:
    """Revert one change (owner or editor); a conflict shows the page again naming the records, with a button
    to revert anyway."""
    app, _role = app_or_404(request, app_id)
    back = request.POST.get("back", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}) or not back.startswith("/"):
        back = reverse("app_activity", args=[app.id])
    try:
        result = change_revert(
            actor=request.user,
            change_id=change_id,
            force=request.POST.get("force") == "1",
            via=ChangeVia.PAGE,
            app_id=app.id,
        )
    except AccessDenied as error:
        return refusal_page(request, app, error)
    except ChangeConflict as conflict:
        return _render(request, app.id, conflict=conflict)
    except NotFound:
        raise Http404("No such change in this app.") from None
    except CharmingError as error:  # a bad change id, the records migrating or migrated since, the records limit
        messages.error(request, _revert_refusal_words(error))
        return redirect(back)
    if result.change_id is None:
        messages.info(request, f"The records of change {result.reverted_id} already were as before it: nothing to do.")
    else:
        done = ", ".join(
            f"{r['collection']}/{r['id']} {ACTION_WORDS.get(r['action'], r['action'])}" for r in result.restored
        )
        messages.success(request, f"Change {result.reverted_id} was reverted: {done}.")
    return redirect(back)
