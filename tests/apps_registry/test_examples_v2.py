"""The three everyday apps an agent built from the served guide alone (issue 19): expenses against a budget per
category and month, a chores rotation, a reading list. Each saves with every one of its tests passing, and each
has a test running at 2,000 generated records or more."""

from __future__ import annotations

import pytest

from apps_registry.services.definitions import definition_dry_run
from tests.apps_registry.route_helpers import example

pytestmark = pytest.mark.django_db


def _largest_generated(definition) -> int:
    sizes = [0]
    for test in definition.get("tests", []):
        for spec in test.get("records", {}).values():
            if isinstance(spec, dict) and "generate" in spec:
                sizes.append(spec["generate"])
    return max(sizes)


@pytest.mark.parametrize("name", ["expenses", "chores", "reading_list"])
def test_each_app_is_valid_and_every_test_passes(user, name):
    definition = example(name)
    checked = definition_dry_run(actor=user, definition=definition)
    assert checked.problems == []
    assert [(r.name, r.failures) for r in checked.tests if not r.passed] == []
    assert len(checked.tests) >= 20
    assert _largest_generated(definition) >= 2000


@pytest.mark.parametrize("name", ["expenses", "chores", "reading_list"])
def test_no_counter_collection_dummy_record_or_repair_route(name):
    definition = example(name)
    routes = " ".join(definition["routes"])
    assert not any(word in routes for word in ("recount", "repair", "rebuild", "fix_"))
    steps = str([route["steps"] for route in definition["routes"].values()])
    assert "increment" not in steps and "_none" not in steps and "tag1" not in steps
