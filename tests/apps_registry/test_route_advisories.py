"""The advisories a route call's result carries come with the call itself (issue 13 item 4): read by its own
lookup query and a per-process snapshot checked on every call, in the mutation's own transaction, never as a
second transaction that could fail after the mutation committed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps_registry.models import Advisory, FeedbackResponse
from apps_registry.services import advisories as advisories_service
from apps_registry.services.routes import route_run
from apps_registry.services.staff import advisories_resolve, feedback_respond
from apps_registry.services.tokens import token_create
from tests.apps_registry.route_helpers import one_route_app, records
from tests.factories import AdvisoryFactory, FeedbackFactory

pytestmark = pytest.mark.django_db

INSERT = [{"insert": {"collection": "items", "value": "{'n': 1}"}}, {"return": "true"}]
# The apps here carry a test of their route, so their save raises no authoring advisory (not even untested-route):
# every advisory a result carries is one a test made.
TESTED = [{"route": "r", "expect": {"value": True}}]


@pytest.fixture
def app(user):
    return one_route_app(user, INSERT, output={"type": "boolean"}, tests=TESTED)


def call(user, app, kind="mutation"):
    op = "r" if kind == "mutation" else "q"
    return route_run(actor=user, app_id=app.id, op=op, params=None, kind=kind, advisories=True)


def summaries(result) -> list[str]:
    return [note.summary for note in result.advisories]


def advisory_reads(queries) -> list[str]:
    """The queries that read advisories or feedback answers on their own (not the lookup's subqueries)."""
    tables = (Advisory._meta.db_table, FeedbackResponse._meta.db_table)
    starts = tuple(f'{verb} "{table}"' for table in tables for verb in ("SELECT", "UPDATE"))
    return [q["sql"] for q in queries if q["sql"].startswith(starts)]


def test_a_rest_run_reads_no_advisories_of_its_own_while_they_are_unchanged(user, app):
    AdvisoryFactory(app=app, summary="Look at this.")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")
    url = f"/api/apps/{app.id}/run/r/"
    assert api.post(url, {}, format="json").json()["advisories"][0]["summary"] == "Look at this."

    with CaptureQueriesContext(connection) as second:
        response = api.post(url, {}, format="json")

    assert response.json()["advisories"][0]["summary"] == "Look at this."
    assert advisory_reads(second.captured_queries) == []


def test_the_snapshot_follows_every_change_to_the_open_advisories(user, app, staff):
    first = AdvisoryFactory(app=app, summary="One")
    assert summaries(call(user, app)) == ["One"]

    first.summary = "One, edited"
    first.save()
    assert summaries(call(user, app)) == ["One, edited"]

    AdvisoryFactory(app=app, summary="Two")
    assert summaries(call(user, app)) == ["One, edited", "Two"]

    advisories_resolve(advisories=Advisory.objects.filter(pk=first.pk))
    assert summaries(call(user, app)) == ["Two"]

    Advisory.objects.filter(app=app).delete()
    AdvisoryFactory(app=app, summary="Three")
    assert summaries(call(user, app)) == ["Three"]


def test_a_snapshot_read_in_another_process_is_checked_against_this_calls_lookup(user, app):
    AdvisoryFactory(app=app, summary="Old")
    assert summaries(call(user, app)) == ["Old"]
    # As if this process had cached a state another process has since changed: the lookup's state decides.
    Advisory.objects.filter(app=app).update(summary="New", updated_at=Advisory.objects.get(app=app).updated_at)
    AdvisoryFactory(app=app, summary="Newer")
    assert summaries(call(user, app)) == ["New", "Newer"]


def test_an_answer_to_the_callers_feedback_is_delivered_once_with_the_result(user, app, staff):
    answer = feedback_respond(staff=staff, feedback=FeedbackFactory(app=app, author=user), body="Fixed it.")

    delivered = call(user, app)
    again = call(user, app)

    assert [note.kind for note in delivered.advisories] == ["feedback-response"]
    assert "Fixed it." in delivered.advisories[0].summary
    assert again.advisories == ()
    answer.refresh_from_db()
    assert answer.read_at is not None


def test_a_query_carries_the_advisories_too(user, staff):
    app = one_route_app(
        user,
        [{"return": "1"}],
        kind="query",
        output={"type": "integer"},
        tests=[{"route": "r", "expect": {"value": 1}}],
    )
    AdvisoryFactory(app=app, summary="Query note")
    feedback_respond(staff=staff, feedback=FeedbackFactory(app=app, author=user), body="Seen.")

    result = route_run(actor=user, app_id=app.id, op="r", params=None, kind="query", advisories=True)

    assert [note.kind for note in result.advisories] == ["missing-output-schema", "feedback-response"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("broken", ["_answers_deliver", "advisories_open_for"])
def test_a_database_error_reading_advisories_does_not_undo_the_mutation(user, staff, monkeypatch, broken):
    """Finding 4 with the read inside the mutation's transaction: it runs in a savepoint, so even a statement
    the database refuses (which on PostgreSQL aborts the transaction) leaves the mutation to commit."""
    app = one_route_app(user, INSERT, output={"type": "boolean"}, tests=TESTED)
    AdvisoryFactory(app=app, summary="Note")
    feedback_respond(staff=staff, feedback=FeedbackFactory(app=app, author=user), body="Answer")

    def fail(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_here")

    monkeypatch.setattr(advisories_service, broken, fail)
    result = call(user, app)

    assert result.value is True
    assert len(records(app, "items")) == 1


def test_advisories_are_not_read_unless_asked_for(user, app):
    AdvisoryFactory(app=app, summary="Note")
    with CaptureQueriesContext(connection) as plain:
        result = route_run(actor=user, app_id=app.id, op="r", params=None, kind="mutation")
    assert result.advisories == ()
    assert not any(Advisory._meta.db_table in q["sql"] for q in plain.captured_queries)


def test_the_snapshot_stays_within_its_bound_and_every_result_keeps_its_advisories(user, monkeypatch):
    monkeypatch.setattr(advisories_service, "SNAPSHOT_APPS", 2)
    monkeypatch.setattr(advisories_service, "_SNAPSHOTS", {})
    apps = [one_route_app(user, INSERT, output={"type": "boolean"}, tests=TESTED) for _ in range(3)]
    for n, app in enumerate(apps):
        AdvisoryFactory(app=app, summary=f"Note {n}")

    for _round in range(2):
        for n, app in enumerate(apps):
            assert f"Note {n}" in summaries(call(user, app))
            assert len(advisories_service._SNAPSHOTS) <= 2
