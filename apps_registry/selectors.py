"""Reads. A caller's apps are reached only through apps_registry.access (`apps_visible_to`, `app_for`);
the selectors here list what those give, read an app already reached that way, or serve staff and
operators (who see every app)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Case, Count, IntegerField, Max, Q, QuerySet, Sum, TextField, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Length
from oauth2_provider.models import AccessToken, Application, RefreshToken

from apps_registry.access import app_for, apps_visible_to
from apps_registry.cursors import cursor_make, cursor_read, items_within_budget
from apps_registry.exceptions import InvalidInput
from apps_registry.models import (
    Advisory,
    ApiToken,
    App,
    AppVersion,
    Change,
    ChangeEntry,
    ConfirmedEmail,
    Feedback,
    HookDelivery,
    Invitation,
    InvitationStatus,
    Membership,
    PublicApp,
    Record,
    Role,
    Route,
    Storage,
)
from apps_registry.oauth.scopes import SCOPES
from apps_registry.values import parse_uuid


@dataclass(frozen=True)
class AppListing:
    """One of the caller's apps as every transport lists it (list_apps, GET /api/apps/)."""

    id: uuid.UUID
    name: str
    description: str
    role: str

    def as_dict(self) -> dict[str, str]:
        """The listing as list_apps and GET /api/apps/ send it."""
        return {"id": str(self.id), "name": self.name, "description": self.description, "role": self.role}


def app_listings_for(actor: Any) -> list[AppListing]:
    """The actor's apps with their role in each, by name."""
    return [
        AppListing(id=app.id, name=app.name, description=app.description, role=app.caller_role)  # type: ignore[attr-defined]
        for app in apps_visible_to(actor).order_by("name", "id")
    ]


# list_apps and GET /api/apps/ return at most this many apps a page (fewer when the result budget is reached).
APP_PAGE_SIZE = 100


@dataclass(frozen=True)
class AppPage:
    """One page of the caller's apps: `next_cursor` continues it; `truncated` when the result budget cut it short."""

    apps: list[AppListing]
    next_cursor: str | None
    truncated: bool


def app_listings_page_for(actor: Any, *, cursor: str | None) -> AppPage:
    """A page of the actor's apps by name (keyset on name, then id), after `cursor` (a `next_cursor`)."""
    page_size = APP_PAGE_SIZE
    binding = f"list_apps|{getattr(actor, 'pk', None)}"
    apps = apps_visible_to(actor)
    if cursor:
        name, app_id = _app_position(cursor_read(cursor, binding=binding, length=2, what="list_apps", path="$.cursor"))
        apps = apps.filter(Q(name__gt=name) | Q(name=name, id__gt=app_id))
    rows = list(apps.order_by("name", "id")[: page_size + 1])
    more = len(rows) > page_size
    listings = [
        AppListing(id=app.id, name=app.name, description=app.description, role=app.caller_role)  # type: ignore[attr-defined]
        for app in rows[:page_size]
    ]
    kept = items_within_budget([listing.as_dict() for listing in listings])
    truncated = kept < len(listings)
    last = listings[kept - 1] if listings else None
    next_cursor = cursor_make([last.name, str(last.id)], binding=binding) if last and (more or truncated) else None
    return AppPage(apps=listings[:kept], next_cursor=next_cursor, truncated=truncated)


def _app_position(position: list[Any]) -> tuple[str, uuid.UUID]:
    name, app_id = position  # signed by this server, so made by cursor_make below
    return str(name), uuid.UUID(str(app_id))


@dataclass(frozen=True)
class MemberListing:
    """One member of an app (GET /api/apps/<id>/members/)."""

    username: str
    role: str
    since: datetime


def members_of(app: App) -> list[MemberListing]:
    """An app's members, the owner first, then by username. Reach `app` through access.app_for first."""
    memberships = (
        Membership.objects.filter(app=app)
        .select_related("user")
        .annotate(_rank=Case(When(role=Role.OWNER, then=Value(0)), default=Value(1), output_field=IntegerField()))
        .order_by("_rank", "user__username")
    )
    return [MemberListing(username=m.user.get_username(), role=m.role, since=m.created_at) for m in memberships]


@dataclass(frozen=True)
class InvitationListing:
    """A pending invitation as its invitee sees it: the app's name, who invited, the role; not the app itself."""

    id: int
    app_name: str
    invited_by: str
    role: str
    created_at: datetime


