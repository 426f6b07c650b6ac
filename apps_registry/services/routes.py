"""Running an app's routes for a caller: access, route lookup, then the engine (and, for a transport's result,
the advisories it carries, from the same lookup and transaction)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from django.db import DatabaseError, connection, transaction

from apps_registry.access import VISITOR, Need, Visitor, app_for, role_check
from apps_registry.exceptions import (
    AppMigrating,
    CommitUnconfirmed,
    OperationFailed,
    RouteKindMismatch,
    RouteNotFound,
    RouteRemoved,
    app_not_found,
    unstorable_text_refuse,
)
from apps_registry.models import (
    Advisory,
    App,
    ChangeVia,
    Feedback,
    FeedbackResponse,
    Membership,
    PublicApp,
    Route,
    Storage,
)
from apps_registry.plans import plan_stable
from apps_registry.routes.cache import cache_route, cached_route, compile_route
from apps_registry.routes.limits import current_limits
from apps_registry.routes.runtime import run_route
from apps_registry.routes.steps import NoticeDraft
from apps_registry.routes.storage import SqlStore, declared_index_paths, index_entry_refusal, index_entry_too_large
from apps_registry.routes.store import ChangeSet
from apps_registry.rows import columns_of
from apps_registry.services.advisories import AdvisoryNote, AdvisoryState, advisories_for_call
from apps_registry.services.changes import change_log_on, change_record
from apps_registry.services.idempotency import (
    IdempotencyKey,
    KeyTaken,
    idempotency_conflict,
    idempotent_result_find,
    idempotent_result_remember,
)
from apps_registry.services.notices import NoticeSent, notices_send
from apps_registry.services.rate_limits import app_budget_take, cel_share
from apps_registry.services.record_migrations import migration_refusal, migration_resume_if_stale
from apps_registry.values import clip, parse_uuid

# What running a route of each kind needs (apps_registry.access decides which roles have it).
NEED_FOR_KIND: dict[str, Need] = {"query": "query", "mutation": "mutate"}

# An op name as quoted in a message: its first 100 characters and an ellipsis, not a caller's 100 KB string.
OP_CHARS = 101


@dataclass(frozen=True)
class RouteResult:
    value: Any  # the validated return value of the route (JSON-compatible)
    app: App  # the app the route ran in (for advisories)
    replayed: bool = False  # the remembered result of an earlier call with the same idempotency key
    advisories: tuple[AdvisoryNote, ...] = ()  # what the result carries (route_run with advisories=True)
    change_id: int | None = None  # the mutation's change set in the change log (a replay: the first call's)
    notices: tuple[NoticeSent, ...] = ()  # what its notify steps sent (services.notices)


def route_run(
    *,
    actor: Any,
    app_id: uuid.UUID | str,
    op: str,
    params: dict[str, Any] | None,
    kind: Literal["query", "mutation"],
    idempotency_key: IdempotencyKey | None = None,
    advisories: bool = False,
    via: str = ChangeVia.INTERNAL,
    budget_taken: bool = False,
) -> RouteResult:
    """Run route `op` of app `app_id` as `actor`. Raises only apps_registry.exceptions errors.

    `budget_taken`: the caller already counted this run against the app's budget (`app_budget_take`), outside its
    own transaction (a schedule's run, which holds one around this call).

    `actor` may be an `access.Visitor` (services.public_apps, which decides what a visitor may run and counts their
    budgets): the lookup then finds the app only while it is public, and no membership is read.

    A mutation with an `idempotency_key` already committed (same caller, app, route, params) within the window
    returns that first call's result (`replayed`) instead of running again; queries ignore the key.
    With `advisories`, the result also carries the advisories a transport shows with it (services.advisories),
    read by the route's own lookup and in a mutation's own transaction: no second transaction per call.
    A mutation that changed records records its change set (services.changes) in its transaction, with `via` (the
    transport: mcp, rest, page) and returns its `change_id`.
    """
    unstorable_text_refuse(op, path="$.op", what="The route name (op)")
    unstorable_text_refuse(params, path="$.params", what="The params")
    # Before the mutation's transaction, so the budget's row is not held while the route runs.
    if not budget_taken:
        app_budget_take(actor=actor, app_id=app_id)
    # The caller's share of this process's CEL worker processes (a visitor's: the app owner's).
    with cel_share(actor=actor):
        return _route_run_retrying(
            actor=actor,
            app_id=app_id,
            op=op,
            params=params,
            kind=kind,
            idempotency_key=idempotency_key,
            advisories=advisories,
            via=via,
        )


def _route_run_retrying(
    *,
    actor: Any,
    app_id: uuid.UUID | str,
    op: str,
    params: dict[str, Any] | None,
    kind: Literal["query", "mutation"],
    idempotency_key: IdempotencyKey | None,
    advisories: bool,
    via: str,
) -> RouteResult:
    if kind == "query":
        return _route_run(actor=actor, app_id=app_id, op=op, params=params, kind=kind, key=None, notes=advisories)
    for _attempt in range(2):
        committing = False
        try:
            # A mutation holds its app's storage row (FOR KEY SHARE, from the lookup on) until it commits; the
            # engine's own transaction becomes a savepoint of this one. See _route_for_call_sql.
            with transaction.atomic():
                result = _route_run(
                    actor=actor,
                    app_id=app_id,
                    op=op,
                    params=params,
                    kind=kind,
                    key=idempotency_key,
                    notes=advisories,
                    via=via,
                )
                committing = True
            return result
        except AppMigrating as refused:
            # Outside the refused call's transaction: a migration whose worker was lost is queued again.
            migration_resume_if_stale(app_id=refused.app_id)
            raise
        except KeyTaken:
            # A concurrent call with the same key committed first; this one's writes were rolled back. Run again:
            # this time the lookup finds the first call's result and returns it.
            continue
        except DatabaseError as error:
            if not committing:
                if index_entry_too_large(error):
                    raise index_entry_refusal() from None
                raise  # failed before COMMIT: nothing was written
            # The COMMIT was sent and its answer lost: it may have been carried out. "Try again" would invite a
            # second write; say so, unless the call's key tells (its result commits with the mutation).
            return _commit_resolved(actor=actor, app=result.app, op=op, params=params, key=idempotency_key)
    assert idempotency_key is not None  # KeyTaken comes only with a key
    raise idempotency_conflict(idempotency_key, clip(op, OP_CHARS))


def _commit_resolved(
    *, actor: Any, app: App, op: str, params: dict[str, Any] | None, key: IdempotencyKey | None
) -> RouteResult:
    """The outcome of a mutation whose COMMIT answer was lost: its result when its key shows that it committed
    (the key's row commits with the mutation), else CommitUnconfirmed. A key not found yet proves nothing: the
    dropped connection's COMMIT may still be under way."""
    if key is not None:
        try:
            remembered = idempotent_result_find(actor=actor, app=app, op=op, key=key, params=params)
        except DatabaseError:
            remembered = None
        if remembered is not None:
            return RouteResult(value=remembered.value, app=app, change_id=remembered.change_id)
    raise CommitUnconfirmed()


def _route_run(
    *,
    actor: Any,
    app_id: uuid.UUID | str,
    op: str,
    params: dict[str, Any] | None,
    kind: Literal["query", "mutation"],
    key: IdempotencyKey | None,
    notes: bool = False,
    via: str = ChangeVia.INTERNAL,
) -> RouteResult:
    # The hot path: the caller's role, the app, its storage and the route's version in one query.
    found = _route_for_call(actor=actor, app_id=app_id, op=op, hold_storage=kind == "mutation", advisories=notes)
    if found is None and isinstance(actor, Visitor):  # no longer public (turned off since the page was drawn)
        raise app_not_found(app_id)
    if found is None:
        # NotFound for missing and invisible apps, AccessDenied for a role without the need.
        app, role = app_for(actor=actor, app_id=app_id, need=NEED_FOR_KIND[kind])
        names = list(Route.objects.filter(app=app).order_by("name").values_list("name", "kind"))
        if any(name == op for name, _kind in names):  # the route is there: its storage is not
            raise _no_storage(app)
        raise RouteNotFound(app_id=app.id, app_name=app.name, op=clip(op, OP_CHARS), routes=names)
    app, role = found.app, found.role
    if not isinstance(actor, Visitor):  # a visitor's runs were decided by access.visitor_check
        role_check(app=app, role=role, need=NEED_FOR_KIND[kind])
    if found.kind != kind:
        raise RouteKindMismatch(op=op, route_kind=found.kind, called_kind=kind)
    if kind == "mutation" and app.migrating:
        raise migration_refusal(app)
    if key is not None:
        remembered = idempotent_result_find(actor=actor, app=app, op=op, key=key, params=params)
        if remembered is not None:
            return RouteResult(
                value=remembered.value,
                app=app,
                replayed=True,
                advisories=_notes(actor, found),
                change_id=remembered.change_id,
            )
    route_id = found.route_id
    limits = current_limits()
    changes = ChangeSet() if kind == "mutation" and change_log_on() else None
    notices: list[NoticeDraft] | None = [] if kind == "mutation" else None
    compiled = cached_route(route_id=route_id, version=found.version, limits=limits)
    if compiled is None:  # this route version's first call in this process
        compiled = compile_route(_route_or_unknown(route_id, op), limits)
        compiled = cache_route(route_id=route_id, version=found.version, limits=limits, compiled=compiled)
    value = run_route(
        compiled,
        params={} if params is None else params,
        caller={"id": actor.caller_id if isinstance(actor, Visitor) else str(actor.pk), "role": role},
        app_id=str(app.id),
        # A mutation runs in route_run's transaction, which any error rolls back whole: no savepoint of its own.
        store=SqlStore(
            storage_id=found.storage_id,
            max_bytes=limits.record_bytes,
            savepoint=False,
            indexes=declared_index_paths(app.collections),  # the lookup's App row: no query of its own
            changes=changes,
        ),
        limits=limits,
        notices=notices,
    )
    change_id = None
    if changes is not None:  # in the mutation's transaction: recorded exactly when the mutation commits
        change_id = change_record(app_id=app.id, actor=actor, via=via, route=op, changes=changes)
    sent: list[NoticeSent] = []
    if notices:  # in the mutation's transaction too: sent exactly when it commits (the e-mails after)
        sent = notices_send(app=app, drafts=notices, via=via, route=op, change_id=change_id)
    if key is not None:  # in the mutation's transaction: remembered exactly when the mutation commits
        idempotent_result_remember(
            actor=actor, app=app, op=op, key=key, params=params, value=value, change_id=change_id
        )
    return RouteResult(value=value, app=app, advisories=_notes(actor, found), change_id=change_id, notices=tuple(sent))


def _notes(actor: Any, found: _RouteForCall) -> tuple[AdvisoryNote, ...]:
    if found.advisories is None:  # not asked for
        return ()
    return tuple(advisories_for_call(actor=actor, app=found.app, state=found.advisories))


@dataclass(frozen=True)
class _RouteForCall:
    app: App
    route_id: int
    version: tuple[Any, ...]
    kind: str
    role: str
    storage_id: uuid.UUID
    advisories: AdvisoryState | None  # when asked for


_ROUTE_FOR_CALL_SQL: dict[tuple[bool, bool, bool], str] = {}


def _route_for_call_sql(*, hold_storage: bool, advisories: bool, visitor: bool = False) -> str:
    # Hand-written once: building this join with the ORM cost ~5x a call's CEL and validation together.
    # It joins the caller's membership (as apps_registry.access.apps_visible_to does) and reads the role;
    # whether that role may run the route is still decided by access.role_check.
    #
    # hold_storage (a mutation, in its transaction): the storage row is locked FOR KEY SHARE before any record.
    # A mutation's record writes take that lock anyway for their foreign key, but only at COMMIT (the constraint is
    # deferred), after they hold record rows; app_delete and the purges lock the storage row first, then delete the
    # records: each waited for the other, a deadlock. Locking it here puts everyone in one order, storage then
    # records. KEY SHARE does not conflict with itself, so mutations of one app still run side by side; a delete
    # (FOR UPDATE) waits for them, or they for it, and then find the app gone (the row no longer joins).
    #
    # advisories (a transport's result): what services.advisories.AdvisoryState needs, in the same query: the
    # open advisories' count, newest id and latest change (an index range on the app's advisories), and
    # whether a staff answer to the caller's feedback on the app is unread.
    #
    # visitor (an anonymous visitor of a public app): the app's public listing joined instead of a membership, so a
    # call finds the app only while it is public (turning it off takes effect at the next lookup); role "visitor".
    assert not (visitor and advisories), "a visitor has no advisories"
    if (hold_storage, advisories, visitor) not in _ROUTE_FOR_CALL_SQL:
        quote = connection.ops.quote_name
        route, app, membership, storage = (quote(model._meta.db_table) for model in (Route, App, Membership, Storage))
        lock = " FOR KEY SHARE OF s" if hold_storage and connection.vendor == "postgresql" else ""
        notes = ""
        if advisories:
            advisory, feedback, response = (quote(m._meta.db_table) for m in (Advisory, Feedback, FeedbackResponse))
            open_ones = f"FROM {advisory} v WHERE v.app_id = a.id AND NOT v.resolved"
            notes = (
                f", (SELECT COUNT(*) {open_ones}) AS advisories_open"
                f", (SELECT MAX(v.id) {open_ones}) AS advisories_newest"
                f", (SELECT MAX(v.updated_at) {open_ones}) AS advisories_changed"
                f", EXISTS (SELECT 1 FROM {response} fr JOIN {feedback} f ON f.id = fr.feedback_id "
                "WHERE f.app_id = a.id AND f.author_id = m.user_id AND fr.read_at IS NULL) AS answers_unread"
            )
        if visitor:
            public = quote(PublicApp._meta.db_table)
            caller = f"JOIN {public} p ON p.app_id = a.id "
            role = f"'{VISITOR}'"
        else:
            caller = f"JOIN {membership} m ON m.app_id = a.id AND m.user_id = %s "
            role = "m.role"
        _ROUTE_FOR_CALL_SQL[(hold_storage, advisories, visitor)] = plan_stable(
            # The app's columns by name, not a.*: a prepared statement then outlives a migration adding a column.
            f"SELECT {columns_of(App).select('a')}, "
            "r.id AS route_pk, r.version AS route_version, r.updated_at AS route_updated_at, "
            f"r.kind AS route_kind, {role} AS caller_role, s.id AS storage_pk{notes} "
            f"FROM {route} r JOIN {app} a ON a.id = r.app_id "
            f"{caller}"
            # An inner join when locking: PostgreSQL locks no row on the nullable side of an outer join.
            f"{'JOIN' if hold_storage else 'LEFT JOIN'} {storage} s ON s.app_id = a.id "
            f"WHERE r.app_id = %s AND r.name = %s LIMIT 1{lock}"
        )
    return _ROUTE_FOR_CALL_SQL[(hold_storage, advisories, visitor)]


def _route_for_call(
    *, actor: Any, app_id: uuid.UUID | str, op: str, hold_storage: bool = False, advisories: bool = False
) -> _RouteForCall | None:
    """The app (a model instance), the route's id, version and kind, the caller's role and the storage,
    in one query; None when the app is invisible or missing, or has no such route."""
    app_uuid = parse_uuid(app_id)
    if app_uuid is None:
        return None
    visitor = isinstance(actor, Visitor)
    params = [App._meta.pk.get_db_prep_value(app_uuid, connection), op]  # type: ignore[union-attr]
    if not visitor:
        params.insert(0, actor.pk)
    with connection.cursor() as cursor:
        cursor.execute(_route_for_call_sql(hold_storage=hold_storage, advisories=advisories, visitor=visitor), params)
        row = cursor.fetchone()
    if row is None:
        return None
    app_columns = columns_of(App)
    app = app_columns.instance(row)
    route_pk, route_version, route_updated_at, route_kind, caller_role, storage_pk, *notes = row[
        len(app_columns.columns) :
    ]
    state = None
    if advisories:
        open_count, newest_id, changed_at, answers_unread = notes
        state = AdvisoryState.read(
            open_count=open_count, newest_id=newest_id, changed_at=changed_at, answers_unread=answers_unread
        )
    return _RouteForCall(
        app=app,
        route_id=route_pk,
        version=(route_version, route_updated_at),
        kind=route_kind,
        role=caller_role,
        storage_id=_storage_uuid(storage_pk, app),
        advisories=state,
    )


def _no_storage(app: App) -> OperationFailed:
    return OperationFailed(f"App '{app.name}' has no storage for its records; ask staff to look at it.")


def _storage_uuid(value: Any, app: App) -> uuid.UUID:
    if value is None:  # every app gets its storage when created; only a damaged database lacks it
        raise _no_storage(app)
    storage_uuid = parse_uuid(value if isinstance(value, uuid.UUID) else str(value))
    if storage_uuid is None:
        raise OperationFailed(f"App '{app.name}' has a damaged storage id; ask staff to look at it.")
    return storage_uuid


def _route_or_unknown(route_id: int, op: str) -> Route:
    route = Route.objects.filter(pk=route_id).first()
    if route is None:  # removed by a save since this call looked it up
        raise RouteRemoved(op=clip(op, OP_CHARS))
    return route
