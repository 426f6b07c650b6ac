"""Schedules: saved only when a run could succeed, run exactly once per due time (across workers, restarts and
daylight-saving changes), paused after failures or when their creator lost access, with the owner told."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.utils import timezone
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from apps_registry.access import membership_set
from apps_registry.exceptions import AccessDenied, InvalidInput, NotFound, OperationFailed
from apps_registry.models import AuditEvent, Change, Schedule, ScheduleRun
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from apps_registry.services.schedules import (
    schedule_create,
    schedule_delete,
    schedule_run_due,
    schedule_update,
    schedules_for,
    schedules_recover,
)
from apps_registry.services.sharing import membership_remove
from apps_registry.tasks import schedule_run_task
from tests.apps_registry.route_helpers import records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CHORES = {
    "name": "Chores",
    "collections": {"counters": {}},
    "routes": {
        "start": {
            "kind": "mutation",
            "steps": [{"insert": {"collection": "counters", "id": "'ticks'", "value": "{'n': 0}"}}, {"return": "1"}],
        },
        "tick": {
            "kind": "mutation",
            "input": {
                "type": "object",
                "properties": {"by": {"type": "integer", "minimum": 1}},
                "required": ["by"],
                "additionalProperties": False,
            },
            "steps": [
                {"increment": {"collection": "counters", "id": "'ticks'", "field": "n", "by": "params.by"}},
                {"return": "1"},
            ],
        },
        "broken": {
            "kind": "mutation",
            "steps": [{"fail": {"when": "true", "message": "'the bank export is not there yet'"}}, {"return": "1"}],
        },
        "count": {"kind": "query", "steps": [{"return": "1"}]},
    },
}


@pytest.fixture
def owner():
    return UserFactory(email="owner@example.com")


@pytest.fixture
def app(owner):
    app = app_definition_save(actor=owner, definition=CHORES)
    route_run(actor=owner, app_id=app.id, op="start", params={}, kind="mutation")
    return app


def ticks(app) -> int:
    return records(app, "counters")["ticks"]["n"]


def _run(schedule: Schedule, *, late: timedelta = timedelta(seconds=1)) -> str:
    """What the worker does when the schedule's task comes due (`late` after its time)."""
    schedule.refresh_from_db()
    due = schedule.next_run_at
    return schedule_run_due(schedule_id=str(schedule.id), due_at=due.isoformat(), now=due + late)


def test_a_schedule_is_saved_with_its_first_time_and_task(owner, app):
    view = schedule_create(
        actor=owner, app_id=app.id, route="tick", cron="daily", time_zone="Europe/Berlin", params={"by": 2}
    )
    schedule = view.schedule
    assert schedule.cron == "0 0 * * *"  # the preset's expression
    local = schedule.next_run_at.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute) == (0, 0)
    task = DBTaskResult.objects.get(pk=schedule.task_id)
    assert task.status == TaskResultStatus.READY and task.run_after == schedule.next_run_at
    assert task.args_kwargs["kwargs"] == {"schedule_id": str(schedule.id), "due_at": schedule.next_run_at.isoformat()}
    assert AuditEvent.objects.filter(action="schedule.create", app_id=app.id).count() == 1
    assert view.as_dict()["created_by"] == owner.username


