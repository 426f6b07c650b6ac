"""Migrating stored records with a save: inline and atomic for a few records, a resumable task for many (no
record lost or migrated twice through a worker killed mid-batch), mutations refused meanwhile; every bad
migration refused when saved, with its path."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps_registry.exceptions import AppMigrating, InvalidDefinition, OperationFailed, RateLimited
from apps_registry.models import Advisory, App, Change, ChangeEntry, ChangeVia, Record, RecordMigration, Storage
from apps_registry.services import definitions, record_migrations
from apps_registry.services.changes import change_revert
from apps_registry.services.definitions import definition_save
from apps_registry.services.record_migrations import (
    migration_resume_if_stale,
    record_migration_run,
    record_migration_slice,
)
from tests.apps_registry.route_helpers import records, run

pytestmark = pytest.mark.django_db

BOOKS: dict[str, Any] = {
    "name": "Reading list",
    "collections": {"books": {}},
    "routes": {
        "add": {
            "kind": "mutation",
            "steps": [{"insert": {"collection": "books", "value": "params"}, "as": "b"}, {"return": "b.id"}],
        },
        "all": {
            "kind": "query",
            "steps": [{"find": {"collection": "books", "limit": "1000"}, "as": "bs"}, {"return": "bs"}],
        },
    },
}
# Each book gains a list of tags, and a count of how many times a migration touched it (exactly once).
TAGGED = "{'title': record.title, 'n': record.n, 'tags': [], 'touched': has(record.touched) ? record.touched + 1 : 1}"


def _app_with_books(user, n: int):
    app = definition_save(actor=user, definition=BOOKS).app
    for i in range(n):
        run(user, app, "add", {"title": f"Book {i}", "n": i})
    return app


def _save(user, app, migrate, **extra):
    return definition_save(
        actor=user,
        definition=copy.deepcopy(BOOKS),
        app_id=app.id,
        expected_version=app.version,
        migrate=migrate,
        **extra,
    )


def test_a_few_records_are_migrated_with_the_save(user):
    app = _app_with_books(user, 3)
    saved = _save(user, app, {"books": TAGGED})
    assert saved.migration is not None
    assert saved.migration.as_dict() == {
        "collections": ["books"],
        "records": 3,
        "status": "done",
        "migrated": 3,
        "deleted": 0,
        "change_id": str(Change.objects.get(app=app, via=ChangeVia.MIGRATION).pk),
    }
    assert saved.migration.text.endswith(f"with the save (change {saved.migration.change_id} in list_changes).")
    found = sorted(records(app, "books").values(), key=lambda r: r["n"])
    assert found == [{"title": f"Book {i}", "n": i, "tags": [], "touched": 1} for i in range(3)]
    assert set(Record.objects.filter(storage__app=app).values_list("version", flat=True)) == {2}


def test_null_deletes_a_record_and_the_app_counts_it_gone(user):
    app = _app_with_books(user, 4)
    saved = _save(user, app, {"books": "record.n % 2 == 0 ? null : record"})
    assert (saved.migration.migrated, saved.migration.deleted) == (2, 2)
    assert sorted(r["n"] for r in records(app, "books").values()) == [1, 3]
    assert Storage.objects.get(app=app).records_held == 2


def test_a_record_the_migration_fails_on_refuses_the_whole_save(user):
    app = _app_with_books(user, 3)
    before = records(app, "books")
    with pytest.raises(OperationFailed) as caught:
        _save(user, app, {"books": "record.n == 2 ? 'oops' : record"})
    assert caught.value.message.startswith("The migration failed, so nothing was saved: Migrating books/")
    assert "must give a map (the record's new data) or null (delete it), got string" in caught.value.message
    assert records(app, "books") == before
    assert App.objects.get(pk=app.pk).version == 1


@pytest.mark.parametrize(
    ("migrate", "expected"),
    [
        (
            "books",
            [
                {
                    "path": "migrate",
                    "message": "must be an object mapping collections to a CEL expression over `record`, such as "
                    "{\"books\": \"{'title': record.title, 'tags': []}\"}: a map replaces the record's data, null "
                    "deletes the record",
                }
            ],
        ),
        (
            {"books": "params.x"},
            [{"path": "migrate.books", "message": "unknown name(s) params; names available here: app, now, record"}],
        ),
        (
            {"2books": "record"},
            [
                {
                    "path": "migrate.2books",
                    "message": "must be a collection name: letters, digits and underscores, not starting with a "
                    "digit, at most 100 characters",
                }
            ],
        ),
        ({"books": 5}, [{"path": "migrate.books", "message": "must be a CEL expression (a string), got integer"}]),
    ],
)
def test_a_bad_migration_is_refused_when_saved_with_its_path(user, migrate, expected):
    app = _app_with_books(user, 1)
    with pytest.raises(InvalidDefinition) as caught:
        _save(user, app, migrate)
    assert caught.value.errors == expected
    assert App.objects.get(pk=app.pk).version == 1


@pytest.fixture
def many(user, settings, monkeypatch):
    """An app with 12 books, a migration past the inline limit (5), in batches of 4."""
    settings.CHARMING_ROUTES_MIGRATE_INLINE_RECORDS = 5
    monkeypatch.setattr(record_migrations, "BATCH", 4)
    return _app_with_books(user, 12)


def test_many_records_are_migrated_by_a_task_and_mutations_wait_for_it(user, many):
    saved = _save(user, many, {"books": TAGGED})
    assert saved.migration.as_dict()["status"] == "queued"
    assert DBTaskResult.objects.filter(task_path__endswith="record_migration_task").count() == 1
    with pytest.raises(AppMigrating) as caught:
        run(user, many, "add", {"title": "New", "n": 99})
    assert caught.value.message == (
        "App 'Reading list' is migrating: 0 of 12 records; cannot change its records until it ends. Try again shortly."
    )
    assert len(run(user, many, "all", {}, kind="query")) == 12  # queries still answer
    row = record_migration_run(migration_id=saved.migration.queued_id, batches=1)
    assert (row.status, row.done) == ("queued", 4)
    with pytest.raises(AppMigrating, match="migrating: 4 of 12 records"):
        run(user, many, "add", {"title": "New", "n": 99})
    row = record_migration_run(migration_id=saved.migration.queued_id)
    assert (row.status, row.done) == ("done", 12)
    assert [r["touched"] for r in records(many, "books").values()] == [1] * 12
    run(user, many, "add", {"title": "New", "n": 99})  # allowed again


def test_a_worker_killed_mid_batch_resumes_without_losing_or_repeating_a_record(user, many, monkeypatch):
    saved = _save(user, many, {"books": TAGGED})
    record_migration_run(migration_id=saved.migration.queued_id, batches=1)
    real = record_migrations._migrate

    def killed_after_writing(batch, *args, **kwargs):
        real(batch, *args, **kwargs)  # the batch's records are written ...
        raise KeyboardInterrupt  # ... and the process dies before its transaction commits

    monkeypatch.setattr(record_migrations, "_migrate", killed_after_writing)
    with pytest.raises(KeyboardInterrupt):
        record_migration_run(migration_id=saved.migration.queued_id)
    assert RecordMigration.objects.get(pk=saved.migration.queued_id).done == 4
    touched = sorted(r.get("touched", 0) for r in records(many, "books").values())
    assert touched == [0] * 8 + [1] * 4  # the killed batch left nothing

    monkeypatch.setattr(record_migrations, "_migrate", real)
    row = record_migration_run(migration_id=saved.migration.queued_id)
    assert (row.status, row.done, row.total) == ("done", 12, 12)
    assert sorted(r["n"] for r in records(many, "books").values()) == list(range(12))
    assert [r["touched"] for r in records(many, "books").values()] == [1] * 12


def test_a_record_failing_in_the_task_stops_it_and_tells_the_author(user, many):
    saved = _save(user, many, {"books": "record.n == 9 ? 'oops' : " + TAGGED})
    row = record_migration_run(migration_id=saved.migration.queued_id)
    assert (row.status, row.done) == ("failed", 8)
    assert "Migrating books/" in row.error
    assert not App.objects.get(pk=many.pk).migrating
    advisory = Advisory.objects.get(app=many, kind="migration-failed")
    assert advisory.summary.startswith("The migration saved with version 2 stopped after 8 of 12 records: Migrating")
    touched = sorted(r.get("touched", 0) for r in records(many, "books").values())
    assert touched == [0] * 4 + [1] * 8
    run(user, many, "add", {"title": "New", "n": 99})


def test_a_stale_migration_is_queued_again_and_a_second_one_refused(user, many):
    saved = _save(user, many, {"books": TAGGED})
    tasks = DBTaskResult.objects.filter(task_path__endswith="record_migration_task")
    assert not migration_resume_if_stale(app_id=many.id)  # fresh: its task is still queued
    tasks.update(status="RUNNING")  # a worker took it, and was killed: the row stays running
    RecordMigration.objects.filter(pk=saved.migration.queued_id).update(updated_at=timezone.now() - timedelta(hours=1))
    with pytest.raises(AppMigrating):
        run(user, many, "add", {"title": "New", "n": 99})  # the refusal queues it again, outside its transaction
    assert tasks.count() == 2
    RecordMigration.objects.filter(pk=saved.migration.queued_id).update(updated_at=timezone.now() - timedelta(hours=1))
    assert migration_resume_if_stale(app_id=many.id)
    assert tasks.count() == 2  # one task waiting to run it is enough
    many.refresh_from_db()
    with pytest.raises(AppMigrating, match="cannot save a new migration until it ends"):
        _save(user, many, {"books": "record"})


def test_a_long_migration_takes_turns_with_the_tasks_queued_after_it(user, many, monkeypatch):
    monkeypatch.setattr(record_migrations, "SLICE_SECONDS", 0)  # every slice is past its time after one record
    saved = _save(user, many, {"books": TAGGED})
    tasks = DBTaskResult.objects.filter(task_path__endswith="record_migration_task")
    later = definition_save(actor=user, definition={**BOOKS, "collections": {"books": {"indexes": [["n"]]}}}).app
    sync = DBTaskResult.objects.get(
        task_path__endswith="collection_indexes_task", args_kwargs__kwargs__storage_id=str(later.storage.id)
    )
    for turn in range(1, 14):  # a record a turn, and a last turn finding none left
        tasks.filter(status="READY").update(status="RUNNING")  # the worker takes the waiting one
        row = record_migration_slice(migration_id=saved.migration.queued_id)
        assert (row.done, row.status) == (min(turn, 12), "queued" if turn < 13 else "done")
        waiting = list(tasks.filter(status="READY"))
        assert len(waiting) == (1 if turn < 13 else 0)
        assert all(task.enqueued_at > sync.enqueued_at for task in waiting)  # behind the task queued meanwhile
    assert [r["touched"] for r in records(many, "books").values()] == [1] * 12


def test_an_owner_has_at_most_its_share_of_migrations_queued_and_one_more_is_refused_before_its_tests(
    user, other_user, many, settings, monkeypatch
):
    settings.CHARMING_MIGRATIONS_PER_USER = 1
    first = _save(user, many, {"books": TAGGED})
    second_app = _app_with_books(user, 12)
    tasks = DBTaskResult.objects.filter(task_path__endswith="record_migration_task")
    real_tests_run = definitions.tests_run
    monkeypatch.setattr(definitions, "tests_run", lambda **kw: pytest.fail("the tests ran before the refusal"))
    with pytest.raises(RateLimited) as caught:
        _save(user, second_app, {"books": TAGGED})
    assert caught.value.message == (
        "The apps you own already have 1 record migration queued or running in the background (the most one "
        "account has at once, so that every account's get their turn). Nothing was saved; try again in 30 seconds, "
        "once one has finished (get_app shows a migration's progress), or migrate fewer records at a time."
    )
    assert caught.value.details == {
        "limit": "migrations",
        "max": 1,
        "queued": 1,
        "setting": "CHARMING_MIGRATIONS_PER_USER",
        "retry_after_seconds": 30,
    }
    second_app.refresh_from_db()
    assert (second_app.version, second_app.migrating) == (1, False)  # nothing saved
    assert RecordMigration.objects.count() == 1 and tasks.count() == 1
    monkeypatch.setattr(definitions, "tests_run", real_tests_run)
    assert _save(user, _app_with_books(user, 3), {"books": TAGGED}).migration.as_dict()["status"] == "done"
    others = _app_with_books(other_user, 12)  # another account's share is its own
    assert _save(other_user, others, {"books": TAGGED}).migration.as_dict()["status"] == "queued"

    record_migration_run(migration_id=first.migration.queued_id)
    second_app.refresh_from_db()
    assert _save(user, second_app, {"books": TAGGED}).migration.as_dict()["status"] == "queued"


def test_the_share_is_counted_again_when_the_migration_is_queued(user, many, settings, monkeypatch):
    """Two saves that both passed the early check: the second to queue is refused inside its transaction."""
    settings.CHARMING_MIGRATIONS_PER_USER = 1
    second_app = _app_with_books(user, 12)
    monkeypatch.setattr(definitions, "record_migration_share_check", lambda **kw: None)  # both pass it
    _save(user, many, {"books": TAGGED})
    with pytest.raises(RateLimited):
        _save(user, second_app, {"books": TAGGED})
    second_app.refresh_from_db()
    assert second_app.version == 1 and RecordMigration.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_killed_mid_migration_loses_and_repeats_no_record(user, settings):
    """manage.py db_worker runs the queued migration and is killed (SIGKILL) part-way; resuming finishes it with
    every record migrated exactly once."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from django.db import connection

    settings.CHARMING_ROUTES_MIGRATE_INLINE_RECORDS = 5
    app = definition_save(actor=user, definition=BOOKS).app
    storage = Storage.objects.get(app=app)
    total = 8_000
    Record.objects.bulk_create(
        Record(storage=storage, collection="books", record_id=f"b{i}", data={"title": f"Book {i}", "n": i})
        for i in range(total)
    )
    saved = _save(user, app, {"books": TAGGED})
    assert saved.migration.as_dict()["status"] == "queued"
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s["PASSWORD"] else ""
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{s['USER']}{password}@{s['HOST']}:{s['PORT']}/{s['NAME']}",
        "CHARMING_ROUTES_MIGRATE_INLINE_RECORDS": "5",
    }
    root = Path(__file__).resolve().parents[2]
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-startup-delay", "--interval", "0.05"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while RecordMigration.objects.get(pk=saved.migration.queued_id).done < 2 * record_migrations.BATCH:
            assert time.monotonic() < deadline, "the worker never started the migration"
            assert worker.poll() is None, "the worker exited"
            time.sleep(0.02)
    finally:
        worker.kill()
        worker.wait()
    row = RecordMigration.objects.get(pk=saved.migration.queued_id)
    assert row.status == "queued" and 0 < row.done < total, (row.status, row.done)
    assert App.objects.get(pk=app.pk).migrating
    row = record_migration_run(migration_id=row.id)  # what the task queued again does
    assert (row.status, row.done) == ("done", total)
    touched = list(Record.objects.filter(storage=storage).values_list("data__touched", flat=True))
    assert len(touched) == total and set(touched) == {1}
    # The change log too: one change, each record in it once, its positions without a gap.
    change = _migration_change(app)
    entries = ChangeEntry.objects.filter(change_id=change.pk)
    assert change.records == total and entries.count() == total
    assert entries.values("record_id").distinct().count() == total
    assert sorted(entries.values_list("position", flat=True)) == list(range(total))


