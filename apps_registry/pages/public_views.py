"""Public apps' pages: `/p/<handle>/` for anyone (signed in or not), and the owner's card that turns it on and off.

A visitor's page is the app page's views and the actions its owner opened, drawn by the same panels
(`PageContext`, overridden in `VisitorPageContext`), with none of the rest: no members, activity, records, exports,
feedback, live updates or scripts. What a visitor may run, and their budgets, are decided by
services/public_apps.py.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps_registry.exceptions import CharmingError, NotFound, RateLimited
from apps_registry.models import Route
from apps_registry.pages.app_views import (
    PLACE_PATTERN,
    MutationPanel,
    Notice,
    PageContext,
    QueryPanel,
    app_or_404,
    form_refusal,
    query_panel,
)
from apps_registry.pages.hints import route_hints, route_title
from apps_registry.pages.schema_forms import SchemaForm, form_parse, schema_form
from apps_registry.pages.words import people_text
from apps_registry.selectors import routes_of
from apps_registry.services.public_apps import (
    PublicVisit,
    public_app_close,
    public_app_set,
    public_route_run,
    public_visit,
)
from apps_registry.services.routes import RouteResult

DONE_SALT = "charming.public.done"  # the signed note of what a visitor's action did, carried by the redirect
DONE_KEY = "_done"


class VisitorPageContext(PageContext):
    """The app page's panels for a visitor: views run as the visitor, only the opened actions offered, no pickers
    (their choices would list records no view returned)."""

    def __init__(self, request: HttpRequest, visit: PublicVisit, routes: list[Route], query: QueryDict) -> None:
        super().__init__(request, visit.app, routes, query, can_mutate=False)
        self.visit = visit
        self.page_url = reverse("public_page", args=[visit.listing.handle])

    def submit_url(self, op: str) -> str:
        return reverse("public_route_submit", args=[self.visit.listing.handle, op])

    def query_run(self, op: str, params: dict[str, Any]) -> RouteResult:
        return public_route_run(visit=self.visit, op=op, params=params, kind="query")

    def offers(self, route: Route) -> bool:
        return route.name in self.visit.listing.mutations

    def records_of(self, route: Route) -> dict[str, str]:
        return {}


def _visit_or_404(request: HttpRequest, handle: str, *, write: bool = False) -> PublicVisit | HttpResponse:
    try:
        return public_visit(handle=handle, address=request.META.get("REMOTE_ADDR"), write=write)
    except NotFound as error:
        raise Http404(error.message) from None
    except RateLimited as error:
        answer = render(request, "apps/public_refused.html", {"message": error.message}, status=429)
        answer["Retry-After"] = str(error.retry_after_seconds)
        return answer


def _render(
    request: HttpRequest,
    visit: PublicVisit,
    *,
    query: QueryDict,
    failed: tuple[str, SchemaForm] | None = None,
    notice: tuple[str, Notice] | None = None,
    status: int = 200,
) -> HttpResponse:
    routes = list(routes_of(visit.app))
    page = VisitorPageContext(request, visit, routes, query)
    ordered = sorted((r for r in routes if r.kind == "query"), key=lambda r: not route_hints(r).start)
    queries = [query_panel(page, r) for r in ordered]
    mutations = page.mutation_panels(failed=failed)
    panels: list[QueryPanel | MutationPanel] = [*queries, *mutations]
    if notice is not None:
        place, shown = notice
        target = next((p for p in panels if p.place == place), panels[0] if panels else None)
        if target is not None:
            target.notice = shown
    context = {
        "app": visit.app,
        "handle": visit.listing.handle,
        "queries": queries,
        "mutations": mutations,
        "lead": people_text(visit.app.description, page.titles),
        "back": query.urlencode(),
        "page_url": page.page_url,
    }
    return render(request, "apps/public_app.html", context, status=status)


def _query_without_done(request: HttpRequest) -> tuple[QueryDict, dict[str, Any] | None]:
    query = request.GET.copy()
    token = query.pop(DONE_KEY, [""])[-1]
    try:
        done = signing.loads(token, salt=DONE_SALT, max_age=600) if token else None
    except signing.BadSignature:
        done = None
    return query, done if isinstance(done, dict) else None


@never_cache
@require_GET
def public_page(request: HttpRequest, handle: str) -> HttpResponse:
    """A public app's page: its views, and the actions its owner opened to visitors."""
    visit = _visit_or_404(request, handle)
    if isinstance(visit, HttpResponse):
        return visit
    query, done = _query_without_done(request)
    notice = None
    if done is not None and done.get("app") == str(visit.app.id):
        route = next((r for r in routes_of(visit.app) if r.name == done.get("op")), None)
        title = route_title(route) if route is not None else str(done.get("op"))
        label = str(done.get("row") or "")
        notice = (
            str(done.get("place") or ""),
            Notice(kind="done", title=f"{title}: done" + (f" (“{label}”)" if label else "") + "."),
        )
    return _render(request, visit, query=query, notice=notice)


