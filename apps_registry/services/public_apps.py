"""Public apps: an owner makes an app public under a handle, and anyone, signed in or not, can open `/p/<handle>/`.

What a visitor may do is decided here and in `access.visitor_check`: every query of the app (read-only), and only
the mutations its owner opened to visitors (a guest book's "sign", a poll's "vote"). Nothing else of the app is
public: not its members, its records outside what its queries return, its activity, its other apps. Each visitor
request is counted against their address (`visitor`, and `visitor_writes` for an action) and the app
(`public_app`), and an action's form is bounded (`CHARMING_PUBLIC_PARAMS_BYTES`); the app's own limits (records,
per-call work) apply as to any call. Turning an app's public page off deletes its listing: the next request, and
the route lookup of any call in flight, no longer finds it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.crypto import salted_hmac

from apps_registry.access import Visitor, app_for, visitor_check
from apps_registry.exceptions import InvalidInput, NotFound
from apps_registry.models import App, ChangeVia, PublicApp, Route
from apps_registry.services.apps import audit_record
from apps_registry.services.rate_limits import client_address_key, visitor_budget_take
from apps_registry.services.routes import RouteResult, route_run
from apps_registry.values import clip

# A handle: 3 to 40 lowercase letters, digits and single hyphens, starting and ending with a letter or digit.
HANDLE_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){1,38}[a-z0-9]")
HANDLE_RULE = "3 to 40 lowercase letters, digits and hyphens, starting and ending with a letter or digit"
PUBLIC_NOT_FOUND = "No public app at this address: it was turned off, or the address is mistyped."


@dataclass(frozen=True)
class PublicVisit:
    """One visitor request to a public app, its budgets counted: the listing, the app, and the visitor it runs as."""

    listing: PublicApp
    app: App
    visitor: Visitor


def handle_normalize(value: Any) -> str:
    """The handle as stored (lowercase, trimmed), or InvalidInput saying what a handle is."""
    if not isinstance(value, str):
        raise InvalidInput("The handle must be text.", errors=[{"path": "$.handle", "message": "must be text"}])
    handle = value.strip().lower()
    if HANDLE_PATTERN.fullmatch(handle) is None:
        raise InvalidInput(
            f"The handle {clip(handle, 41)!r} is not one: use {HANDLE_RULE} (like 'our-guest-book').",
            errors=[{"path": "$.handle", "message": HANDLE_RULE}],
        )
    return handle


@transaction.atomic
def public_app_set(*, actor: Any, app_id: Any, handle: Any, mutations: Any) -> PublicApp:
    """Make the app public under `handle`, with the mutation routes named in `mutations` open to visitors (its
    owner only); again on a public app: change its handle or its open actions. Its queries are always public."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    handle = handle_normalize(handle)
    if not isinstance(mutations, list) or not all(isinstance(name, str) for name in mutations):
        raise InvalidInput(
            "mutations must be a list of route names.", errors=[{"path": "$.mutations", "message": "must be a list"}]
        )
    kinds = dict(Route.objects.filter(app=app).values_list("name", "kind"))
    problems = [
        {"path": f"$.mutations[{n}]", "message": _open_problem(name, kinds.get(name))}
        for n, name in enumerate(mutations)
        if kinds.get(name) != "mutation"
    ]
    if problems:
        names = ", ".join(sorted(name for name, kind in kinds.items() if kind == "mutation")) or "none"
        raise InvalidInput(
            f"Only the app's own actions can be opened to visitors ({problems[0]['message']}). Its actions: {names}.",
            errors=problems,
        )
    if PublicApp.objects.filter(handle=handle).exclude(app=app).exists():
        raise _handle_taken(handle)
    fields = {"handle": handle, "mutations": sorted(set(mutations)), "opened_by": actor}
    try:
        with transaction.atomic():  # a savepoint: another app taking the handle at the same moment is refused
            listing, created = PublicApp.objects.update_or_create(app=app, defaults=fields)
    except IntegrityError:
        raise _handle_taken(handle) from None
    audit_record(
        actor=actor,
        action="public.open" if created else "public.change",
        app_id=app.id,
        details={"handle": handle, "mutations": listing.mutations},
    )
    return listing


