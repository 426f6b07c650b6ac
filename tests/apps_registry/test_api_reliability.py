"""Reliability of the REST API (issue 12): malformed text refused as input, never a 500."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from apps_registry.models import App, Feedback, Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
from tests.mcp_tools.test_mutate_app import DEFINITION

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")
    return client


@pytest.fixture
def budget(user):
    return app_definition_save(actor=user, definition=DEFINITION)


def post_raw(api, url, body, method="post"):
    """The body as JSON with \\u escapes, as any client may send a NUL or a lone surrogate."""
    return getattr(api, method)(url, data=json.dumps(body), content_type="application/json")


def assert_refused(response, path):
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["kind"] == "invalid_input"
    assert "must be valid Unicode text without NUL characters" in error["message"]
    assert [problem["path"] for problem in error["errors"]] == [path]


@pytest.mark.parametrize("bad", ["ab\x00c", "ab\ud800c"], ids=["nul", "surrogate"])
def test_unstorable_text_in_params_feedback_and_definitions_is_invalid_input(api, budget, bad):
    assert_refused(
        post_raw(api, f"/api/apps/{budget.id}/run/add_expense/", {"params": {"amount": 1, "category": bad}}),
        "$.params.category",
    )
    assert_refused(post_raw(api, f"/api/apps/{budget.id}/feedback/", {"body": bad}), "$.body")
    assert_refused(post_raw(api, "/api/apps/definitions/", {**DEFINITION, "name": bad}), "$.name")
    assert_refused(
        post_raw(api, f"/api/apps/{budget.id}/definition/", {**DEFINITION, "description": bad}, method="put"),
        "$.description",
    )
    assert Record.objects.count() == Feedback.objects.count() == 0
    assert App.objects.count() == 1


def test_a_nul_in_the_op_of_the_url_is_invalid_input(api, budget):
    assert_refused(api.post(f"/api/apps/{budget.id}/run/add%00expense/", {}, format="json"), "$.op")
