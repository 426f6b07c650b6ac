"""Sharing on the pages through Django's test client: the members section, leaving, and answering invitations."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.models import AuditEvent, Invitation, InvitationStatus, Membership
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.sharing import invitation_create
from tests.apps_registry.route_helpers import example
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

OWNER_ONLY = "Only the app&#x27;s owner can delete, share or manage app &#x27;Budget&#x27;"


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.fixture
def budget(user):
    return app_definition_save(actor=user, definition=example("budget"))


@pytest.fixture
def owner_client(client, user):
    client.force_login(user)
    return client


def member(budget, username: str, role: str):
    person = UserFactory(username=username, email=f"{username}@example.com")
    membership_set(actor=budget.owner, app=budget, user=person, role=role)
    return person


def url(name: str, *args) -> str:
    return reverse(name, args=list(args))


def test_owner_sees_members_invitations_and_the_invite_form(owner_client, budget):
    member(budget, "ed", "editor")
    UserFactory(username="ivy")
    invitation_create(actor=budget.owner, app_id=budget.id, invitee="ivy", role="viewer")
    body = text(owner_client.get(url("app_page", budget.id)))
    assert "Members and invitations" in body
    assert re.search(r"<td>alice</td> <td><span class=\"role role-owner\">Owner</span>", body)
    assert re.search(r"<td>ed</td> <td><span class=\"role role-editor\">Editor</span>", body)
    assert f'action="{url("app_member_role", budget.id, "ed")}"' in body
    assert f'action="{url("app_member_remove", budget.id, "ed")}"' in body
    assert f'action="{url("app_member_role", budget.id, "alice")}"' not in body
    assert 'ivy as <span class="role role-viewer">Viewer</span>' in body
    assert 'name="user"' in body and 'name="role"' in body
    assert "csrfmiddlewaretoken" in body


def test_owner_invites_by_username_or_email_and_is_sent_back_with_a_message(owner_client, budget):
    UserFactory(username="bob", email="Bob@Example.com")
    response = owner_client.post(url("app_member_invite", budget.id), {"user": "bob@example.com", "role": "editor"})
    assert response.status_code == 302
    assert response["Location"] == url("app_page", budget.id) + "#members"
    invitation = Invitation.objects.get(app=budget)
    assert (invitation.invitee.username, invitation.role, invitation.status) == ("bob", "editor", "pending")
    body = text(owner_client.get(response["Location"]))
    assert "bob is invited as editor; they see the invitation on their home page." in body
    assert AuditEvent.objects.filter(action="membership.invite").exists()


def test_inviting_an_unknown_user_is_shown_at_the_username_field(owner_client, budget):
    response = owner_client.post(url("app_member_invite", budget.id), {"user": "nobody", "role": "viewer"})
    assert response.status_code == 400
    body = text(response)
    assert re.search(
        r'<input type="text" name="user" value="nobody"[^>]*> <ul class="field-errors"><li>No Charming user has the '
        r"username or confirmed email &#x27;nobody&#x27;. Check the spelling, or ask them to sign up \(and confirm "
        r"their email address\) first.</li>",
        body,
    )
    assert not Invitation.objects.exists()


def test_inviting_with_an_empty_name_or_a_bad_role_is_refused_at_the_field(owner_client, budget):
    UserFactory(username="bob")
    body = text(owner_client.post(url("app_member_invite", budget.id), {"user": "", "role": "owner"}))
    assert "This field is required." in body
    assert "Select a valid choice. owner is not one of the available choices." in body
    assert not Invitation.objects.exists()


def test_inviting_a_member_again_is_shown_above_the_form(owner_client, budget):
    member(budget, "ed", "editor")
    response = owner_client.post(url("app_member_invite", budget.id), {"user": "ed", "role": "viewer"})
    assert response.status_code == 409
    assert (
        "&#x27;ed&#x27; is already an editor of app &#x27;Budget&#x27;; change their role instead of inviting them."
        in text(response)
    )


def test_owner_changes_a_role_and_removes_a_member(owner_client, budget):
    ed = member(budget, "ed", "editor")
    response = owner_client.post(url("app_member_role", budget.id, "ed"), {"role": "viewer"})
    assert response.status_code == 302
    assert Membership.objects.get(app=budget, user=ed).role == "viewer"
    assert "ed is now viewer of “Budget”." in text(owner_client.get(url("app_page", budget.id)))

    response = owner_client.post(url("app_member_remove", budget.id, "ed"))
    assert response.status_code == 302
    assert not Membership.objects.filter(app=budget, user=ed).exists()
    assert "ed was removed from “Budget”." in text(owner_client.get(url("app_page", budget.id)))


def test_a_bad_role_or_the_owners_own_row_is_refused_next_to_the_member(owner_client, budget):
    member(budget, "ed", "editor")
    response = owner_client.post(url("app_member_role", budget.id, "ed"), {"role": "owner"})
    assert response.status_code == 400
    assert re.search(r'id="member-2-errors" role="alert"><li>[^<]*owner', text(response))
    assert 'aria-describedby="member-2-errors"' in text(response)
    response = owner_client.post(url("app_member_remove", budget.id, "alice"))
    assert response.status_code == 400
    assert "The owner cannot be removed from app &#x27;Budget&#x27;: an app has exactly one owner." in text(response)
    response = owner_client.post(url("app_member_remove", budget.id, "ghost"))
    assert response.status_code == 404
    assert "&#x27;ghost&#x27; is not a member of app &#x27;Budget&#x27;." in text(response)


def test_owner_revokes_a_pending_invitation(owner_client, budget):
    UserFactory(username="ivy")
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee="ivy", role="viewer")
    response = owner_client.post(url("app_invitation_revoke", budget.id, invitation.pk))
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.REVOKED
    assert "The invitation of ivy is revoked." in text(owner_client.get(url("app_page", budget.id)))
    again = owner_client.post(url("app_invitation_revoke", budget.id, invitation.pk))
    assert again.status_code == 409
    assert "revoked" in text(again)


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_owner_only_actions_are_refused_for_members_with_the_domains_refusal(client, budget, role):
    someone = member(budget, "mia", role)
    other = member(budget, "ed", "viewer")
    UserFactory(username="ivy")
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee="ivy", role="viewer")
    client.force_login(someone)
    posts = [
        (url("app_member_invite", budget.id), {"user": "ivy", "role": "viewer"}),
        (url("app_member_role", budget.id, "ed"), {"role": "editor"}),
        (url("app_member_remove", budget.id, "ed"), {}),
        (url("app_invitation_revoke", budget.id, invitation.pk), {}),
    ]
    for path, data in posts:
        response = client.post(path, data)
        assert response.status_code == 403, path
        assert OWNER_ONLY in text(response)
    assert Membership.objects.get(app=budget, user=other).role == "viewer"
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.PENDING


def test_a_member_sees_the_members_read_only_and_may_leave_after_confirming(client, budget):
    vic = member(budget, "vic", "viewer")
    client.force_login(vic)
    body = text(client.get(url("app_page", budget.id)))
    assert "<td>alice</td>" in body and "<td>vic</td>" in body
    assert "app_member" not in body and "/members/" not in body and 'name="user"' not in body
    assert "Pending invitations" not in body
    assert f'href="{url("app_leave", budget.id)}"' in body

    confirm = text(client.get(url("app_leave", budget.id)))
    assert "Leave “Budget”?" in confirm and "csrfmiddlewaretoken" in confirm
    assert Membership.objects.filter(app=budget, user=vic).exists()
    response = client.post(url("app_leave", budget.id))
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert not Membership.objects.filter(app=budget, user=vic).exists()
    assert "You left “Budget”" in text(client.get(reverse("home")))


def test_the_owner_cannot_leave(owner_client, budget):
    for response in (owner_client.get(url("app_leave", budget.id)), owner_client.post(url("app_leave", budget.id))):
        assert response.status_code == 403
        assert "You own app &#x27;Budget&#x27; and cannot leave it" in text(response)
    assert Membership.objects.filter(app=budget, user=budget.owner).exists()


def _unmasked(response) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode())


def test_another_users_app_is_a_404_for_every_sharing_page(client, other_user, budget):
    client.force_login(other_user)
    missing = client.get(url("app_page", "00000000-0000-0000-0000-000000000000"))
    for path in (
        url("app_member_invite", budget.id),
        url("app_member_role", budget.id, "alice"),
        url("app_member_remove", budget.id, "alice"),
        url("app_invitation_revoke", budget.id, 1),
        url("app_leave", budget.id),
    ):
        response = client.post(path, {"user": "bob", "role": "viewer"})
        assert response.status_code == 404, path
        # the same styled 404, but for the randomly masked CSRF token of the log-out button
        assert _unmasked(response) == _unmasked(missing)
    assert client.get(url("app_leave", budget.id)).status_code == 404
    assert not Invitation.objects.exists()


def test_home_lists_pending_invitations_and_accepting_opens_the_app(client, budget, other_user):
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee="bob", role="viewer")
    client.force_login(other_user)
    body = text(client.get(reverse("home")))
    assert "Invitations for you" in body
    assert '<strong>Budget</strong>: alice invites you as <span class="role role-viewer">Viewer</span>' in body
    assert f'action="{url("invitation_accept", invitation.pk)}"' in body
    assert f'action="{url("invitation_decline", invitation.pk)}"' in body

    response = client.post(url("invitation_accept", invitation.pk))
    assert response.status_code == 302 and response["Location"] == url("app_page", budget.id)
    assert Membership.objects.get(app=budget, user=other_user).role == "viewer"
    page = text(client.get(response["Location"]))
    assert "You joined “Budget” as viewer." in page
    assert "Invitations for you" not in text(client.get(reverse("home")))


def test_declining_grants_nothing_and_a_second_answer_is_shown_on_home(client, budget, other_user):
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee="bob", role="editor")
    client.force_login(other_user)
    response = client.post(url("invitation_decline", invitation.pk))
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert "You declined the invitation to “Budget”." in text(client.get(reverse("home")))
    assert not Membership.objects.filter(app=budget, user=other_user).exists()
    again = client.post(url("invitation_accept", invitation.pk))
    assert again.status_code == 409
    assert "declined" in text(again)
    assert not Membership.objects.filter(app=budget, user=other_user).exists()


def test_someone_elses_invitation_is_a_404(client, budget, other_user):
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee="bob", role="editor")
    client.force_login(UserFactory(username="eve"))
    assert client.post(url("invitation_accept", invitation.pk)).status_code == 404
    assert client.post(url("invitation_decline", invitation.pk)).status_code == 404
    assert client.get(url("invitation_accept", invitation.pk)).status_code == 405
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.PENDING


def test_sharing_forms_need_the_csrf_token(budget, user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    UserFactory(username="bob")
    response = client.post(url("app_member_invite", budget.id), {"user": "bob", "role": "viewer"})
    assert response.status_code == 403
    assert not Invitation.objects.exists()
