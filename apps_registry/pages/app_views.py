"""The app page and its sub-pages: views of the queries, forms of the mutations, records, export, delete.

Everything goes through the access module and the services, exactly as MCP and REST do: the page of an
app the user cannot see is the same 404 as a missing app's, and a route runs through `route_run`.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps_registry.access import SHAREABLE_ROLES, app_for, role_allows
from apps_registry.exceptions import AccessDenied, CharmingError, HandlerError, InvalidInput, NotFound, UnknownOp
from apps_registry.models import App, Route
from apps_registry.pages.forms import InvitationCreateForm
from apps_registry.pages.hints import route_hints, route_title
from apps_registry.pages.paging import CURSOR, is_paged, page_parts, without_cursor
from apps_registry.pages.schema_forms import (
    ResultView,
    SchemaForm,
    cell,
    errors_place,
    field_place_detail,
    form_parse,
    result_view,
    schema_form,
)
from apps_registry.selectors import (
    advisories_for_users,
    app_versions_of,
    feedback_sent_by,
    invitations_pending_of,
    members_of,
    record_counts_of,
    records_of,
    routes_of,
)
from apps_registry.services.apps import app_delete, app_delete_check
from apps_registry.services.feedback import feedback_send
from apps_registry.services.routes import route_run

# The result of the last successful mutation, shown once on the page the POST redirects to.
LAST_RESULT_SESSION_KEY = "charming.last_result"
RECORDS_PER_PAGE = 25
APP_NOT_FOUND = "No app with this id exists, or it is not shared with you."


@dataclass
class QueryPanel:
    route: Route
    title: str
    form: SchemaForm
    ran: bool = False
    view: ResultView | None = None
    error: str = ""
    carry: list[tuple[str, str]] | None = None  # the other views' filters, kept when this one is submitted
    next_url: str = ""  # a paged view's next page (the same filters, the route's next_cursor)
    first_url: str = ""  # back to its first page, once past it


@dataclass
class MutationPanel:
    route: Route
    title: str
    form: SchemaForm


def app_or_404(request: HttpRequest, app_id: uuid.UUID, need: str = "read") -> tuple[App, str]:
    try:
        return app_for(actor=request.user, app_id=app_id, need=need)  # type: ignore[arg-type]
    except NotFound:
        raise Http404(APP_NOT_FOUND) from None


def refusal_page(request: HttpRequest, app: App, error: CharmingError) -> HttpResponse:
    return render(request, "apps/refused.html", {"app": app, "message": error.message}, status=403)


def _query_panel(request: HttpRequest, app: App, route: Route) -> QueryPanel:
    prefix = f"{route.name}."
    paged = is_paged(route.input_schema_ordered, route.output_schema_ordered)
    input_schema = without_cursor(route.input_schema_ordered) if paged else route.input_schema_ordered
    form = schema_form(input_schema, id_prefix=f"q-{route.name}", prefix=prefix)
    cursor_key = prefix + CURSOR
    carry = [(key, value) for key, values in request.GET.lists() if not key.startswith(prefix) for value in values]
    panel = QueryPanel(route=route, title=route_title(route), form=form, carry=carry)
    submitted = any(key.startswith(prefix) for key in request.GET)
    form_parse(form, request.GET)
    if form.has_errors or not (submitted or not form.required_names()):
        return panel
    panel.ran = True
    cursor = request.GET.get(cursor_key, "")[:4096] if paged else ""
    params = {**form.params, CURSOR: cursor} if cursor else form.params
    try:
        result = route_run(actor=request.user, app_id=app.id, op=route.name, params=params, kind="query")
    except InvalidInput as error:
        errors_place(form, error.errors, fallback=error.message)
        panel.error = "Check the filter: " + error.message
    except CharmingError as error:
        panel.error = error.message
    else:
        hints = route_hints(route)
        value, output_schema = result.value, route.output_schema_ordered
        if paged:
            value, output_schema, next_cursor = page_parts(value, output_schema)
            others = [(key, item) for key, items in request.GET.lists() if key != cursor_key for item in items]
            if next_cursor:
                panel.next_url = _view_url(app, route, [*others, (cursor_key, next_cursor)])
            if cursor:
                panel.first_url = _view_url(app, route, others)
        panel.view = result_view(value, output_schema, view=hints.view, columns=hints.columns)
    return panel


def app_page_render(
    request: HttpRequest,
    app: App,
    role: str,
    *,
    failed: tuple[str, SchemaForm] | None = None,
    feedback_errors: list[str] | None = None,
    feedback_body: str = "",
    invite_form: InvitationCreateForm | None = None,
    member_errors: dict[str, str] | None = None,
    invitations_error: str = "",
    status: int = 200,
) -> HttpResponse:
    routes = list(routes_of(app))
    can_mutate = role_allows(role, "mutate")
    # The author's start view first (a stable sort keeps the others by name).
    ordered = sorted((r for r in routes if r.kind == "query"), key=lambda r: not route_hints(r).start)
    queries = [_query_panel(request, app, r) for r in ordered]
    mutations = []
    if can_mutate:
        for r in routes:
            if r.kind != "mutation" or not route_hints(r).form:
                continue
            if failed is not None and failed[0] == r.name:
                form = failed[1]
            else:
                form = schema_form(r.input_schema_ordered, id_prefix=f"m-{r.name}")
            mutations.append(MutationPanel(route=r, title=route_title(r), form=form))
    last = None
    stored = request.session.pop(LAST_RESULT_SESSION_KEY, None) if failed is None else None
    if isinstance(stored, dict) and stored.get("app") == str(app.id):
        route = next((r for r in routes if r.name == stored.get("op")), None)
        last = {
            "title": route_title(route) if route else stored.get("op"),
            "view": result_view(stored.get("value"), route.output_schema_ordered if route else None),
        }
    context = {
        "app": app,
        "role": role,
        "is_owner": role_allows(role, "own"),
        "can_mutate": can_mutate,
        "queries": queries,
        "mutations": mutations,
        "last": last,
        "advisories": list(advisories_for_users(app)),
        "feedback": list(feedback_sent_by(user=request.user, app=app)),
        "feedback_errors": feedback_errors or [],
        "feedback_body": feedback_body,
        # (name, count) pairs, not the dict: a template's `collections.items` would find a collection named "items".
        "collections": list(record_counts_of(app).items()),
        "versions": app_versions_of(app) if role_allows(role, "own") else [],
        **_members_context(
            app,
            role,
            invite_form=invite_form,
            member_errors=member_errors or {},
            invitations_error=invitations_error,
        ),
    }
    # htmx swaps only successful responses: a form with errors comes back as 200 to be shown in place.
    if getattr(request, "htmx", False) and status >= 400:
        status = 200
    return render(request, "apps/app_detail.html", context, status=status)


def _members_context(
    app: App,
    role: str,
    *,
    invite_form: InvitationCreateForm | None,
    member_errors: dict[str, str],
    invitations_error: str,
) -> dict[str, Any]:
    """The members section: read-only for members, with the sharing forms for the owner."""
    is_owner = role_allows(role, "own")
    members = [
        {"username": m.username, "role": m.role, "error": member_errors.get(m.username, "")} for m in members_of(app)
    ]
    listed = {m["username"] for m in members}
    return {
        "members": members,
        # a refusal about a username that is not (or no longer) a member has no row to sit in
        "members_unlisted_errors": [m for name, m in member_errors.items() if name not in listed],
        "shareable_roles": SHAREABLE_ROLES,
        "invite_form": (invite_form or InvitationCreateForm()) if is_owner else None,
        "pending_invitations": invitations_pending_of(app) if is_owner else [],
        "invitations_error": invitations_error,
    }


@never_cache
@login_required
@require_GET
def app_page(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """The app's views (queries), forms (mutations), advisories, feedback and records."""
    app, role = app_or_404(request, app_id)
    return app_page_render(request, app, role)