@pytest.mark.parametrize(
    ("fields", "path", "says"),
    [
        ({"cron": "every day"}, "$.cron", "has 2 fields"),
        ({"cron": "61 * * * *"}, "$.cron", "not a valid cron expression"),
        ({"cron": "0 0 30 2 *"}, "$.cron", "not a valid cron expression"),
        ({"cron": "* * * * *"}, "$.cron", "at most every 5 minutes"),
        ({"time_zone": "Mars/Olympus"}, "$.timezone", "not an IANA time zone"),
        ({"time_zone": "America"}, "$.timezone", "not an IANA time zone"),  # a directory of the zone database
        ({"time_zone": "localtime"}, "$.timezone", "not an IANA time zone"),
        ({"cron": "0 0 * * " + "1," * 70 + "1"}, "$.cron", "at most 120"),
        ({"route": "ti\x00ck"}, "$.route", "NUL"),
        ({"params": {"by": 1, "note": "a\x00b"}}, "$.params.note", "NUL"),
        ({"route": "count"}, "$.route", "'count' is a query; schedules run mutations. Its mutation routes: broken,"),
        (
            {"route": "nope"},
            "$.route",
            "'nope' is not a route of app 'Chores'; its mutation routes: broken, start, tick",
        ),
        ({"params": {"by": 0}}, "$.params.by", "minimum"),
        ({"params": {}}, "$.params", '"by" is a required property'),
        ({"params": [1]}, "$.params", "must be of type object"),
    ],
)
def test_a_schedule_that_could_not_run_is_refused_with_what_to_fix(owner, app, fields, path, says):
    given = {"route": "tick", "cron": "hourly", "time_zone": "UTC", "params": {"by": 1}, **fields}
    with pytest.raises(InvalidInput) as refused:
        schedule_create(actor=owner, app_id=app.id, **given)
    assert says in refused.value.message or any(says in e["message"] for e in refused.value.errors)
    assert any(e["path"] == path for e in refused.value.errors), refused.value.errors
    assert not Schedule.objects.exists() and not DBTaskResult.objects.exists()


def test_viewers_and_strangers_cannot_manage_schedules(owner, app):
    viewer, stranger = UserFactory(), UserFactory()
    membership_set(actor=owner, app=app, user=viewer, role="viewer")
    with pytest.raises(AccessDenied):
        schedule_create(actor=viewer, app_id=app.id, route="tick", cron="hourly", params={"by": 1})
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    with pytest.raises(NotFound):
        schedule_create(actor=stranger, app_id=app.id, route="tick", cron="hourly", params={"by": 1})
    with pytest.raises(NotFound) as hidden:
        schedule_delete(actor=stranger, schedule_id=schedule.id)
    assert hidden.value.message == f"No schedule with id {schedule.id} exists or is visible to you."
    with pytest.raises(AccessDenied):
        schedule_update(actor=viewer, schedule_id=schedule.id, active=False)
    assert schedules_for(actor=viewer, app_id=app.id)[1][0].schedule == schedule  # viewers see them


def test_an_app_has_at_most_its_share_of_schedules(owner, app, settings):
    settings.CHARMING_SCHEDULES_PER_APP = 2
    for by in (1, 2):
        schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": by})
    with pytest.raises(OperationFailed) as refused:
        schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 3})
    assert refused.value.details == {"limit": "schedules_per_app", "max": 2}
    assert refused.value.message == (
        "App 'Chores' has 2 schedules, the most an app may have (CHARMING_SCHEDULES_PER_APP). Delete one, or have one "
        "route do more per run."
    )
    settings.CHARMING_SCHEDULES_PER_APP, settings.CHARMING_SCHEDULES_PER_OWNER = 10, 2
    second = app_definition_save(actor=owner, definition={**CHORES, "name": "Other"})
    with pytest.raises(OperationFailed) as refused:
        schedule_create(actor=owner, app_id=second.id, route="tick", cron="hourly", params={"by": 1})
    assert refused.value.details == {"limit": "schedules_per_owner", "max": 2}
    assert "2 schedules, the most one owner's apps may have (CHARMING_SCHEDULES_PER_OWNER)" in refused.value.message


def test_each_due_time_runs_once_and_plans_the_next(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 3}).schedule
    first_due = schedule.next_run_at
    assert _run(schedule) == "ok"
    assert ticks(app) == 3
    # The same due time again (its task queued twice): nothing runs.
    assert schedule_run_due(schedule_id=str(schedule.id), due_at=first_due.isoformat(), now=first_due) == "not due"
    assert ticks(app) == 3
    run = ScheduleRun.objects.get(schedule=schedule)
    assert (run.due_at, run.outcome) == (first_due, "ok")
    change = Change.objects.get(pk=run.change_id)
    assert (change.via, change.route, change.actor) == ("schedule", "tick", owner)
    schedule.refresh_from_db()
    assert schedule.next_run_at == first_due + timedelta(hours=1)
    assert DBTaskResult.objects.get(pk=schedule.task_id).run_after == schedule.next_run_at


