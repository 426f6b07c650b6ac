"""Schedules: a mutation route run on its own at the times of a cron expression in a time zone, with fixed params.

Saving one checks everything a run would need (the route is a mutation of the app, the params match its input
schema, the expression and the zone are valid, the times are not closer than CHARMING_SCHEDULE_MIN_MINUTES, the
per-app and per-owner counts) and queues a task (django-tasks, run by `manage.py db_worker`) for its first due time.

Exactly once per due time, with any number of workers: the task for a due time runs, in one transaction, the claim
(the schedule's row locked; the time must still be its `next_run_at`), the route (as any call, through
services.routes, as the person it runs as), the run's record (`ScheduleRun`, unique per due time) and the task for
the next due time. A worker killed anywhere in it leaves nothing: `next_run_at` is still that time, and
`schedules_recover` (run by each schedule task, and by `db_worker` as it starts and from a sweep thread every
CHARMING_SCHEDULE_SWEEP_SECONDS) queues its task again. A task
queued twice for one time finds the time no longer due and does nothing.

A time missed while no worker ran runs once when one comes back, if it is at most CHARMING_SCHEDULE_CATCHUP_MINUTES
old (else it is recorded as missed); the next due time is the first one after the run, so a long absence never
runs a schedule over and over. Times follow the schedule's zone with cron's rules across daylight-saving changes
(cronsim): a daily time in the skipped hour runs at the hour's end, one in the repeated hour runs once.

A run that fails counts (a refusal that passes, such as the app's rate limit spent, is recorded but not counted);
CHARMING_SCHEDULE_PAUSE_AFTER consecutive failures pause the schedule, and a person it runs as who can no longer change
the app (left, was removed, became a viewer, was deactivated) pauses it at once; either way the app's owner gets an
e-mail. Whoever changes what it runs or resumes it (an owner or editor) is the person it runs as from then on;
resuming clears the count and plans the next time from now.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from apps_registry.access import app_for, manager_app_for, still_authors
from apps_registry.exceptions import (
    AppMigrating,
    CharmingError,
    InvalidInput,
    OperationFailed,
    RateLimited,
    unstorable_text_refuse,
)
from apps_registry.models import App, ChangeVia, Route, Schedule, ScheduleRun, ScheduleRunOutcome
from apps_registry.redaction import redact
from apps_registry.routes.cache import cache_route, cached_route, compile_route
from apps_registry.routes.limits import current_limits
from apps_registry.routes.runtime import params_check
from apps_registry.services.apps import audit_record
from apps_registry.services.automation import invalid, kept_for, mutation_route_checked, shares_check
from apps_registry.services.rate_limits import app_budget_take
from apps_registry.services.record_migrations import migration_resume_if_stale
from apps_registry.values import clip

logger = logging.getLogger(__name__)

# What a preset stands for (cron's own meanings: weekly is Sunday at midnight, monthly the 1st at midnight).
PRESETS: dict[str, str] = {
    "hourly": "0 * * * *",
    "daily": "0 0 * * *",
    "weekly": "0 0 * * 0",
    "monthly": "0 0 1 * *",
}
# How long a due time may stay unrun before schedules_recover queues its task again (a task waiting behind others
# is left alone; one whose worker was killed is queued again).
RECOVER_AFTER = timedelta(minutes=2)
# A task running longer than this has lost its worker (a run is bounded by the route's time limits: seconds). Queuing
# a time's task again while the first still runs is harmless: the second waits for the schedule's row, then finds
# the time no longer due.
RUNNING_LOST_AFTER = timedelta(minutes=2)
RUNS_SHOWN = 5  # the last runs each listing shows


@dataclass(frozen=True)
class ScheduleView:
    """A schedule with its last runs, as the MCP tools and the page show it."""

    schedule: Schedule
    runs: list[ScheduleRun]

    def next_runs(self, count: int = 3) -> list[datetime]:
        """Its next due times in its own zone (none while paused): what a person checks the expression against."""
        s = self.schedule
        if s.next_run_at is None:
            return []
        zone = ZoneInfo(s.time_zone)
        first = s.next_run_at.astimezone(zone)
        times = CronSim(s.cron, first)
        return [first] + [next(times) for _ in range(count - 1)]

    def as_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "id": str(s.id),
            "app_id": str(s.app_id),
            "route": s.route,
            "cron": s.cron,
            "timezone": s.time_zone,
            "params": s.params,
            "active": s.active,
            "paused_reason": s.paused_reason or None,
            "failures": s.failures,
            "next_run_at": None if s.next_run_at is None else s.next_run_at.isoformat(),
            "next_runs": [t.isoformat() for t in self.next_runs()],
            "created_by": s.creator.get_username(),
            "runs": [_run_dict(run) for run in self.runs],
        }


def _run_dict(run: ScheduleRun) -> dict[str, Any]:
    found: dict[str, Any] = {"due_at": run.due_at.isoformat(), "ran_at": run.ran_at.isoformat(), "outcome": run.outcome}
    if run.error:
        found["error"] = run.error
    if run.change_id is not None:
        found["change_id"] = str(run.change_id)
    return found


def cron_checked(cron: Any, *, path: str = "$.cron") -> str:
    """The five-field expression `cron` stands for (a preset's, or itself), or InvalidInput saying what to fix."""
    if not isinstance(cron, str) or not cron.strip():
        raise invalid(
            path, "must be a five-field cron expression such as '30 7 * * 1-5' or a preset: " + ", ".join(PRESETS)
        )
    text = " ".join(cron.split())
    if len(text) > 120:
        raise invalid(path, f"is {len(text)} characters long; a cron expression has at most 120")
    expression = PRESETS.get(text.lower(), text)
    if len(expression.split(" ")) != 5:
        raise invalid(
            path,
            f"'{clip(cron, 60)}' has {len(expression.split(' '))} fields; a cron expression has five: minute hour "
            f"day-of-month month day-of-week (e.g. '30 7 * * 1-5'), or use a preset: {', '.join(PRESETS)}",
        )
    try:
        times = CronSim(expression, datetime(2026, 1, 1, tzinfo=UTC))
        upcoming = [next(times) for _ in range(50)]
    except (CronSimError, StopIteration) as problem:
        raise invalid(path, f"'{clip(cron, 60)}' is not a valid cron expression ({problem})") from None
    least = min(b - a for a, b in zip(upcoming, upcoming[1:], strict=False))
    minimum = timedelta(minutes=settings.CHARMING_SCHEDULE_MIN_MINUTES)
    if least < minimum:
        raise invalid(
            path,
            f"'{clip(cron, 60)}' runs every {int(least.total_seconds() // 60)} minute(s); schedules run at most "
            f"every {settings.CHARMING_SCHEDULE_MIN_MINUTES} minutes (CHARMING_SCHEDULE_MIN_MINUTES)",
        )
    return expression


def zone_checked(name: Any, *, path: str = "$.timezone") -> ZoneInfo:
    """The IANA time zone `name`, or InvalidInput."""
    if isinstance(name, str) and name in _zones():
        return ZoneInfo(name)
    raise invalid(path, f"{clip(name, 60)!r} is not an IANA time zone; use a name such as 'Europe/Berlin' or 'UTC'")


@cache
def _zones() -> frozenset[str]:
    """The IANA zone names (the system's database, or the tzdata package's), without aliases such as 'localtime'."""
    return frozenset(available_timezones()) - {"localtime", "posixrules"}


def next_due(*, cron: str, time_zone: str, after: datetime) -> datetime:
    """The first time of `cron` in `time_zone` strictly after `after`, in UTC."""
    zone = ZoneInfo(time_zone)
    return next(CronSim(cron, after.astimezone(zone))).astimezone(UTC)


def _route_checked(*, app: App, route: Any, params: Any) -> Route:
    """The app's mutation route named `route`, with `params` checked against its input schema."""
    unstorable_text_refuse(route, path="$.route", what="The route name")
    unstorable_text_refuse(params, path="$.params", what="The params")
    found = mutation_route_checked(app=app, route=route, what="schedules")
    limits = current_limits()
    version = (found.version, found.updated_at)
    compiled = cached_route(route_id=found.pk, version=version, limits=limits)
    if compiled is None:
        compiled = cache_route(route_id=found.pk, version=version, limits=limits, compiled=compile_route(found, limits))
    try:
        params_check(compiled, params, limits)
    except InvalidInput as refused:  # its paths are within the params: say so
        errors = [{**e, "path": "$.params" + str(e.get("path", "$")).removeprefix("$")} for e in refused.errors or []]
        listing = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:3])
        raise InvalidInput(
            f"The schedule's params are not accepted by route '{found.name}': {listing}", errors=errors
        ) from None
    return found


