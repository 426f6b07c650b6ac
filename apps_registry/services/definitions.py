"""App definitions (the author format v1): save (create or replace) whole or not at all, check without
saving, export, clear; the app's versions (each save kept whole) and restoring one. Saving runs the
definition's tests and recomputes the app's authoring advisories."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from apps_registry.access import app_for
from apps_registry.exceptions import (
    InvalidDefinition,
    NotFound,
    RateLimited,
    TestsFailed,
    VersionConflict,
    app_not_found,
    unstorable_text_refuse,
)
from apps_registry.models import Advisory, App, AppVersion, AuditEvent, Route, Storage
from apps_registry.routes import cache
from apps_registry.routes.advisories import (
    AUTHORING_KINDS,
    DOC_URL,
    AdvisoryDraft,
    authoring_advisories,
    unindexed_advisories,
)
from apps_registry.routes.authortests import AuthorTest, TestResult, failure_summary, run_test
from apps_registry.routes.compiler import DefinitionParts, check_definition, compile_parts
from apps_registry.routes.limits import Limits, current_limits
from apps_registry.routes.runtime import run_route
from apps_registry.routes.scratch import ScratchSqlStore
from apps_registry.services.apps import app_create
from apps_registry.services.collection_indexes import collection_indexes_enqueue, declared_index_keys
from apps_registry.services.rate_limits import author_tests_lease, cel_share
from apps_registry.services.record_migrations import (
    MigrationOutcome,
    migration_check,
    record_migration_share_check,
    record_migration_start,
    record_migration_try,
)
from apps_registry.values import clip, clip_repr, first_problems, parse_uuid


def definition_check(*, definition: Any) -> DefinitionParts:
    """The checked parts of a definition, or InvalidDefinition listing every problem with its path."""
    unstorable_text_refuse(definition, path="$", what="The app definition")
    parts, problems = check_definition(definition, current_limits())
    if problems or parts is None:
        raise InvalidDefinition(
            f"The app definition has {len(problems)} problem(s); nothing was saved. {first_problems(problems)}",
            errors=[p.as_dict() for p in problems],
        )
    return parts


@dataclass(frozen=True)
class SavedDefinition:
    """What a save did: the app (at its new version), what changed, and its tests' results."""

    app: App
    version: int
    changes: dict[str, Any]
    summary: str
    tests: list[TestResult]
    created: bool
    migration: MigrationOutcome | None = None  # what the save's `migrate` did


@dataclass(frozen=True)
class CheckedDefinition:
    """A definition checked without saving: its problems, or the advisories it would raise and its tests."""

    problems: list[dict[str, Any]]
    advisories: list[AdvisoryDraft]
    tests: list[TestResult]


def app_definition_save(
    *,
    actor: Any,
    definition: Any,
    app_id: uuid.UUID | str | None = None,
    expected_version: int | None = None,
    allow_failing_tests: bool = False,
) -> App:
    """Create an app from a definition, or replace the definition of an app the actor may author.

    A definition that does not validate is refused whole (InvalidDefinition); nothing is saved.
    Only routes whose content changed get a new version, so only they are recompiled.
    """
    return definition_save(
        actor=actor,
        definition=definition,
        app_id=app_id,
        expected_version=expected_version,
        allow_failing_tests=allow_failing_tests,
    ).app