def invitations_pending_for(user: Any) -> list[InvitationListing]:
    """The invitations waiting for `user`'s answer, newest first."""
    invitations = (
        Invitation.objects.filter(invitee=user, status=InvitationStatus.PENDING)
        .select_related("app", "invited_by")
        .order_by("-created_at", "-id")
    )
    return [
        InvitationListing(
            id=i.pk,
            app_name=i.app.name,
            invited_by=i.invited_by.get_username() if i.invited_by else "",
            role=i.role,
            created_at=i.created_at,
        )
        for i in invitations
    ]


@dataclass(frozen=True)
class SentInvitation:
    """A pending invitation as the app's owner sees it (GET /api/apps/<id>/invitations/)."""

    id: int
    username: str
    role: str
    created_at: datetime


def invitations_pending_of(app: App) -> list[SentInvitation]:
    """An app's invitations still waiting for an answer, newest first. Reach `app` with need "own" first."""
    invitations = (
        Invitation.objects.filter(app=app, status=InvitationStatus.PENDING)
        .select_related("invitee")
        .order_by("-created_at", "-id")
    )
    return [
        SentInvitation(id=i.pk, username=i.invitee.get_username(), role=i.role, created_at=i.created_at)
        for i in invitations
    ]


def advisories_open_for(app: App) -> QuerySet[Advisory]:
    return Advisory.objects.filter(app=app, resolved=False).order_by("created_at", "id")


def retained_storage(
    *, detached_before: datetime | None = None, app_uuid: uuid.UUID | str | None = None
) -> QuerySet[Storage]:
    """Storage of deleted apps (detached, kept for the retention window), oldest first."""
    storages = Storage.objects.filter(detached_at__isnull=False).select_related("owner").order_by("detached_at", "id")
    if detached_before is not None:
        storages = storages.filter(detached_at__lt=detached_before)
    if app_uuid is not None:
        storages = storages.filter(app_uuid=str(app_uuid))
    return storages


@dataclass(frozen=True)
class AppSummary:
    app: App
    records: int
    routes: int
    members: int


def app_summary_for_staff(*, app_id: uuid.UUID | str) -> AppSummary | None:
    """Any app (staff see all) with its record, route and member counts; None if there is none."""
    app = App.objects.select_related("owner").filter(pk=str(app_id)).first() if parse_uuid(app_id) else None
    if app is None:
        return None
    return AppSummary(
        app=app,
        records=Record.objects.filter(storage__app=app).count(),
        routes=app.routes.count(),
        members=app.memberships.count(),
    )


@dataclass(frozen=True)
class StorageUsage:
    storage: Storage
    records: int
    # Characters of the records' JSON: an approximate size in bytes.
    size: int


def storage_with_usage(storages: QuerySet[Storage]) -> QuerySet[Storage]:
    """Annotate `record_count` and `data_size` (see StorageUsage)."""
    return storages.annotate(
        record_count=Count("records"),
        data_size=Coalesce(Sum(Length(Cast("records__data", TextField()))), 0),
    )


def storage_usage(storages: QuerySet[Storage]) -> list[StorageUsage]:
    return [
        StorageUsage(storage=s, records=int(s.record_count), size=int(s.data_size))  # type: ignore[attr-defined]
        for s in storage_with_usage(storages)
    ]


def feedback_sent_by(*, user: Any, app: App) -> QuerySet[Feedback]:
    """The user's own feedback on an app, newest first, with the staff answers prefetched."""
    return Feedback.objects.filter(author=user, app=app).prefetch_related("responses").order_by("-created_at", "-id")


def public_listing_of(app: App) -> PublicApp | None:
    """The app's public listing (services/public_apps.py), if it is public."""
    return PublicApp.objects.filter(app=app).first()


def routes_of(app: App) -> QuerySet[Route]:
    """The app's routes, by name."""
    return Route.objects.filter(app=app).order_by("name")


def routes_after(app: App, cursor: str | None) -> QuerySet[Route]:
    """The app's routes by name, after `cursor` (get_app's `next_cursor`, which `route_cursor` makes)."""
    routes = routes_of(app)
    if cursor:
        (name,) = cursor_read(cursor, binding=f"get_app|{app.id}", length=1, what="get_app", path="$.cursor")
        routes = routes.filter(name__gt=str(name))
    return routes


def route_cursor(app: App, last_route: str) -> str:
    """The cursor that continues get_app's routes after `last_route`."""
    return cursor_make([last_route], binding=f"get_app|{app.id}")


