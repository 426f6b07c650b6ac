"""Staff purges run off the request: the admin queues a `PurgeJob`, a `db_worker` process runs it.

The queued task carries only ids (the job's, the target's, the acting staff user's); the run loads
the user again and calls the retention service, which checks the permission at run time.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from apps_registry.exceptions import CharmingError, InvalidInput
from apps_registry.models import PurgeJob
from apps_registry.services.retention import app_purge, retained_storage_purge, staff_permission_require

logger = logging.getLogger(__name__)

_PERMISSIONS = {
    PurgeJob.Kind.APP: ("purge_app", "purge apps"),
    PurgeJob.Kind.STORAGE: ("purge_storage", "purge retained storage"),
}


def purge_jobs_enqueue(*, actor: Any, kind: str, targets: Iterable[tuple[uuid.UUID, str]]) -> list[PurgeJob]:
    """Queue one purge job per (id, label) target for the worker; returns the queued jobs at once."""
    from apps_registry.tasks import purge_job_task

    if kind not in _PERMISSIONS:
        raise InvalidInput(f"Unknown purge kind {kind!r}; expected one of {', '.join(_PERMISSIONS)}.")
    staff_permission_require(actor, *_PERMISSIONS[PurgeJob.Kind(kind)])
    jobs = []
    # The job rows and their task rows commit together: a worker never sees a task without its job.
    with transaction.atomic():
        for target_id, label in targets:
            job = PurgeJob.objects.create(
                kind=kind,
                target_id=target_id,
                target_label=label[:300],
                requested_by=actor,
                requested_by_repr=actor.get_username() if actor is not None else "system",
            )
            result = purge_job_task.enqueue(
                job_id=str(job.id),
                target_id=str(target_id),
                actor_id=actor.pk if actor is not None else None,
            )
            job.task_id = str(result.id)
            job.save(update_fields=["task_id"])
            jobs.append(job)
    return jobs


def purge_job_run(*, job_id: uuid.UUID | str, target_id: uuid.UUID | str, actor_id: int | None) -> PurgeJob:
    """Run one queued purge job: permission re-checked by the retention service, progress after each batch.

    A refusal or failure is recorded on the job (status `failed`, its message); an unexpected error
    is recorded with a generic message and raised again, so the task result keeps the traceback.
    """
    job = PurgeJob.objects.get(pk=job_id)
    if job.status != PurgeJob.Status.QUEUED:
        return job  # already run (a worker re-delivered it): purging again would only fail
    job.status, job.started_at = PurgeJob.Status.RUNNING, timezone.now()
    job.save(update_fields=["status", "started_at"])

    def on_batch(deleted: int, at_start: int) -> None:
        PurgeJob.objects.filter(pk=job.pk).update(records_purged=deleted, records_total=at_start)

    try:
        actor = _actor(actor_id)
        if job.kind == PurgeJob.Kind.APP:
            app_result = app_purge(actor=actor, app_id=target_id, confirmed_via="admin", on_batch=on_batch)
            purged, message = (
                app_result.records_purged,
                f"Purged app '{app_result.app_name}': {app_result.records_purged} records.",
            )
        else:
            storage_result = retained_storage_purge(
                actor=actor, storage_id=target_id, confirmed_via="admin", on_batch=on_batch
            )
            purged, message = (
                storage_result.records_purged,
                f"Purged retained storage of '{storage_result.app_name}': {storage_result.records_purged} records.",
            )
    except CharmingError as error:
        _finish(job, PurgeJob.Status.FAILED, error.message)
        return job
    except BaseException:
        logger.exception("Purge job %s failed unexpectedly", job.pk)
        _finish(job, PurgeJob.Status.FAILED, "The purge stopped on an internal error; the server log has the details.")
        raise
    _finish(job, PurgeJob.Status.DONE, message, records_purged=purged)
    return job


def _actor(actor_id: int | None) -> Any:
    if actor_id is None:
        return None
    actor = get_user_model().objects.filter(pk=actor_id).first()
    if actor is None:
        raise InvalidInput(f"The staff account (id {actor_id}) that queued this purge no longer exists.")
    return actor


def _finish(job: PurgeJob, status: str, message: str, *, records_purged: int | None = None) -> None:
    job.refresh_from_db(fields=["records_purged", "records_total"])  # as far as on_batch got
    if records_purged is not None:
        job.records_purged = records_purged
        job.records_total = records_purged if job.records_total is None else job.records_total
    job.status, job.message, job.finished_at = status, message, timezone.now()
    job.save(update_fields=["status", "message", "finished_at", "records_purged", "records_total"])