def definition_save(
    *,
    actor: Any,
    definition: Any,
    app_id: uuid.UUID | str | None = None,
    expected_version: int | None = None,
    allow_failing_tests: bool = False,
    restored_from: int | None = None,
    create_missing: bool = True,
    migrate: Any = None,
    within: Callable[[App], None] | None = None,
) -> SavedDefinition:
    """Save a definition (create, or replace when `app_id` names an app the actor may author), keeping it
    whole as a new AppVersion.

    Refused whole, with nothing saved: InvalidDefinition (every problem), TestsFailed (its own tests fail,
    unless `allow_failing_tests`: then saved with a `failing-tests` advisory), VersionConflict
    (`expected_version` is not the app's version; enforced by a conditional UPDATE under a row lock).
    An `app_id` no app has creates the app with that id, unless not `create_missing` (then NotFound).
    With `migrate`, the app's records are migrated too (services/record_migrations.py): with the save, or, for
    many records, by a task queued with it. `within` runs in the save's transaction once the app is saved (its tests
    ran before, outside it): what a remix or an import writes with the app, all or nothing.
    """
    parts = definition_check(definition=definition)
    migration = migration_check(migrate=migrate) if migrate is not None else None
    limits = current_limits()
    existing = _existing_app(actor=actor, app_id=app_id)
    if existing is None and app_id is not None and (not create_missing or _id_ever_used(_app_uuid(app_id))):
        # Before the tests run, so a deleted app's id is refused exactly as an invisible app's is.
        raise app_not_found(app_id)
    if existing is not None and expected_version is not None and existing[0].version != expected_version:
        raise _conflict(existing[0], expected_version)
    if existing is not None and migration is not None:  # refused before the tests run, not after
        record_migration_share_check(app=existing[0], actor=actor, migration=migration)
    test_app_id = existing[0].id if existing else (app_id or uuid.uuid4())
    role = existing[1] if existing else "owner"
    results = tests_run(parts=parts, actor=actor, role=role, app_id=str(test_app_id), limits=limits)
    failing = [r for r in results if not r.passed]
    if failing and not allow_failing_tests:
        raise TestsFailed(
            f"{len(failing)} of {len(results)} test(s) of the definition fail; nothing was saved. "
            f"{failure_summary(results)}. Fix the routes or the tests (or pass allow_failing_tests: true to "
            "save anyway).",
            errors=[{"path": f"tests[{_test_index(parts, r)}]", "message": " and ".join(r.failures)} for r in failing],
            details={"tests": [r.as_dict() for r in results]},
        )
    with transaction.atomic():
        if existing is not None:
            # Locked before anything is read, so what changed is measured against what this save replaces.
            locked, _role = app_for(actor=actor, app_id=existing[0].id, need="author", for_update=True)
            previous = _current_version_row(locked)
            changes = _changes(app=locked, parts=parts, previous=previous, definition=definition, new=False)
        declared_before = declared_index_keys(existing[0].collections) if existing is not None else set()
        app = _app_for_save(actor=actor, app_id=test_app_id, parts=parts)
        _owner_indexes_check(app=app, collections=parts.collections, limits=limits)
        if existing is None:
            changes = _changes(app=app, parts=parts, previous=None, definition=definition, new=True)
        version = _version_bump(app=app, expected_version=expected_version)
        changed = _sync_routes(app=app, parts=parts)
        migrated = None
        if migration is not None:
            migrated = record_migration_start(
                app=app,
                actor=actor,
                storage_id=Storage.objects.get(app=app).id,
                version=version,
                migration=migration,
                spec=migrate,
            )
        Advisory.objects.filter(app=app, kind__in=AUTHORING_KINDS).delete()
        drafts = _unproven(authoring_advisories(parts, limits), parts, results) + tests_advisories(results, saved=True)
        drafts += unindexed_advisories(parts, limits, records_held=_records_held(app))
        Advisory.objects.bulk_create(
            Advisory(
                app=app,
                kind=draft.kind,
                severity=draft.severity,
                summary=draft.summary,
                user_summary=draft.user_summary,
                data=draft.data,
                doc_url=DOC_URL,
            )
            for draft in drafts
        )
        declared_now = declared_index_keys(parts.collections)
        if declared_now or declared_now != declared_before:
            _indexes_sync_queue(app)
        summary = changes_summary(changes, restored_from=restored_from)
        AppVersion.objects.create(
            app=app,
            number=version,
            author=actor,
            author_repr=str(actor.get_username()),
            definition=definition,
            changes=changes,
            summary=summary,
            restored_from=restored_from,
        )
        if within is not None:
            within(app)
    cache.forget(changed)
    return SavedDefinition(
        app=app,
        version=version,
        changes=changes,
        summary=summary,
        tests=results,
        created=existing is None,
        migration=migrated,
    )