def _schedule_for(*, actor: Any, schedule_id: Any, app_id: Any = None, for_update: bool = False) -> Schedule:
    """The schedule (of app `app_id`, when given), if `actor` may manage its app's schedules (owner or editor);
    NotFound alike for a missing schedule and one of an app the actor cannot see."""
    missing = f"No schedule with id {clip(schedule_id)} exists or is visible to you."
    return kept_for(
        Schedule,
        actor=actor,
        kept_id=schedule_id,
        app_id=app_id,
        for_update=for_update,
        what="schedules",
        missing=missing,
    )


def schedule_app_for(*, actor: Any, app_id: Any, for_update: bool = False) -> App:
    """The app, if `actor` may manage its schedules (the owner and editors, as for its definition)."""
    return manager_app_for(actor=actor, app_id=app_id, what="schedules", for_update=for_update)


def _duplicate_refuse(*, app: App, route: str, cron: str, time_zone: str, params: Any, but: Any = None) -> None:
    """Refuse a schedule that would run the same route at the same times with the same params as one the app has:
    each run would be done twice."""
    same = Schedule.objects.filter(app=app, route=route, cron=cron, time_zone=time_zone).exclude(pk=but)
    twin = next((other for other in same if other.params == params), None)
    if twin is not None:
        raise OperationFailed(
            f"App '{app.name}' already has this schedule (id {twin.id}): route '{route}' at '{cron}' ({time_zone}) "
            "with the same params. Two would run it twice each time; change that one (update_schedule) instead.",
            details={"schedule_id": str(twin.id)},
        )


