"""The engine's bounds: each one refuses at save time (authoring limits) or fails the call with
operation_failed naming the limit (run-time limits), and a failed call writes nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps_registry.exceptions import InvalidDefinition, OperationFailed
from apps_registry.models import Route
from tests.apps_registry.route_helpers import one_route_app, records, run
from tests.factories import RecordFactory

pytestmark = pytest.mark.django_db


def test_an_expression_longer_than_the_limit_is_refused_when_saved(user, settings):
    settings.CHARMING_ROUTES_MAX_EXPRESSION_LENGTH = 20
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": "'" + "x" * 30 + "'"}])
    assert exc.value.errors == [
        {
            "path": "routes.r.steps[0].return",
            "message": "expression is 32 characters long; the limit is 20",
            "limit": "expression_length",
            "max": 20,
        }
    ]


def test_comprehensions_nested_deeper_than_the_limit_are_refused(user, settings):
    settings.CHARMING_ROUTES_MAX_COMPREHENSION_NESTING = 2
    ok = "[[1]].map(a, a.map(b, b + 1))"
    too_deep = "[[[1]]].map(a, a.map(b, b.filter(c, c > 0)))"
    one_route_app(user, [{"return": ok}])
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": too_deep}])
    error = exc.value.errors[0]
    assert error["limit"] == "comprehension_nesting" and error["max"] == 2
    assert "nested 3 deep" in error["message"]


def test_comprehension_names_inside_strings_do_not_count(user, settings):
    settings.CHARMING_ROUTES_MAX_COMPREHENSION_NESTING = 1
    one_route_app(user, [{"return": "[1].map(a, '.map(.filter(.all(')"}])


def test_a_route_with_too_many_steps_is_refused(user, settings):
    settings.CHARMING_ROUTES_MAX_STEPS = 3
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"let": "1", "as": f"v{i}"} for i in range(4)])
    assert exc.value.errors[0]["path"] == "routes.r.steps"
    assert exc.value.errors[0]["limit"] == "steps_per_route"


def test_a_saved_route_over_a_lowered_limit_fails_the_call_with_operation_failed(user, settings):
    app = one_route_app(user, [{"return": "'" + "x" * 30 + "'"}])
    settings.CHARMING_ROUTES_MAX_EXPRESSION_LENGTH = 20
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert "cannot run under the current limits" in exc.value.message
    assert exc.value.details["limit"] == "expression_length"
    assert exc.value.details["max"] == 20
    assert exc.value.details["setting"] == "CHARMING_ROUTES_MAX_EXPRESSION_LENGTH"
    assert Route.objects.filter(app=app).count() == 1


def test_reading_more_records_than_the_limit_fails(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_READ = 5
    app = one_route_app(user, [{"find": {"collection": "items"}, "as": "all"}, {"return": "size(all)"}], kind="query")
    for i in range(5):
        RecordFactory(storage=app.storage, collection="items", record_id=f"r{i}")
    assert run(user, app, kind="query") == 5
    RecordFactory(storage=app.storage, collection="items", record_id="r5")
    with pytest.raises(OperationFailed) as exc:
        run(user, app, kind="query")
    assert exc.value.message.startswith("This call read more than 5 records")
    assert exc.value.details == {
        "limit": "records_read_per_call",
        "max": 5,
        "setting": "CHARMING_ROUTES_MAX_RECORDS_READ",
    }


def test_writing_more_records_than_the_limit_fails_and_writes_nothing(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_WRITTEN = 2
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "{'n': 1}"}} for _ in range(3)])
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.details["limit"] == "records_written_per_call"
    assert exc.value.details["max"] == 2
    assert records(app) == {}


def test_a_record_larger_than_the_limit_fails(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORD_BYTES = 100
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "{'text': params.text}"}}])
    run(user, app, params={"text": "x" * 50})
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"text": "y" * 200})
    assert exc.value.details["limit"] == "record_bytes"
    assert exc.value.details["max"] == 100
    assert "the limit is 100" in exc.value.message
    assert [data["text"] for data in records(app).values()] == ["x" * 50]


def test_an_app_cannot_hold_more_records_than_the_limit(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 3
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "{'n': 1}"}}])
    for _ in range(3):
        run(user, app)
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.details["limit"] == "records_per_app"
    assert exc.value.details["max"] == 3
    assert len(records(app)) == 3


def _stored_count(app) -> int:
    app.storage.refresh_from_db(fields=["records_held"])
    return app.storage.records_held


def test_the_records_per_app_limit_reads_a_counter_kept_by_the_writes_not_a_count(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 3
    app = one_route_app(
        user,
        [{"insert": {"collection": "items", "id": "params.id", "value": "{'n': 1}"}}],
        drop={"kind": "mutation", "steps": [{"delete": {"collection": "items", "id": "params.id"}}]},
        put={"kind": "mutation", "steps": [{"upsert": {"collection": "items", "id": "params.id", "value": "{}"}}]},
    )
    run(user, app, params={"id": "a"})
    run(user, app, "put", params={"id": "b"})
    run(user, app, "put", params={"id": "b"})  # a merge creates nothing
    assert _stored_count(app) == 2
    with CaptureQueriesContext(connection) as queries:
        run(user, app, params={"id": "c"})
    assert not [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert _stored_count(app) == 3
    with pytest.raises(OperationFailed):
        run(user, app, params={"id": "d"})
    assert _stored_count(app) == 3  # the refused call's counter update was rolled back with it
    run(user, app, "drop", params={"id": "a"})
    assert _stored_count(app) == 2
    run(user, app, params={"id": "d"})
    assert sorted(records(app)) == ["b", "c", "d"] and _stored_count(app) == 3


def test_a_call_that_deletes_as_many_as_it_inserts_passes_at_the_limit(user, settings):
    settings.CHARMING_ROUTES_MAX_RECORDS_PER_APP = 2
    app = one_route_app(
        user,
        [
            {"delete": {"collection": "items", "id": "params.old"}},
            {"insert": {"collection": "items", "id": "params.new", "value": "{}"}},
        ],
        add={"kind": "mutation", "steps": [{"insert": {"collection": "items", "id": "params.id", "value": "{}"}}]},
    )
    run(user, app, "add", params={"id": "a"})
    run(user, app, "add", params={"id": "b"})
    run(user, app, params={"old": "a", "new": "c"})
    assert sorted(records(app)) == ["b", "c"] and _stored_count(app) == 2