def definition_dry_run(*, actor: Any, definition: Any) -> CheckedDefinition:
    """Check a definition without saving anything: every problem, or the advisories it would raise and
    the results of its tests (run in a transaction that is rolled back)."""
    try:
        parts = definition_check(definition=definition)
    except InvalidDefinition as exc:
        return CheckedDefinition(problems=exc.errors or [], advisories=[], tests=[])
    limits = current_limits()
    results = tests_run(parts=parts, actor=actor, role="owner", app_id=str(uuid.uuid4()), limits=limits)
    return CheckedDefinition(
        problems=[],
        advisories=_unproven(authoring_advisories(parts, limits), parts, results)
        + tests_advisories(results, saved=False),
        tests=results,
    )


def _unproven(drafts: list[AdvisoryDraft], parts: DefinitionParts, results: list[TestResult]) -> list[AdvisoryDraft]:
    """`drafts` less the over-limit-route estimates a passing test disproves: one calling the route with at least
    the estimated number of records in each collection the estimate names (generated ones included)."""
    sizes: dict[str, dict[str, int]] = {}
    for test, result in zip(parts.tests, results, strict=False):
        if not result.passed:
            continue
        held = sizes.setdefault(test.route, {})
        for collection in {*test.records, *test.generated}:
            count = len(test.records.get(collection, [])) + len(test.generated.get(collection, []))
            held[collection] = max(held.get(collection, 0), count)
    kept = []
    for draft in drafts:
        if draft.kind == "over-limit-route":
            held = sizes.get(draft.data["route"], {})
            if all(held.get(c, 0) >= draft.data["records"] for c in draft.data["collections"]):
                continue
        kept.append(draft)
    return kept


def tests_run(*, parts: DefinitionParts, actor: Any, role: str, app_id: str, limits: Limits) -> list[TestResult]:
    """Run a definition's tests against the real engine and database, each on a scratch storage inside a
    transaction that is always rolled back: no record of any app is read or written.

    Shared fairly: one of the account's places for test runs across every process (RateLimited at once when its
    other saves hold them), the account's share of CEL worker processes, and at most `test_seconds` for all the
    tests together: each test's CEL time stops at what is left, and the tests past it are not run (they fail)."""
    if not parts.tests:
        return []
    compiled = {name: compile_parts(route) for name, route in parts.routes.items()}
    caller = {"id": str(actor.pk), "role": role}
    deadline = time.monotonic() + limits.test_seconds
    refused: list[RateLimited] = []

    @contextmanager
    def scratch() -> Iterator[ScratchSqlStore]:
        with transaction.atomic():
            storage = Storage.objects.create(
                app=None, app_uuid=uuid.UUID(app_id), app_name="(author tests)", detached_at=timezone.now()
            )
            try:
                yield ScratchSqlStore(storage_id=storage.id, max_bytes=limits.record_bytes)
            finally:
                transaction.set_rollback(True)

    def run(store: ScratchSqlStore, test: AuthorTest) -> Any:
        left_ms = int((deadline - time.monotonic()) * 1000)
        within = dataclasses.replace(limits, cel_ms=max(1, min(limits.cel_ms, left_ms)))
        try:
            if test.migration is not None:
                return record_migration_try(
                    migration=test.migration, storage_id=store.storage_id, app_id=app_id, limits=within
                )
            return run_route(
                compiled[test.route],
                params=test.params,
                caller=caller,
                app_id=app_id,
                store=store,
                limits=within,
                now=test.now,
            )
        except RateLimited as error:  # the account's own calls hold its CEL share: the save waits, not the test
            refused.append(error)
            raise

    results: list[TestResult] = []
    spent = 0.0  # the tests' own time (SQLite's pauses below not counted)
    lease = author_tests_lease(user_id=actor.pk, seconds=2 * limits.test_seconds + TEST_LEASE_MARGIN_SECONDS)
    with lease, cel_share(actor=actor):
        for index, test in enumerate(parts.tests):
            if time.monotonic() >= deadline:
                results += [_not_run(later, spent, limits) for later in parts.tests[index:]]
                break
            started = time.monotonic()
            results.append(run_test(test, scratch=scratch, run=run))
            held = time.monotonic() - started
            spent += held
            if refused:
                raise refused[0]
            if connection.vendor == "sqlite" and held > SQLITE_YIELD_AFTER_SECONDS:
                # SQLite has one write lock for every request (each writes its rate budget), and a test holds it
                # while it runs: give it back for as long again, so waiting writers get their turn between tests
                # instead of queueing behind the whole run (SQLite's busy wait is not first come, first served).
                pause = min(max(held, SQLITE_YIELD_MIN_SECONDS), SQLITE_YIELD_MAX_SECONDS)
                time.sleep(pause)
                deadline += pause
    return results