@transaction.atomic
def schedule_create(
    *, actor: Any, app_id: Any, route: Any, cron: Any, time_zone: Any = "UTC", params: Any = None
) -> ScheduleView:
    """Attach a schedule to a mutation route of the app (owner or editor); it runs as `actor`."""
    app = schedule_app_for(actor=actor, app_id=app_id, for_update=True)  # the counts are checked one save at a time
    params = {} if params is None else params
    expression = cron_checked(cron)
    zone_checked(time_zone)
    found = _route_checked(app=app, route=route, params=params)
    shares_check(
        app,
        Schedule,
        what="schedules",
        limit="schedules",
        setting="CHARMING_SCHEDULES",
        instead="Delete one, or have one route do more per run.",
    )
    _duplicate_refuse(app=app, route=found.name, cron=expression, time_zone=time_zone, params=params)
    schedule = Schedule.objects.create(
        app=app, route=found.name, cron=expression, time_zone=time_zone, params=params, creator=actor
    )
    _plan(schedule, after=timezone.now())
    audit_record(
        actor=actor,
        action="schedule.create",
        app_id=app.id,
        details={"schedule_id": str(schedule.id), "route": found.name, "cron": expression, "timezone": time_zone},
    )
    return ScheduleView(schedule=schedule, runs=[])


_UNSET: Any = object()


