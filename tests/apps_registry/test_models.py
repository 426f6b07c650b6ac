from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from apps_registry.models import AuditEvent, Membership, Record, Role, Route, Storage
from tests.factories import UserFactory, make_app

pytestmark = pytest.mark.django_db


def test_route_name_is_unique_per_app():
    app = make_app()
    Route.objects.create(app=app, name="add", kind="mutation")
    with pytest.raises(IntegrityError), transaction.atomic():
        Route.objects.create(app=app, name="add", kind="query")
    Route.objects.create(app=make_app(), name="add", kind="mutation")  # another app may reuse the name


def test_route_kind_is_checked_by_the_database():
    with pytest.raises(IntegrityError), transaction.atomic():
        Route.objects.create(app=make_app(), name="x", kind="script")


def test_record_id_is_unique_within_storage_and_collection():
    storage = make_app().storage
    Record.objects.create(storage=storage, collection="expenses", record_id="a", data={})
    with pytest.raises(IntegrityError), transaction.atomic():
        Record.objects.create(storage=storage, collection="expenses", record_id="a", data={})
    Record.objects.create(storage=storage, collection="budgets", record_id="a", data={})
    Record.objects.create(storage=make_app().storage, collection="expenses", record_id="a", data={})


def test_an_app_has_exactly_one_owner_membership():
    app = make_app()
    assert Membership.objects.filter(app=app, role=Role.OWNER).count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.create(app=app, user=UserFactory(), role=Role.OWNER)
    Membership.objects.create(app=app, user=UserFactory(), role=Role.EDITOR)


def test_a_user_has_one_membership_per_app():
    app = make_app()
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.create(app=app, user=app.owner, role=Role.VIEWER)


def test_storage_is_either_attached_or_detached():
    app = make_app()
    storage = app.storage
    with pytest.raises(IntegrityError), transaction.atomic():
        Storage.objects.filter(pk=storage.pk).update(app=None)  # detached without a time
    assert storage.app_uuid == app.id and storage.app_name == app.name


def test_audit_events_are_append_only():
    event = AuditEvent.objects.create(actor_repr="system", action="test", details={})
    event.action = "changed"
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    with pytest.raises(ValueError, match="append-only"):
        event.delete()
    assert AuditEvent.objects.get(pk=event.pk).action == "test"