def test_an_author_test_checks_a_migration_before_it_runs(user):
    from apps_registry.services.definitions import definition_dry_run

    migrate = {"books": "record.n == 0 ? null : " + TAGGED}
    definition = {
        **copy.deepcopy(BOOKS),
        "tests": [
            {
                "name": "tags every book, drops the empty one",
                "migrate": migrate,
                "records": {"books": [{"id": "b0", "title": "Zero", "n": 0}, {"id": "b1", "title": "One", "n": 1}]},
                "expect": {"value": {"migrated": 1, "deleted": 1}},
                "records_after": {"books": [{"id": "b1", "title": "One", "n": 1, "tags": [], "touched": 1}]},
            },
            {
                "name": "a record the migration fails on",
                "migrate": {"books": "'oops'"},
                "records": {"books": [{"title": "X", "n": 5}]},
                "expect": {"error": "handler_error", "message": "must give a map"},
            },
        ],
    }
    checked = definition_dry_run(actor=user, definition=definition)
    assert checked.problems == []
    assert [(r.name, r.passed, r.failures) for r in checked.tests] == [
        ("tags every book, drops the empty one", True, []),
        ("a record the migration fails on", True, []),
    ]


def test_a_bad_migration_test_is_a_problem_with_its_path(user):
    from apps_registry.services.definitions import definition_dry_run

    definition = {
        **copy.deepcopy(BOOKS),
        "tests": [{"migrate": {"books": "params.x"}, "route": "all", "expect": {"value": {}}}],
    }
    checked = definition_dry_run(actor=user, definition=definition)
    assert checked.problems == [
        {
            "path": "tests[0].migrate.books",
            "message": "unknown name(s) params; names available here: app, now, record",
        },
        {"path": "tests[0].route", "message": "a migration test runs its migrate, not a route: give one of them"},
    ]


