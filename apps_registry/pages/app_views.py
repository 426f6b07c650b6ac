"""The app page and its sub-pages: views of the queries, forms of the mutations, records, export, delete.

Everything goes through the access module and the services, exactly as MCP and REST do: the page of an
app the user cannot see is the same 404 as a missing app's, and a route runs through `route_run`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from dataclasses import dataclass, field, replace
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
from apps_registry.models import App, ChangeVia, Route
from apps_registry.pages.actions import field_order, is_destructive, record_params, shown_collections
from apps_registry.pages.forms import InvitationCreateForm
from apps_registry.pages.hints import route_hints, route_title
from apps_registry.pages.live import is_live_refresh, live_context
from apps_registry.pages.paging import CURSOR, is_paged, page_parts, without_cursor
from apps_registry.pages.results import ResultView, cell, result_view, table_view
from apps_registry.pages.schema_forms import (
    SchemaForm,
    errors_place,
    field_place_detail,
    form_parse,
    schema_form,
)
from apps_registry.pages.words import friendly_error, humanize, people_text
from apps_registry.selectors import (
    LABEL_FIELDS,
    advisories_for_users,
    app_versions_of,
    feedback_sent_by,
    invitations_pending_of,
    members_of,
    public_listing_of,
    record_choices_of,
    record_counts_of,
    record_label_field,
    records_changes_of,
    records_of,
    records_recent_of,
    routes_of,
)
from apps_registry.services.apps import app_delete, app_delete_check
from apps_registry.services.feedback import feedback_send
from apps_registry.services.notices import notices_muted
from apps_registry.services.routes import RouteResult, route_run
from apps_registry.services.transfers import transfer_pending_of

# The result of the last successful mutation, shown once, next to the form or the row it came from.
LAST_RESULT_SESSION_KEY = "charming.last_result"
RECORDS_PER_PAGE = 25
RECENT_RECORDS = 5  # rows of each collection in the start view's "Recently added"
PICKER_CHOICES = 200  # records a picker lists at once; more get a search box
APP_NOT_FOUND = "No app with this id exists, or it is not shared with you."
PLACE_PATTERN = re.compile(r"^(action|view|recent)-[A-Za-z0-9_-]{1,120}$")


@dataclass
class Notice:
    """What an action did (or why it failed), shown in the card it was started from."""

    kind: str  # done or error
    title: str
    view: ResultView | None = None
    messages: list[str] = field(default_factory=list)


@dataclass
class RowAction:
    """A mutation offered on each row of a table: the row's id goes in as `param`; other required params
    are asked in a small form; a mutation that deletes asks to confirm."""

    route: Route
    title: str
    param: str
    destructive: bool
    extra: dict[str, Any]  # the input schema of the params asked for on the row
    submit_url: str = ""  # where its form posts


@dataclass
class RowForm:
    action: RowAction
    form: SchemaForm
    row_id: str


@dataclass
class QueryPanel:
    route: Route
    title: str
    form: SchemaForm
    help: str = ""
    ran: bool = False
    view: ResultView | None = None
    error: str = ""
    carry: list[tuple[str, str]] | None = None  # the other views' filters, kept when this one is submitted
    next_url: str = ""  # a paged view's next page (the same filters, the route's next_cursor)
    first_url: str = ""  # back to its first page, once past it
    rows_prev_url: str = ""  # a long table's pages
    rows_next_url: str = ""
    notice: Notice | None = None
    place: str = ""
    filter_folded: bool = False  # only optional filters, none used: folded under "Filter"


@dataclass
class MutationPanel:
    route: Route
    title: str
    form: SchemaForm
    help: str = ""
    notice: Notice | None = None
    place: str = ""
    destructive: bool = False  # its button is drawn as a danger
    submit_url: str = ""  # where its form posts


@dataclass
class RecentPanel:
    """The newest records of one collection, in the start view."""

    collection: str
    title: str
    count: int
    view: ResultView
    place: str
    notice: Notice | None = None


def app_or_404(request: HttpRequest, app_id: uuid.UUID, need: str = "read") -> tuple[App, str]:
    try:
        return app_for(actor=request.user, app_id=app_id, need=need)  # type: ignore[arg-type]
    except NotFound:
        raise Http404(APP_NOT_FOUND) from None


def refusal_page(request: HttpRequest, app: App, error: CharmingError) -> HttpResponse:
    return render(request, "apps/refused.html", {"app": app, "message": error.message}, status=403)


class PageContext:
    """What the panels of one rendering share: the app, the filters, the titles of its routes (for words),
    and the pickers' choices (read once per collection). A member's page; pages/public_views.py's visitor page
    overrides how views run, which actions it offers and where forms go."""

    def __init__(
        self, request: HttpRequest, app: App, routes: list[Route], query: QueryDict, *, can_mutate: bool
    ) -> None:
        self.request = request
        self.can_mutate = can_mutate  # viewers get no row actions (their POSTs would be refused anyway)
        self.app = app
        self.routes = {r.name: r for r in routes}
        self.query = query
        self.titles = {r.name: route_title(r) for r in routes}
        self._choices: dict[tuple[str, str], tuple[int, list[tuple[str, str]], str]] = {}
        self._rows = 0  # rows given actions so far: their forms' ids stay unique on the page
        self.page_url = reverse("app_page", args=[app.id])  # the page itself: filters and pages link to it

    def submit_url(self, op: str) -> str:
        return reverse("app_route_submit", args=[self.app.id, op])

    def query_run(self, op: str, params: dict[str, Any]) -> RouteResult:
        return route_run(actor=self.request.user, app_id=self.app.id, op=op, params=params, kind="query")

    def offers(self, route: Route) -> bool:
        """Whether this page offers the mutation `route` (its form, a row's button)."""
        return self.can_mutate

    def records_of(self, route: Route) -> dict[str, str]:
        """The route's params that name a record, drawn as pickers of their collection."""
        return record_params(route)

    def mutation_panels(self, *, failed: tuple[str, SchemaForm] | None = None) -> list[MutationPanel]:
        """The forms of the mutations this page offers (those with a form); `failed`: a form sent back with errors."""
        panels = []
        for route in self.routes.values():
            if route.kind != "mutation" or not route_hints(route).form or not self.offers(route):
                continue
            if failed is not None and failed[0] == route.name:
                form = failed[1]
            else:
                form = schema_form(
                    route.input_schema_ordered, id_prefix=f"m-{route.name}", records=self.records_of(route)
                )
            panels.append(
                MutationPanel(
                    route=route,
                    title=route_title(route),
                    form=self.pickers_fill(form),
                    help=self.words(route),
                    place=f"action-{route.name}",
                    destructive=is_destructive(route),
                    submit_url=self.submit_url(route.name),
                )
            )
        return panels

    def words(self, route: Route) -> str:
        hints = route_hints(route)
        return hints.help or people_text(route.description, self.titles)

    def pickers_fill(self, form: SchemaForm) -> SchemaForm:
        for spec in form.all_fields():
            if spec.widget != "record":
                continue
            key = (spec.collection, spec.label_field)
            if key not in self._choices:
                label = spec.label_field or record_label_field(self.app, collection=spec.collection)
                total, choices = record_choices_of(
                    self.app, collection=spec.collection, label_field=label, limit=PICKER_CHOICES
                )
                self._choices[key] = (total, choices, label)
            total, choices, label = self._choices[key]
            spec.choices = choices
            spec.label_field = label
            if total > PICKER_CHOICES:
                spec.search = True
                spec.search_url = (
                    reverse("app_picker", args=[self.app.id, spec.collection])
                    + "?"
                    + urlencode({"label": label, "value": spec.value or ""})
                )
                spec.hint = f"{total:,} to choose from: type part of a name to narrow the list."
            if spec.value and all(value != spec.value for value, _text in choices):
                spec.choices = [(str(spec.value), str(spec.value)), *choices]
        return form

    def row_actions(self, names: list[tuple[str, str]]) -> list[RowAction]:
        actions: list[RowAction] = []
        for name, param in names:
            route = self.routes.get(name)
            if route is None or route.kind != "mutation" or not self.offers(route):
                continue
            schema: dict[str, Any] = route.input_schema_ordered if isinstance(route.input_schema_ordered, dict) else {}
            declared = schema.get("properties")
            properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
            required = [n for n in schema.get("required") or [] if n != param and n in properties]
            extra = {
                "type": "object",
                "properties": {n: properties[n] for n in properties if n in required},
                "required": required,
            }
            actions.append(
                RowAction(
                    route=route,
                    title=self.titles[name],
                    param=param,
                    destructive=is_destructive(route),
                    extra=extra,
                    submit_url=self.submit_url(name),
                )
            )
        return sorted(actions, key=lambda action: action.destructive)  # the ones that delete last

    def rows_act(self, view: ResultView, actions: list[RowAction], place: str) -> None:
        """Give each row of a table (with an id) a form per row action: the view's own table, or the tables
        of records inside an object (a report's list of expenses)."""
        if not actions:
            return
        if view.shape == "fields":
            for _label, item in view.items:
                if item.nested is not None:
                    self.rows_act(item.nested, actions, place)
            return
        if view.shape != "table":
            return
        for row in view.rows:
            if not row.id:
                continue
            self._rows += 1
            for action in actions:
                records = {k: v for k, v in self.records_of(action.route).items() if k != action.param}
                form = schema_form(action.extra, id_prefix=f"r{self._rows}-{action.route.name}", records=records)
                for spec in form.fields:  # what the row holds now, to change (a rename starts from the title)
                    current = row.data.get(spec.name)
                    if isinstance(current, (str, int, float)) and not isinstance(current, bool):
                        spec.value = str(current)
                row.actions.append(RowForm(action=action, form=self.pickers_fill(form), row_id=row.id))


def query_panel(page: PageContext, route: Route) -> QueryPanel:
    query = page.query
    prefix = f"{route.name}."
    rows_key = f"{route.name}:rows"
    paged = is_paged(route.input_schema_ordered, route.output_schema_ordered)
    input_schema = without_cursor(route.input_schema_ordered) if paged else route.input_schema_ordered
    form = page.pickers_fill(
        schema_form(input_schema, id_prefix=f"q-{route.name}", prefix=prefix, records=page.records_of(route))
    )
    cursor_key = prefix + CURSOR
    carry = [
        (key, value)
        for key, values in query.lists()
        if not key.startswith(prefix) and not key.startswith(f"{route.name}:")
        for value in values
    ]
    place = f"view-{route.name}"
    panel = QueryPanel(
        route=route, title=route_title(route), form=form, carry=carry, help=page.words(route), place=place
    )
    submitted = any(key.startswith(prefix) for key in query)
    form_parse(form, query)
    panel.filter_folded = not submitted and not form.required_names() and not form.has_errors
    if form.has_errors or not (submitted or not form.required_names()):
        return panel
    panel.ran = True
    cursor = query.get(cursor_key, "")[:4096] if paged else ""
    params = {**form.params, CURSOR: cursor} if cursor else form.params
    try:
        result = page.query_run(route.name, params)
    except InvalidInput as error:
        if cursor and any(e.get("path") == f"$.{CURSOR}" for e in error.errors or []):
            # An altered or outdated page link: the person can only start again from the first page.
            panel.error = "This page link no longer works: start again from the first page."
            panel.first_url = _view_url(page, route, [(k, v) for k, vs in query.lists() if k != cursor_key for v in vs])
            return panel
        errors_place(form, error.errors, fallback=friendly_error(error.message))
        panel.error = "Check the filter." if any(f.errors for f in form.all_fields()) else ""
    except CharmingError as error:
        panel.error = people_text(error.message, page.titles, agent_only=False)
    else:
        hints = route_hints(route)
        value, output_schema = result.value, route.output_schema_ordered
        if paged:
            value, output_schema, next_cursor = page_parts(value, output_schema)
            others = [(key, item) for key, items in query.lists() if key != cursor_key for item in items]
            if next_cursor:
                panel.next_url = _view_url(page, route, [*others, (cursor_key, next_cursor)])
            if cursor:
                panel.first_url = _view_url(page, route, others)
        number = _int(query.get(rows_key, "1"))
        panel.view = result_view(
            value, output_schema, view=hints.view, columns=hints.columns, chart=hints.chart, page=number
        )
        if panel.view.pages > 1:
            others = [(key, item) for key, items in query.lists() if key != rows_key for item in items]
            if panel.view.page > 1:
                panel.rows_prev_url = _view_url(page, route, [*others, (rows_key, str(panel.view.page - 1))])
            if panel.view.page < panel.view.pages:
                panel.rows_next_url = _view_url(page, route, [*others, (rows_key, str(panel.view.page + 1))])
        page.rows_act(panel.view, page.row_actions(list(hints.row_actions)), place)
    return panel


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 7 else 1


def _recent_panels(
    page: PageContext, counts: dict[str, int], mutations: list[Route], shown: set[str], *, keep: set[str]
) -> list[RecentPanel]:
    """The newest records of each collection shown to people that no view already lists (`shown`), with the
    actions that take one of them; the places in `keep` (a notice's) are drawn whatever they hold."""
    panels = []
    order = field_order(list(page.routes.values()))
    for collection, count in counts.items():
        if collection_hidden(page.app, collection):
            continue
        if (not count or collection in shown) and f"recent-{collection}" not in keep:
            continue
        records = records_recent_of(page.app, collection=collection, limit=RECENT_RECORDS)
        rows = [{**(r.data if isinstance(r.data, dict) else {"value": r.data}), "id": r.record_id} for r in records]
        keys: list[str] = []
        for row in rows:
            keys.extend(k for k in row if k not in keys)
        label = next((k for k in LABEL_FIELDS if k in keys), "")
        keys.sort(key=lambda k: (k != label, order.index(k) if k in order else len(order), k))
        place = f"recent-{collection}"
        view = table_view(rows, {"properties": {k: {} for k in keys}})
        names = [
            (route.name, param)
            for route in mutations
            for param, target in record_params(route).items()
            if target == collection
        ]
        page.rows_act(view, page.row_actions(names), place)
        panels.append(
            RecentPanel(collection=collection, title=humanize(collection), count=count, view=view, place=place)
        )
    return panels


def collection_hidden(app: App, collection: str) -> bool:
    spec = (app.collections or {}).get(collection)
    return isinstance(spec, dict) and spec.get("hidden") is True


def app_page_render(
    request: HttpRequest,
    app: App,
    role: str,
    *,
    failed: tuple[str, SchemaForm] | None = None,
    failed_notice: tuple[str, Notice] | None = None,
    back: str | None = None,
    feedback_errors: list[str] | None = None,
    feedback_body: str = "",
    invite_form: InvitationCreateForm | None = None,
    member_errors: dict[str, str] | None = None,
    invitations_error: str = "",
    status: int = 200,
) -> HttpResponse:
    # Read before the views run: a write committed while they are drawn moves the counter past this one, so the
    # page's next poll fetches it again.
    changes = records_changes_of(app_id=app.id)
    routes = list(routes_of(app))
    can_mutate = role_allows(role, "mutate")
    # The filters the views are drawn with: the page's own, or (after a POST) those the form came from.
    query = request.GET if back is None else QueryDict(back[:2000])
    page = PageContext(request, app, routes, query, can_mutate=can_mutate)
    # The author's start view first (a stable sort keeps the others by name).
    ordered = sorted((r for r in routes if r.kind == "query"), key=lambda r: not route_hints(r).start)
    queries = [query_panel(page, r) for r in ordered]
    mutations = page.mutation_panels(failed=failed)
    mutation_routes = [panel.route for panel in mutations]
    counts = record_counts_of(app)
    # Collections a view lists without being asked (it needs no filter, and returns their records) are not
    # repeated as "Recently added"; a view that waits for a filter (expenses of one category) does not count.
    shown = {
        c
        for p in queries
        if p.view is not None and p.view.shape != "empty" and not p.form.required_names()
        for c in shown_collections(p.route)
    }
    notices: dict[str, Notice] = {}
    # A live refresh (the page fetching itself after a poll) leaves the one-time result to the page it is for.
    shows_result = failed is None and failed_notice is None and not is_live_refresh(request)
    stored = request.session.pop(LAST_RESULT_SESSION_KEY, None) if shows_result else None
    if isinstance(stored, dict) and stored.get("app") == str(app.id):
        route = page.routes.get(str(stored.get("op")))
        title = route_title(route) if route else str(stored.get("op"))
        label = stored.get("row") or ""
        notices[str(stored.get("place") or f"action-{stored.get('op')}")] = Notice(
            kind="done",
            title=f"{title}: done" + (f" (“{label}”)" if label else "") + ".",
            view=result_view(stored.get("value"), route.output_schema_ordered if route else None),
        )
    if failed_notice is not None:
        notices[failed_notice[0]] = failed_notice[1]
    # A collection a notice is about keeps its card, even once its last record is gone.
    recent = _recent_panels(page, counts, mutation_routes, shown, keep=set(notices))
    panels: list[QueryPanel | MutationPanel | RecentPanel] = [*queries, *mutations, *recent]
    for panel in panels:
        panel.notice = notices.pop(panel.place, None)
    if notices and panels:  # its card is not on the page (an action since hidden): the first card shows it
        panels[0].notice = next(iter(notices.values()))
    context = {
        "app": app,
        "role": role,
        "is_owner": role_allows(role, "own"),
        "can_author": role_allows(role, "author"),
        "notices_muted": notices_muted(user=request.user, app_id=app.id),
        "transfer": transfer_pending_of(actor=request.user, app_id=app.id) if role_allows(role, "own") else None,
        "can_mutate": can_mutate,
        **_public_context(request, app, routes),
        "queries": queries,
        "mutations": mutations,
        "recent": recent,
        "has_start": any(route_hints(r).start for r in ordered),
        "has_records": any(counts.values()),
        "lead": people_text(app.description, page.titles),
        "back": query.urlencode(),
        "page_url": page.page_url,
        "advisories": list(advisories_for_users(app)),
        "feedback": list(feedback_sent_by(user=request.user, app=app)),
        "feedback_errors": feedback_errors or [],
        "feedback_body": feedback_body,
        # (name, count) pairs, not the dict: a template's `collections.items` would find a collection named "items".
        "collections": [(name, n) for name, n in counts.items() if not collection_hidden(app, name)],
        "versions": app_versions_of(app) if role_allows(role, "own") else [],
        **live_context(app_id=app.id, user_pk=request.user.pk, changes=changes),
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


def _public_context(request: HttpRequest, app: App, routes: list[Route]) -> dict[str, Any]:
    """The Public page card: the listing, its address, and the actions the owner may open to visitors."""
    public = public_listing_of(app)
    opened = set(public.mutations) if public is not None else set()
    return {
        "public": public,
        "public_url": request.build_absolute_uri(reverse("public_page", args=[public.handle])) if public else "",
        "public_choices": [(r.name, route_title(r), r.name in opened) for r in routes if r.kind == "mutation"],
    }


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
    """Run a mutation from its form or a row's button; on success back to where it was started (POST/redirect/GET,
    the filters kept, the card's anchor), where its result is shown; errors are shown in that card."""
    app, role = app_or_404(request, app_id)
    route = routes_of(app).filter(name=op, kind="mutation").first()
    if route is None:  # queries are read with GET on the app page, not posted
        raise Http404("This app has no such action.")
    back = request.POST.get("_back", "")[:2000]
    place = request.POST.get("_place", "")
    place = place if PLACE_PATTERN.match(place) else f"action-{op}"
    row_label = request.POST.get("_row", "")[:60]
    form = form_parse(
        schema_form(route.input_schema_ordered, id_prefix=f"m-{route.name}", records=record_params(route)),
        request.POST,
    )

    def failure(status: int) -> HttpResponse:
        if place == f"action-{op}":
            return app_page_render(request, app, role, failed=(op, form), back=back, status=status)
        messages_ = [*form.errors, *(f"{f.label}: {e}" for f in form.all_fields() for e in f.errors)]
        title = route_title(route) + (f" (“{row_label}”)" if row_label else "")
        notice = Notice(kind="error", title=f"{title} did not go through.", messages=messages_)
        return app_page_render(request, app, role, failed_notice=(place, notice), back=back, status=status)

    if form.has_errors:
        return failure(400)
    try:
        result = route_run(
            actor=request.user, app_id=app.id, op=op, params=form.params, kind="mutation", via=ChangeVia.PAGE
        )
    except AccessDenied as error:
        return refusal_page(request, app, error)
    except CharmingError as error:
        return failure(form_refusal(form, error, app))
    request.session[LAST_RESULT_SESSION_KEY] = {
        "app": str(app.id),
        "op": op,
        "value": result.value,
        "place": place,
        "row": row_label,
    }
    return redirect(_page_url(app, back) + f"#{place}")


def form_refusal(form: SchemaForm, error: CharmingError, app: App) -> int:
    """Put a refused action's error in its form, in people's words (beside the field it is about, when it says):
    the status to answer with."""
    if isinstance(error, InvalidInput):
        errors_place(form, error.errors, fallback=friendly_error(error.message))
        return 400
    if isinstance(error, HandlerError):
        titles = {r.name: route_title(r) for r in routes_of(app)}
        message = people_text(error.message, titles, agent_only=False)
        target = field_place_detail(form, error.details)
        (target.errors if target is not None else form.errors).append(message)
        return 422
    form.errors.append(error.message)
    return 400 if isinstance(error, UnknownOp) else error.http_status


@never_cache
@login_required
@require_GET
def picker_options(request: HttpRequest, app_id: uuid.UUID, collection: str) -> HttpResponse:
    """The options of a record picker whose records match what was typed (htmx swaps them into the select)."""
    app, _role = app_or_404(request, app_id)
    if collection not in (app.collections or {}):
        raise Http404("This app has no such collection.")
    label = request.GET.get("label", "")[:100] or record_label_field(app, collection=collection)
    query = request.GET.get("_pick_q", "").strip()[:200]
    total, choices = record_choices_of(app, collection=collection, label_field=label, query=query, limit=PICKER_CHOICES)
    context = {"choices": choices, "total": total, "value_chosen": request.GET.get("value", "")}
    return render(request, "apps/_picker_options.html", context)


def _view_url(page: PageContext, route: Route, query: list[tuple[str, str]]) -> str:
    return f"{page.page_url}?{urlencode(query)}#view-{route.name}"


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
