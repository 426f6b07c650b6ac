"""tests/flush.py: the suite's cheaper flush leaves the database as Django's own flush does."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from tests.factories import UserFactory, make_app
from tests.flush import _tables_with_rows


def flushed() -> None:
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False, inhibit_post_migrate=False)


def made_by_post_migrate() -> tuple[list, list]:
    return (
        sorted(ContentType.objects.values_list("pk", "app_label", "model")),
        sorted(Permission.objects.values_list("pk", "content_type_id", "codename", "name")),
    )


@pytest.mark.parametrize("permissions", ["untouched", "renamed-and-added", "all-deleted"])
def test_a_flush_empties_what_a_test_wrote_and_gives_back_what_post_migrate_made(transactional_db, permissions):
    flushed()  # the worker's first flush (Django's own post_migrate) may be this one: what follows is a later one
    before = made_by_post_migrate()
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    post_migrate_tables = set(_tables_with_rows(connection, tables))
    assert post_migrate_tables == {ContentType._meta.db_table, Permission._meta.db_table}
    make_app(owner=UserFactory(username="writer"), name="Written")
    if permissions == "renamed-and-added":
        Permission.objects.filter(pk=before[1][0][0]).update(name="renamed")
        Permission.objects.create(content_type_id=before[0][0][0], codename="extra", name="Extra")
    if permissions == "all-deleted":
        Permission.objects.all().delete()

    flushed()

    assert set(_tables_with_rows(connection, tables)) == post_migrate_tables
    assert made_by_post_migrate() == before