# --- the change log: a migration is one change, by who saved it ---


def _migration_change(app) -> Change:
    return Change.objects.get(app=app, via=ChangeVia.MIGRATION)


def _entries(change: Change) -> list[tuple[int, str, Any, Any]]:
    return [
        (e.position, e.record_id, e.before, e.after)
        for e in ChangeEntry.objects.filter(change_id=change.pk).order_by("position")
    ]


def test_an_inline_migration_is_one_change_with_each_record_before_and_after(user):
    app = _app_with_books(user, 3)
    ids = {r["n"]: key for key, r in records(app, "books").items()}
    _save(user, app, {"books": "record.n == 1 ? null : {'title': record.title, 'n': record.n, 'tags': []}"})
    change = _migration_change(app)
    assert (change.actor_id, change.actor_repr, change.route, change.records) == (user.pk, "alice", "", 3)
    assert _entries(change) == [
        (0, ids[0], {"title": "Book 0", "n": 0}, {"title": "Book 0", "n": 0, "tags": []}),
        (1, ids[1], {"title": "Book 1", "n": 1}, None),
        (2, ids[2], {"title": "Book 2", "n": 2}, {"title": "Book 2", "n": 2, "tags": []}),
    ]


def test_a_failed_inline_migration_records_no_change(user):
    app = _app_with_books(user, 3)
    with pytest.raises(OperationFailed):
        _save(user, app, {"books": "record.n == 2 ? 'oops' : record"})
    assert not Change.objects.filter(app=app, via=ChangeVia.MIGRATION).exists()


