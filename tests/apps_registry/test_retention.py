from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import Permission

from apps_registry.exceptions import Forbidden, InvalidInput, NotFound, OperationFailed
from apps_registry.models import App, AuditEvent, Record, Storage
from apps_registry.selectors import retained_storage, storage_with_usage
from apps_registry.services.retention import (
    app_purge,
    retained_storage_purge,
    retention_cutoff,
    storage_restore,
)
from tests.factories import UserFactory, make_app
from tests.retention_helpers import app_with_records, records_by_app, retained

pytestmark = pytest.mark.django_db


class Interrupted(Exception):
    pass


# ---- purge --------------------------------------------------------------------------------------


def test_purge_deletes_records_and_storage_and_audits_once(user):
    storage = retained(user, count=7, days_ago=40)
    result = retained_storage_purge(actor=None, storage_id=storage.id, batch_size=3)
    assert result.records_purged == 7 and result.app_name == "Old budget" and result.owner == "alice"
    assert not Storage.objects.filter(pk=storage.pk).exists()
    assert Record.objects.filter(storage_id=storage.pk).count() == 0
    event = AuditEvent.objects.get(action="storage.purge")
    assert event.app_id == storage.app_uuid and event.actor_repr == "system"
    assert event.details["records_purged"] == 7 and event.details["storage_id"] == str(storage.id)
    assert event.details["app_name"] == "Old budget" and event.details["owner"] == "alice"


def test_purge_leaves_every_other_apps_records_untouched(user, other_user):
    app_with_records(user, "Live one", 4)
    app_with_records(other_user, "Bob's live", 6, prefix="b")
    keep = retained(other_user, name="Bob's retained", count=3, days_ago=1)
    doomed = retained(user, name="Doomed", count=9, days_ago=60)
    before = records_by_app(exclude_storage=doomed)
    assert before == {"Live one": 4, "Bob's live": 6, "Bob's retained": 3}
    retained_storage_purge(actor=None, storage_id=doomed.id, batch_size=2)
    assert records_by_app() == before
    assert Storage.objects.filter(pk=keep.pk).exists()


def test_purge_runs_in_batches_of_the_given_size(user):
    storage = retained(user, count=10, days_ago=40)
    seen: list[tuple[int, int]] = []
    retained_storage_purge(actor=None, storage_id=storage.id, batch_size=4, on_batch=lambda d, t: seen.append((d, t)))
    assert seen == [(4, 10), (8, 10), (10, 10)]


def test_interrupted_purge_keeps_the_storage_and_a_rerun_resumes(user):
    storage = retained(user, count=10, days_ago=40)

    def stop_after_two_batches(done: int, total: int) -> None:
        if done >= 6:
            raise Interrupted

    with pytest.raises(Interrupted):
        retained_storage_purge(actor=None, storage_id=storage.id, batch_size=3, on_batch=stop_after_two_batches)
    assert Storage.objects.filter(pk=storage.pk).exists()
    assert Record.objects.filter(storage=storage).count() == 4
    assert not AuditEvent.objects.filter(action="storage.purge").exists()

    result = retained_storage_purge(actor=None, storage_id=storage.id, batch_size=3)
    assert result.records_purged == 4
    assert not Storage.objects.filter(pk=storage.pk).exists()
    assert AuditEvent.objects.filter(action="storage.purge").count() == 1


def test_purge_refuses_attached_storage(user):
    app = app_with_records(user, "Live", 2)
    with pytest.raises(OperationFailed) as excinfo:
        retained_storage_purge(actor=None, storage_id=app.storage.id)
    assert excinfo.value.kind == "operation_failed"
    assert "belongs to the live app 'Live'" in excinfo.value.message and "purge_app" in excinfo.value.message
    assert Record.objects.filter(storage=app.storage).count() == 2


def test_purge_of_unknown_or_malformed_storage_is_not_found():
    missing = uuid.uuid4()
    with pytest.raises(NotFound, match=f"No storage with id {missing} exists"):
        retained_storage_purge(actor=None, storage_id=missing)
    with pytest.raises(NotFound, match="'nope' is not a UUID"):
        retained_storage_purge(actor=None, storage_id="nope")


@pytest.mark.parametrize("batch_size", [0, -5])
def test_purge_refuses_a_non_positive_batch_size(user, batch_size):
    storage = retained(user, days_ago=40)
    with pytest.raises(InvalidInput, match=f"got {batch_size}"):
        retained_storage_purge(actor=None, storage_id=storage.id, batch_size=batch_size)


