"""Optimistic concurrency on PostgreSQL: two updates naming the same version at once: one saves, one conflicts."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from apps_registry.exceptions import CharmingError, VersionConflict
from apps_registry.models import App, AppVersion
from apps_registry.services.definitions import app_definition_save, definition_save
from tests.apps_registry.route_helpers import example

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_concurrent_updates_with_the_same_expected_version_give_one_success_and_one_conflict(user, settings):
    # Both saves run the example's tests: room for two test runs of one account at once, or the second is refused
    # with rate_limited (tests/apps_registry/test_fair_shares.py) before it could meet the version.
    settings.CHARMING_TEST_RUNS_PER_USER = 2
    app = app_definition_save(actor=user, definition=example("todo"))
    barrier = Barrier(2)

    def update(i: int) -> object:
        definition = copy.deepcopy(example("todo"))
        definition["description"] = f"edited by writer {i}"
        try:
            barrier.wait()
            return definition_save(actor=user, definition=definition, app_id=app.id, expected_version=1)
        except CharmingError as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(update, range(2)))
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    saved = [r for r in results if not isinstance(r, CharmingError)]
    assert len(saved) == 1 and len(conflicts) == 1, results
    assert conflicts[0].details == {"expected_version": 1, "current_version": 2}
    app.refresh_from_db()
    assert app.version == 2
    assert list(AppVersion.objects.filter(app=app).values_list("number", flat=True).order_by("number")) == [1, 2]
    assert App.objects.get(pk=app.pk).description == saved[0].app.description  # type: ignore[union-attr]