def _open_problem(name: str, kind: str | None) -> str:
    if kind is None:
        return f"the app has no route {clip(name, 101)!r}"
    return f"{name!r} is a query: queries are always public"


def _handle_taken(handle: str) -> InvalidInput:
    return InvalidInput(
        f"The handle {handle!r} is taken by another public app; choose another.",
        errors=[{"path": "$.handle", "message": "taken"}],
    )


@transaction.atomic
def public_app_close(*, actor: Any, app_id: Any) -> None:
    """Turn the app's public page off (its owner only), at once: its handle no longer answers."""
    app, _role = app_for(actor=actor, app_id=app_id, need="own", for_update=True)
    listing = PublicApp.objects.filter(app=app).first()
    if listing is None:
        raise NotFound(f"App '{app.name}' is not public.")
    audit_record(actor=actor, action="public.close", app_id=app.id, details={"handle": listing.handle})
    listing.delete()


def visitor_for(*, app: App, address: str | None) -> Visitor:
    """The visitor from `address` of public app `app`. Their `caller.id` is a pseudonym of the address (an IPv6
    address by its /64) for this app alone: stable, so an author can count one vote per visitor, and unrelated
    across apps, so it tells nothing of where else they went."""
    address_key = client_address_key(address)
    pseudonym = salted_hmac("charming.public.visitor", f"{app.id}:{address_key}").hexdigest()[:20]
    return Visitor(app_id=app.id, owner_id=app.owner_id, caller_id=f"visitor-{pseudonym}", address_key=address_key)


def public_visit(*, handle: str, address: str | None, write: bool = False) -> PublicVisit:
    """A visitor's request to the public app under `handle` (a page view, or with `write` a form sent), its budgets
    counted first. NotFound when no app is public under it; RateLimited when a budget is spent."""
    listing = PublicApp.objects.select_related("app").filter(handle=handle.lower()[:41]).first()
    if listing is None:
        raise NotFound(PUBLIC_NOT_FOUND)
    visitor = visitor_for(app=listing.app, address=address)
    visitor_budget_take(address_key=visitor.address_key, app_id=listing.app.id, write=write)
    return PublicVisit(listing=listing, app=listing.app, visitor=visitor)


def public_route_run(
    *, visit: PublicVisit, op: str, params: dict[str, Any], kind: Literal["query", "mutation"]
) -> RouteResult:
    """Run route `op` as the visit's visitor: any query; a mutation only when opened to visitors, and with params
    no larger than CHARMING_PUBLIC_PARAMS_BYTES. The run itself is route_run's (the app's limits, its change log
    with via "public", its notices)."""
    visitor_check(opened=list(visit.listing.mutations), op=op, kind=kind)
    if kind == "mutation":
        most = int(settings.CHARMING_PUBLIC_PARAMS_BYTES)
        size = len(json.dumps(params, ensure_ascii=False).encode())
        if size > most:
            message = (
                f"What you sent is {size:,} bytes; a visitor may send at most {most:,}. Shorten it and send again."
            )
            raise InvalidInput(message, errors=[{"path": "$", "message": message}])
    # The visitor's budgets were counted by public_visit; the app's members' budget is not theirs to spend.
    return route_run(
        actor=visit.visitor,
        app_id=visit.app.id,
        op=op,
        params=params,
        kind=kind,
        via=ChangeVia.PUBLIC,
        budget_taken=True,
    )


@transaction.atomic
def public_apps_close_by_staff(*, actor: Any, app_ids: list[Any]) -> int:
    """Staff turn public pages off (the admin's action, for abuse); returns how many were turned off."""
    closed = 0
    for listing in PublicApp.objects.select_for_update().filter(app_id__in=app_ids):
        audit_record(actor=actor, action="public.close", app_id=listing.app_id, details={"handle": listing.handle})
        listing.delete()
        closed += 1
    return closed
