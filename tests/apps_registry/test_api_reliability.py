"""Reliability of the REST API (issue 12): malformed text refused as input, never a 500."""

from __future__ import annotations

import json

import pytest

from apps_registry.models import App, Feedback, Record
from apps_registry.services.definitions import app_definition_save
from tests.mcp_tools.test_mutate_app import DEFINITION
from tests.redaction_cases import LEAKY, SECRET_IDS, SECRET_PARAMS

pytestmark = pytest.mark.django_db


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


# --- PUT /api/apps/<id>/definition/: no existence oracle, no claiming a deleted app's id ---


def definition_put(api, app_id):
    from tests.apps_registry.route_helpers import example

    return api.put(f"/api/apps/{app_id}/definition/", example("todo"), format="json")


def test_put_answers_an_unused_a_deleted_and_another_users_id_alike_and_creates_nothing(api, user, other_user):
    """Issue 22: PUT used to create an app at an id no app ever had (201) and refuse the others (404), so it told
    which ids some app has had. It never creates now: the three answers differ only by the id they quote."""
    import uuid

    from apps_registry.services.apps import app_delete
    from tests.factories import make_app

    theirs = make_app(owner=other_user, name="Theirs")
    deleted = make_app(owner=other_user, name="Deleted")
    app_delete(actor=other_user, app_id=deleted.id, purge_storage=True, confirmed_via="confirm_parameter")
    unused = uuid.uuid4()

    answers = {}
    for app_id in (unused, deleted.id, theirs.id):
        response = definition_put(api, app_id)
        body = response.content.decode().replace(str(app_id), "<id>")
        answers[app_id] = (response.status_code, body, response["Content-Type"], response.get("Allow"))

    assert len(set(answers.values())) == 1, answers
    status, body, _type, _allow = answers[unused]
    assert status == 404
    assert json.loads(body)["error"] == {
        "kind": "not_found",
        "message": "No app with id <id> exists or is visible to you. GET /api/apps/ lists your apps.",
    }
    assert not App.objects.filter(pk=unused).exists()
    assert set(App.objects.values_list("name", flat=True)) == {"Theirs"}


def test_put_replaces_an_app_you_author(api, user):
    created = api.post("/api/apps/definitions/", DEFINITION, format="json").json()["value"]

    response = definition_put(api, created["app_id"])

    assert response.status_code == 200
    assert response.json()["value"]["app_id"] == created["app_id"]


def test_put_at_any_id_you_cannot_author_is_answered_like_an_invisible_app(api, user, other_user):
    from apps_registry.services.apps import app_delete
    from tests.factories import make_app

    theirs = make_app(owner=other_user, name="Theirs")
    retained = make_app(owner=other_user, name="Deleted, storage retained")
    app_delete(actor=other_user, app_id=retained.id, purge_storage=False, confirmed_via="confirm_parameter")
    purged = make_app(owner=other_user, name="Deleted and purged")
    app_delete(actor=other_user, app_id=purged.id, purge_storage=True, confirmed_via="confirm_parameter")
    mine_deleted = make_app(owner=user, name="My deleted app")
    app_delete(actor=user, app_id=mine_deleted.id, purge_storage=True, confirmed_via="confirm_parameter")

    for app in (theirs, retained, purged, mine_deleted):
        response = definition_put(api, app.id)

        assert response.status_code == 404, app.name
        assert response.json()["error"] == api.get(f"/api/apps/{app.id}/definition/").json()["error"]
        assert response.json()["error"]["message"].startswith(f"No app with id {app.id} exists or is visible to you.")
    assert set(App.objects.values_list("name", flat=True)) == {"Theirs"}


def test_a_definition_with_failing_tests_at_a_deleted_id_is_answered_like_an_invisible_app(api, other_user):
    from apps_registry.services.apps import app_delete
    from tests.apps_registry.route_helpers import example
    from tests.factories import make_app

    failing = example("todo")
    failing["tests"] = [{"name": "wrong", "route": failing["tests"][0]["route"], "expect": {"error": "handler_error"}}]
    theirs = make_app(owner=other_user, name="Theirs")
    deleted = make_app(owner=other_user, name="Deleted")
    app_delete(actor=other_user, app_id=deleted.id, purge_storage=True, confirmed_via="confirm_parameter")

    answers = [api.put(f"/api/apps/{app.id}/definition/", failing, format="json") for app in (theirs, deleted)]

    assert [answer.status_code for answer in answers] == [404, 404]
    assert answers[1].json()["error"]["message"].startswith(f"No app with id {deleted.id} exists or is visible to you.")


# --- finding 6: secrets are redacted in every error, on every path ---


@pytest.mark.parametrize(("text", "secret"), SECRET_PARAMS, ids=SECRET_IDS)
def test_secrets_are_redacted_in_every_rest_error_path(api, user, text, secret):
    leaky = app_definition_save(actor=user, definition=LEAKY)
    failed = api.post(f"/api/apps/{leaky.id}/run/fail_with/", {"params": {"msg": text}}, format="json")
    bad_value = api.post(f"/api/apps/{leaky.id}/run/wants_a_number/", {"params": {"n": text}}, format="json")
    responses = [failed, bad_value]
    if "/" not in text:  # a path segment cannot hold a slash
        responses.append(api.post(f"/api/apps/{leaky.id}/run/{text}/", {}, format="json"))  # unknown op
        responses.append(api.get(f"/api/apps/{text}/definition/"))  # not found

    assert failed.status_code == 422
    assert "[REDACTED]" in failed.json()["error"]["details"]["note"]
    assert [r.json()["error"]["kind"] for r in responses][:2] == ["handler_error", "invalid_input"]
    assert [r.json()["error"]["kind"] for r in responses][2:] in ([], ["unknown_op", "not_found"])
    for response in responses:
        assert secret not in response.content.decode()
        assert "[REDACTED]" in response.content.decode()


def test_secrets_in_an_unexpected_error_are_redacted_in_the_log_line(api, user, monkeypatch, caplog):
    from apps_registry.api import runs

    def broken(**kwargs):
        raise RuntimeError("could not connect to postgres://app:hunter2pass@db.internal/x with password=hunter2pass")

    monkeypatch.setattr(runs, "route_run", broken)
    leaky = app_definition_save(actor=user, definition=LEAKY)

    response = api.post(f"/api/apps/{leaky.id}/run/fail_with/", {"params": {"msg": "x"}}, format="json")

    assert response.status_code == 500
    assert "hunter2pass" not in response.content.decode()
    assert "postgres://app:[REDACTED]@db.internal/x" in caplog.text
    assert "hunter2pass" not in caplog.text


@pytest.mark.django_db(transaction=True)  # a real COMMIT, not the test's savepoint
def test_a_run_whose_commit_answer_was_lost_is_503_saying_the_outcome_is_unknown(api, budget, commit_answer_lost):
    url = f"/api/apps/{budget.id}/run/add_expense/"

    lost = api.post(url, {"params": {"amount": 2, "category": "tea"}}, format="json")

    assert lost.status_code == 503
    assert lost.json()["error"]["message"].startswith("The connection to the database was lost while this change")
    assert Record.objects.count() == 1  # it did commit: the caller is not told to simply try again