def test_a_queued_migration_is_one_change_its_batches_add_to(user, many):
    saved = _save(user, many, {"books": TAGGED})
    assert not Change.objects.filter(app=many, via=ChangeVia.MIGRATION).exists()  # nothing written yet
    record_migration_run(migration_id=saved.migration.queued_id, batches=1)
    assert _migration_change(many).records == 4
    row = record_migration_run(migration_id=saved.migration.queued_id)
    change = _migration_change(many)
    assert row.change_id == change.pk and change.actor_id == user.pk
    entries = _entries(change)
    assert change.records == 12 and [e[0] for e in entries] == list(range(12))
    assert sorted(e[1] for e in entries) == sorted(records(many, "books"))
    assert all(after["touched"] == 1 and "touched" not in before for _, _, before, after in entries)


def test_a_killed_batch_adds_nothing_to_the_migrations_change(user, many, monkeypatch):
    saved = _save(user, many, {"books": TAGGED})
    record_migration_run(migration_id=saved.migration.queued_id, batches=1)
    real = record_migrations._logged

    def killed_after_logging(row, changes):
        real(row, changes)
        raise KeyboardInterrupt

    monkeypatch.setattr(record_migrations, "_logged", killed_after_logging)
    with pytest.raises(KeyboardInterrupt):
        record_migration_run(migration_id=saved.migration.queued_id)
    assert _migration_change(many).records == 4 and len(_entries(_migration_change(many))) == 4
    monkeypatch.setattr(record_migrations, "_logged", real)
    record_migration_run(migration_id=saved.migration.queued_id)
    assert len(_entries(_migration_change(many))) == 12