@dataclass(frozen=True)
class ConnectedClient:
    """An OAuth client holding live tokens a user granted."""

    application_id: int
    name: str
    client_id: str
    scopes: list[str]
    connected_at: datetime


def oauth_clients_connected_to(user: Any) -> list[ConnectedClient]:
    """The OAuth clients holding an access token or an unrevoked refresh token of `user`, oldest first."""
    live_refresh = RefreshToken.objects.filter(user=user, revoked__isnull=True)
    application_ids = set(AccessToken.objects.filter(user=user).values_list("application_id", flat=True))
    application_ids |= set(live_refresh.values_list("application_id", flat=True))
    clients = []
    for application in Application.objects.filter(pk__in=application_ids).order_by("created"):
        granted: set[str] = set()
        for scope in AccessToken.objects.filter(user=user, application=application).values_list("scope", flat=True):
            granted.update(scope.split())
        # Rotation replaces the tokens on every refresh; the first refresh token of the family dates the consent.
        families = live_refresh.filter(application=application).exclude(token_family=None).values("token_family")
        first = (
            RefreshToken.objects.filter(token_family__in=families).order_by("created").first()
            or AccessToken.objects.filter(user=user, application=application).order_by("created").first()
        )
        clients.append(
            ConnectedClient(
                application_id=application.pk,
                name=application.name or application.client_id,
                client_id=application.client_id,
                scopes=[SCOPES.get(scope, scope) for scope in sorted(granted)],
                connected_at=first.created if first else application.created,
            )
        )
    return clients


def tokens_of(user: Any) -> QuerySet[ApiToken]:
    """The user's personal API tokens, newest first (revoked and expired ones included, marked by their fields)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


# --- App pages (apps_registry/pages/app_views.py): an app already reached through access.app_for ---


def records_of(app: App, *, collection: str | None = None, id_contains: str = "") -> QuerySet[Record]:
    """The app's stored records (one collection, or all), by collection then id; `id_contains` filters ids."""
    records = Record.objects.filter(storage__app=app).order_by("collection", "record_id")
    if collection is not None:
        records = records.filter(collection=collection)
    if id_contains:
        records = records.filter(record_id__icontains=id_contains)
    return records


def record_counts_of(app: App) -> dict[str, int]:
    """How many records each collection of the app holds (declared collections first, at 0 when empty)."""
    counts = dict.fromkeys(app.collections or {}, 0)
    for row in Record.objects.filter(storage__app=app).values("collection").annotate(n=Count("id")).order_by():
        counts[row["collection"]] = row["n"]
    return counts


def advisories_for_users(app: App) -> QuerySet[Advisory]:
    """The app's open advisories that carry a summary meant for its users."""
    return advisories_open_for(app).exclude(user_summary="")


@dataclass(frozen=True)
class AppActivity:
    """What the home page adds to an app's listing: when it last changed, and its notes for users."""

    changed_at: datetime
    notes: int


def app_activity_for(actor: Any) -> dict[uuid.UUID, AppActivity]:
    """For each app the actor can see: the latest change (its definition or a record) and open user notes."""
    apps = apps_visible_to(actor).annotate(
        last_record=Max("storage__records__updated_at"),
        notes=Count(
            "advisories", filter=Q(advisories__resolved=False) & ~Q(advisories__user_summary=""), distinct=True
        ),
    )
    return {
        app.id: AppActivity(
            changed_at=max(filter(None, [app.updated_at, app.last_record])),  # type: ignore[attr-defined]
            notes=int(app.notes),  # type: ignore[attr-defined]
        )
        for app in apps
    }


def app_versions_of(app: App, *, limit: int = 20) -> list[AppVersion]:
    """The app's latest saved definitions, newest first (number, author, time, summary), without the documents."""
    return list(
        AppVersion.objects.filter(app=app)
        .only("number", "author_repr", "created_at", "summary", "restored_from")
        .order_by("-number")[:limit]
    )


def app_owned_named(*, owner: Any, name: str) -> App | None:
    """The owner's oldest app with exactly this name, if any (import_app refuses a silent second copy)."""
    return App.objects.filter(owner=owner, name=name).order_by("created_at").first()


def records_recent_of(app: App, *, collection: str, limit: int) -> list[Record]:
    """The collection's newest records (by when they were added), newest first."""
    return list(Record.objects.filter(storage__app=app, collection=collection).order_by("-created_at", "-id")[:limit])


LABEL_FIELDS = ("title", "name", "label", "description", "category")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a field a JSON key lookup can name as it is