@pytest.mark.parametrize(
    ("start", "expected_local"),
    [
        # Spring forward in Berlin (29 March 2026, 02:00 -> 03:00): 02:30 does not exist that day; it runs at 03:00.
        (datetime(2026, 3, 27, 12, tzinfo=UTC), ["03-28 02:30", "03-29 03:00", "03-30 02:30", "03-31 02:30"]),
        # Fall back (25 October 2026, 03:00 -> 02:00): 02:30 happens twice; it runs once.
        (datetime(2026, 10, 23, 12, tzinfo=UTC), ["10-24 02:30", "10-25 02:30", "10-26 02:30", "10-27 02:30"]),
    ],
)
def test_a_daily_run_is_neither_skipped_nor_doubled_across_daylight_saving(owner, app, start, expected_local):
    from zoneinfo import ZoneInfo

    from apps_registry.services import schedules

    berlin = ZoneInfo("Europe/Berlin")
    schedule = schedule_create(
        actor=owner, app_id=app.id, route="tick", cron="30 2 * * *", time_zone="Europe/Berlin", params={"by": 1}
    ).schedule
    schedules._plan(schedule, after=start)  # as if saved at `start`
    for _ in expected_local:
        assert _run(schedule) == "ok"
    ran = [run.due_at.astimezone(berlin) for run in ScheduleRun.objects.filter(schedule=schedule).order_by("due_at")]
    assert [f"{t:%m-%d %H:%M}" for t in ran] == expected_local
    assert ticks(app) == len(expected_local)


def test_a_time_missed_while_no_worker_ran_runs_once_within_the_window(owner, app, settings):
    settings.CHARMING_SCHEDULE_CATCHUP_MINUTES = 60
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="*/10 * * * *", params={"by": 1}).schedule
    due = schedule.next_run_at
    # The worker comes back 45 minutes late: four times passed, the first runs once, the next is after now.
    assert _run(schedule, late=timedelta(minutes=45)) == "ok"
    assert ticks(app) == 1
    schedule.refresh_from_db()
    assert schedule.next_run_at > due + timedelta(minutes=45)
    # Two hours late: recorded as missed, not run.
    assert _run(schedule, late=timedelta(hours=2)) == "missed"
    assert ticks(app) == 1
    missed = ScheduleRun.objects.get(schedule=schedule, outcome="missed")
    assert "catch-up window of 60 minutes" in missed.error


def test_a_failing_schedule_pauses_after_its_failures_and_tells_the_owner(
    owner, app, settings, django_capture_on_commit_callbacks
):
    settings.CHARMING_SCHEDULE_PAUSE_AFTER = 3
    schedule = schedule_create(actor=owner, app_id=app.id, route="broken", cron="hourly").schedule
    with django_capture_on_commit_callbacks(execute=True):
        assert [_run(schedule) for _ in range(3)] == ["failed", "failed", "paused"]
    schedule.refresh_from_db()
    assert (schedule.active, schedule.failures, schedule.next_run_at) == (False, 3, None)
    assert "Paused after 3 failed runs in a row; the last: the bank export is not there yet" in schedule.paused_reason
    runs = ScheduleRun.objects.filter(schedule=schedule)
    assert [r.error for r in runs] == ["the bank export is not there yet"] * 3
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["owner@example.com"]
    assert "the bank export is not there yet" in mail.outbox[0].body
    assert AuditEvent.objects.filter(action="schedule.pause", app_id=app.id).count() == 1
    # Resumed by the owner: the count starts again and the next time is planned from now.
    resumed = schedule_update(actor=owner, schedule_id=schedule.id, active=True).schedule
    assert (resumed.active, resumed.failures, resumed.paused_reason) == (True, 0, "")
    assert resumed.next_run_at is not None and DBTaskResult.objects.filter(pk=resumed.task_id).exists()