def test_staff_without_the_permission_may_not_purge_and_with_it_may(user):
    storage = retained(user, days_ago=40)
    clerk = UserFactory(username="clerk", is_staff=True)
    with pytest.raises(Forbidden, match="apps_registry.purge_storage"):
        retained_storage_purge(actor=clerk, storage_id=storage.id)
    clerk.user_permissions.add(Permission.objects.get(codename="purge_storage"))
    clerk = type(clerk).objects.get(pk=clerk.pk)  # drop the permission cache
    retained_storage_purge(actor=clerk, storage_id=storage.id)
    assert AuditEvent.objects.get(action="storage.purge").actor_repr == "clerk"


def test_retained_storage_selector_filters_by_age_and_app(user):
    old = retained(user, name="Old", days_ago=31)
    young = retained(user, name="Young", days_ago=29)
    assert list(retained_storage(detached_before=retention_cutoff())) == [old]
    assert list(retained_storage(app_uuid=young.app_uuid)) == [young]
    usage = storage_with_usage(retained_storage()).get(pk=old.pk)
    assert usage.record_count == 5 and usage.data_size == 5 * len('{"n": 0}')


# ---- restore ------------------------------------------------------------------------------------


def test_restore_into_an_empty_app_attaches_the_retained_storage(user):
    storage = retained(user, name="Old budget", count=3, days_ago=10)
    target = make_app(owner=user, name="Budget again")
    empty_storage_id = target.storage.id
    result = storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)
    assert result.mode == "attached" and result.records_restored == 3 and result.storage_id == storage.id
    storage.refresh_from_db()
    assert storage.app == target and storage.detached_at is None and storage.app_name == "Budget again"
    assert not Storage.objects.filter(pk=empty_storage_id).exists()
    event = AuditEvent.objects.get(action="storage.restore")
    assert event.app_id == target.id and event.details["from_app_name"] == "Old budget"
    assert event.details["mode"] == "attached" and event.details["records_restored"] == 3


def test_restore_into_an_app_with_data_merges_the_records(user):
    storage = retained(user, count=3, days_ago=10, prefix="old")
    target = app_with_records(user, "Budget again", 2, prefix="new")
    result = storage_restore(actor=None, storage_id=storage.id, to_app_id=str(target.id))
    assert result.mode == "merged" and result.records_restored == 3 and result.storage_id == target.storage.id
    assert sorted(Record.objects.filter(storage=target.storage).values_list("record_id", flat=True)) == [
        "new0",
        "new1",
        "old0",
        "old1",
        "old2",
    ]
    assert not Storage.objects.filter(pk=storage.pk).exists()


def test_restore_refuses_a_merge_with_clashing_record_ids_and_changes_nothing(user):
    storage = retained(user, count=3, days_ago=10)
    target = app_with_records(user, "Budget again", 2)
    with pytest.raises(OperationFailed) as excinfo:
        storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)
    assert "2 record id(s) exist in both, e.g. expenses/r0, expenses/r1" in excinfo.value.message
    assert excinfo.value.details == {"collisions": 2, "examples": ["expenses/r0", "expenses/r1"]}
    assert Record.objects.filter(storage=storage).count() == 3
    assert Record.objects.filter(storage=target.storage).count() == 2
    assert not AuditEvent.objects.filter(action="storage.restore").exists()


def test_restore_outside_the_retention_window_is_refused(user, settings):
    settings.CHARMING_STORAGE_RETENTION_DAYS = 30
    storage = retained(user, name="Ancient", days_ago=31)
    target = make_app(owner=user, name="Target")
    with pytest.raises(OperationFailed) as excinfo:
        storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)
    message = excinfo.value.message
    assert "'Ancient'" in message and "31 days ago, outside the 30-day retention window" in message
    assert "CHARMING_STORAGE_RETENTION_DAYS" in message
    storage.refresh_from_db()
    assert storage.detached_at is not None and Record.objects.filter(storage=storage).count() == 5


def test_restore_just_inside_the_window_works(user, settings):
    settings.CHARMING_STORAGE_RETENTION_DAYS = 30
    storage = retained(user, days_ago=29.9)
    target = make_app(owner=user, name="Target")
    assert storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id).records_restored == 5


def test_restore_to_another_owners_app_is_refused(user, other_user):
    storage = retained(user, days_ago=1)
    theirs = make_app(owner=other_user, name="Bob's")
    with pytest.raises(OperationFailed, match="owned by bob, but storage .* belonged to an app of alice"):
        storage_restore(actor=None, storage_id=storage.id, to_app_id=theirs.id)


