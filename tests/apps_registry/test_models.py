from __future__ import annotations

import re

import pytest
from django.db import IntegrityError, transaction

from apps_registry.models import AuditEvent, Membership, Record, Role, Route, Storage
from tests.factories import UserFactory, make_app

pytestmark = pytest.mark.django_db


def violates(constraint: str, sqlite_columns: str | None = None) -> str:
    """A `match=` for the IntegrityError of this constraint: PostgreSQL names it; SQLite names a check
    constraint but reports a unique one by its columns."""
    postgres = f'"{constraint}"'
    sqlite = f"CHECK constraint failed: {constraint}$|UNIQUE constraint failed: {re.escape(sqlite_columns or '')}$"
    return f"{postgres}|{sqlite}"


def test_route_name_is_unique_per_app():
    app = make_app()
    Route.objects.create(app=app, name="add", kind="mutation")
    unique = violates("route_name_unique_per_app", "apps_registry_route.app_id, apps_registry_route.name")
    with pytest.raises(IntegrityError, match=unique), transaction.atomic():
        Route.objects.create(app=app, name="add", kind="query")
    Route.objects.create(app=make_app(), name="add", kind="mutation")  # another app may reuse the name


def test_route_kind_is_checked_by_the_database():
    with pytest.raises(IntegrityError, match=violates("route_kind_valid")), transaction.atomic():
        Route.objects.create(app=make_app(), name="x", kind="script")


def test_record_id_is_unique_within_storage_and_collection():
    storage = make_app().storage
    Record.objects.create(storage=storage, collection="expenses", record_id="a", data={})
    columns = "apps_registry_record.storage_id, apps_registry_record.collection, apps_registry_record.record_id"
    with (
        pytest.raises(IntegrityError, match=violates("record_id_unique_per_collection", columns)),
        transaction.atomic(),
    ):
        Record.objects.create(storage=storage, collection="expenses", record_id="a", data={})
    Record.objects.create(storage=storage, collection="budgets", record_id="a", data={})
    Record.objects.create(storage=make_app().storage, collection="expenses", record_id="a", data={})


def test_an_app_has_exactly_one_owner_membership():
    app = make_app()
    assert Membership.objects.filter(app=app, role=Role.OWNER).count() == 1
    one_owner = violates("membership_one_owner_per_app", "apps_registry_membership.app_id")
    with pytest.raises(IntegrityError, match=one_owner), transaction.atomic():
        Membership.objects.create(app=app, user=UserFactory(), role=Role.OWNER)
    Membership.objects.create(app=app, user=UserFactory(), role=Role.EDITOR)


def test_a_user_has_one_membership_per_app():
    app = make_app()
    one_each = violates(
        "membership_one_per_user_and_app", "apps_registry_membership.user_id, apps_registry_membership.app_id"
    )
    with pytest.raises(IntegrityError, match=one_each), transaction.atomic():
        Membership.objects.create(app=app, user=app.owner, role=Role.VIEWER)


def test_storage_is_either_attached_or_detached():
    app = make_app()
    storage = app.storage
    with pytest.raises(IntegrityError, match=violates("storage_attached_xor_detached")), transaction.atomic():
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
