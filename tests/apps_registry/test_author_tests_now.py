"""An author test may fix the call's `now`, so a route that reads today is tested on the day it names."""

from __future__ import annotations

import pytest

from apps_registry.services.definitions import definition_dry_run

TODAY = {
    "name": "Today",
    "routes": {"today": {"kind": "query", "steps": [{"return": "date(now, 'Europe/Paris')"}]}},
}


@pytest.mark.django_db
def test_a_test_runs_at_the_now_it_names(user):
    definition = {
        **TODAY,
        "tests": [
            {"route": "today", "now": "2026-12-02T23:30:00Z", "expect": {"value": "2026-12-03"}},
            {"route": "today", "now": "2026-12-02T22:30:00Z", "expect": {"value": "2026-12-02"}},
        ],
    }
    checked = definition_dry_run(actor=user, definition=definition)
    assert checked.problems == []
    assert [r.passed for r in checked.tests] == [True, True]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("now", "message"),
    [
        (
            "yesterday",
            "must be an ISO 8601 timestamp with its offset, such as \"2026-12-02T09:30:00Z\", got 'yesterday'",
        ),
        (
            "2026-12-02T09:30:00",
            'must be an ISO 8601 timestamp with its offset, such as "2026-12-02T09:30:00Z" (this one has no offset), '
            "got '2026-12-02T09:30:00'",
        ),
        (5, 'must be an ISO 8601 timestamp with its offset, such as "2026-12-02T09:30:00Z", got 5'),
    ],
)
def test_a_bad_now_is_a_problem_with_its_path(user, now, message):
    definition = {**TODAY, "tests": [{"route": "today", "now": now, "expect": {"value": "x"}}]}
    checked = definition_dry_run(actor=user, definition=definition)
    assert checked.problems == [{"path": "tests[0].now", "message": message}]