@transaction.atomic
def schedule_update(
    *,
    actor: Any,
    schedule_id: Any,
    route: Any = _UNSET,
    cron: Any = _UNSET,
    time_zone: Any = _UNSET,
    params: Any = _UNSET,
    active: Any = _UNSET,
    app_id: Any = None,
) -> ScheduleView:
    """Change what is given (the rest is kept), or pause (`active=False`) or resume it.

    Whoever changes what it runs (route, params, times, zone) or resumes it is the one it runs as from then on: an
    editor cannot make it run something as someone else, and a schedule paused for its creator's lost access resumes
    as the person resuming it. Any change but a pause plans the next time from now; resuming clears the failure count.
    Pausing checks nothing (a schedule whose route is gone can still be stopped). With `app_id` (a page's URL), a
    schedule of another app is not found."""
    schedule = _schedule_for(actor=actor, schedule_id=schedule_id, app_id=app_id, for_update=True)
    if active is not _UNSET and not isinstance(active, bool):
        raise invalid("$.active", "must be true (run) or false (pause)")
    changed = sorted(
        name
        for name, given in (("route", route), ("cron", cron), ("timezone", time_zone), ("params", params))
        if given is not _UNSET
    )
    if cron is not _UNSET:
        schedule.cron = cron_checked(cron)
    if time_zone is not _UNSET:
        zone_checked(time_zone)
        schedule.time_zone = time_zone
    if params is not _UNSET:
        schedule.params = {} if params is None else params
    resuming = active is True and not schedule.active
    if route is not _UNSET or params is not _UNSET or resuming:
        route_name = route if route is not _UNSET else schedule.route
        schedule.route = _route_checked(app=schedule.app, route=route_name, params=schedule.params).name
    if changed:
        _duplicate_refuse(
            app=schedule.app,
            route=schedule.route,
            cron=schedule.cron,
            time_zone=schedule.time_zone,
            params=schedule.params,
            but=schedule.pk,
        )
    if changed or resuming:
        schedule.creator = actor
    if resuming:
        schedule.active, schedule.failures, schedule.paused_reason = True, 0, ""
    elif active is False:
        schedule.active, schedule.paused_reason = False, f"Paused by {actor.get_username()}."
    schedule.save()
    if schedule.active and (changed or resuming):
        _plan(schedule, after=timezone.now())
    elif not schedule.active:
        _unplan(schedule)
    audit_record(
        actor=actor,
        action="schedule.update",
        app_id=schedule.app_id,
        details={"schedule_id": str(schedule.id), "changed": changed + (["active"] if active is not _UNSET else [])},
    )
    return ScheduleView(schedule=schedule, runs=_last_runs(schedule))


@dataclass(frozen=True)
class DeletedSchedule:
    id: uuid.UUID
    app_id: uuid.UUID
    route: str
    cron: str


@transaction.atomic
def schedule_delete(*, actor: Any, schedule_id: Any, app_id: Any = None) -> DeletedSchedule:
    """Delete the schedule and its runs (owner or editor). A task still queued for it finds it gone."""
    schedule = _schedule_for(actor=actor, schedule_id=schedule_id, app_id=app_id, for_update=True)
    audit_record(
        actor=actor,
        action="schedule.delete",
        app_id=schedule.app_id,
        details={"schedule_id": str(schedule.id), "route": schedule.route, "cron": schedule.cron},
    )
    gone = DeletedSchedule(id=schedule.id, app_id=schedule.app_id, route=schedule.route, cron=schedule.cron)
    schedule.delete()
    return gone


def schedules_for(*, actor: Any, app_id: Any) -> tuple[App, list[ScheduleView]]:
    """The app's schedules with their last runs (anyone who sees the app)."""
    app, _role = app_for(actor=actor, app_id=app_id, need="read")
    schedules = list(Schedule.objects.filter(app=app).select_related("creator").order_by("created_at"))
    return app, [ScheduleView(schedule=s, runs=_last_runs(s)) for s in schedules]


def _last_runs(schedule: Schedule) -> list[ScheduleRun]:
    return list(ScheduleRun.objects.filter(schedule=schedule).order_by("-due_at")[:RUNS_SHOWN])


def _plan(schedule: Schedule, *, after: datetime) -> None:
    """Set the schedule's next due time after `after` and queue its task (in the caller's transaction); a task still
    waiting for the time it had is dropped (it would find that time no longer due)."""
    _drop_waiting_task(schedule.task_id)
    schedule.next_run_at = next_due(cron=schedule.cron, time_zone=schedule.time_zone, after=after)
    schedule.task_id = _enqueue(schedule.id, schedule.next_run_at)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=schedule.next_run_at, task_id=schedule.task_id)


