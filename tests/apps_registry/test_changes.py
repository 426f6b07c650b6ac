"""The change log: each mutation records its change set in its transaction, and a change can be reverted."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps_registry.access import membership_set
from apps_registry.exceptions import AccessDenied, ChangeConflict, InvalidInput, NotFound, OperationFailed
from apps_registry.models import Change, ChangeEntry, Storage
from apps_registry.selectors import change_moment_read, changes_page_for, records_changes_of
from apps_registry.services.changes import change_revert, changes_purge
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from tests.apps_registry.route_helpers import records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

TASKS = {
    "name": "Tasks",
    "collections": {"tasks": {}, "counters": {}},
    "routes": {
        "add": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"id": {"type": "string"}, "title": {"type": "string"}}},
            "steps": [
                {
                    "insert": {
                        "collection": "tasks",
                        "id": "params.id",
                        "value": "{'title': params.title, 'done': false}",
                    }
                },
                {"upsert": {"collection": "counters", "id": "'added'", "value": "{'seen': true}"}},
                {"increment": {"collection": "counters", "id": "'added'", "field": "n"}},
                {"return": "{'ok': true}"},
            ],
        },
        "finish": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"id": {"type": "string"}}},
            "steps": [
                {"update": {"collection": "tasks", "id": "params.id", "value": "{'done': true, 'note': 'finished'}"}},
                {"return": "{'ok': true}"},
            ],
        },
        "remove": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"id": {"type": "string"}}},
            "steps": [{"delete": {"collection": "tasks", "id": "params.id"}}, {"return": "{'ok': true}"}],
        },
        "add_then_fail": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"id": {"type": "string"}}},
            "steps": [
                {"insert": {"collection": "tasks", "id": "params.id", "value": "{'title': 'x'}"}},
                {"fail": {"message": "'refused on purpose'"}},
            ],
        },
        "all": {"kind": "query", "steps": [{"find": {"collection": "tasks"}, "as": "t"}, {"return": "t"}]},
    },
}


@pytest.fixture
def app(user):
    return app_definition_save(actor=user, definition=TASKS)


def mutate(actor, app, op, **params):
    return route_run(actor=actor, app_id=app.id, op=op, params=params, kind="mutation", via="mcp")


def entries_of(change_id):
    return [(e.collection, e.record_id, e.before, e.after) for e in ChangeEntry.objects.filter(change_id=change_id)]


def test_a_mutation_records_each_record_before_and_after_with_who_how_and_the_route(user, app):
    result = mutate(user, app, "add", id="t1", title="Milk")
    change = Change.objects.get(pk=result.change_id)
    assert (change.app_id, change.actor, change.via, change.route, change.records) == (app.id, user, "mcp", "add", 2)
    assert entries_of(change.pk) == [
        ("tasks", "t1", None, {"title": "Milk", "done": False}),
        ("counters", "added", None, {"seen": True, "n": 1}),  # written twice: noted once
    ]
    second = mutate(user, app, "add", id="t2", title="Eggs")
    assert entries_of(second.change_id)[1] == ("counters", "added", {"seen": True, "n": 1}, {"seen": True, "n": 2})
    finished = mutate(user, app, "finish", id="t1")
    assert entries_of(finished.change_id) == [
        ("tasks", "t1", {"title": "Milk", "done": False}, {"title": "Milk", "done": True, "note": "finished"})
    ]
    removed = mutate(user, app, "remove", id="t2")
    assert entries_of(removed.change_id) == [("tasks", "t2", {"title": "Eggs", "done": False}, None)]


def test_a_failed_mutation_records_nothing(user, app):
    with pytest.raises(Exception, match="refused on purpose"):
        mutate(user, app, "add_then_fail", id="t9")
    assert Change.objects.count() == 0 and ChangeEntry.objects.count() == 0
    assert records(app) == {}


def test_a_query_records_nothing(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    route_run(actor=user, app_id=app.id, op="all", params={}, kind="query")
    assert Change.objects.count() == 1


def test_the_change_log_can_be_turned_off(user, app, settings):
    settings.CHARMING_CHANGE_LOG = False
    assert mutate(user, app, "add", id="t1", title="Milk").change_id is None
    assert Change.objects.count() == 0


def test_revert_restores_the_before_state_as_a_new_change(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    finished = mutate(user, app, "finish", id="t1")
    result = change_revert(actor=user, change_id=str(finished.change_id), via="mcp")
    assert records(app, "tasks") == {"t1": {"title": "Milk", "done": False}}  # 'note' gone again, not merged
    assert result.restored == [{"collection": "tasks", "id": "t1", "action": "restored"}]
    revert = Change.objects.get(pk=result.change_id)
    assert (revert.reverts_id, revert.route, revert.via) == (finished.change_id, "", "mcp")
    assert entries_of(revert.pk) == [
        ("tasks", "t1", {"title": "Milk", "done": True, "note": "finished"}, {"title": "Milk", "done": False})
    ]


def test_a_revert_moves_the_changes_counter_open_pages_poll(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    finished = mutate(user, app, "finish", id="t1")  # an update only: no record created or deleted
    before = records_changes_of(app_id=app.id)
    change_revert(actor=user, change_id=str(finished.change_id), via="page")
    assert records_changes_of(app_id=app.id) == before + 1


def test_reverting_an_insert_deletes_the_records_and_keeps_the_count(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    change_revert(actor=user, change_id=added.change_id, via="page")
    assert records(app) == {}
    assert Storage.objects.get(app=app).records_held == 0


def test_a_restored_deleted_record_comes_back_with_its_id(user, app):
    mutate(user, app, "add", id="keep-me-42", title="Milk")
    removed = mutate(user, app, "remove", id="keep-me-42")
    assert "keep-me-42" not in records(app, "tasks")
    result = change_revert(actor=user, change_id=removed.change_id, via="page")
    assert records(app, "tasks") == {"keep-me-42": {"title": "Milk", "done": False}}
    assert result.restored == [{"collection": "tasks", "id": "keep-me-42", "action": "recreated"}]
    assert Storage.objects.get(app=app).records_held == 2  # the task and the counter


def test_a_revert_is_refused_when_a_later_change_touched_the_record_and_names_it(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    finished = mutate(user, app, "finish", id="t1")
    removed = mutate(user, app, "remove", id="t1")
    with pytest.raises(ChangeConflict) as refused:
        change_revert(actor=user, change_id=finished.change_id, via="mcp")
    assert f"tasks/t1 (by change {removed.change_id})" in refused.value.message
    assert "Nothing was changed" in refused.value.message
    assert refused.value.details["conflicts"] == [
        {"collection": "tasks", "id": "t1", "change_id": str(removed.change_id)}
    ]
    assert records(app, "tasks") == {}  # nothing written
    assert Change.objects.filter(reverts__isnull=False).count() == 0


def test_a_conflict_with_a_later_change_is_not_worded_as_already_reverted(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    first = change_revert(actor=user, change_id=added.change_id, via="mcp")
    mutate(user, app, "add", id="t1", title="Bread")  # a later change beside the revert
    with pytest.raises(ChangeConflict) as again:
        change_revert(actor=user, change_id=added.change_id, via="mcp")
    assert again.value.reverted_by is None and "already reverted" not in again.value.message
    assert {c["change_id"] for c in again.value.conflicts} != {str(first.change_id)}


def test_a_forced_revert_overwrites_the_later_change(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    finished = mutate(user, app, "finish", id="t1")
    mutate(user, app, "remove", id="t1")
    result = change_revert(actor=user, change_id=finished.change_id, force=True, via="mcp")
    assert records(app, "tasks") == {"t1": {"title": "Milk", "done": False}}
    assert [c["collection"] + "/" + c["id"] for c in result.forced_over] == ["tasks/t1"]


def test_reverting_twice_is_a_conflict_with_the_first_revert(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    first = change_revert(actor=user, change_id=added.change_id, via="mcp")
    with pytest.raises(ChangeConflict) as again:
        change_revert(actor=user, change_id=added.change_id, via="mcp")
    assert again.value.message == (
        f"Change {added.change_id} was already reverted, by change {first.change_id}: its records are as they were "
        f"before it. Nothing was changed. To redo change {added.change_id}, revert change {first.change_id}."
    )
    assert again.value.details["reverted_by"] == str(first.change_id)
    # and the revert itself can be reverted: the task is back
    change_revert(actor=user, change_id=first.change_id, via="mcp")
    assert records(app, "tasks") == {"t1": {"title": "Milk", "done": False}}


def test_another_users_change_is_not_found_and_a_viewer_may_not_revert(user, other_user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    with pytest.raises(NotFound, match=f"No change {added.change_id} in any app you can see"):
        change_revert(actor=other_user, change_id=added.change_id, via="mcp")
    with pytest.raises(NotFound):
        changes_page_for(other_user, app_id=app.id)
    membership_set(actor=user, app=app, user=other_user, role="viewer")
    with pytest.raises(AccessDenied, match="viewer"):
        change_revert(actor=other_user, change_id=added.change_id, via="mcp")
    assert [c.id for c in changes_page_for(other_user, app_id=app.id).changes] == [added.change_id]
    editor = UserFactory(username="ed")
    membership_set(actor=user, app=app, user=editor, role="editor")
    change_revert(actor=editor, change_id=added.change_id, via="mcp")
    assert records(app) == {}


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "1" * 19, "１２"])
def test_a_bad_change_id_says_what_a_change_id_is(user, bad):
    with pytest.raises(InvalidInput, match="positive whole number"):
        change_revert(actor=user, change_id=bad, via="mcp")


def test_an_unknown_change_is_not_found(user):
    with pytest.raises(NotFound, match="No change 999"):
        change_revert(actor=user, change_id=999, via="mcp")


def test_a_revert_while_the_records_migrate_is_refused(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    type(app).objects.filter(pk=app.pk).update(migrating=True)
    with pytest.raises(OperationFailed):
        change_revert(actor=user, change_id=added.change_id, via="mcp")
    assert "t1" in records(app, "tasks")


def test_timeline_and_record_history_pages(user, app):
    ids = [mutate(user, app, "add", id=f"t{n}", title=f"n{n}").change_id for n in range(5)]
    finished = mutate(user, app, "finish", id="t2").change_id
    page = changes_page_for(user, app_id=app.id, limit=4)
    assert [c.id for c in page.changes] == [finished, *reversed(ids[2:])]
    rest = changes_page_for(user, app_id=app.id, limit=4, cursor=page.next_cursor)
    assert [c.id for c in rest.changes] == list(reversed(ids[:2])) and rest.next_cursor is None
    history = changes_page_for(user, app_id=app.id, collection="tasks", record_id="t2")
    assert [c.id for c in history.changes] == [finished, ids[2]]
    assert [e["id"] for c in history.changes for e in c.entries] == ["t2", "t2"]  # that record alone
    with pytest.raises(InvalidInput, match="cursor"):  # a timeline's cursor is not a record history's
        changes_page_for(user, app_id=app.id, collection="tasks", record_id="t2", cursor=page.next_cursor)


def made_at(change_id, moment):
    Change.objects.filter(pk=change_id).update(created_at=moment)


def test_since_and_until_list_only_the_changes_of_that_span_and_bind_its_cursors(user, app):
    day = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=3)
    ids = [mutate(user, app, "add", id=f"t{n}", title=f"n{n}").change_id for n in range(6)]
    for n, change_id in enumerate(ids):  # two changes a day, days 0, 1 and 2, at 12:00 and 18:00
        made_at(change_id, day + timedelta(days=n // 2, hours=6 * (n % 2)))
    second_day, third_day = day + timedelta(days=1), day + timedelta(days=2)

    def listed(**span):
        return [c.id for c in changes_page_for(user, app_id=app.id, **span).changes]

    assert listed(since=second_day) == list(reversed(ids[2:]))  # since is included
    assert listed(until=second_day) == list(reversed(ids[:2]))  # until is left out
    assert listed(since=second_day, until=third_day) == [ids[3], ids[2]]
    assert listed(since=second_day, until=third_day, collection="tasks", record_id="t3") == [ids[3]]
    assert listed(since=third_day + timedelta(hours=7)) == []
    page = changes_page_for(user, app_id=app.id, since=day, limit=2)
    rest = changes_page_for(user, app_id=app.id, since=day, limit=2, cursor=page.next_cursor)
    assert [c.id for c in rest.changes] == [ids[3], ids[2]]
    with pytest.raises(InvalidInput, match="cursor"):  # a span's cursor is not the whole timeline's, nor another's
        changes_page_for(user, app_id=app.id, limit=2, cursor=page.next_cursor)
    with pytest.raises(InvalidInput, match="cursor"):
        changes_page_for(user, app_id=app.id, since=second_day, limit=2, cursor=page.next_cursor)
    with pytest.raises(InvalidInput, match=r"'since' \(.*\) must be before 'until'"):
        changes_page_for(user, app_id=app.id, since=third_day, until=second_day)


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-12-03", "2026-12-03T00:00:00+00:00"),
        ("2026-12-03T09:30:00Z", "2026-12-03T09:30:00+00:00"),
        ("2026-12-03T09:30:00-05:00", "2026-12-03T09:30:00-05:00"),
        ("2026-12-03T09:30", "2026-12-03T09:30:00+00:00"),
    ],
)
def test_a_span_bound_is_an_iso_date_time_utc_without_an_offset_or_a_dates_midnight(text, moment):
    assert change_moment_read(text, name="since").isoformat() == moment


@pytest.mark.parametrize(
    "bad", ["yesterday", "2026-13-01", "2026-12-03T25:00", "", "12/03/2026", "9999-12-31T23:00-05:00"]
)
def test_a_bad_span_bound_says_what_to_send(bad):
    with pytest.raises(InvalidInput, match=r"'until' must be an ISO 8601 date-time such as '2026-12-03T09:00:00Z'"):
        change_moment_read(bad, name="until")


def test_a_page_of_changes_reads_the_same_few_statements_whatever_its_size(user, app):
    """The changes, their reverts and their shown entries: the same reads a page, not one more per change."""
    for n in range(12):
        mutate(user, app, "add", id=f"t{n}", title="x")
    changes_page_for(user, app_id=app.id, limit=2)  # warm the app's lookups alike for both counts
    with CaptureQueriesContext(connection) as two:
        small_page = changes_page_for(user, app_id=app.id, limit=2)
    with CaptureQueriesContext(connection) as twelve:
        big_page = changes_page_for(user, app_id=app.id, limit=12)
    assert len(big_page.changes) == 12
    assert len(two) == len(twelve)
    for change, n in zip(big_page.changes, reversed(range(12)), strict=True):  # each change shows its own entries
        assert f"t{n}" in [entry["id"] for entry in change.entries]
    assert [c.entries for c in small_page.changes] == [c.entries for c in big_page.changes[:2]]


@pytest.mark.parametrize("batch", [1, 1000])
def test_the_purge_deletes_changes_older_than_the_window_only(user, app, settings, batch):
    settings.CHARMING_CHANGE_RETENTION_DAYS = 30
    older = mutate(user, app, "add", id="t0", title="Tea").change_id
    old = mutate(user, app, "add", id="t1", title="Milk").change_id
    revert = change_revert(actor=user, change_id=old, via="mcp").change_id
    recent = mutate(user, app, "add", id="t2", title="Eggs").change_id
    Change.objects.filter(pk__in=[older, old]).update(created_at=timezone.now() - timedelta(days=31))
    assert changes_purge(older_than=timezone.now() - timedelta(days=30), batch=batch) == 2
    assert set(Change.objects.values_list("id", flat=True)) == {revert, recent}
    assert not ChangeEntry.objects.filter(change_id=old).exists()
    assert Change.objects.get(pk=revert).reverts_id is None


def test_purge_storage_deletes_the_history_past_its_window_and_a_dry_run_only_counts(user, app, settings):
    settings.CHARMING_CHANGE_RETENTION_DAYS = 30
    old = mutate(user, app, "add", id="t1", title="Milk").change_id
    recent = mutate(user, app, "add", id="t2", title="Eggs").change_id
    Change.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(days=31))
    out = io.StringIO()
    call_command("purge_storage", "--dry-run", stdout=out)
    assert "Change history older than 30 days" in out.getvalue() and "1 changes would be deleted" in out.getvalue()
    assert Change.objects.count() == 2
    out = io.StringIO()
    call_command("purge_storage", stdout=out)
    assert "1 changes deleted" in out.getvalue()
    assert list(Change.objects.values_list("id", flat=True)) == [recent]
    assert records(app, "tasks").keys() == {"t1", "t2"}  # the records themselves stay


@pytest.mark.parametrize("purge", [True, False])
def test_deleting_an_app_deletes_its_history(user, app, purge):
    from apps_registry.services.apps import app_delete

    mutate(user, app, "add", id="t1", title="Milk")
    mutate(user, app, "remove", id="t1")
    app_delete(actor=user, app_id=app.id, purge_storage=purge, confirmed_via="confirm_parameter")
    assert not Change.objects.exists() and not ChangeEntry.objects.exists()


def test_bringing_a_record_back_past_the_records_limit_is_refused_and_writes_nothing(user, app, settings):
    mutate(user, app, "add", id="t1", title="Milk")  # a task and the counter
    removed = mutate(user, app, "remove", id="t1").change_id
    mutate(user, app, "add", id="t2", title="Eggs")  # t2 and the counter: at the limit below
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 2
    with pytest.raises(OperationFailed, match="more than 2 records") as refused:
        change_revert(actor=user, change_id=removed, via="mcp")
    assert refused.value.details["limit"] == "records_per_app"
    assert set(records(app, "tasks")) == {"t2"}
    assert Storage.objects.get(app=app).records_held == 2
    assert not Change.objects.filter(reverts__isnull=False).exists()
