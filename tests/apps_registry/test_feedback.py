from __future__ import annotations

import uuid

import pytest

from apps_registry.access import membership_set
from apps_registry.exceptions import InvalidInput, NotFound
from apps_registry.models import Feedback
from apps_registry.services.feedback import FEEDBACK_MAX_CHARS, feedback_send
from tests.factories import UserFactory, make_app
from tests.messages import app_not_found

pytestmark = pytest.mark.django_db


def test_owner_sends_feedback_which_is_stored_trimmed(user):
    app = make_app(owner=user, name="Budget")
    feedback = feedback_send(actor=user, app_id=app.id, body="  The add button is confusing.\n")
    stored = Feedback.objects.get(pk=feedback.pk)
    assert (stored.app_id, stored.author_id, stored.body) == (app.id, user.id, "The add button is confusing.")


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_any_member_may_send_feedback(user, other_user, role):
    app = make_app(owner=user)
    membership_set(actor=user, app=app, user=other_user, role=role)
    feedback = feedback_send(actor=other_user, app_id=str(app.id), body="Nice app")
    assert feedback.author == other_user


def test_non_member_gets_not_found_like_a_missing_app(user, other_user):
    app = make_app(owner=user)
    with pytest.raises(NotFound) as hidden:
        feedback_send(actor=other_user, app_id=app.id, body="hi")
    missing_id = uuid.uuid4()
    with pytest.raises(NotFound) as missing:
        feedback_send(actor=other_user, app_id=missing_id, body="hi")
    assert hidden.value.kind == "not_found"
    assert hidden.value.message.startswith(app_not_found(app.id))
    assert hidden.value.message == missing.value.message.replace(str(missing_id), str(app.id))
    assert Feedback.objects.count() == 0


def test_malformed_app_id_is_not_found(user):
    with pytest.raises(NotFound, match="No app with id not-a-uuid"):
        feedback_send(actor=user, app_id="not-a-uuid", body="hi")


@pytest.mark.parametrize("body", ["", "   \n\t"])
def test_empty_body_is_refused(user, body):
    app = make_app(owner=user)
    with pytest.raises(InvalidInput) as excinfo:
        feedback_send(actor=user, app_id=app.id, body=body)
    assert excinfo.value.kind == "invalid_input"
    assert "Feedback body is empty" in excinfo.value.message
    assert excinfo.value.errors == [{"path": "$.body", "message": "must contain text"}]
    assert Feedback.objects.count() == 0


def test_body_at_the_limit_is_accepted_and_one_over_is_refused(user):
    app = make_app(owner=user)
    feedback_send(actor=user, app_id=app.id, body="x" * FEEDBACK_MAX_CHARS)
    with pytest.raises(InvalidInput) as excinfo:
        feedback_send(actor=user, app_id=app.id, body="x" * (FEEDBACK_MAX_CHARS + 1))
    assert excinfo.value.message == "Feedback body is 5001 characters long; the limit is 5000. Shorten it."
    assert Feedback.objects.count() == 1


def test_non_string_body_is_refused(user):
    app = make_app(owner=user)
    with pytest.raises(InvalidInput, match="must be a string"):
        feedback_send(actor=user, app_id=app.id, body=42)  # type: ignore[arg-type]


def test_feedback_from_one_user_does_not_attach_to_another_users_app(user):
    mine = make_app(owner=user, name="Mine")
    make_app(owner=UserFactory(username="carol"), name="Theirs")
    feedback_send(actor=user, app_id=mine.id, body="ok")
    assert list(Feedback.objects.values_list("app__name", flat=True)) == ["Mine"]


def test_only_staff_answer_feedback_and_an_answer_needs_a_body(user, staff):
    from apps_registry.exceptions import Forbidden, InvalidInput
    from apps_registry.services.staff import feedback_respond
    from tests.factories import FeedbackFactory

    feedback = FeedbackFactory(author=user)
    with pytest.raises(Forbidden) as refused:
        feedback_respond(staff=user, feedback=feedback, body="Sure.")
    assert refused.value.message == "Only staff can answer feedback."
    with pytest.raises(InvalidInput) as empty:
        feedback_respond(staff=staff, feedback=feedback, body="  ")
    assert empty.value.message == "A response needs a body: write the answer to the user's feedback."
    assert not feedback.responses.exists()
