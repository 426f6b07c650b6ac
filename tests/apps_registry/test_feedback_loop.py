"""The feedback loop end to end: a user sends feedback over REST, staff answer in the admin, the
next tool result for the app carries the answer once, and the admin shows when it was read."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse
from rest_framework.test import APIClient

from apps_registry.access import membership_set
from apps_registry.models import Feedback, FeedbackResponse
from apps_registry.services.advisories import advisories_deliver
from apps_registry.services.tokens import token_create
from tests.factories import make_app

pytestmark = pytest.mark.django_db


def test_feedback_answer_reaches_the_sender_once_and_staff_see_it_read(client, user, other_user, staff):
    app = make_app(owner=user, name="Budget")
    membership_set(actor=user, app=app, user=other_user, role="viewer")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=other_user).plaintext}")
    sent = api.post(f"/api/apps/{app.id}/feedback/", {"body": "Can I export to CSV?"}, format="json")
    assert sent.status_code == 201
    feedback = Feedback.objects.get(pk=sent.json()["value"]["id"])

    client.force_login(staff)
    answered = client.post(
        reverse("admin:apps_registry_feedback_change", args=[feedback.pk]),
        {
            "responses-TOTAL_FORMS": "1",
            "responses-INITIAL_FORMS": "0",
            "responses-MIN_NUM_FORMS": "0",
            "responses-MAX_NUM_FORMS": "1000",
            "responses-0-body": "Yes: next week.",
            "_save": "Save",
        },
    )
    assert answered.status_code == 302

    # The owner's tool results do not carry an answer meant for the viewer who asked.
    assert [a for a in advisories_deliver(actor=user, app=app) if a.kind == "feedback-response"] == []
    delivered = [a for a in advisories_deliver(actor=other_user, app=app) if a.kind == "feedback-response"]
    assert len(delivered) == 1 and "Yes: next week." in delivered[0].summary
    assert [a for a in advisories_deliver(actor=other_user, app=app) if a.kind == "feedback-response"] == []

    answer = FeedbackResponse.objects.get(feedback=feedback)
    assert answer.read_at is not None and answer.staff_author == staff
    listed = client.get(reverse("admin:apps_registry_feedback_changelist"), {"status": "read"}).context["cl"]
    (row,) = listed.result_list
    model_admin = admin.site._registry[Feedback]
    assert row.pk == feedback.pk and model_admin.last_read_at(row) == answer.read_at
    assert api.get(f"/api/apps/{app.id}/feedback/").json()["value"][0]["responses"][0]["read_at"] == (
        answer.read_at.isoformat()
    )