def _unplan(schedule: Schedule) -> None:
    """No next time while paused."""
    _drop_waiting_task(schedule.task_id)
    schedule.next_run_at, schedule.task_id = None, ""
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=None, task_id="")


def _drop_waiting_task(task_id: str) -> None:
    if task_id:
        DBTaskResult.objects.filter(pk=task_id, status=TaskResultStatus.READY).delete()


def _enqueue(schedule_id: uuid.UUID, due_at: datetime) -> str:
    from apps_registry.tasks import schedule_run_task  # the task module imports the services

    queued = schedule_run_task.using(run_after=due_at).enqueue(schedule_id=str(schedule_id), due_at=due_at.isoformat())
    return str(queued.id)


def schedule_run_due(*, schedule_id: str, due_at: str, now: datetime | None = None) -> str:
    """Run one due time of a schedule (its task's body); returns what happened, for the task's result."""
    schedules_recover(now=now)
    now = now or timezone.now()
    due = datetime.fromisoformat(due_at)
    peek = Schedule.objects.filter(pk=schedule_id).select_related("creator").first()
    if peek is None:
        return "gone"
    if not peek.active or peek.next_run_at != due:
        return "not due"  # run already (a task queued twice), paused, or planned anew by a change
    # The app's budget, before the run's transaction, so its row is not held while the route runs (as route_run does).
    try:
        app_budget_take(actor=peek.creator, app_id=peek.app_id)
        over_budget = None
    except RateLimited as refused:
        over_budget = refused
    with transaction.atomic():
        rows = Schedule.objects.select_for_update(of=("self",)).select_related("app", "creator")
        schedule = rows.filter(pk=schedule_id).first()
        if schedule is None:
            return "gone"
        if not schedule.active or schedule.next_run_at != due:
            return "not due"
        if ScheduleRun.objects.filter(schedule=schedule, due_at=due).exists():  # planned again for a time it ran
            _plan(schedule, after=max(now, due))
            return "not due"
        run = ScheduleRun(schedule=schedule, due_at=due, ran_at=now)
        if now - due > timedelta(minutes=settings.CHARMING_SCHEDULE_CATCHUP_MINUTES):
            run.outcome = ScheduleRunOutcome.MISSED
            run.error = (
                f"Not run: no task worker ran from {due:%Y-%m-%d %H:%M} UTC until {now:%Y-%m-%d %H:%M} UTC, longer "
                f"than the catch-up window of {settings.CHARMING_SCHEDULE_CATCHUP_MINUTES} minutes."
            )
            run.save()
            _plan(schedule, after=now)
            return "missed"
        outcome = _run_route(schedule, run, over_budget=over_budget)
        run.error = redact(run.error)
        run.save()
        if outcome == "ok":
            Schedule.objects.filter(pk=schedule.pk).update(failures=0)
            _plan(schedule, after=now)
            return "ok"
        if outcome == "temporary":  # the app's budget spent, or its records migrating: not the schedule's fault
            _plan(schedule, after=now)
            return "failed"
        schedule.failures += 1
        if outcome == "lost access":
            reason = (
                f"Paused: {schedule.creator.get_username()}, who set it up and as whom it runs, can no longer change "
                "this app. An owner or editor can resume it, to run as them."
            )
        elif schedule.failures >= settings.CHARMING_SCHEDULE_PAUSE_AFTER:
            reason = f"Paused after {schedule.failures} failed runs in a row; the last: {clip(run.error, 200)}"
        else:
            Schedule.objects.filter(pk=schedule.pk).update(failures=schedule.failures)
            _plan(schedule, after=now)
            return "failed"
        Schedule.objects.filter(pk=schedule.pk).update(
            failures=schedule.failures, active=False, paused_reason=reason[:300]
        )
        _unplan(schedule)
        audit_record(
            actor=None,
            action="schedule.pause",
            app_id=schedule.app_id,
            details={"schedule_id": str(schedule.id), "route": schedule.route, "failures": schedule.failures},
        )
        transaction.on_commit(lambda: _tell_owner(schedule, reason))
        return "paused"


