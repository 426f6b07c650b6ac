"""Indexes an author declares per collection: checked when saved, built by a task (concurrently on
PostgreSQL), partial to the app's storage and collection, served to the engine's queries, dropped when no
longer declared or when the app goes."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from django.db import connection, transaction
from django_tasks_db.models import DBTaskResult

from apps_registry.exceptions import InvalidDefinition
from apps_registry.models import App, Record
from apps_registry.routes.compiler import check_definition
from apps_registry.routes.limits import Limits
from apps_registry.routes.storage import SqlStore
from apps_registry.routes.store import Group, Measure
from apps_registry.services.apps import app_delete
from apps_registry.services.collection_indexes import collection_indexes_sync, index_name
from apps_registry.services.definitions import app_definition_save

ROUTES = {"r": {"kind": "query", "steps": [{"return": "1"}]}}


def _problems(collections, limits: Limits | None = None) -> list[dict]:
    definition = {"name": "A", "collections": collections, "routes": ROUTES}
    _parts, problems = check_definition(definition, limits or Limits())
    return [p.as_dict() for p in problems]


def test_declared_indexes_are_checked_with_a_path_for_each_problem():
    assert _problems({"checkins": {"indexes": [["habit_id", "date"], ["meta.day"]]}}) == []
    assert _problems({"c": {"index": [["a"]]}}) == [
        {"path": "collections.c", "message": "unknown key(s) index; a collection takes: indexes, hidden"}
    ]
    assert _problems({"c": {"indexes": "a"}})[0]["path"] == "collections.c.indexes"
    assert _problems({"c": {"indexes": [[]]}})[0]["path"] == "collections.c.indexes[0]"
    assert _problems({"c": {"indexes": [["a", "id"]]}})[0]["path"] == "collections.c.indexes[0][1]"
    assert _problems({"c": {"indexes": [["a-b"]]}})[0]["path"] == "collections.c.indexes[0][0]"
    assert _problems({"c": {"indexes": [["a", "a"]]}}) == [
        {"path": "collections.c.indexes[0]", "message": "names a field more than once"}
    ]
    assert _problems({"c": {"indexes": [["a"], ["a"]]}}) == [
        {"path": "collections.c.indexes[1]", "message": "is the same index as collections.c.indexes[0]"}
    ]
    assert _problems({"c": {"indexes": [["a", "b", "c", "d", "e"]]}}) == [
        {"path": "collections.c.indexes[0]", "message": "an index has at most 4 fields, got 5"}
    ]


def test_an_app_declares_at_most_the_limit_of_indexes():
    collections = {"a": {"indexes": [["x"], ["y"]]}, "b": {"indexes": [["x"]]}}
    assert _problems(collections, Limits(indexes_per_app=3)) == []
    assert _problems(collections, Limits(indexes_per_app=2)) == [
        {
            "path": "collections",
            "message": "the definition declares 3 indexes; the limit is 2",
            "limit": "indexes_per_app",
            "max": 2,
        }
    ]


def _definition(indexes):
    return {
        "name": "Habits",
        "collections": {"checkins": {"indexes": indexes} if indexes is not None else {}},
        "routes": {
            "recent": {
                "kind": "query",
                "steps": [
                    {
                        "find": {
                            "collection": "checkins",
                            "where": {"habit_id": "params.habit"},
                            "order_by": "-date",
                            "limit": "20",
                        },
                        "as": "found",
                    },
                    {"return": "found.map(r, r.id)"},
                ],
            }
        },
    }


def _indexes_in_database(storage_id) -> set[str]:
    prefix = f"rix_{storage_id.hex}_"
    with connection.cursor() as cursor:
        names = connection.introspection.get_constraints(cursor, Record._meta.db_table)
    return {name for name in names if name.startswith(prefix)}


def _plan(qs) -> str:
    sql, params = qs.query.sql_with_params()
    explain = "EXPLAIN " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    with connection.cursor() as cursor:
        cursor.execute(explain + sql, params)
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


def _plan_without_gin(qs) -> str:
    """The plan with only the declared indexes to choose from (PostgreSQL's GIN index on all data serves
    equality too, and the planner may prefer it); the GIN index comes back with the rollback."""
    if connection.vendor != "postgresql":
        return _plan(qs)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX apps_registry_record_data_gin")
        plan = _plan(qs)
        transaction.set_rollback(True)
    return plan


def _seed(storage, n=3000):
    Record.objects.bulk_create(
        Record(storage=storage, collection="checkins", record_id=str(i), data={"habit_id": f"h{i % 300}", "date": i})
        for i in range(n)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _lifecycle(user):
    app = app_definition_save(actor=user, definition=_definition([["habit_id", "date"]]))
    storage = app.storage
    assert DBTaskResult.objects.filter(task_path__endswith="collection_indexes_task").count() == 1
    name = index_name(storage.id, "checkins", ("habit_id", "date"))
    assert collection_indexes_sync(storage_id=storage.id).created == [name]
    assert _indexes_in_database(storage.id) == {name}
    assert collection_indexes_sync(storage_id=storage.id).created == []  # a re-run changes nothing

    _seed(storage)
    qs = SqlStore(storage_id=storage.id, max_bytes=65536)._filtered("checkins", [(("habit_id",), "eq", "h7")])
    assert sorted(int(r.record_id) for r in qs) == list(range(7, 3000, 300))
    assert name in _plan_without_gin(qs)

    app = app_definition_save(actor=user, definition=_definition(None), app_id=app.id)
    assert collection_indexes_sync(storage_id=storage.id).dropped == [name]
    assert _indexes_in_database(storage.id) == set()

    app = app_definition_save(actor=user, definition=_definition([["date"]]), app_id=app.id)
    collection_indexes_sync(storage_id=storage.id)
    assert len(_indexes_in_database(storage.id)) == 1
    app_delete(actor=user, app_id=app.id, purge_storage=False, confirmed_via="command")
    assert collection_indexes_sync(storage_id=storage.id).dropped
    assert _indexes_in_database(storage.id) == set()


@pytest.mark.django_db
def test_declared_indexes_are_built_served_and_dropped_on_sqlite(user):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL run is the test below (concurrent builds need no transaction)")
    _lifecycle(user)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_declared_indexes_are_built_concurrently_served_and_dropped_on_postgresql(user):
    _lifecycle(user)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_sync_refuses_to_run_inside_a_transaction_on_postgresql(user):
    app = app_definition_save(actor=user, definition=_definition([["habit_id"]]))
    with pytest.raises(RuntimeError, match="outside a transaction"):
        collection_indexes_sync(storage_id=app.storage.id)


def test_an_index_on_an_undeclared_field_shape_is_refused_when_saved(user, db):
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=_definition([["habit_id", "id"]]))
    assert exc.value.errors[0]["path"] == "collections.checkins.indexes[0][1]"


@pytest.mark.django_db
def test_a_large_app_is_advised_to_index_the_fields_its_steps_filter_and_order_on(user, settings):
    from apps_registry.models import Advisory, Storage

    settings.CHARMING_ROUTES_UNINDEXED_ADVISORY_RECORDS = 100
    app = app_definition_save(actor=user, definition=_definition(None))
    assert not Advisory.objects.filter(app=app, kind="unindexed-field").exists()  # a small app: no advice
    Storage.objects.filter(app=app).update(records_held=100)
    app = app_definition_save(actor=user, definition=_definition(None), app_id=app.id)
    advisory = Advisory.objects.get(app=app, kind="unindexed-field")
    assert advisory.data == {"route": "recent", "step": 0, "collection": "checkins", "index": ["habit_id", "date"]}
    assert "holds 100 records" in advisory.summary
    assert '"collections": {"checkins": {"indexes": [["habit_id", "date"]]}}' in advisory.summary
    app = app_definition_save(actor=user, definition=_definition([["habit_id"]]), app_id=app.id)
    assert not Advisory.objects.filter(app=app, kind="unindexed-field").exists()
    app = app_definition_save(actor=user, definition=_definition([["date"]]), app_id=app.id)
    assert not Advisory.objects.filter(app=app, kind="unindexed-field").exists()  # the ordering is served
    app = app_definition_save(actor=user, definition=_definition([["uid"]]), app_id=app.id)
    assert Advisory.objects.filter(app=app, kind="unindexed-field").exists()


@pytest.mark.django_db
def test_a_storage_has_one_sync_waiting_however_many_saves_change_its_indexes(user, other_user):
    queued = DBTaskResult.objects.filter(task_path__endswith="collection_indexes_task")
    app = app_definition_save(actor=user, definition=_definition([["habit_id"]]))
    for fields in (["date"], ["habit_id", "date"], ["habit_id"]):
        app = app_definition_save(actor=user, definition=_definition([fields]), app_id=app.id)
    assert [r.args_kwargs["kwargs"]["storage_id"] for r in queued.all()] == [str(app.storage.id)]
    other = app_definition_save(actor=other_user, definition=_definition([["habit_id"]]))
    assert queued.count() == 2  # another storage's sync is its own
    queued.filter(args_kwargs__kwargs__storage_id=str(app.storage.id)).update(status="RUNNING")  # a worker took it
    app_definition_save(actor=user, definition=_definition([["date"]]), app_id=app.id)
    app_definition_save(actor=user, definition=_definition([["habit_id"]]), app_id=app.id)
    # The running one may have read the definition before this save: one more waits for after it.
    assert sorted(queued.values_list("status", flat=True)) == ["READY", "READY", "RUNNING"]
    assert queued.filter(status="READY", args_kwargs__kwargs__storage_id=str(other.storage.id)).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_waiting_sync_a_save_joins_is_not_taken_by_a_worker_before_the_save_commits(user):
    import threading

    from apps_registry.services.collection_indexes import collection_indexes_enqueue

    app = app_definition_save(actor=user, definition=_definition([["habit_id"]]))
    waiting = DBTaskResult.objects.get(task_path__endswith="collection_indexes_task")
    taken: list[object] = []

    def worker_claims() -> None:  # as db_worker does: the first ready row it can lock, skipping locked ones
        try:
            with transaction.atomic():
                taken.append(DBTaskResult.objects.ready().get_locked())
        finally:
            connection.close()

    with transaction.atomic():
        collection_indexes_enqueue(storage_id=app.storage.id)  # joins the waiting one
        claim = threading.Thread(target=worker_claims)
        claim.start()
        claim.join()
    assert taken == [None]
    claim = threading.Thread(target=worker_claims)
    claim.start()
    claim.join()
    assert taken[1] == waiting and DBTaskResult.objects.count() == 1


@pytest.mark.django_db
def test_restoring_retained_storage_into_an_app_builds_that_apps_indexes_for_it(user):
    from apps_registry.services.retention import storage_restore
    from tests.retention_helpers import retained

    storage = retained(user, name="Old habits", count=3, days_ago=1)
    target = app_definition_save(actor=user, definition=_definition([["habit_id"]]))
    empty_storage_id = target.storage.id
    if connection.vendor == "sqlite":
        collection_indexes_sync(storage_id=empty_storage_id)
        assert len(_indexes_in_database(empty_storage_id)) == 1
    queued = DBTaskResult.objects.filter(task_path__endswith="collection_indexes_task")
    storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)
    # Built for the restored one, dropped for the other (whose sync already waiting serves that: one per storage).
    synced = [r.args_kwargs["kwargs"]["storage_id"] for r in queued.filter(status="READY")]
    assert sorted(synced) == sorted([str(storage.id), str(empty_storage_id)])
    if connection.vendor == "sqlite":
        assert collection_indexes_sync(storage_id=storage.id).created == [
            index_name(storage.id, "checkins", ("habit_id",))
        ]
        assert collection_indexes_sync(storage_id=empty_storage_id).dropped


def _with_add(indexes):
    definition = _definition(indexes)
    definition["routes"]["add"] = {
        "kind": "mutation",
        "input": {"type": "object"},
        "steps": [{"insert": {"collection": "checkins", "value": "params"}}],
    }
    return definition


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_value_too_large_for_a_declared_index_fails_the_write_in_words_on_postgresql(user):
    from apps_registry.exceptions import OperationFailed
    from apps_registry.services.routes import route_run

    app = app_definition_save(actor=user, definition=_with_add([["habit_id"]]))
    collection_indexes_sync(storage_id=app.storage.id)

    with pytest.raises(OperationFailed) as refused:
        route_run(
            actor=user, app_id=app.id, op="add", params={"habit_id": secrets.token_urlsafe(4000)}, kind="mutation"
        )

    assert "too large for an index the app declares" in refused.value.message
    assert not Record.objects.filter(storage=app.storage).exists()
    route_run(actor=user, app_id=app.id, op="add", params={"habit_id": "x" * 2000}, kind="mutation")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_index_its_records_cannot_fit_is_skipped_leaving_no_invalid_index_on_postgresql(user):
    from apps_registry.services.routes import route_run

    app = app_definition_save(actor=user, definition=_with_add(None))
    route_run(
        actor=user,
        app_id=app.id,
        op="add",
        params={"habit_id": secrets.token_urlsafe(4000), "date": "d"},
        kind="mutation",
    )
    app = app_definition_save(actor=user, definition=_with_add([["habit_id"], ["date"]]), app_id=app.id)

    sync = collection_indexes_sync(storage_id=app.storage.id)

    assert sync.failed == [index_name(app.storage.id, "checkins", ("habit_id",))]
    assert _indexes_in_database(app.storage.id) == {index_name(app.storage.id, "checkins", ("date",))}


@pytest.mark.django_db
def test_one_owners_apps_declare_at_most_the_per_owner_limit_of_indexes_together(user, other_user, settings):
    settings.CHARMING_ROUTES_MAX_INDEXES_PER_OWNER = 3
    first = app_definition_save(actor=user, definition=_definition([["habit_id"], ["date"]]))
    app_definition_save(actor=other_user, definition=_definition([["habit_id"], ["date"]]))  # another owner's

    with pytest.raises(InvalidDefinition) as refused:
        app_definition_save(actor=user, definition=_definition([["habit_id"], ["uid"]]))

    assert refused.value.errors == [
        {
            "path": "collections",
            "message": "the owner's other apps declare 2 indexes and this definition 2; together they may declare "
            "at most 3: drop indexes here or in another app",
            "limit": "indexes_per_owner",
            "max": 3,
        }
    ]
    assert App.objects.filter(owner=user).count() == 1
    second = app_definition_save(actor=user, definition=_definition([["uid"]]))  # 3 in all: allowed
    app_definition_save(actor=user, definition=_definition([["date"]]), app_id=first.id)  # replacing its own
    assert second.collections == {"checkins": {"indexes": [["uid"]]}}


@pytest.mark.django_db(transaction=True)
def test_a_declared_index_serves_range_filters_and_aggregates(user):
    app = app_definition_save(actor=user, definition=_definition([["date"]]))
    collection_indexes_sync(storage_id=app.storage.id)
    (name,) = _indexes_in_database(app.storage.id)
    _seed(app.storage, n=5000)
    store = SqlStore(storage_id=app.storage.id, max_bytes=65536)
    where = [(("date",), "gte", 4990), (("date",), "lt", 4995)]
    qs = store._filtered("checkins", where)
    assert sorted(int(r.record_id) for r in qs) == list(range(4990, 4995))
    assert name in _plan_without_gin(qs)

    executed: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):
        executed.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        rows = store.aggregate("checkins", where, [Group("habit", ("habit_id",))], [Measure("n", "count")], [], None)
    assert rows == [{"habit": f"h{i % 300}", "n": 1} for i in range(4990, 4995)]
    sql, params = executed[-1]
    explain = "EXPLAIN " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    with connection.cursor() as cursor:
        cursor.execute(explain + sql, params)
        plan = "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())
    assert name in plan


def _index_sql(name: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_get_indexdef(%s::regclass)", [name])
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s", [name])
        return cursor.fetchone()[0]


def _build_first_form_index(storage_id, collection: str, fields: tuple[str, ...]) -> str:
    """An index as form 1 built it (the fields alone), under its form-1 name."""
    from apps_registry.routes.storage import field_sql

    name = index_name(storage_id, collection, fields, form=1)
    storage = f"'{storage_id}'::uuid" if connection.vendor == "postgresql" else f"'{storage_id.hex}'"
    expressions = ", ".join(field_sql((f,), connection.vendor, column='"data"') for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f'CREATE INDEX "{name}" ON apps_registry_record ({expressions}) '
            f"WHERE storage_id = {storage} AND collection = '{collection}'"
        )
    return name


@pytest.mark.django_db(transaction=True)
def test_an_index_of_the_first_form_is_rebuilt_with_the_tie_breakers_under_its_new_name_before_it_is_dropped(user):
    app = app_definition_save(actor=user, definition=_definition([["habit_id", "date"]]))
    old = _build_first_form_index(app.storage.id, "checkins", ("habit_id", "date"))
    new = index_name(app.storage.id, "checkins", ("habit_id", "date"))
    assert old != new and _indexes_in_database(app.storage.id) == {old}
    executed: list[str] = []

    def capture(execute, sql, params, many, context):
        executed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        sync = collection_indexes_sync(storage_id=app.storage.id)

    assert (sync.created, sync.dropped) == ([new], [old])
    assert _indexes_in_database(app.storage.id) == {new}
    assert "created_at" in _index_sql(new) and "record_id" in _index_sql(new)
    ddl = [sql.split(" IF ")[0] for sql in executed if sql.startswith(("CREATE INDEX", "DROP INDEX"))]
    assert [d.split()[0] for d in ddl] == ["CREATE", "DROP"]  # the new one serves before the old one goes


@pytest.mark.django_db
def test_migration_0021_queues_a_sync_of_each_storage_that_declares_or_holds_indexes(user):
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.utils import timezone

    from apps_registry.models import Storage

    migration = importlib.import_module("apps_registry.migrations.0021_collection_indexes_with_tie_breakers")
    declaring = app_definition_save(actor=user, definition=_definition([["habit_id"]]))
    app_definition_save(actor=user, definition=_definition(None))  # declares none: no sync
    # A retained storage still holding a first-form index (its app gone, the drop not run yet).
    retained = Storage.objects.create(app=None, app_uuid=declaring.id, app_name="gone", detached_at=timezone.now())
    _build_first_form_index(retained.id, "checkins", ("habit_id",))
    queued = DBTaskResult.objects.filter(task_path__endswith="collection_indexes_task")
    before = set(queued.values_list("id", flat=True))

    migration.queue_syncs(apps, SimpleNamespace(connection=connection))

    synced = [r.args_kwargs["kwargs"]["storage_id"] for r in queued.exclude(id__in=before)]
    assert sorted(synced) == sorted([str(declaring.storage.id), str(retained.id)])