@never_cache
@require_POST
def public_route_submit(request: HttpRequest, handle: str, op: str) -> HttpResponse:
    """Run an action a visitor sent (one its owner opened); back to the page with a note of it, or its errors."""
    visit = _visit_or_404(request, handle, write=True)
    if isinstance(visit, HttpResponse):
        return visit
    route = routes_of(visit.app).filter(name=op, kind="mutation").first()
    if route is None or op not in visit.listing.mutations:
        raise Http404("This app has no such action open to visitors.")
    back = QueryDict(request.POST.get("_back", "")[:2000], mutable=True)
    back.pop(DONE_KEY, None)
    place = request.POST.get("_place", "")
    place = place if PLACE_PATTERN.match(place) else f"action-{op}"
    row_label = request.POST.get("_row", "")[:60]
    form = form_parse(schema_form(route.input_schema_ordered, id_prefix=f"m-{route.name}"), request.POST)
    status = 400 if form.has_errors else 0
    if not status:
        try:
            public_route_run(visit=visit, op=op, params=form.params, kind="mutation")
        except CharmingError as error:
            status = form_refusal(form, error, visit.app)
    if status:
        if place == f"action-{op}":
            return _render(request, visit, query=back, failed=(op, form), status=status)
        messages_ = [*form.errors, *(f"{f.label}: {e}" for f in form.all_fields() for e in f.errors)]
        title = route_title(route) + (f" (“{row_label}”)" if row_label else "")
        failed = Notice(kind="error", title=f"{title} did not go through.", messages=messages_)
        return _render(request, visit, query=back, notice=(place, failed), status=status)
    back[DONE_KEY] = signing.dumps(
        {"app": str(visit.app.id), "op": op, "place": place, "row": row_label}, salt=DONE_SALT
    )
    return redirect(f"{reverse('public_page', args=[visit.listing.handle])}?{back.urlencode()}#{place}")


# --- the owner's card on the app page ---


@never_cache
@login_required
@require_POST
def public_settings_submit(request: HttpRequest, app_id: Any) -> HttpResponse:
    """Make the app public under a handle with the chosen actions open, change that, or turn it off (its owner)."""
    app, _role = app_or_404(request, app_id)
    try:
        if request.POST.get("action") == "close":
            public_app_close(actor=request.user, app_id=app.id)
            messages.success(request, "The public page is off: its address no longer answers.")
        else:
            listing = public_app_set(
                actor=request.user,
                app_id=app.id,
                handle=request.POST.get("handle", ""),
                mutations=request.POST.getlist("mutations"),
            )
            address = request.build_absolute_uri(reverse("public_page", args=[listing.handle]))
            messages.success(request, f"The app is public: anyone with its address sees it, {address}")
    except CharmingError as error:
        messages.error(request, error.message)
    return redirect(reverse("app_page", args=[app.id]) + "#public")