# SQLite only: a test that held the write lock longer than this is followed by a pause as long, between the min
# (a waiting writer polls every 100 ms at worst) and the max.
SQLITE_YIELD_AFTER_SECONDS = 0.05
SQLITE_YIELD_MIN_SECONDS = 0.12
SQLITE_YIELD_MAX_SECONDS = 1.0


# A test-run lease outlives the tests' own bound by this much (generated records, the database): it frees the place
# of a process that died mid-run, and a live one gives it back when its tests end.
TEST_LEASE_MARGIN_SECONDS = 60


def _not_run(test: AuthorTest, spent: float, limits: Limits) -> TestResult:
    expected: dict[str, Any] = (
        {"value": test.expect_value} if test.has_value else {"error": test.expect_error, "message": test.expect_message}
    )
    message = (
        f"not run: the tests before it took {spent:.1f} s, and a definition's tests may take {limits.test_seconds} s "
        "together (test_seconds, CHARMING_ROUTES_MAX_TEST_SECONDS); make the slow ones faster (smaller generated "
        "records or comprehensions) or test less in one definition"
    )
    return TestResult(test.name, test.route, False, expected, {"error": "not_run", "message": message}, [message])


def tests_advisories(results: list[TestResult], *, saved: bool) -> list[AdvisoryDraft]:
    """The `failing-tests` advisory: of an app saved with allow_failing_tests (`saved`), or of a definition
    only checked (check_app), which is worded as what a save would do, since nothing was written."""
    failing = [r for r in results if not r.passed]
    if not failing:
        return []
    # Test names only: every member sees advisories, while what a test sends and expects is the
    # definition's (authors read it with check_app or get_app_source).
    names = f"{', '.join(repr(clip(r.name, 100)) for r in failing[:5])}" + (
        f" and {len(failing) - 5} more" if len(failing) > 5 else ""
    )
    if saved:
        summary = (
            f"{len(failing)} of {len(results)} test(s) of this app's definition fail (it was saved with "
            f"allow_failing_tests): {names}. Run check_app for what each got; fix the routes or the tests and "
            "save again."
        )
    else:
        summary = (
            f"{len(failing)} of {len(results)} test(s) of this definition fail: {names}. create_app and "
            "update_app refuse it until they pass (or take it with allow_failing_tests, and the app keeps this "
            "advisory); fix the routes or the tests."
        )
    return [
        AdvisoryDraft(
            kind="failing-tests",
            severity="warn",
            summary=summary,
            user_summary="Some of this app's own checks fail; it may not work as intended.",
            data={"failing": [r.name for r in failing]},
        )
    ]


def _test_index(parts: DefinitionParts, result: TestResult) -> int:
    for test in parts.tests:
        if test.name == result.name and test.route == result.route:
            return test.index
    return 0