def record_label_field(app: App, *, collection: str) -> str:
    """The field a collection's records are best named by for a person: a usual name field its newest record
    holds as text, else the first text field it holds ("" when none: the picker shows ids)."""
    newest = records_recent_of(app, collection=collection, limit=1)
    data = newest[0].data if newest and isinstance(newest[0].data, dict) else {}
    for key in LABEL_FIELDS:
        if isinstance(data.get(key), str):
            return key
    return next(
        (
            k
            for k, v in data.items()
            if isinstance(v, str) and _PLAIN_KEY.match(k) and "__" not in k and k != "id" and not k.endswith("_id")
        ),
        "",
    )


def record_choices_of(
    app: App, *, collection: str, label_field: str, query: str = "", limit: int = 200
) -> tuple[int, list[tuple[str, str]]]:
    """(how many records match, the first `limit` as (id, label)) of a collection, ordered by the label;
    `query` matches any part of the label or of the id."""
    records = Record.objects.filter(storage__app=app, collection=collection)
    if query:
        match = Q(record_id__icontains=query)
        if label_field and _PLAIN_KEY.match(label_field) and "__" not in label_field:
            match |= Q(**{f"data__{label_field}__icontains": query})
        records = records.filter(match)
    total = records.count()
    if label_field:
        records = records.annotate(label=Cast(KeyTextTransform(label_field, "data"), TextField())).order_by(
            "label", "record_id"
        )
    else:
        records = records.order_by("record_id")
    choices = []
    for record in records[:limit]:
        data = record.data if isinstance(record.data, dict) else {}
        label = data.get(label_field) if label_field else None
        choices.append((record.record_id, str(label) if label not in (None, "") else record.record_id))
    return total, choices


@dataclass(frozen=True)
class EmailStatus:
    """A person's address and whether they confirmed it (it is the address of their ConfirmedEmail row)."""

    email: str
    confirmed: bool
    confirmed_at: datetime | None = None


def email_status_of(user: Any) -> EmailStatus:
    """The address `user` gave and whether it is confirmed (one query by primary key)."""
    email = getattr(user, "email", "") or ""
    row = ConfirmedEmail.objects.filter(user_id=user.pk).first() if email else None
    if row is None or row.email.lower() != email.lower():
        return EmailStatus(email=email, confirmed=False)
    return EmailStatus(email=email, confirmed=True, confirmed_at=row.confirmed_at)


def records_changes_of(*, app_id: uuid.UUID | str) -> int | None:
    """The app's changes counter (+1 per write of its records; Storage.records_changes), None once it has no
    storage. One read by the storage's unique app key: what each poll of an open app page costs."""
    return Storage.objects.filter(app_id=app_id).values_list("records_changes", flat=True).first()


# The change log's pages (list_changes, GET /api/apps/<id>/changes/, the activity page): changes per page by
# default and at most, and the records shown per change (its `records` says how many it has).
CHANGE_PAGE_SIZE = 20
CHANGE_PAGE_MAX = 100
CHANGE_ENTRIES_SHOWN = 20


@dataclass(frozen=True)
class ChangeListing:
    """One change of an app's history, newest first: who, when, through what, and its records' before and after."""

    id: int
    at: datetime
    by: str
    via: str
    route: str
    reverts: int | None
    reverted_by: list[int]
    records: int
    entries: list[dict[str, Any]]  # {collection, id, before, after}; the first CHANGE_ENTRIES_SHOWN

    def as_dict(self) -> dict[str, Any]:
        shaped: dict[str, Any] = {
            "id": str(self.id),
            "at": self.at.isoformat(),
            "by": self.by,
            "via": self.via,
            "route": self.route,
            "records": self.records,
            "entries": self.entries,
        }
        if self.reverts is not None:
            shaped["reverts"] = str(self.reverts)
        if self.reverted_by:
            shaped["reverted_by"] = [str(n) for n in self.reverted_by]
        return shaped


@dataclass(frozen=True)
class ChangesPage:
    app: App
    changes: list[ChangeListing]
    next_cursor: str | None
    truncated: bool


