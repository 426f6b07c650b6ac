"""The change log over REST: a mutation's change id in its header, the app's changes, a revert."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps_registry.models import Change, Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
from tests.mcp_tools.test_mutate_app import DEFINITION

pytestmark = pytest.mark.django_db


@pytest.fixture
def budget(user):
    return app_definition_save(actor=user, definition=DEFINITION)


def add(api, budget):
    response = api.post(
        f"/api/apps/{budget.id}/run/add_expense/", {"params": {"amount": 2, "category": "tea"}}, format="json"
    )
    assert response.status_code == 200
    return response


def test_a_mutation_answers_its_change_id_and_the_change_says_rest(api, budget):
    response = add(api, budget)
    change = Change.objects.get()
    assert response["Charming-Change-Id"] == str(change.pk)
    assert (change.via, change.route) == ("rest", "add_expense")


def test_the_app_changes_list_and_a_revert(api, budget):
    change_id = add(api, budget)["Charming-Change-Id"]
    listed = api.get(f"/api/apps/{budget.id}/changes/").json()
    assert [c["id"] for c in listed["value"]] == [change_id]
    assert listed["value"][0]["entries"][0]["before"] is None
    reverted = api.post(f"/api/changes/{change_id}/revert/", {}, format="json")
    assert reverted.status_code == 200, reverted.json()
    assert reverted.json()["value"]["records"][0]["action"] == "deleted"
    assert not Record.objects.exists()
    again = api.post(f"/api/changes/{change_id}/revert/", {}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["kind"] == "conflict"
    assert f"by change {reverted.json()['value']['change_id']}" in again.json()["error"]["message"]


def test_since_and_until_bound_the_listed_changes(api, budget):
    old, new = (add(api, budget)["Charming-Change-Id"] for _ in range(2))
    Change.objects.filter(pk=old).update(created_at="2026-01-10T12:00:00Z")
    recent = api.get(f"/api/apps/{budget.id}/changes/?since=2026-02-01")
    assert [c["id"] for c in recent.json()["value"]] == [new]
    earlier = api.get(f"/api/apps/{budget.id}/changes/?until=2026-02-01T00:00:00Z")
    assert [c["id"] for c in earlier.json()["value"]] == [old]


def test_bad_inputs_are_refused_with_what_to_fix(api, budget):
    change_id = add(api, budget)["Charming-Change-Id"]
    half = api.get(f"/api/apps/{budget.id}/changes/?collection=expenses")
    assert half.status_code == 400 and "both 'collection' and 'record_id'" in half.json()["error"]["message"]
    limit = api.get(f"/api/apps/{budget.id}/changes/?limit=0")
    assert (
        limit.status_code == 400 and "'limit' must be a whole number from 1 to 100" in limit.json()["error"]["message"]
    )
    since = api.get(f"/api/apps/{budget.id}/changes/?since=tomorrow")
    assert since.status_code == 400 and "'since' must be an ISO 8601 date-time" in since.json()["error"]["message"]
    force = api.post(f"/api/changes/{change_id}/revert/", {"force": "perhaps"}, format="json")
    assert force.status_code == 400 and "'force' must be true or false." in force.json()["error"]["message"]
    unknown = api.post(f"/api/changes/{change_id}/revert/", {"forse": True}, format="json")
    assert unknown.status_code == 400 and "Unknown field(s) 'forse'" in unknown.json()["error"]["message"]
    bad_id = api.post("/api/changes/nope/revert/", {}, format="json")
    assert bad_id.status_code == 400 and "positive whole number" in bad_id.json()["error"]["message"]
    assert Record.objects.count() == 1


def test_another_users_token_sees_no_changes_and_cannot_revert(api, budget, other_user):
    change_id = add(api, budget)["Charming-Change-Id"]
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=other_user).plaintext}")
    assert other.get(f"/api/apps/{budget.id}/changes/").status_code == 404
    refused = other.post(f"/api/changes/{change_id}/revert/", {}, format="json")
    assert refused.status_code == 404 and f"No change {change_id}" in refused.json()["error"]["message"]
    assert Record.objects.count() == 1


def test_a_read_only_token_may_list_but_not_revert(api, budget, user):
    change_id = add(api, budget)["Charming-Change-Id"]
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, scopes=('apps:read',)).plaintext}")
    assert reader.get(f"/api/apps/{budget.id}/changes/").status_code == 200
    refused = reader.post(f"/api/changes/{change_id}/revert/", {}, format="json")
    assert refused.status_code == 403 and "apps:write" in refused.json()["error"]["message"]
    assert Record.objects.count() == 1
