from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps_registry.access import membership_set
from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
from tests.mcp_tools.test_mutate_app import DEFINITION

pytestmark = pytest.mark.django_db


@pytest.fixture
def budget(user):
    return app_definition_save(actor=user, definition=DEFINITION)


def test_post_runs_a_mutation_and_answers_the_envelope(api, budget):
    response = api.post(
        f"/api/apps/{budget.id}/run/add_expense/", {"params": {"amount": 2, "category": "tea"}}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {"ok": True, "value": {"id": Record.objects.get().record_id}}


def test_a_query_runs_with_kind_query(api, budget):
    response = api.post(f"/api/apps/{budget.id}/run/count_expenses/", {"kind": "query"}, format="json")

    assert response.json() == {"ok": True, "value": {"n": 0}}


def test_domain_errors_keep_their_kind_and_message(api, budget):
    response = api.post(f"/api/apps/{budget.id}/run/count_expenses/", {}, format="json")

    assert response.status_code == 404
    assert response.json()["error"] == {
        "kind": "unknown_op",
        "message": '\'count_expenses\' is a query route: run it with "kind": "query", not "mutation".',
    }


def test_a_viewer_cannot_mutate(api, budget, other_user):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="viewer")
    viewer = APIClient()
    viewer.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=other_user).plaintext}")

    response = viewer.post(
        f"/api/apps/{budget.id}/run/add_expense/", {"params": {"amount": 1, "category": "x"}}, format="json"
    )

    assert response.status_code == 403
    assert response.json()["error"]["kind"] == "forbidden"
    assert response.json()["error"]["message"].startswith("You are a viewer of app 'Budget'; viewers may only query")
    assert not Record.objects.exists()


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        ([1], "$", "Send a JSON object"),
        ({"params": [1]}, "$.params", "'params' must be a JSON object matching the route's input schema, got array."),
        ({"params": "x"}, "$.params", "'params' must be a JSON object matching the route's input schema, got string."),
        ({"kind": "delete"}, "$.kind", "'kind' must be 'mutation' or 'query', got 'delete'."),
        ({"kind": None}, "$.kind", "'kind' must be 'mutation' or 'query', got null."),
        ({"kind": True}, "$.kind", "'kind' must be 'mutation' or 'query', got true."),
        ({"kind": ["query"]}, "$.kind", "'kind' must be 'mutation' or 'query', got [\"query\"]."),
        ({"param": {}}, "$.param", "Unknown field(s) 'param'"),
    ],
)
def test_a_malformed_body_is_invalid_input(api, budget, body, path, message):
    response = api.post(f"/api/apps/{budget.id}/run/add_expense/", body, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["kind"] == "invalid_input" and error["message"].startswith(message)
    if path != "$" and not message.startswith("Unknown"):
        assert error["errors"][0]["message"] == message
    assert error["errors"][0]["path"] == path


def test_a_body_with_two_bad_fields_names_both(api, budget):
    response = api.post(f"/api/apps/{budget.id}/run/add_expense/", {"params": 3, "kind": ""}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert [e["path"] for e in error["errors"]] == ["$.params", "$.kind"]
    assert error["message"] == (
        "'params' must be a JSON object matching the route's input schema, got integer. "
        "'kind' must be 'mutation' or 'query', got ''."
    )
    assert not Record.objects.exists()


def test_a_null_params_runs_a_route_taking_no_input(api, budget):
    response = api.post(f"/api/apps/{budget.id}/run/count_expenses/", {"params": None, "kind": "query"}, format="json")

    assert response.status_code == 200, response.json()


def test_without_a_token_it_is_401(budget):
    response = APIClient().post(f"/api/apps/{budget.id}/run/add_expense/", {}, format="json")

    assert response.status_code == 401
    assert response.json()["error"] == {
        "kind": "unauthenticated",
        "message": "Missing token: send the header 'Authorization: Bearer <token>'.",
    }
    assert not Record.objects.exists()


def test_a_run_carries_the_apps_advisories_and_delivers_a_staff_answer_once(api, budget, user, staff):
    from apps_registry.services.staff import feedback_respond
    from tests.factories import AdvisoryFactory, FeedbackFactory

    AdvisoryFactory(app=budget, kind="find-without-limit", summary="s", user_summary="", data={})
    answer = feedback_respond(staff=staff, feedback=FeedbackFactory(app=budget, author=user), body="Done.")
    url = f"/api/apps/{budget.id}/run/count_expenses/"

    first = api.post(url, {"kind": "query"}, format="json").json()
    second = api.post(url, {"kind": "query"}, format="json").json()

    stored, delivered = first["advisories"]
    assert stored == {"kind": "find-without-limit", "severity": "warn", "summary": "s"}
    assert delivered["kind"] == "feedback-response"
    assert delivered["user_summary"] == "Charming staff answered your feedback about 'Budget': Done."
    assert delivered["data"]["response_id"] == str(answer.pk)
    assert [a["kind"] for a in second["advisories"]] == ["find-without-limit"]
    answer.refresh_from_db()
    assert answer.read_at is not None


def test_a_committed_run_answers_200_when_its_advisories_fail(api, budget, monkeypatch):
    from apps_registry.services import advisories as advisories_service

    def fail(app):
        raise RuntimeError("advisory query failed")

    monkeypatch.setattr(advisories_service, "advisories_open_for", fail)

    response = api.post(
        f"/api/apps/{budget.id}/run/add_expense/", {"params": {"amount": 2, "category": "tea"}}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {"ok": True, "value": {"id": Record.objects.get().record_id}}


def test_an_oversized_app_id_or_op_is_not_echoed_whole(api, budget):
    missing = api.post(f"/api/apps/{'7' * 5000}/run/x/", {}, format="json")
    unknown = api.post(f"/api/apps/{budget.id}/run/{'o' * 5000}/", {}, format="json")

    assert missing.status_code == 404 and len(missing.content) < 1_000
    assert unknown.status_code == 404 and len(unknown.content) < 1_000


def test_a_route_that_breaks_its_output_contract_is_422_not_a_server_fault(api, budget):
    response = api.post(f"/api/apps/{budget.id}/run/broken/", {}, format="json")

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["kind"] == "invalid_output"
    assert "the app's author must fix the route" in error["message"]
    assert Record.objects.count() == 0


def test_an_idempotency_key_header_makes_a_retry_return_the_first_result(api, budget):
    url = f"/api/apps/{budget.id}/run/add_expense/"
    body = {"params": {"amount": 2, "category": "tea"}}

    first = api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="rest-1")
    retry = api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="rest-1")
    changed = api.post(url, {"params": {"amount": 3, "category": "tea"}}, format="json", HTTP_IDEMPOTENCY_KEY="rest-1")

    assert first.json() == retry.json() == {"ok": True, "value": {"id": Record.objects.get().record_id}}
    assert "Idempotent-Replayed" not in first and retry["Idempotent-Replayed"] == "true"
    assert changed.status_code == 400
    assert changed.json()["error"]["message"].startswith(
        "The idempotency key (Idempotency-Key header) was already used for a call of 'add_expense' with other params"
    )
    assert Record.objects.count() == 1