def test_a_success_clears_the_failure_count(owner, app, settings):
    settings.CHARMING_SCHEDULE_PAUSE_AFTER = 2
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    Schedule.objects.filter(pk=schedule.pk).update(failures=1)
    assert _run(schedule) == "ok"
    schedule.refresh_from_db()
    assert schedule.failures == 0 and schedule.active


def test_a_creator_who_lost_access_stops_the_schedule_at_once(owner, app, django_capture_on_commit_callbacks):
    editor = UserFactory()
    membership_set(actor=owner, app=app, user=editor, role="editor")
    schedule = schedule_create(actor=editor, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    assert _run(schedule) == "ok"
    membership_remove(actor=owner, app_id=app.id, username=editor.username)
    with django_capture_on_commit_callbacks(execute=True):
        assert _run(schedule) == "paused"
    assert ticks(app) == 1  # the second run wrote nothing
    schedule.refresh_from_db()
    assert not schedule.active and f"{editor.username}, who set it up" in schedule.paused_reason
    assert len(mail.outbox) == 1 and "can no longer change this app" in mail.outbox[0].body


def test_a_paused_or_deleted_schedule_does_not_run_its_queued_task(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    due = schedule.next_run_at.isoformat()
    schedule_update(actor=owner, schedule_id=schedule.id, active=False)
    assert not DBTaskResult.objects.filter(pk=schedule.task_id).exists()  # its waiting task was dropped
    assert schedule_run_due(schedule_id=str(schedule.id), due_at=due) == "not due"
    schedule_delete(actor=owner, schedule_id=schedule.id)
    assert schedule_run_due(schedule_id=str(schedule.id), due_at=due) == "gone"
    assert ticks(app) == 0


def test_a_lost_task_is_queued_again_and_its_time_still_runs_once(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    due = schedule.next_run_at
    later = due + timedelta(minutes=5)
    # Its task was claimed by a worker that was killed: RUNNING for good.
    DBTaskResult.objects.filter(pk=schedule.task_id).update(status=TaskResultStatus.RUNNING, started_at=due)
    assert schedules_recover(now=due + timedelta(minutes=1)) == 0  # not overdue yet
    assert schedules_recover(now=later + timedelta(minutes=10)) == 1
    schedule.refresh_from_db()
    again = DBTaskResult.objects.get(pk=schedule.task_id)
    assert again.status == TaskResultStatus.READY and again.args_kwargs["kwargs"]["due_at"] == due.isoformat()
    assert schedules_recover(now=later + timedelta(minutes=10)) == 0  # its new task waits: not queued twice
    assert _run(schedule) == "ok"
    assert ticks(app) == 1


def test_a_task_queued_through_django_tasks_runs_the_schedule(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 4}).schedule
    due = timezone.now().replace(microsecond=0) - timedelta(minutes=1)  # as if its time came a minute ago
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=due)
    assert schedule_run_task.call(schedule_id=str(schedule.id), due_at=due.isoformat()) == "ok"
    assert ticks(app) == 4


def _worker_env() -> dict[str, str]:
    import os

    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        url = f"sqlite:///{s['NAME']}"
    else:
        password = f":{s['PASSWORD']}" if s["PASSWORD"] else ""
        url = f"postgres://{s['USER']}{password}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "CHARMING_SCHEDULE_SWEEP_SECONDS": "0.5"}


def _workers(count: int) -> list:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return [
        subprocess.Popen(
            [sys.executable, "manage.py", "db_worker", "--no-startup-delay", "--interval", "0.05"],
            cwd=root,
            env=_worker_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def _wait_for(condition, workers, what: str) -> None:
    import time

    deadline = time.monotonic() + 90
    while not condition():
        assert time.monotonic() < deadline, f"the workers never {what}"
        assert all(w.poll() is None for w in workers), "a worker exited"
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_real_workers_run_a_due_time_once_and_a_restarted_worker_runs_a_lost_one(owner, app):
    """Two `manage.py db_worker` processes, one due time queued twice: it runs once. Then the workers are gone, the
    next time's task was claimed by a killed worker; a worker started again queues it anew and runs it once."""
    from apps_registry.services.schedules import _enqueue

    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 5}).schedule
    due = timezone.now().replace(microsecond=0) - timedelta(seconds=30)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=due)
    twice = [_enqueue(schedule.id, due) for _ in range(2)]
    workers = _workers(2)
    try:
        done = DBTaskResult.objects.filter(pk__in=twice, status=TaskResultStatus.SUCCESSFUL)
        _wait_for(lambda: done.count() == 2, workers, "ran both tasks")
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert sorted(task.return_value for task in done) == ["not due", "ok"]
    assert ticks(app) == 5
    assert list(ScheduleRun.objects.filter(schedule=schedule).values_list("due_at", "outcome")) == [(due, "ok")]

    schedule.refresh_from_db()
    missed = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=missed)
    DBTaskResult.objects.filter(pk=schedule.task_id).update(
        status=TaskResultStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=20)
    )
    workers = _workers(1)
    try:
        _wait_for(lambda: ScheduleRun.objects.filter(schedule=schedule, due_at=missed).exists(), workers, "ran it")
        assert ticks(app) == 10

        # While that worker runs: the next time's task is claimed by a worker killed just now (RUNNING, started 3
        # minutes ago, past the 2 minutes a run may take). The running worker's sweep queues it again.
        schedule.refresh_from_db()
        lost = timezone.now().replace(microsecond=0) - timedelta(minutes=3)
        Schedule.objects.filter(pk=schedule.pk).update(next_run_at=lost)
        DBTaskResult.objects.filter(pk=schedule.task_id).update(status=TaskResultStatus.RUNNING, started_at=lost)
        _wait_for(lambda: ScheduleRun.objects.filter(schedule=schedule, due_at=lost).exists(), workers, "swept it")
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert ticks(app) == 15
    assert ScheduleRun.objects.filter(schedule=schedule).count() == 3


