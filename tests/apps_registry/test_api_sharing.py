"""The sharing endpoints: members, invitations and their answers, over REST with bearer tokens."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from apps_registry.access import membership_set
from apps_registry.models import AuditEvent, Invitation, Membership
from apps_registry.services.sharing import invitation_accept, invitation_create
from apps_registry.services.tokens import token_create
from tests.factories import UserFactory, make_app
from tests.messages import app_not_found

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")
    return client


@pytest.fixture
def budget(user):
    return make_app(owner=user, name="Budget")


@pytest.fixture
def carol(db):
    return UserFactory(username="carol")


@pytest.fixture
def alice_api(user):
    return client_for(user)


@pytest.fixture
def bob_api(other_user):
    return client_for(other_user)


def members_url(app_id, username=None) -> str:
    return f"/api/apps/{app_id}/members/" + (f"{username}/" if username else "")


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.json()
    body = response.json()
    assert body["ok"] is False
    return body["error"]


def invite(app, username="bob", role="editor"):
    return invitation_create(actor=app.owner, app_id=app.id, invitee=username, role=role)


# ---- the owner invites; the invitee sees, accepts or declines ------------------------------------


def test_invite_accept_and_list_members_end_to_end(budget, alice_api, bob_api):
    sent = alice_api.post(members_url(budget.id), {"user": "bob@example.com", "role": "editor"}, format="json")
    assert sent.status_code == 201, sent.json()
    invitation = sent.json()["value"]
    assert {k: invitation[k] for k in ("username", "role")} == {"username": "bob", "role": "editor"}

    pending = bob_api.get("/api/invitations/")
    assert pending.status_code == 200
    assert pending.json()["value"] == [
        {
            "id": invitation["id"],
            "app_name": "Budget",
            "invited_by": "alice",
            "role": "editor",
            "created_at": invitation["created_at"],
        }
    ]
    assert bob_api.get("/api/apps/").json()["value"] == []  # pending grants nothing
    assert error_of(bob_api.get(members_url(budget.id)), 404)["kind"] == "not_found"

    accepted = bob_api.post(f"/api/invitations/{invitation['id']}/accept/")
    assert accepted.status_code == 200, accepted.json()
    assert accepted.json()["value"] == {"app_id": str(budget.id), "app_name": "Budget", "role": "editor"}

    assert bob_api.get("/api/invitations/").json()["value"] == []
    assert [a["role"] for a in bob_api.get("/api/apps/").json()["value"]] == ["editor"]
    members = bob_api.get(members_url(budget.id))
    assert members.status_code == 200
    assert members.json()["value"] == [{"username": "alice", "role": "owner"}, {"username": "bob", "role": "editor"}]


def test_decline(budget, bob_api, other_user):
    invitation = invite(budget)
    response = bob_api.post(f"/api/invitations/{invitation.pk}/decline/")
    assert response.status_code == 200
    assert response.json()["value"] == {"id": invitation.pk, "status": "declined"}
    assert not Membership.objects.filter(user=other_user).exists()
    again = error_of(bob_api.post(f"/api/invitations/{invitation.pk}/accept/"), 409)
    assert again["kind"] == "operation_failed" and "was already declined on " in again["message"]


@pytest.mark.parametrize("verb", ["accept", "decline"])
def test_another_users_invitation_is_not_found(budget, other_user, carol, verb):
    invitation = invite(budget)
    for invitation_id in (invitation.pk, "nope", "99999999999999999999"):
        error = error_of(client_for(carol).post(f"/api/invitations/{invitation_id}/{verb}/"), 404)
        assert error == {"kind": "not_found", "message": f"No invitation with id {invitation_id} is addressed to you."}
    assert client_for(carol).get("/api/invitations/").json()["value"] == []
    assert Invitation.objects.get().status == "pending"


@pytest.mark.parametrize(
    ("payload", "status", "kind", "message", "path"),
    [
        ({"role": "editor"}, 400, "invalid_input", "Missing 'user': the username or email to invite.", "$.user"),
        ({"user": "bob"}, 400, "invalid_input", "Missing 'role': 'editor' or 'viewer'.", "$.role"),
        (
            {"user": "bob", "role": "owner"},
            400,
            "invalid_input",
            "A shared app's role must be 'editor' or 'viewer', got 'owner'.",
            "$.role",
        ),
        (
            {"user": "zed", "role": "viewer"},
            400,
            "invalid_input",
            "No Charming user has the username or confirmed email 'zed'. Check the spelling, or ask them to sign up "
            "(and confirm their email address) first.",
            "$.user",
        ),
        ({"user": 7, "role": "viewer"}, 400, "invalid_input", "Name the person to invite", "$.user"),
        ({"user": "bob", "role": "viewer", "note": "hi"}, 400, "invalid_input", "Unknown field(s) 'note'", "$.note"),
        (["bob"], 400, "invalid_input", "Send a JSON object like", "$"),
    ],
)
def test_bad_invitations_are_refused_with_what_to_fix(budget, alice_api, payload, status, kind, message, path):
    error = error_of(alice_api.post(members_url(budget.id), payload, format="json"), status)
    assert error["kind"] == kind and error["message"].startswith(message)
    assert error["errors"][0]["path"] == path
    assert not Invitation.objects.exists()


def test_inviting_twice_or_a_member_is_a_conflict(budget, alice_api, other_user, carol):
    invite(budget, "bob")
    membership_set(actor=budget.owner, app=budget, user=carol, role="viewer")
    twice = error_of(alice_api.post(members_url(budget.id), {"user": "bob", "role": "viewer"}, format="json"), 409)
    assert twice["message"] == (
        "'bob' already has a pending invitation to app 'Budget' (as editor); revoke it before inviting them again."
    )
    member = error_of(alice_api.post(members_url(budget.id), {"user": "carol", "role": "editor"}, format="json"), 409)
    assert member == {
        "kind": "operation_failed",
        "message": "'carol' is already a viewer of app 'Budget'; change their role instead of inviting them.",
        "details": {"username": "carol", "role": "viewer"},
    }


def test_only_the_owner_invites_and_strangers_get_not_found(budget, bob_api, other_user, carol):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="editor")
    denied = error_of(bob_api.post(members_url(budget.id), {"user": "carol", "role": "viewer"}, format="json"), 403)
    assert denied["kind"] == "forbidden"
    assert denied["message"] == (
        "Only the app's owner can delete, share or manage app 'Budget'; you are an editor, not the owner."
    )
    stranger = client_for(carol)
    missing = uuid.uuid4()
    for method, url in (
        ("get", members_url(budget.id)),
        ("post", members_url(budget.id)),
        ("patch", members_url(budget.id, "bob")),
        ("delete", members_url(budget.id, "bob")),
        ("get", f"/api/apps/{budget.id}/invitations/"),
        ("delete", f"/api/apps/{budget.id}/invitations/1/"),
    ):
        body = {"user": "carol", "role": "viewer"} if method == "post" else {"role": "viewer"}
        send = getattr(stranger, method)
        hidden = error_of(send(url, body, format="json"), 404)
        absent = error_of(send(url.replace(str(budget.id), str(missing)), body, format="json"), 404)
        assert hidden["kind"] == "not_found", url
        assert hidden["message"] == absent["message"].replace(str(missing), str(budget.id)), url
        assert hidden["message"].startswith(app_not_found(budget.id)), url
    assert not Invitation.objects.exists()
    assert Membership.objects.get(app=budget, user=other_user).role == "editor"


def test_sharing_needs_a_token(budget):
    for response in (APIClient().get(members_url(budget.id)), APIClient().get("/api/invitations/")):
        assert error_of(response, 401)["kind"] == "unauthenticated"


# ---- the owner manages members and invitations ---------------------------------------------------


def test_the_owner_lists_and_revokes_pending_invitations(budget, alice_api, other_user):
    invitation = invite(budget, "bob", role="viewer")
    listed = alice_api.get(f"/api/apps/{budget.id}/invitations/")
    assert listed.status_code == 200
    assert [(i["id"], i["username"], i["role"]) for i in listed.json()["value"]] == [(invitation.pk, "bob", "viewer")]

    revoked = alice_api.delete(f"/api/apps/{budget.id}/invitations/{invitation.pk}/")

    assert revoked.status_code == 200 and revoked.json()["value"] == {"id": invitation.pk, "status": "revoked"}
    assert alice_api.get(f"/api/apps/{budget.id}/invitations/").json()["value"] == []
    again = error_of(alice_api.delete(f"/api/apps/{budget.id}/invitations/{invitation.pk}/"), 409)
    assert "was already revoked on " in again["message"]
    for unknown_id in ("999", "x", "99999999999999999999"):
        unknown = error_of(alice_api.delete(f"/api/apps/{budget.id}/invitations/{unknown_id}/"), 404)
        assert unknown == {"kind": "not_found", "message": f"App 'Budget' has no invitation with id {unknown_id}."}


def test_members_see_but_cannot_list_invitations(budget, bob_api, other_user):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="viewer")
    error = error_of(bob_api.get(f"/api/apps/{budget.id}/invitations/"), 403)
    assert error["message"].endswith("you are a viewer, not the owner.")


def test_the_owner_changes_a_role(budget, alice_api, bob_api, other_user):
    invitation_accept(actor=other_user, invitation_id=invite(budget, "bob", role="editor").pk)

    response = alice_api.patch(members_url(budget.id, "bob"), {"role": "viewer"}, format="json")

    assert response.status_code == 200 and response.json()["value"] == {"username": "bob", "role": "viewer"}
    assert [a["role"] for a in bob_api.get("/api/apps/").json()["value"]] == ["viewer"]
    assert AuditEvent.objects.filter(action="membership.role_change").count() == 1


@pytest.mark.parametrize(
    ("username", "payload", "status", "message"),
    [
        ("bob", {}, 400, "Missing 'role': 'editor' or 'viewer'."),
        ("bob", {"role": "owner"}, 400, "A shared app's role must be 'editor' or 'viewer', got 'owner'."),
        ("bob", {"role": "viewer", "user": "x"}, 400, "Unknown field(s) 'user'"),
        ("alice", {"role": "viewer"}, 400, "The owner's own role cannot change: an app has exactly one owner."),
        ("carol", {"role": "viewer"}, 404, "'carol' is not a member of app 'Budget'."),
    ],
)
def test_bad_role_changes_are_refused(budget, alice_api, other_user, username, payload, status, message):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="editor")
    error = error_of(alice_api.patch(members_url(budget.id, username), payload, format="json"), status)
    assert error["message"].startswith(message)
    assert Membership.objects.get(app=budget, user=other_user).role == "editor"


def test_an_editor_cannot_change_roles(budget, bob_api, other_user):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="editor")
    error = error_of(bob_api.patch(members_url(budget.id, "bob"), {"role": "editor"}, format="json"), 403)
    assert error["kind"] == "forbidden"


def test_the_owner_removes_a_member(budget, alice_api, bob_api, other_user):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="editor")

    response = alice_api.delete(members_url(budget.id, "bob"))

    assert response.status_code == 200
    assert response.json()["value"] == {"app_id": str(budget.id), "removed": "bob"}
    assert bob_api.get("/api/apps/").json()["value"] == []
    assert error_of(bob_api.get(members_url(budget.id)), 404)["message"].startswith(app_not_found(budget.id))


def test_a_member_cannot_remove_another(budget, bob_api, other_user, carol):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="editor")
    membership_set(actor=budget.owner, app=budget, user=carol, role="viewer")
    error = error_of(bob_api.delete(members_url(budget.id, "carol")), 403)
    assert error["kind"] == "forbidden"
    assert Membership.objects.filter(app=budget).count() == 3


def test_a_member_deletes_themselves_to_leave(budget, bob_api, other_user):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="viewer")

    response = bob_api.delete(members_url(budget.id, "bob"))

    assert response.status_code == 200 and response.json()["value"] == {"app_id": str(budget.id), "left": True}
    assert bob_api.get("/api/apps/").json()["value"] == []
    assert AuditEvent.objects.get(action="membership.leave").actor == other_user


def test_the_owner_cannot_leave(budget, alice_api):
    error = error_of(alice_api.delete(members_url(budget.id, "alice")), 403)
    assert error == {
        "kind": "forbidden",
        "message": "You own app 'Budget' and cannot leave it: an app has exactly one owner. "
        "Delete the app instead, or remove its other members.",
    }
    assert Membership.objects.filter(app=budget).count() == 1
