from __future__ import annotations

import pytest

from apps_registry.services.advisories import AdvisoryNote, advisories_deliver
from apps_registry.services.staff import feedback_respond
from mcp_tools.results import advisories_as_contract
from tests.factories import AdvisoryFactory, FeedbackFactory, make_app


@pytest.mark.django_db
def test_open_advisories_are_delivered_and_shaped_like_the_contract_with_optional_fields_only_when_set(user):
    app = make_app(owner=user)
    AdvisoryFactory(
        app=app,
        kind="legacy-bridge",
        severity="info",
        summary="s",
        user_summary="",
        data={"a": 1},
        doc_url="docs/authoring.md#legacy",
    )
    AdvisoryFactory(app=app, kind="missing-output-schema", severity="warn", summary="t", user_summary="u")

    notes = advisories_deliver(actor=user, app=app)
    shaped = advisories_as_contract(notes)

    assert notes[1] == AdvisoryNote(kind="missing-output-schema", severity="warn", summary="t", user_summary="u")
    assert shaped == [
        {
            "kind": "legacy-bridge",
            "severity": "info",
            "summary": "s",
            "data": {"a": 1},
            "doc_url": "docs/authoring.md#legacy",
        },
        {"kind": "missing-output-schema", "severity": "warn", "summary": "t", "userSummary": "u"},
    ]


@pytest.mark.django_db
def test_each_unread_answer_is_delivered_once_and_marked_read(user, staff):
    app = make_app(owner=user)
    feedback = FeedbackFactory(app=app, author=user)
    first = feedback_respond(staff=staff, feedback=feedback, body="One")
    second = feedback_respond(staff=staff, feedback=feedback, body="Two")

    delivered = advisories_deliver(actor=user, app=app)
    again = advisories_deliver(actor=user, app=app)

    assert [a.data["response_id"] for a in delivered] == [str(first.pk), str(second.pk)]
    assert all(a.kind == "feedback-response" and a.user_summary for a in delivered)
    assert again == []
    first.refresh_from_db()
    assert first.read_at is not None


@pytest.mark.django_db
def test_answers_on_another_app_are_not_delivered_here(user, staff):
    app, other = make_app(owner=user, name="A"), make_app(owner=user, name="B")
    feedback_respond(staff=staff, feedback=FeedbackFactory(app=other, author=user), body="Elsewhere")

    assert advisories_deliver(actor=user, app=app) == []


@pytest.mark.django_db
def test_an_app_the_caller_cannot_see_carries_no_advisories_and_delivers_nothing(user, other_user, staff):
    app = make_app(owner=user)
    AdvisoryFactory(app=app)
    answer = feedback_respond(staff=staff, feedback=FeedbackFactory(app=app, author=other_user), body="Hidden")

    assert advisories_deliver(actor=other_user, app_id=app.id) == []
    assert advisories_deliver(actor=other_user, app_id="not-a-uuid") == []
    answer.refresh_from_db()
    assert answer.read_at is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_results_deliver_each_answer_exactly_once(user, staff):
    import threading

    from django.db import connection

    app = make_app(owner=user)
    feedback = FeedbackFactory(app=app, author=user)
    for body in ("One", "Two", "Three"):
        feedback_respond(staff=staff, feedback=feedback, body=body)
    delivered: list[str] = []
    barrier = threading.Barrier(4)

    def deliver():
        try:
            barrier.wait()
            notes = advisories_deliver(actor=user, app=app)
            delivered.extend(a.data["response_id"] for a in notes if a.kind == "feedback-response")
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(delivered) == sorted(str(r.pk) for r in feedback.responses.all())
