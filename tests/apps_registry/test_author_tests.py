"""Author tests in a definition: checked with it (every problem with its path), run on every save against the
real engine in a rolled-back transaction, refusing the save when one fails unless allow_failing_tests."""

from __future__ import annotations

import copy

import pytest

from apps_registry.exceptions import InvalidDefinition, TestsFailed
from apps_registry.models import Advisory, App, Record, Storage
from apps_registry.routes.authortests import matches
from apps_registry.services.definitions import definition_dry_run, definition_save
from tests.apps_registry.route_helpers import example
from tests.mcp_tools.test_authoring_session import HABITS

pytestmark = pytest.mark.django_db


def with_tests(*tests):
    definition = copy.deepcopy(HABITS)
    definition["tests"] = list(tests)
    return definition


@pytest.mark.parametrize("name", ["budget", "todo"])
def test_both_examples_carry_tests_that_pass(user, name):
    definition = example(name)
    assert len(definition["tests"]) >= 4
    saved = definition_save(actor=user, definition=definition)
    assert [(r.name, r.passed, r.failures) for r in saved.tests if not r.passed] == []


def test_tests_leave_no_record_and_no_storage_behind(user):
    definition_save(actor=user, definition=HABITS)
    assert Record.objects.count() == 0
    assert Storage.objects.count() == 1  # the app's own storage only


def test_each_test_starts_from_its_own_records_only(user):
    app = definition_save(actor=user, definition=HABITS).app
    Record.objects.create(storage=app.storage, collection="logs", record_id="real", data={"habit": "x", "day": "d"})
    edited = with_tests({"route": "list_logs", "expect": {"value": []}})
    saved = definition_save(actor=user, definition=edited, app_id=app.id, expected_version=1)
    assert [r.passed for r in saved.tests] == [True]
    assert list(Record.objects.values_list("record_id", flat=True)) == ["real"]


def test_a_failing_test_refuses_the_save_listing_expected_and_got(user):
    definition = with_tests(
        {
            "name": "wrong",
            "route": "log_habit",
            "params": {"habit": "a", "day": "2026-01-01"},
            "expect": {"value": {"habit": "b"}},
        }
    )
    with pytest.raises(TestsFailed) as exc:
        definition_save(actor=user, definition=definition)
    assert exc.value.kind == "tests_failed"
    assert exc.value.message.startswith(
        "1 of 1 test(s) of the definition fail; nothing was saved. 'wrong' (log_habit): "
    )
    got_id = exc.value.details["tests"][0]["got"]["value"]["id"]
    message = f'expected the value {{"habit": "b"}}, got {{"day": "2026-01-01", "habit": "a", "id": "{got_id}"}}'
    assert exc.value.errors == [{"path": "tests[0]", "message": message}]
    assert not App.objects.exists()


def test_allow_failing_tests_saves_with_a_warn_advisory(user):
    definition = with_tests({"name": "wrong", "route": "list_logs", "expect": {"error": "handler_error"}})
    saved = definition_save(actor=user, definition=definition, allow_failing_tests=True)
    advisory = Advisory.objects.get(app=saved.app, kind="failing-tests")
    assert advisory.severity == "warn"
    assert advisory.summary.startswith(
        "1 of 1 test(s) of this app's definition fail (it was saved with allow_failing_tests): "
    )
    # every member sees advisories: the summary names the failing test, not what it sent or got
    assert advisory.summary == (
        "1 of 1 test(s) of this app's definition fail (it was saved with allow_failing_tests): 'wrong'. "
        "Run check_app for what each got; fix the routes or the tests and save again."
    )
    assert "got the value" not in advisory.summary
    fixed = definition_save(actor=user, definition=HABITS, app_id=saved.app.id, expected_version=1)
    assert not Advisory.objects.filter(app=fixed.app, kind="failing-tests").exists()


def test_a_check_with_failing_tests_words_its_advisory_as_what_a_save_would_do_and_saves_nothing(user):
    definition = with_tests({"name": "wrong", "route": "list_logs", "expect": {"error": "handler_error"}})
    checked = definition_dry_run(actor=user, definition=definition)
    [advisory] = [a for a in checked.advisories if a.kind == "failing-tests"]
    assert (advisory.severity, advisory.data) == ("warn", {"failing": ["wrong"]})
    assert advisory.summary == (
        "1 of 1 test(s) of this definition fail: 'wrong'. create_app and update_app refuse it until they pass "
        "(or take it with allow_failing_tests, and the app keeps this advisory); fix the routes or the tests."
    )
    assert "saved" not in advisory.summary
    assert not App.objects.exists() and not Advisory.objects.exists()


