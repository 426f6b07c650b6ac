from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django_tasks_db.models import DBTaskResult

from apps_registry.models import App, AuditEvent, PurgeJob, Storage
from apps_registry.services import purge_jobs, retention
from apps_registry.services.purge_jobs import purge_jobs_enqueue
from tests.factories import UserFactory
from tests.retention_helpers import app_with_records, retained, run_purge_worker

# The worker commits its own transactions (and closes connections between tasks), as in production.
pytestmark = pytest.mark.django_db(transaction=True)


def purger(*codenames: str):
    user = UserFactory(username="clerk", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return type(user).objects.get(pk=user.pk)


def test_the_queued_task_carries_only_ids(staff, user):
    app = app_with_records(user, "Spam", 2)
    [job] = purge_jobs_enqueue(actor=staff, kind="app", targets=[(app.id, "Spam")])
    task = DBTaskResult.objects.get()
    assert str(task.id) == job.task_id
    assert task.args_kwargs == {
        "args": [],
        "kwargs": {"job_id": str(job.id), "target_id": str(app.id), "actor_id": staff.pk},
    }


def test_enqueueing_needs_the_permission_and_queues_nothing_without_it(user):
    app = app_with_records(user, "Spam", 2)
    clerk = purger("purge_storage")
    with pytest.raises(retention.Forbidden, match="You need the permission apps_registry.purge_app to purge apps"):
        purge_jobs_enqueue(actor=clerk, kind="app", targets=[(app.id, "Spam")])
    assert not PurgeJob.objects.exists() and not DBTaskResult.objects.exists()


def test_the_worker_rechecks_the_permission_when_it_runs(user):
    storage = retained(user, name="Old", count=2)
    clerk = purger("purge_storage")
    [job] = purge_jobs_enqueue(actor=clerk, kind="storage", targets=[(storage.id, "Old")])
    clerk.user_permissions.clear()  # revoked while the job waited in the queue
    run_purge_worker()
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.message == (
        "You need the permission apps_registry.purge_storage to purge retained storage; ask a superuser to grant it."
    )
    assert Storage.objects.filter(pk=storage.pk).exists() and not AuditEvent.objects.filter(action="storage.purge")


def test_progress_is_recorded_after_each_batch(staff, user, monkeypatch):
    app = app_with_records(user, "Big", 5)
    seen: list[tuple[str, int, int | None]] = []
    real_purge = retention.app_purge

    def in_batches_of_two(**kwargs):
        on_batch = kwargs.pop("on_batch")

        def watching(deleted: int, at_start: int) -> None:
            on_batch(deleted, at_start)
            job = PurgeJob.objects.get()
            seen.append((job.status, job.records_purged, job.records_total))

        return real_purge(**kwargs, on_batch=watching, batch_size=2)

    monkeypatch.setattr(purge_jobs, "app_purge", in_batches_of_two)
    [job] = purge_jobs_enqueue(actor=staff, kind="app", targets=[(app.id, "Big")])
    run_purge_worker()
    assert seen == [("running", 2, 5), ("running", 4, 5), ("running", 5, 5)]
    job.refresh_from_db()
    assert (job.status, job.records_purged, job.records_total) == ("done", 5, 5)
    assert not App.objects.filter(pk=app.pk).exists()


def test_an_unexpected_failure_is_recorded_on_the_job_and_the_task_result(staff, user, monkeypatch):
    app = app_with_records(user, "Spam", 2)

    def broken(**kwargs):
        raise RuntimeError("disk on fire at /var/lib/postgresql")

    monkeypatch.setattr(purge_jobs, "app_purge", broken)
    [job] = purge_jobs_enqueue(actor=staff, kind="app", targets=[(app.id, "Spam")])
    run_purge_worker()
    job.refresh_from_db()
    assert job.status == "failed"
    # Staff see a plain message; the traceback stays in the log and on the (staff-only) task result.
    assert job.message == "The purge stopped on an internal error; the server log has the details."
    task = DBTaskResult.objects.get()
    assert task.status == "FAILED" and "RuntimeError" in task.traceback
    assert App.objects.filter(pk=app.pk).exists()


def test_a_job_already_run_is_not_run_again(staff, user):
    app = app_with_records(user, "Spam", 1)
    [job] = purge_jobs_enqueue(actor=staff, kind="app", targets=[(app.id, "Spam")])
    run_purge_worker()
    again = purge_jobs.purge_job_run(job_id=job.id, target_id=app.id, actor_id=staff.pk)
    assert (again.status, again.message) == ("done", "Purged app 'Spam': 1 records.")
    assert AuditEvent.objects.filter(action="app.purge").count() == 1


def test_a_job_whose_staff_account_was_deleted_fails_and_purges_nothing(user):
    storage = retained(user, name="Old", count=2)
    clerk = purger("purge_storage")
    [job] = purge_jobs_enqueue(actor=clerk, kind="storage", targets=[(storage.id, "Old")])
    clerk_id = clerk.pk
    clerk.delete()
    run_purge_worker()
    job.refresh_from_db()
    assert job.status == "failed" and job.requested_by is None and job.requested_by_repr == "clerk"
    assert job.message == f"The staff account (id {clerk_id}) that queued this purge no longer exists."
    assert Storage.objects.filter(pk=storage.pk).exists()