def test_an_editor_who_changes_what_a_schedule_runs_runs_it_as_themselves(owner, app):
    editor = UserFactory()
    membership_set(actor=owner, app=app, user=editor, role="editor")
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    schedule_update(actor=editor, schedule_id=schedule.id, active=False)  # a pause changes nothing it runs
    schedule.refresh_from_db()
    assert schedule.creator == owner
    changed = schedule_update(actor=editor, schedule_id=schedule.id, params={"by": 7}, active=True).schedule
    assert changed.creator == editor
    assert _run(changed) == "ok"
    run = ScheduleRun.objects.get(schedule=changed)
    assert Change.objects.get(pk=run.change_id).actor == editor


def test_a_schedule_whose_route_is_gone_can_still_be_paused(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    without_tick = {**CHORES, "routes": {k: v for k, v in CHORES["routes"].items() if k != "tick"}}
    app_definition_save(actor=owner, definition=without_tick, app_id=app.id, expected_version=1)
    paused = schedule_update(actor=owner, schedule_id=schedule.id, active=False).schedule
    assert not paused.active and paused.next_run_at is None
    with pytest.raises(InvalidInput) as refused:  # resuming checks the route again
        schedule_update(actor=owner, schedule_id=schedule.id, active=True)
    assert "route 'tick' is not a route of app 'Chores'" in refused.value.message


def test_a_resumed_schedule_runs_as_the_person_resuming_it(owner, app, django_capture_on_commit_callbacks):
    editor = UserFactory()
    membership_set(actor=owner, app=app, user=editor, role="editor")
    schedule = schedule_create(actor=editor, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    membership_remove(actor=owner, app_id=app.id, username=editor.username)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now().replace(microsecond=0))  # due now
    with django_capture_on_commit_callbacks(execute=True):
        assert _run(schedule) == "paused"
    resumed = schedule_update(actor=owner, schedule_id=schedule.id, active=True).schedule
    assert resumed.creator == owner and _run(resumed) == "ok"
    assert ticks(app) == 1


def test_a_deactivated_creator_stops_the_schedule(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    owner.is_active = False
    owner.save(update_fields=["is_active"])
    assert _run(schedule) == "paused"
    assert ticks(app) == 0


def test_a_spent_app_budget_fails_the_run_without_counting_towards_the_pause(owner, app, settings, monkeypatch):
    from apps_registry.exceptions import RateLimited
    from apps_registry.services import schedules

    settings.CHARMING_SCHEDULE_PAUSE_AFTER = 1

    def spent(**_kwargs):
        raise RateLimited("This app had too many calls.", limit="app", retry_after_seconds=5, details={})

    monkeypatch.setattr(schedules, "app_budget_take", spent)
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    assert _run(schedule) == "failed"
    schedule.refresh_from_db()
    assert schedule.active and schedule.failures == 0
    assert ScheduleRun.objects.get(schedule=schedule).error == "This app had too many calls."


def test_a_runs_error_is_kept_without_secrets(owner, app):
    leaky = {
        **CHORES,
        "routes": {
            **CHORES["routes"],
            "leak": {
                "kind": "mutation",
                "steps": [
                    {"fail": {"when": "true", "message": "'password=hunter2hunter2 was refused'"}},
                    {"return": "1"},
                ],
            },
        },
    }
    app_definition_save(actor=owner, definition=leaky, app_id=app.id, expected_version=1)
    schedule = schedule_create(actor=owner, app_id=app.id, route="leak", cron="hourly").schedule
    assert _run(schedule) == "failed"
    assert "hunter2" not in ScheduleRun.objects.get(schedule=schedule).error


def test_deleting_an_app_deletes_its_schedules_and_their_waiting_tasks_do_nothing(owner, app):
    from apps_registry.services.apps import app_delete

    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    app_delete(actor=owner, app_id=app.id, purge_storage=True, confirmed_via="command")
    assert not Schedule.objects.exists()
    assert schedule_run_due(schedule_id=str(schedule.id), due_at=schedule.next_run_at.isoformat()) == "gone"


def test_a_time_planned_again_after_it_ran_is_not_run_twice(owner, app):
    schedule = schedule_create(actor=owner, app_id=app.id, route="tick", cron="hourly", params={"by": 1}).schedule
    due = schedule.next_run_at
    assert _run(schedule) == "ok"
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=due)  # e.g. resumed before its time came
    assert schedule_run_due(schedule_id=str(schedule.id), due_at=due.isoformat(), now=due) == "not due"
    schedule.refresh_from_db()
    assert ticks(app) == 1 and schedule.next_run_at == due + timedelta(hours=1)


def test_a_schedule_shows_its_next_times_in_its_own_zone(owner, app):
    from zoneinfo import ZoneInfo

    view = schedule_create(
        actor=owner, app_id=app.id, route="tick", cron="0 7 * * 1", time_zone="Europe/London", params={"by": 1}
    )
    shown = view.as_dict()["next_runs"]
    times = [datetime.fromisoformat(t) for t in shown]
    assert len(times) == 3 and times[0] == view.schedule.next_run_at
    assert all(t.utcoffset() == t.astimezone(ZoneInfo("Europe/London")).utcoffset() for t in times)
    assert all((t.weekday(), t.hour, t.minute) == (0, 7, 0) for t in times)  # Mondays at 07:00, London time
    assert [b - a for a, b in zip(times, times[1:], strict=False)] == [timedelta(days=7)] * 2
    paused = schedule_update(actor=owner, schedule_id=view.schedule.id, active=False)
    assert paused.as_dict()["next_runs"] == []


def test_the_same_schedule_twice_is_refused(owner, app):
    first = schedule_create(actor=owner, app_id=app.id, route="tick", cron="daily", params={"by": 1}).schedule
    with pytest.raises(OperationFailed) as refused:
        schedule_create(actor=owner, app_id=app.id, route="tick", cron="0 0 * * *", params={"by": 1})
    assert f"already has this schedule (id {first.id})" in refused.value.message
    other = schedule_create(actor=owner, app_id=app.id, route="tick", cron="daily", params={"by": 2}).schedule
    with pytest.raises(OperationFailed):  # changed into a twin of the first
        schedule_update(actor=owner, schedule_id=other.id, params={"by": 1})
    assert Schedule.objects.get(pk=other.pk).params == {"by": 2}