@never_cache
@login_required
@require_POST
def route_submit(request: HttpRequest, app_id: uuid.UUID, op: str) -> HttpResponse:
    """Run a mutation from its generated form; on success back to the page (POST/redirect/GET)."""
    app, role = app_or_404(request, app_id)
    route = routes_of(app).filter(name=op, kind="mutation").first()
    if route is None:  # queries are read with GET on the app page, not posted
        raise Http404("This app has no such action.")
    form = form_parse(schema_form(route.input_schema_ordered, id_prefix=f"m-{route.name}"), request.POST)
    if not form.has_errors:
        try:
            result = route_run(actor=request.user, app_id=app.id, op=op, params=form.params, kind="mutation")
        except AccessDenied as error:
            return refusal_page(request, app, error)
        except InvalidInput as error:
            errors_place(form, error.errors, fallback=error.message)
            return app_page_render(request, app, role, failed=(op, form), status=400)
        except HandlerError as error:
            target = field_place_detail(form, error.details)
            if target is not None:
                target.errors.append(error.message)
            else:
                form.errors.append(error.message)
            return app_page_render(request, app, role, failed=(op, form), status=422)
        except UnknownOp as error:
            form.errors.append(error.message)
            return app_page_render(request, app, role, failed=(op, form), status=400)
        except CharmingError as error:
            form.errors.append(error.message)
            return app_page_render(request, app, role, failed=(op, form), status=error.http_status)
        request.session[LAST_RESULT_SESSION_KEY] = {"app": str(app.id), "op": op, "value": result.value}
        messages.success(request, f"{route_title(route)}: done.")
        return redirect(_page_url(app, request.POST.get("_back", "")))
    return app_page_render(request, app, role, failed=(op, form), status=400)


def _view_url(app: App, route: Route, query: list[tuple[str, str]]) -> str:
    return f"{reverse('app_page', args=[app.id])}?{urlencode(query)}#view-{route.name}"


