from __future__ import annotations

import uuid

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps_registry.access import membership_set
from apps_registry.models import Feedback, FeedbackResponse
from apps_registry.services.tokens import token_create
from tests.factories import make_app
from tests.messages import app_not_found

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")
    return client


def url(app_id) -> str:
    return f"/api/apps/{app_id}/feedback/"


def test_member_sends_feedback_and_gets_it_back(user, other_user):
    app = make_app(owner=user, name="Budget")
    membership_set(actor=user, app=app, user=other_user, role="viewer")
    response = client_for(other_user).post(url(app.id), {"body": "Please add CSV export."}, format="json")
    assert response.status_code == 201, response.json()
    value = response.json()["value"]
    assert value["app_id"] == str(app.id) and value["body"] == "Please add CSV export." and value["responses"] == []
    stored = Feedback.objects.get(pk=value["id"])
    assert stored.author == other_user and stored.app == app


def test_get_lists_only_my_feedback_with_answers_and_read_times(user, other_user, staff):
    app = make_app(owner=user)
    membership_set(actor=user, app=app, user=other_user, role="editor")
    mine = Feedback.objects.create(app=app, author=user, body="mine")
    Feedback.objects.create(app=app, author=other_user, body="not mine")
    read_at = timezone.now()
    FeedbackResponse.objects.create(feedback=mine, staff_author=staff, body="Thanks!", read_at=read_at)
    response = client_for(user).get(url(app.id))
    assert response.status_code == 200
    (item,) = response.json()["value"]
    assert item["body"] == "mine"
    assert item["responses"] == [
        {"body": "Thanks!", "created_at": item["responses"][0]["created_at"], "read_at": read_at.isoformat()}
    ]


def test_non_member_gets_the_same_not_found_as_for_a_missing_app(user, other_user):
    app = make_app(owner=user)
    client = client_for(other_user)
    hidden = client.post(url(app.id), {"body": "hi"}, format="json")
    missing_id = uuid.uuid4()
    missing = client.post(url(missing_id), {"body": "hi"}, format="json")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"]["kind"] == "not_found"
    assert hidden.json()["error"]["message"] == missing.json()["error"]["message"].replace(str(missing_id), str(app.id))
    assert hidden.json()["error"]["message"].startswith(app_not_found(app.id))
    listed = client.get(url(app.id))
    assert listed.status_code == 404
    assert listed.json()["error"]["kind"] == "not_found"
    assert listed.json()["error"]["message"].startswith(app_not_found(app.id))
    assert not Feedback.objects.exists()


def test_malformed_app_id_is_not_found_json_not_an_html_page(user):
    response = client_for(user).post(url("not-a-uuid"), {"body": "hi"}, format="json")
    assert response.status_code == 404
    assert response.json()["error"] == {
        "kind": "not_found",
        "message": "No app with id not-a-uuid exists or is visible to you. GET /api/apps/ lists your apps.",
    }


@pytest.mark.parametrize(
    ("payload", "message", "path"),
    [
        ({}, "Missing 'body'", "$.body"),
        ({"body": "   "}, "Feedback body is empty", "$.body"),
        ({"body": "x" * 5001}, "Feedback body is 5001 characters long; the limit is 5000", "$.body"),
        ({"body": 7}, "Feedback body must be a string", "$.body"),
        ({"body": "ok", "rating": 5}, "Unknown field(s) 'rating'", "$.rating"),
        (["body"], "Send a JSON object", "$"),
    ],
)
def test_bad_feedback_is_refused_with_what_to_fix(user, payload, message, path):
    app = make_app(owner=user)
    response = client_for(user).post(url(app.id), payload, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["kind"] == "invalid_input" and message in error["message"]
    assert error["errors"][0]["path"] == path
    assert not Feedback.objects.exists()


def test_feedback_needs_a_token(user):
    app = make_app(owner=user)
    response = APIClient().post(url(app.id), {"body": "hi"}, format="json")
    assert response.status_code == 401 and response.json()["error"] == {
        "kind": "unauthenticated",
        "message": "Missing token: send the header 'Authorization: Bearer <token>'.",
    }
    assert not Feedback.objects.exists()