def _existing_app(*, actor: Any, app_id: uuid.UUID | str | None) -> tuple[App, str] | None:
    """The app (and the actor's role) a save replaces; None when the save creates one."""
    if app_id is None:
        return None
    app_uuid = _app_uuid(app_id)
    if not App.objects.filter(pk=app_uuid).exists():
        return None
    return app_for(actor=actor, app_id=app_uuid, need="author")


def _conflict(app: App, expected_version: int) -> VersionConflict:
    return VersionConflict(app_name=app.name, expected_version=expected_version, current_version=app.version)


def _version_bump(*, app: App, expected_version: int | None) -> int:
    """+1 on the app's version, only if it still is `expected_version` (when given): one conditional UPDATE."""
    apps = App.objects.filter(pk=app.pk)
    if expected_version is not None:
        apps = apps.filter(version=expected_version)
    if not apps.update(version=F("version") + 1):
        app.refresh_from_db(fields=["version"])
        raise _conflict(app, expected_version if expected_version is not None else -1)
    app.refresh_from_db(fields=["version"])
    return app.version


def _current_version_row(app: App) -> AppVersion | None:
    return AppVersion.objects.filter(app=app).order_by("-number").first()


def _changes(
    *, app: App, parts: DefinitionParts, previous: AppVersion | None, definition: Any, new: bool
) -> dict[str, Any]:
    """Which routes were added, changed or removed, and which other parts of the definition changed."""
    before = {
        route.name: (route.kind, route.description, route.input_schema, route.output_schema, route.definition)
        for route in Route.objects.filter(app=app)
    }
    after = {name: (r.kind, r.description, r.input_schema, r.output_schema, r.body) for name, r in parts.routes.items()}
    changes: dict[str, Any] = {
        "added": sorted(set(after) - set(before)),
        "changed": sorted(name for name in set(after) & set(before) if after[name] != before[name]),
        "removed": sorted(set(before) - set(after)),
        "unchanged": sorted(name for name in set(after) & set(before) if after[name] == before[name]),
    }
    if new:
        changes["other"] = []
        return changes
    old = previous.definition if previous is not None and isinstance(previous.definition, dict) else {}
    other = []
    for key in ("name", "description", "collections", "tests"):
        if previous is None and key == "tests":
            continue
        now_value = definition.get(key) if isinstance(definition, dict) else None
        if previous is None:
            then_value = {"name": app.name, "description": app.description, "collections": app.collections}.get(key)
        else:
            then_value = old.get(key)
        if now_value != then_value and not (key == "description" and not now_value and not then_value):
            other.append(key)
    changes["other"] = other
    return changes


def changes_summary(changes: dict[str, Any], *, restored_from: int | None = None) -> str:
    """One line saying what a save changed, e.g. "Added routes x; changed y; removed z; changed tests."."""
    parts = []
    for key, verb in (("added", "added"), ("changed", "changed"), ("removed", "removed")):
        if changes.get(key):
            noun = "route" if len(changes[key]) == 1 else "routes"
            parts.append(f"{verb} {noun} {', '.join(changes[key])}")
    if changes.get("other"):
        parts.append(f"changed {', '.join(changes['other'])}")
    text = "; ".join(parts) or "no change"
    text = text[0].upper() + text[1:] + "."
    return f"Restored version {restored_from}: {text}" if restored_from is not None else text


def _app_uuid(app_id: uuid.UUID | str) -> uuid.UUID:
    app_uuid = parse_uuid(app_id)
    if app_uuid is None:
        raise InvalidDefinition(
            f"app_id {clip_repr(app_id)} is not a UUID.", errors=[{"path": "app_id", "message": "must be a UUID"}]
        )
    return app_uuid


def _id_ever_used(app_uuid: uuid.UUID) -> bool:
    """Whether any app has had this id: one now, a deleted one's retained storage, or the audit trail."""
    return (
        App.objects.filter(pk=app_uuid).exists()
        or Storage.objects.filter(app_uuid=app_uuid).exists()  # author tests' scratch storage is always rolled back
        or AuditEvent.objects.filter(app_id=app_uuid).exists()
    )