def _page_url(app: App, back: str) -> str:
    # The page's query filters as they were, re-encoded (only a query string: the path is fixed).
    query = QueryDict(back[:2000]).urlencode()
    return reverse("app_page", args=[app.id]) + (f"?{query}" if query else "")


@never_cache
@login_required
@require_POST
def feedback_submit(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    app, role = app_or_404(request, app_id)
    body = request.POST.get("body", "")
    try:
        feedback_send(actor=request.user, app_id=app.id, body=body)
    except InvalidInput as error:
        return app_page_render(request, app, role, feedback_errors=[error.message], feedback_body=body, status=400)
    messages.success(request, "Thank you: your feedback is with Charming's staff. Their answer will appear here.")
    return redirect(reverse("app_page", args=[app.id]) + "#feedback")


@never_cache
@login_required
@require_GET
def records_page(request: HttpRequest, app_id: uuid.UUID, collection: str) -> HttpResponse:
    """One collection's records, read-only, paginated, searchable by id."""
    app, role = app_or_404(request, app_id)
    counts = record_counts_of(app)
    if collection not in counts:
        raise Http404("This app has no such collection.")
    query = request.GET.get("q", "").strip()[:200]
    page = Paginator(records_of(app, collection=collection, id_contains=query), RECORDS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    keys: list[str] = []
    for record in page:
        if isinstance(record.data, dict):
            keys.extend(k for k in record.data if k not in keys and k != "id")
    rows = [
        {
            "id": record.record_id,
            "cells": [
                replace(cell(record.data.get(k) if isinstance(record.data, dict) else None), label=k) for k in keys
            ],
            "updated_at": record.updated_at,
        }
        for record in page
    ]
    context = {
        "app": app,
        "role": role,
        "collection": collection,
        "collections": list(counts.items()),
        "keys": keys,
        "rows": rows,
        "page": page,
        "query": query,
    }
    return render(request, "apps/records.html", context)


def _export_rows(app: App) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (r.collection, r.record_id, r.data if isinstance(r.data, dict) else {"value": r.data})
        for r in records_of(app).iterator()
    ]


def _filename(app: App, ext: str) -> str:
    return f"{slugify(app.name) or 'app'}-records.{ext}"


@never_cache
@login_required
@require_GET
def export_json(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """All the app's records as one JSON document, by collection."""
    app, _role = app_or_404(request, app_id)
    collections: dict[str, list[dict[str, Any]]] = {name: [] for name in record_counts_of(app)}
    for collection, record_id, data in _export_rows(app):
        collections.setdefault(collection, []).append({**data, "id": record_id})
    document = {
        "app": {"id": str(app.id), "name": app.name},
        "exported_at": timezone.now().isoformat(),
        "collections": collections,
    }
    response = HttpResponse(
        json.dumps(document, ensure_ascii=False, indent=2), content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{_filename(app, "json")}"'
    return response


def _csv_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        # A spreadsheet would run text starting like a formula: keep it text (OWASP CSV injection).
        return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@never_cache
@login_required
@require_GET
def export_csv(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """All the app's records as CSV: collection, id, then one column per top-level field."""
    app, _role = app_or_404(request, app_id)
    rows = _export_rows(app)
    keys: list[str] = []
    for _collection, _id, data in rows:
        keys.extend(k for k in data if k not in keys and k != "id")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["collection", "id", *(_csv_text(k) for k in keys)])
    for collection, record_id, data in rows:
        writer.writerow([collection, _csv_text(record_id), *(_csv_text(data.get(k)) for k in keys)])
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_filename(app, "csv")}"'
    return response


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def app_delete_page(request: HttpRequest, app_id: uuid.UUID) -> HttpResponse:
    """The owner's confirmation (GET) and deletion (POST) of an app, through `app_delete`."""
    try:
        app = app_delete_check(actor=request.user, app_id=app_id)
    except NotFound:
        raise Http404(APP_NOT_FOUND) from None
    except AccessDenied as error:
        app, _role = app_or_404(request, app_id)
        return refusal_page(request, app, error)
    if request.method == "POST":
        purge = request.POST.get("purge_storage") == "on"
        try:
            result = app_delete(actor=request.user, app_id=app.id, purge_storage=purge, confirmed_via="web")
        except AccessDenied as error:
            return refusal_page(request, app, error)
        if result.purged:
            note = f"its {result.records_purged} stored record(s) were erased"
        else:
            note = f"its stored records are kept for {settings.CHARMING_STORAGE_RETENTION_DAYS} days, then purged"
        messages.success(request, f"The app “{result.app_name}” was deleted; {note}.")
        return redirect("home")
    counts = record_counts_of(app)
    context = {
        "app": app,
        "records": sum(counts.values()),
        "retention_days": settings.CHARMING_STORAGE_RETENTION_DAYS,
    }
    return render(request, "apps/app_delete.html", context)
