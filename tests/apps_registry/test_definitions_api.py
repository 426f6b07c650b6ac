"""The authors' REST API for app definitions: token auth, owner and editors only, the error envelope."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps_registry.access import membership_set
from apps_registry.models import App, Role
from apps_registry.services.tokens import token_create
from tests.apps_registry.route_helpers import example
from tests.messages import app_not_found

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")
    return client


def test_create_read_replace_and_clear_a_definition(user):
    client = client_for(user)
    created = client.post("/api/apps/definitions/", example("todo"), format="json")
    assert created.status_code == 201
    app_id = created.json()["value"]["app_id"]
    assert {r["name"] for r in created.json()["value"]["routes"]} == set(example("todo")["routes"])
    read = client.get(f"/api/apps/{app_id}/definition/")
    assert read.status_code == 200
    assert read.json()["value"]["routes"]["add_todo"]["steps"] == example("todo")["routes"]["add_todo"]["steps"]
    changed = example("todo")
    changed["routes"]["add_todo"]["description"] = "Edited."
    replaced = client.put(f"/api/apps/{app_id}/definition/", changed, format="json")
    assert replaced.status_code == 200
    versions = {r["name"]: r["version"] for r in replaced.json()["value"]["routes"]}
    assert versions["add_todo"] == 2 and versions["progress"] == 1
    cleared = client.delete(f"/api/apps/{app_id}/definition/")
    assert cleared.status_code == 200
    assert client.get(f"/api/apps/{app_id}/definition/").json()["value"]["routes"] == {}
    assert App.objects.filter(pk=app_id).exists()


def test_an_invalid_definition_is_a_400_listing_every_problem(user):
    broken = example("todo")
    broken["routes"]["add_todo"]["steps"][0]["count"]["collection"] = "no such"
    broken["routes"]["progress"]["kind"] = "x"
    response = client_for(user).post("/api/apps/definitions/", broken, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["kind"] == "invalid_definition"
    assert error["message"].startswith("The app definition has 2 problem(s); nothing was saved.")
    assert [e["path"] for e in error["errors"]] == [
        "routes.add_todo.steps[0].count.collection",
        "routes.progress.kind",
    ]
    assert not App.objects.exists()


def test_saving_returns_the_authoring_advisories(user):
    definition = example("todo")
    del definition["routes"]["progress"]["output"]
    response = client_for(user).post("/api/apps/definitions/", definition, format="json")
    assert [a["kind"] for a in response.json()["value"]["advisories"]] == ["missing-output-schema"]


def test_only_the_owner_and_editors_may_use_the_definition_api(user, other_user):
    app_id = client_for(user).post("/api/apps/definitions/", example("todo"), format="json").json()["value"]["app_id"]
    stranger = client_for(other_user)
    hidden = stranger.get(f"/api/apps/{app_id}/definition/")
    assert hidden.status_code == 404
    assert hidden.json()["error"]["kind"] == "not_found"
    assert hidden.json()["error"]["message"].startswith(app_not_found(app_id))
    membership_set(actor=user, app=App.objects.get(pk=app_id), user=other_user, role=Role.VIEWER)
    for response in (
        stranger.get(f"/api/apps/{app_id}/definition/"),
        stranger.put(f"/api/apps/{app_id}/definition/", example("todo"), format="json"),
        stranger.delete(f"/api/apps/{app_id}/definition/"),
    ):
        assert response.status_code == 403
        assert response.json()["error"]["kind"] == "forbidden"
        assert response.json()["error"]["message"] == (
            "Only the app's owner and editors can read or change the definition of app 'To-do'; you are a viewer."
        )
    membership_set(actor=user, app=App.objects.get(pk=app_id), user=other_user, role=Role.EDITOR)
    assert stranger.get(f"/api/apps/{app_id}/definition/").status_code == 200


def test_the_definition_api_needs_a_token():
    response = APIClient().post("/api/apps/definitions/", example("todo"), format="json")
    assert response.status_code == 401
    assert response.json() == {
        "ok": False,
        "error": {
            "kind": "unauthenticated",
            "message": "Missing token: send the header 'Authorization: Bearer <token>'.",
        },
    }
    assert not App.objects.exists()


def test_a_definition_whose_tests_fail_is_refused_with_422_and_every_failure(user):
    definition = example("todo")
    definition["tests"][0]["expect"] = {"value": {"priority": 3}}
    response = client_for(user).post("/api/apps/definitions/", definition, format="json")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["kind"] == "tests_failed"
    assert [e["path"] for e in error["errors"]] == ["tests[0]"]
    assert len(error["details"]["tests"]) == len(definition["tests"])
    assert not App.objects.exists()


def test_the_exported_definition_keeps_its_tests(user):
    app_id = client_for(user).post("/api/apps/definitions/", example("todo"), format="json").json()["value"]["app_id"]
    exported = client_for(user).get(f"/api/apps/{app_id}/definition/").json()["value"]
    assert exported["tests"] == example("todo")["tests"]