def test_restore_of_attached_storage_or_to_a_missing_app_is_refused(user):
    live = make_app(owner=user, name="Live")
    with pytest.raises(OperationFailed, match="attached to the live app 'Live'"):
        storage_restore(actor=None, storage_id=live.storage.id, to_app_id=live.id)
    storage = retained(user, days_ago=1)
    missing = uuid.uuid4()
    with pytest.raises(NotFound, match=f"No app with id {missing} exists"):
        storage_restore(actor=None, storage_id=storage.id, to_app_id=missing)


def test_restore_needs_the_restore_permission(user):
    storage = retained(user, days_ago=1)
    target = make_app(owner=user, name="Target")
    clerk = UserFactory(username="clerk", is_staff=True)
    with pytest.raises(Forbidden, match="apps_registry.restore_storage"):
        storage_restore(actor=clerk, storage_id=storage.id, to_app_id=target.id)


# ---- purge_app ----------------------------------------------------------------------------------


def test_app_purge_removes_the_app_and_its_data_and_audits_both_steps(user, other_user, staff):
    app = app_with_records(user, "Spam", 5)
    app_with_records(other_user, "Innocent", 3)
    before = records_by_app(exclude_storage=app.storage)
    result = app_purge(actor=staff, app_id=app.id, confirmed_via="admin", batch_size=2)
    assert result.records_purged == 5 and result.app_name == "Spam" and result.owner == "alice"
    assert not App.objects.filter(pk=app.pk).exists()
    assert not Storage.objects.filter(app_uuid=app.id).exists()
    assert records_by_app() == before == {"Innocent": 3}
    actions = {e.action: e for e in AuditEvent.objects.all()}
    assert set(actions) == {"app.purge", "storage.purge"}
    assert actions["app.purge"].details["confirmed_via"] == "admin" and actions["app.purge"].actor_repr == "staffer"
    assert actions["storage.purge"].details["confirmed_via"] == "app.purge"


def test_interrupted_app_purge_leaves_retained_storage_that_purge_finishes(user):
    app = app_with_records(user, "Spam", 6)

    def stop(done: int, total: int) -> None:
        raise Interrupted

    with pytest.raises(Interrupted):
        app_purge(actor=None, app_id=app.id, confirmed_via="command", batch_size=2, on_batch=stop)
    assert not App.objects.filter(pk=app.pk).exists()
    (storage,) = retained_storage(app_uuid=app.id)
    assert Record.objects.filter(storage=storage).count() == 4
    retained_storage_purge(actor=None, storage_id=storage.id)
    assert not Storage.objects.filter(app_uuid=app.id).exists()


def test_app_purge_of_a_missing_app_or_without_permission_is_refused(user):
    missing = uuid.uuid4()
    with pytest.raises(NotFound, match=f"No app with id {missing} exists"):
        app_purge(actor=None, app_id=missing, confirmed_via="command")
    app = make_app(owner=user)
    with pytest.raises(Forbidden, match="apps_registry.purge_app"):
        app_purge(actor=UserFactory(username="clerk", is_staff=True), app_id=app.id, confirmed_via="admin")
    assert App.objects.filter(pk=app.pk).exists()


def test_a_restore_during_a_purge_stops_the_purge_before_the_next_batch(user):
    storage = retained(user, name="Rescued", count=9, days_ago=10)
    target = make_app(owner=user, name="Rescue target")
    restored: list[int] = []

    def staff_restores_after_first_batch(done: int, total: int) -> None:
        if not restored:
            restored.append(storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id).records_restored)

    with pytest.raises(OperationFailed) as excinfo:
        retained_storage_purge(
            actor=None, storage_id=storage.id, batch_size=3, on_batch=staff_restores_after_first_batch
        )
    assert "was restored to app 'Rescue target' while it was being purged; 3 record(s)" in excinfo.value.message
    assert restored == [6]
    assert Record.objects.filter(storage__app=target).count() == 6
    assert not AuditEvent.objects.filter(action="storage.purge").exists()


def test_a_merge_restore_during_a_purge_leaves_the_merged_records_alone(user):
    storage = retained(user, name="Merged", count=6, days_ago=10, prefix="old")
    target = app_with_records(user, "Has data", 2, prefix="new")
    done_once: list[bool] = []

    def merge_after_first_batch(done: int, total: int) -> None:
        if not done_once:
            done_once.append(True)
            storage_restore(actor=None, storage_id=storage.id, to_app_id=target.id)

    with pytest.raises(NotFound, match="no longer exists: another purge finished it, or a restore merged"):
        retained_storage_purge(actor=None, storage_id=storage.id, batch_size=2, on_batch=merge_after_first_batch)
    assert Record.objects.filter(storage=target.storage).count() == 2 + 4