def test_error_expectations_match_the_kind_and_a_message_fragment(user):
    results = definition_dry_run(
        actor=user,
        definition=with_tests(
            {
                "route": "log_habit",
                "params": {"habit": "nothing", "day": "2026-01-01"},
                "expect": {"error": "handler_error", "message": "not a habit"},
            },
            {
                "route": "log_habit",
                "params": {"habit": "nothing", "day": "2026-01-01"},
                "expect": {"error": "handler_error", "message": "elephant"},
            },
            {"route": "log_habit", "params": {"habit": "x", "day": "yesterday"}, "expect": {"error": "invalid_input"}},
        ),
    ).tests
    assert [r.passed for r in results] == [True, False, True]
    assert results[1].failures == [
        "expected an error message containing 'elephant', got 'Doing nothing is not a habit.'"
    ]


def test_records_after_are_compared_in_insertion_order(user):
    results = definition_dry_run(
        actor=user,
        definition=with_tests(
            {
                "route": "log_habit",
                "params": {"habit": "b", "day": "2026-01-02"},
                "records": {"logs": [{"id": "first", "habit": "a", "day": "2026-01-01"}]},
                "expect": {"value": {"habit": "b"}},
                "records_after": {"logs": [{"id": "first"}, {"habit": "a"}]},
            }
        ),
    ).tests
    assert results[0].passed is False
    assert (
        results[0].failures[0].startswith('expected logs to hold [{"id": "first"}, {"habit": "a"}] afterwards, got [')
    )


def test_problems_in_tests_are_listed_with_their_paths(user):
    definition = with_tests(
        "not a test",
        {"route": "nope", "expect": {"value": 1}},
        {"route": "list_logs", "expect": {"value": 1, "error": "x"}, "records_after": {}},
        {
            "route": "log_habit",
            "params": [],
            "records": {"logs": [{"id": 5}]},
            "expect": {"error": "x", "message": 3},
            "extra": 1,
        },
    )
    with pytest.raises(InvalidDefinition) as exc:
        definition_save(actor=user, definition=definition)
    assert exc.value.errors == [
        {
            "path": "tests[0]",
            "message": 'a test must be an object: {"route": ..., "params": {...}, "expect": {"value": ...}}',
        },
        {
            "path": "tests[1].route",
            "message": "must name one of the definition's routes (list_logs, log_habit), got 'nope'",
        },
        {"path": "tests[2].expect", "message": "needs exactly one of 'value' or 'error'"},
        {
            "path": "tests[2].records_after",
            "message": "a query writes nothing; only a mutation's (or a migration's) test has it",
        },
        {
            "path": "tests[3]",
            "message": (
                "unknown key(s) extra; allowed: name, route, migrate, params, now, records, expect, records_after"
            ),
        },
        {"path": "tests[3].params", "message": "must be an object (the route's params)"},
        {"path": "tests[3].records.logs[0].id", "message": "must be a string"},
        {"path": "tests[3].expect.message", "message": "must be a string (a fragment of the message)"},
    ]


@pytest.mark.parametrize(
    ("expected", "got", "result"),
    [
        ({"a": 1}, {"a": 1.0, "b": 2}, True),
        ({"a": 1}, {"b": 1}, False),
        ([{"a": 1}], [{"a": 1}, {"a": 2}], False),
        (True, 1, False),
        (1, True, False),
        ("x", "x", True),
        (None, None, True),
    ],
)
def test_expected_values_match_as_patterns(expected, got, result):
    assert matches(expected, got) is result


def test_problems_in_tests_quote_values_in_json_words(user):
    definition = with_tests({"expect": {"value": 1}}, {"route": "list_logs", "expect": {"value": 1}, "records": []})
    with pytest.raises(InvalidDefinition) as exc:
        definition_save(actor=user, definition=definition)
    assert exc.value.kind == "invalid_definition"
    assert exc.value.errors == [
        {
            "path": "tests[0].route",
            "message": "must name one of the definition's routes (list_logs, log_habit), got null",
        },
        {
            "path": "tests[1].records",
            "message": 'must be an object mapping collections to arrays of records: {"todos": [{...}]}',
        },
    ]


@pytest.mark.parametrize("name", ["budget", "todo"])
def test_both_examples_test_every_route_and_save_with_no_authoring_advisory(user, name):
    definition = example(name)
    assert {test["route"] for test in definition["tests"]} == set(definition["routes"])
    checked = definition_dry_run(actor=user, definition=definition)
    assert (checked.problems, checked.advisories) == ([], [])
    assert [(r.name, r.failures) for r in checked.tests if not r.passed] == []
    saved = definition_save(actor=user, definition=definition)
    assert not Advisory.objects.filter(app=saved.app).exists()