def _app_for_save(*, actor: Any, app_id: uuid.UUID | str, parts: DefinitionParts) -> App:
    """The app a save writes: the one at `app_id` if the actor may author it, else a new app with that id.

    An id chosen by the caller creates an app only if no app ever had it: an id in use by an app the actor cannot
    see, or once used by a deleted app (its retained storage or its audit trail remembers it), is answered exactly
    like an app the actor cannot see (NotFound), so the answer tells nothing about that app and nobody can claim
    the id of a deleted app (docs/authoring.md).
    """
    app_uuid = _app_uuid(app_id)
    if App.objects.filter(pk=app_uuid).exists():
        app, _role = app_for(actor=actor, app_id=app_uuid, need="author", for_update=True)
        app.name, app.description, app.collections = parts.name, parts.description, parts.collections
        app.save(update_fields=["name", "description", "collections", "updated_at"])
        return app
    if _id_ever_used(app_uuid):
        raise app_not_found(app_id)
    try:
        with transaction.atomic():
            app = app_create(owner=actor, name=parts.name, description=parts.description, app_id=app_uuid)
    except IntegrityError:  # another request created an app with this id since the check
        raise app_not_found(app_id) from None
    app.collections = parts.collections
    app.save(update_fields=["collections"])
    return app


def _owner_indexes_check(*, app: App, collections: Any, limits: Limits) -> None:
    """Refuse a definition whose indexes, with those the owner's other apps declare, pass the per-owner limit:
    every declared index is built in the one records table all apps share, where each one costs every write a
    little, so one account may not pile them up."""
    mine = len(declared_index_keys(collections))
    if not mine:
        return
    others = sum(
        len(declared_index_keys(declared))
        for declared in App.objects.filter(owner_id=app.owner_id)
        .exclude(pk=app.pk)
        .values_list("collections", flat=True)
    )
    limit = limits.indexes_per_owner
    if mine + others > limit:
        message = (
            f"the owner's other apps declare {others} indexes and this definition {mine}; together they may declare "
            f"at most {limit}: drop indexes here or in another app"
        )
        raise InvalidDefinition(
            f"The app definition has 1 problem(s); nothing was saved. collections: {message}.",
            errors=[{"path": "collections", "message": message, "limit": "indexes_per_owner", "max": limit}],
        )


def _records_held(app: App) -> int:
    return Storage.objects.filter(app=app).values_list("records_held", flat=True).first() or 0


def _indexes_sync_queue(app: App) -> None:
    """Queue the sync of the app's declared indexes (built off the request, concurrently on PostgreSQL)."""
    storage_id = Storage.objects.filter(app=app).values_list("id", flat=True).first()
    if storage_id is not None:
        collection_indexes_enqueue(storage_id=storage_id)


def _sync_routes(*, app: App, parts: DefinitionParts) -> list[int]:
    """Make the app's routes match `parts`; returns the ids of routes that changed or went away."""
    existing = {route.name: route for route in Route.objects.select_for_update().filter(app=app)}
    changed = []
    for name, route_parts in parts.routes.items():
        fields = {
            "kind": route_parts.kind,
            "description": route_parts.description,
            "input_schema": route_parts.input_schema,
            "output_schema": route_parts.output_schema,
            "definition": route_parts.body,
            "hints": route_parts.hints,
            "schemas_text": json.dumps({"input": route_parts.input_schema, "output": route_parts.output_schema}),
        }
        route = existing.pop(name, None)
        if route is None:
            Route.objects.create(app=app, name=name, **fields)
            continue
        if any(getattr(route, key) != value for key, value in fields.items()):
            for key, value in fields.items():
                setattr(route, key, value)
            route.version += 1
            route.save()
            changed.append(route.pk)
    for route in existing.values():
        changed.append(route.pk)
        route.delete()
    return changed