def change_moment_read(value: str | None, *, name: str) -> datetime | None:
    """A `since` / `until` bound of the change log: an ISO 8601 date-time (its offset, or UTC when it has none) or
    a date (its midnight, UTC); None when not given; invalid_input saying what to send otherwise."""
    if value is None:
        return None
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text) if "T" in text or " " in text else datetime.fromisoformat(text + "T00:00")
        moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
        moment.astimezone(UTC)  # the database compares in UTC: a moment past year 9999 there is refused here
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"'{name}' must be an ISO 8601 date-time such as '2026-12-03T09:00:00Z', or a date such as "
            f"'2026-12-03' (its midnight, UTC); got {value[:40]!r}.",
            errors=[{"path": name, "message": "is not an ISO 8601 date-time or date"}],
        ) from None
    return moment


def changes_page_for(
    actor: Any,
    *,
    app_id: uuid.UUID | str,
    collection: str | None = None,
    record_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    cursor: str | None = None,
    limit: int = CHANGE_PAGE_SIZE,
) -> ChangesPage:
    """A page of an app's changes, newest first (any member may read them); with `collection` and `record_id`,
    only the changes of that record (a record's history), each showing that record alone; with `since` and/or
    `until`, only the changes made at or after `since` and before `until`.

    Three reads whatever the page's size: the changes, the reverts of them, and their first CHANGE_ENTRIES_SHOWN
    entries (a change's entries are numbered from 0, so that is `position <` it, by the (change, position) key)."""
    app, _role = app_for(actor=actor, app_id=app_id, need="read")
    if since is not None and until is not None and since >= until:
        raise InvalidInput(
            f"'since' ({since.isoformat()}) must be before 'until' ({until.isoformat()}): changes are listed from "
            "since, included, to until, left out.",
            errors=[{"path": "until", "message": "must be after since"}],
        )
    one_record = collection is not None and record_id is not None
    window = "|".join("" if moment is None else moment.isoformat() for moment in (since, until))
    binding = (
        f"list_changes|{app.pk}|{getattr(actor, 'pk', None)}|{collection if one_record else ''}|{record_id or ''}"
        f"{'|' + window if since or until else ''}"
    )
    changes = Change.objects.filter(app=app)
    if one_record:
        touching = ChangeEntry.objects.filter(app=app, collection=collection, record_id=record_id).values("change_id")
        changes = changes.filter(pk__in=touching)
    if since is not None:
        changes = changes.filter(created_at__gte=since)
    if until is not None:
        changes = changes.filter(created_at__lt=until)
    if cursor:
        (after,) = cursor_read(cursor, binding=binding, length=1, what="list_changes", path="$.cursor")
        changes = changes.filter(pk__lt=int(after))
    rows = list(changes.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    ids = [change.pk for change in rows]
    reverted_by: dict[int, list[int]] = {}
    for reverting, reverted in Change.objects.filter(reverts_id__in=ids).values_list("id", "reverts_id"):
        reverted_by.setdefault(reverted, []).append(reverting)
    entries = ChangeEntry.objects.filter(change_id__in=ids)
    if one_record:
        entries = entries.filter(collection=collection, record_id=record_id)
    else:
        entries = entries.filter(position__lt=CHANGE_ENTRIES_SHOWN)
    shown: dict[int, list[dict[str, Any]]] = {}
    for entry in entries.order_by("change_id", "position").values_list(
        "change_id", "collection", "record_id", "before", "after"
    ):
        change_id, collection_of, id_of, before, after = entry
        of_change = shown.setdefault(change_id, [])
        if len(of_change) < CHANGE_ENTRIES_SHOWN:
            of_change.append({"collection": collection_of, "id": id_of, "before": before, "after": after})
    listings = [
        ChangeListing(
            id=change.pk,
            at=change.created_at,
            by=change.actor_repr,
            via=change.via,
            route=change.route,
            reverts=change.reverts_id,
            reverted_by=sorted(reverted_by.get(change.pk, [])),
            records=change.records,
            entries=shown.get(change.pk, []),
        )
        for change in rows
    ]
    kept = items_within_budget([listing.as_dict() for listing in listings])
    truncated = kept < len(listings)
    last = listings[kept - 1] if listings else None
    next_cursor = cursor_make([str(last.id)], binding=binding) if last and (more or truncated) else None
    return ChangesPage(app=app, changes=listings[:kept], next_cursor=next_cursor, truncated=truncated)


def changes_made_before(cutoff: datetime) -> int:
    """How many changes (of every app) were made before `cutoff`: what the history's purge would delete."""
    return Change.objects.filter(created_at__lt=cutoff).count()


def hook_deliveries_before(cutoff: datetime) -> int:
    """How many webhook deliveries were received before `cutoff`: what the same purge would delete."""
    return HookDelivery.objects.filter(received_at__lt=cutoff).count()