def test_a_migrations_change_purged_meanwhile_is_made_again_by_the_next_batch(user, many):
    saved = _save(user, many, {"books": TAGGED})
    record_migration_run(migration_id=saved.migration.queued_id, batches=1)
    first = _migration_change(many)
    ChangeEntry.objects.filter(change_id=first.pk).delete()
    first.delete()
    record_migration_run(migration_id=saved.migration.queued_id)
    again = _migration_change(many)
    assert again.pk != first.pk and again.records == 8 and [e[0] for e in _entries(again)] == list(range(8))


def test_no_change_is_recorded_with_the_change_log_off(user, many, settings):
    settings.CHARMING_CHANGE_LOG = False
    saved = _save(user, many, {"books": TAGGED})
    row = record_migration_run(migration_id=saved.migration.queued_id)
    assert row.status == "done" and row.change_id is None
    assert not Change.objects.filter(app=many, via=ChangeVia.MIGRATION).exists()


def test_neither_a_migration_nor_a_change_before_it_to_the_records_it_reshaped_is_reverted(user):
    app = _app_with_books(user, 2)
    added = Change.objects.filter(app=app).order_by("id").first()
    _save(user, app, {"books": TAGGED})
    migration = _migration_change(app)
    before = records(app, "books")
    for force in (False, True):  # forcing would put back the record's shape from before the migration
        with pytest.raises(OperationFailed) as caught:
            change_revert(actor=user, change_id=added.pk, via=ChangeVia.MCP, force=force)
        assert caught.value.message.startswith(
            f"Change {added.pk} was not reverted: a record migration since (change {migration.pk}) reshaped the "
            "records of its collections, and reverting would put back data from before it"
        )
        assert caught.value.details == {"change_id": str(added.pk), "migrations": [str(migration.pk)]}
    with pytest.raises(OperationFailed) as refused:
        change_revert(actor=user, change_id=migration.pk, via=ChangeVia.MCP, force=True)
    assert refused.value.message.startswith(
        f"Change {migration.pk} is a record migration (a definition save's migrate), which revert_change does not "
        "undo: the app's routes expect the records as it left them. Nothing was changed."
    )
    assert records(app, "books") == before and Change.objects.filter(app=app).count() == 3