def app_definition_export(*, actor: Any, app_id: uuid.UUID | str) -> dict[str, Any]:
    """The app's definition as stored (for those who may author it): the same document `app_definition_save` accepts."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author")
    routes: dict[str, Any] = {}
    for route in Route.objects.filter(app=app).order_by("name"):
        exported: dict[str, Any] = {"kind": route.kind}
        if route.description:
            exported["description"] = route.description
        exported["input"] = route.input_schema_ordered
        if route.output_schema is not None:
            exported["output"] = route.output_schema_ordered
        exported.update(route.hints)
        exported.update(route.definition)
        routes[route.name] = exported
    exported = {
        "format": 1,
        "name": app.name,
        "description": app.description,
        "collections": app.collections,
        "routes": routes,
    }
    saved = _current_version_row(app)
    if saved is not None and isinstance(saved.definition, dict) and "tests" in saved.definition:
        exported["tests"] = saved.definition["tests"]
    return exported


@transaction.atomic
def app_definition_clear(*, actor: Any, app_id: uuid.UUID | str) -> App:
    """Remove an app's routes and declared collections (for those who may author it). The app and its records stay:
    deleting an app is app_delete's job, with its confirmation and audit trail."""
    app, _role = app_for(actor=actor, app_id=app_id, need="author", for_update=True)
    route_ids = list(Route.objects.filter(app=app).values_list("pk", flat=True))
    Route.objects.filter(app=app).delete()
    Advisory.objects.filter(app=app, kind__in=AUTHORING_KINDS).delete()
    had_indexes = bool(declared_index_keys(app.collections))
    app.collections = {}
    app.save(update_fields=["collections", "updated_at"])
    if had_indexes:
        _indexes_sync_queue(app)
    transaction.on_commit(lambda: cache.forget(route_ids))
    return app


@dataclass(frozen=True)
class DefinitionSource:
    """A stored definition: the document, its version number, and the app's history."""

    app: App
    role: str
    version: int
    definition: dict[str, Any]
    saved_at: Any
    author: str
    summary: str
    history: list[AppVersion]


HISTORY_SHOWN = 20


def app_source_get(*, actor: Any, app_id: uuid.UUID | str, version: int | None = None) -> DefinitionSource:
    """The definition of an app the actor may author (owner and editors), as saved at `version` (default: the
    current one), with the latest versions of its history. NotFound for a version that does not exist."""
    app, role = app_for(actor=actor, app_id=app_id, need="author")
    history = list(AppVersion.objects.filter(app=app).order_by("-number")[:HISTORY_SHOWN])
    wanted = version if version is not None else app.version
    row = next((v for v in history if v.number == wanted), None)
    if row is None and version is not None:
        row = AppVersion.objects.filter(app=app, number=version).first()
        if row is None:
            numbers = f"1 to {app.version}" if app.version else "none yet"
            raise NotFound(f"App '{app.name}' has no version {version}; its versions are {numbers}.")
    if row is None:  # an app saved before versions were kept: its routes as stored
        return DefinitionSource(
            app=app,
            role=role,
            version=app.version,
            definition=app_definition_export(actor=actor, app_id=app.id),
            saved_at=app.updated_at,
            author=app.owner.get_username(),
            summary="",
            history=history,
        )
    return DefinitionSource(
        app=app,
        role=role,
        version=row.number,
        definition=row.definition,
        saved_at=row.created_at,
        author=row.author_repr,
        summary=row.summary,
        history=history,
    )


def app_version_restore(
    *, actor: Any, app_id: uuid.UUID | str, version: int, expected_version: int, allow_failing_tests: bool = False
) -> SavedDefinition:
    """Save version `version` of an app's definition again, as a new version (checked, tested and
    guarded by `expected_version` like any save). Records are not touched."""
    source = app_source_get(actor=actor, app_id=app_id, version=version)
    return definition_save(
        actor=actor,
        definition=source.definition,
        app_id=source.app.id,
        expected_version=expected_version,
        allow_failing_tests=allow_failing_tests,
        restored_from=version,
        create_missing=False,
    )