def _run_route(schedule: Schedule, run: ScheduleRun, *, over_budget: RateLimited | None) -> str:
    """Run the schedule's route as its creator, in the caller's transaction (a savepoint of it: a failure writes
    nothing); fills in `run`. Returns ok, failed, temporary (a refusal that passes) or lost access."""
    from apps_registry.services.routes import route_run  # routes imports a good deal; keep this module light

    run.outcome = ScheduleRunOutcome.FAILED
    if not still_authors(user=schedule.creator, app_id=schedule.app_id):
        run.error = f"{schedule.creator.get_username()} can no longer change this app; nothing was run."
        return "lost access"
    if over_budget is not None:
        run.error = over_budget.message
        return "temporary"
    try:
        with transaction.atomic():
            result = route_run(
                actor=schedule.creator,
                app_id=schedule.app_id,
                op=schedule.route,
                params=schedule.params,
                kind="mutation",
                via=ChangeVia.SCHEDULE,
                budget_taken=True,
            )
    except AppMigrating as refused:
        run.error = refused.message
        app_id = refused.app_id
        transaction.on_commit(lambda: migration_resume_if_stale(app_id=app_id))  # its own work, after the run's
        return "temporary"
    except RateLimited as refused:  # the creator's share of the CEL workers, busy with their own calls
        run.error = refused.message
        return "temporary"
    except CharmingError as failed:
        run.error = failed.message
        return "failed"
    except Exception:  # a fault of ours: recorded as a failure, never a worker stuck on the same time
        logger.exception("schedule %s: run at %s failed unexpectedly", schedule.id, run.due_at)
        run.error = "The run failed on the server; it was logged."
        return "failed"
    run.outcome, run.change_id = ScheduleRunOutcome.OK, result.change_id
    return "ok"


def _tell_owner(schedule: Schedule, reason: str) -> None:
    owner = schedule.app.owner
    if not owner.email:
        return
    page = settings.CHARMING_PUBLIC_URL + reverse("app_schedules", args=[schedule.app_id])
    body = (
        f"Your app '{schedule.app.name}' stopped running its schedule of route '{schedule.route}' "
        f"('{schedule.cron}', {schedule.time_zone}).\n\n{reason}\n\n"
        f"Its runs are on the app's Schedules page: {page}\n"
        "Resume it there, or ask your agent (update_schedule, active=true)."
    )
    try:
        send_mail(f"Charming: a schedule of '{schedule.app.name}' was paused", body, None, [owner.email])
    except Exception:  # the pause stands whether or not the mail could be sent
        logger.exception("schedule %s: could not send the pause notice", schedule.id)


def schedules_recover(*, now: datetime | None = None) -> int:
    """Queue again the task of every running schedule whose due time passed RECOVER_AFTER ago with no task waiting
    or running for it (its worker was killed, or the enqueue was lost); returns how many."""
    now = now or timezone.now()
    rows = Schedule.objects.filter(active=True, next_run_at__lt=now - RECOVER_AFTER)
    overdue = list(rows.values_list("pk", "next_run_at", "task_id")[:500])
    if not overdue:
        return 0
    waiting = DBTaskResult.objects.filter(pk__in=[task_id for _pk, _due, task_id in overdue if task_id]).filter(
        Q(status=TaskResultStatus.READY) | Q(status=TaskResultStatus.RUNNING, started_at__gte=now - RUNNING_LOST_AFTER)
    )
    alive = {str(pk) for pk in waiting.values_list("pk", flat=True)}
    queued = 0
    for pk, due, task_id in overdue:
        if due is None or task_id in alive:
            continue
        with transaction.atomic():
            task = _enqueue(pk, due)
            # Only if no one planned the schedule anew or recovered it meanwhile; else the task finds it not due.
            queued += Schedule.objects.filter(pk=pk, next_run_at=due, task_id=task_id).update(task_id=task)
    if queued:
        logger.warning("schedules: queued again the lost tasks of %d due schedule times", queued)
    return queued