def test_a_deletion_before_a_migration_is_not_reverted_into_the_old_shape(user):
    """The migration never saw the deleted record, so no entry of its names it: bringing the record back would
    still put the old shape among the migrated ones."""
    definition = copy.deepcopy(BOOKS)
    definition["routes"]["remove"] = {
        "kind": "mutation",
        "steps": [{"delete": {"collection": "books", "id": "params.id"}, "as": "gone"}, {"return": "gone"}],
    }
    app = definition_save(actor=user, definition=definition).app
    run(user, app, "add", {"title": "Kept", "n": 1})
    gone_id = run(user, app, "add", {"title": "Gone", "n": 2})
    run(user, app, "remove", {"id": gone_id})
    deletion = Change.objects.filter(app=app).latest("id")
    other = definition_save(
        actor=user,
        definition=copy.deepcopy(definition),
        app_id=app.id,
        expected_version=app.version,
        migrate={"books": TAGGED},
    )
    assert other.migration.migrated == 1
    migration = _migration_change(app)
    with pytest.raises(OperationFailed) as caught:
        change_revert(actor=user, change_id=deletion.pk, via=ChangeVia.MCP, force=True)
    assert caught.value.details == {"change_id": str(deletion.pk), "migrations": [str(migration.pk)]}
    assert gone_id not in records(app, "books")
