"""Sharing services: invitations and memberships, every rule and refusal (kind and message), and the audit."""

from __future__ import annotations

import pytest

from apps_registry.access import app_for, apps_visible_to, membership_set
from apps_registry.exceptions import (
    AccessDenied,
    AppNotFound,
    Forbidden,
    InvalidInput,
    NotFound,
    OperationFailed,
)
from apps_registry.models import AuditEvent, Invitation, InvitationStatus, Membership
from apps_registry.selectors import invitations_pending_for, invitations_pending_of, members_of
from apps_registry.services.accounts import account_delete
from apps_registry.services.sharing import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_revoke,
    membership_leave,
    membership_remove,
    membership_role_change,
)
from tests.factories import UserFactory, make_app

pytestmark = pytest.mark.django_db

OWNER_ONLY = "Only the app's owner can delete, share or manage app 'Budget'; you are {}, not the owner."


@pytest.fixture
def budget(user):
    return make_app(owner=user, name="Budget")


@pytest.fixture
def carol(db):
    return UserFactory(username="carol", email="Carol@Example.com")


def invite(app, username, role="editor"):
    return invitation_create(actor=app.owner, app_id=app.id, invitee=username, role=role)


def actions(app):
    return list(AuditEvent.objects.filter(app_id=app.id).order_by("created_at", "id").values_list("action", flat=True))


# ---- inviting ----------------------------------------------------------------------------------


@pytest.mark.parametrize("identifier", ["bob", "bob@example.com", "BOB@Example.COM", "  bob  "])
def test_the_owner_invites_by_username_or_email(budget, other_user, identifier):
    invitation = invitation_create(actor=budget.owner, app_id=budget.id, invitee=identifier, role="viewer")

    assert (invitation.invitee, invitation.role, invitation.status) == (other_user, "viewer", "pending")
    assert invitation.invited_by == budget.owner and invitation.responded_at is None
    event = AuditEvent.objects.get(action="membership.invite")
    assert event.app_id == budget.id and event.actor == budget.owner
    assert event.details == {"app_name": "Budget", "invitation_id": invitation.pk, "username": "bob", "role": "viewer"}


def test_a_pending_invitation_does_not_make_the_app_visible(budget, other_user):
    invite(budget, "bob")

    assert list(apps_visible_to(other_user)) == []
    with pytest.raises(AppNotFound):
        app_for(actor=other_user, app_id=budget.id, need="read")
    (listing,) = invitations_pending_for(other_user)
    assert (listing.app_name, listing.invited_by, listing.role) == ("Budget", "alice", "editor")
    assert not hasattr(listing, "app_id")


@pytest.mark.parametrize("role", ["owner", "admin", "", None])
def test_an_invitation_gives_only_editor_or_viewer(budget, other_user, role):
    with pytest.raises(InvalidInput) as exc:
        invite(budget, "bob", role=role)
    assert exc.value.message == f"A shared app's role must be 'editor' or 'viewer', got {role!r}."
    assert exc.value.errors == [{"path": "$.role", "message": "must be 'editor' or 'viewer'"}]
    assert not Invitation.objects.exists()


@pytest.mark.parametrize("identifier", ["nobody", "nobody@example.com"])
def test_an_unknown_username_or_email_is_refused_alike(budget, identifier):
    with pytest.raises(InvalidInput) as exc:
        invite(budget, identifier)
    assert exc.value.kind == "invalid_input"
    assert exc.value.message == (
        f"No Charming user has the username or confirmed email {identifier!r}. Check the spelling, or ask them to "
        "sign up (and confirm their email address) first."
    )
    assert exc.value.errors == [{"path": "$.user", "message": "no such user"}]
    assert not AuditEvent.objects.exists()


def test_an_inactive_account_is_refused_like_an_unknown_one(budget):
    UserFactory(username="gone", is_active=False)
    with pytest.raises(InvalidInput, match="No Charming user has the username or confirmed email 'gone'"):
        invite(budget, "gone")


@pytest.mark.parametrize("identifier", ["", "   ", 7, None])
def test_the_invitee_must_be_named(budget, identifier):
    with pytest.raises(InvalidInput) as exc:
        invite(budget, identifier)
    assert exc.value.message == "Name the person to invite: their username or email."


def test_no_two_accounts_share_an_email_whatever_its_case(budget):
    from django.db import IntegrityError, transaction

    UserFactory(username="twin1", email="twin@example.com")
    with pytest.raises(IntegrityError), transaction.atomic():
        UserFactory(username="twin2", email="TWIN@example.com")
    invitation = invite(budget, "Twin@Example.com")  # the one account with it, whatever the case asked
    assert invitation.invitee.username == "twin1"


def test_an_invitation_by_email_never_reaches_an_account_that_only_claimed_the_address(budget):
    # Someone signed up with the address first, and never opened the link mailed to it (issue 22).
    UserFactory(username="squatter", email="victim@example.com", email_confirmed=False)
    with pytest.raises(InvalidInput) as exc:
        invite(budget, "victim@example.com")
    assert exc.value.message.startswith("No Charming user has the username or confirmed email 'victim@example.com'.")
    assert not Invitation.objects.exists()


def test_once_its_owner_confirms_the_address_an_invitation_by_email_reaches_them(budget):
    from apps_registry.services.accounts import account_create
    from apps_registry.services.email_confirmation import email_confirm, email_confirmation_token

    squatter = UserFactory(username="squatter", email="victim@example.com", email_confirmed=False)
    # The address's owner signs up with it: the unconfirmed claim gives way, and their link confirms it.
    victim = account_create(username="victim", email="victim@example.com", password="a-long-pass-phrase-9")
    email_confirm(token=email_confirmation_token(user=victim))

    invitation = invite(budget, "VICTIM@example.com")

    assert invitation.invitee == victim
    squatter.refresh_from_db()
    assert squatter.email == ""
    assert AuditEvent.objects.get(action="account.email_released").details == {
        "username": "squatter",
        "email": "victim@example.com",
        "taken_by": "victim",
    }


def test_the_owner_cannot_invite_themselves(budget):
    for identifier in ("alice", "alice@example.com"):
        with pytest.raises(InvalidInput) as exc:
            invite(budget, identifier)
        assert exc.value.message == "You own app 'Budget': its one owner cannot be invited to it."
        assert exc.value.errors == [{"path": "$.user", "message": "is the app's owner"}]


def test_inviting_a_member_is_refused(budget, other_user):
    membership_set(actor=budget.owner, app=budget, user=other_user, role="viewer")
    with pytest.raises(OperationFailed) as exc:
        invite(budget, "bob")
    assert exc.value.kind == "operation_failed"
    assert exc.value.message == "'bob' is already a viewer of app 'Budget'; change their role instead of inviting them."


def test_one_pending_invitation_per_app_and_invitee(budget, other_user):
    invite(budget, "bob", role="viewer")
    with pytest.raises(OperationFailed) as exc:
        invite(budget, "bob", role="editor")
    assert exc.value.message == (
        "'bob' already has a pending invitation to app 'Budget' (as viewer); revoke it before inviting them again."
    )
    assert Invitation.objects.count() == 1


def test_after_a_decline_the_owner_may_invite_again(budget, other_user):
    first = invite(budget, "bob")
    invitation_decline(actor=other_user, invitation_id=first.pk)
    second = invite(budget, "bob", role="viewer")
    assert second.pk != first.pk and second.status == "pending"


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_only_the_owner_invites(budget, other_user, carol, role):
    membership_set(actor=budget.owner, app=budget, user=other_user, role=role)
    with pytest.raises(AccessDenied) as exc:
        invitation_create(actor=other_user, app_id=budget.id, invitee="carol", role="viewer")
    assert exc.value.message == OWNER_ONLY.format(f"an {role}" if role == "editor" else f"a {role}")
    with pytest.raises(AppNotFound) as hidden:
        invitation_create(actor=carol, app_id=budget.id, invitee="bob", role="viewer")
    assert hidden.value.message == f"No app with id {budget.id} exists or is visible to you."
    assert not Invitation.objects.exists()


# ---- answering ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_accepting_makes_the_invitee_a_member_with_the_role(budget, other_user, role):
    invitation = invite(budget, "bob", role=role)

    membership = invitation_accept(actor=other_user, invitation_id=invitation.pk)

    assert (membership.user, membership.app, membership.role) == (other_user, budget, role)
    assert app_for(actor=other_user, app_id=budget.id, need="read") == (budget, role)
    invitation.refresh_from_db()
    assert invitation.status == "accepted" and invitation.responded_at is not None
    assert invitations_pending_for(other_user) == []
    assert actions(budget) == ["membership.invite", "membership.accept"]
    event = AuditEvent.objects.get(action="membership.accept")
    assert event.actor == other_user
    assert event.details == {"app_name": "Budget", "invitation_id": invitation.pk, "role": role}


def test_declining_grants_nothing(budget, other_user):
    invitation = invite(budget, "bob")

    invitation_decline(actor=other_user, invitation_id=invitation.pk)

    invitation.refresh_from_db()
    assert invitation.status == "declined" and invitation.responded_at is not None
    assert not Membership.objects.filter(app=budget, user=other_user).exists()
    assert actions(budget) == ["membership.invite", "membership.decline"]


@pytest.mark.parametrize("answer", [invitation_accept, invitation_decline])
def test_only_the_invitee_sees_and_answers_an_invitation(budget, other_user, carol, answer):
    invitation = invite(budget, "bob")
    for stranger in (carol, budget.owner):
        with pytest.raises(NotFound) as exc:
            answer(actor=stranger, invitation_id=invitation.pk)
        assert exc.value.kind == "not_found"
        assert exc.value.message == f"No invitation with id {invitation.pk} is addressed to you."
    for missing in (invitation.pk + 100, "not-a-number", "-1", "99999999999999999999", "٣"):
        with pytest.raises(NotFound) as absent:
            answer(actor=other_user, invitation_id=missing)
        assert absent.value.message == f"No invitation with id {missing} is addressed to you."
    invitation.refresh_from_db()
    assert invitation.status == "pending"
    assert invitations_pending_for(carol) == []


@pytest.mark.parametrize("answer", [invitation_accept, invitation_decline])
@pytest.mark.parametrize("status", ["accepted", "declined", "revoked"])
def test_an_answered_invitation_cannot_be_answered_again(budget, other_user, answer, status):
    invitation = invite(budget, "bob", role="viewer")
    if status == "accepted":
        invitation_accept(actor=other_user, invitation_id=invitation.pk)
        membership_remove(actor=budget.owner, app_id=budget.id, username="bob")
    elif status == "declined":
        invitation_decline(actor=other_user, invitation_id=invitation.pk)
    else:
        invitation_revoke(actor=budget.owner, app_id=budget.id, invitation_id=invitation.pk)

    with pytest.raises(OperationFailed) as exc:
        answer(actor=other_user, invitation_id=invitation.pk)

    assert exc.value.message.startswith(f"The invitation to app 'Budget' was already {status} on ")
    assert exc.value.message.endswith("; it can no longer be answered or revoked.")
    assert exc.value.details == {"invitation_id": invitation.pk, "status": status}
    assert not Membership.objects.filter(app=budget, user=other_user).exists()


# ---- revoking ----------------------------------------------------------------------------------


def test_the_owner_revokes_a_pending_invitation(budget, other_user):
    invitation = invite(budget, "bob")
    assert [i.id for i in invitations_pending_of(budget)] == [invitation.pk]

    invitation_revoke(actor=budget.owner, app_id=budget.id, invitation_id=invitation.pk)

    invitation.refresh_from_db()
    assert invitation.status == "revoked" and invitation.responded_at is not None
    assert invitations_pending_for(other_user) == [] and invitations_pending_of(budget) == []
    event = AuditEvent.objects.get(action="membership.revoke")
    assert event.details == {"app_name": "Budget", "invitation_id": invitation.pk, "username": "bob", "role": "editor"}


def test_revoking_is_owner_only_and_names_the_apps_invitations_only(budget, user, other_user, carol):
    invitation = invite(budget, "bob")
    elsewhere = make_app(owner=carol, name="Chores")
    theirs = invitation_create(actor=carol, app_id=elsewhere.id, invitee="bob", role="viewer")
    membership_set(actor=budget.owner, app=budget, user=carol, role="editor")

    with pytest.raises(AccessDenied) as denied:
        invitation_revoke(actor=carol, app_id=budget.id, invitation_id=invitation.pk)
    assert denied.value.message == OWNER_ONLY.format("an editor")
    with pytest.raises(AppNotFound):
        invitation_revoke(actor=other_user, app_id=budget.id, invitation_id=invitation.pk)
    for other in (theirs.pk, "x", "99999999999999999999"):  # another app's invitation, or no id at all
        with pytest.raises(NotFound) as exc:
            invitation_revoke(actor=user, app_id=budget.id, invitation_id=other)
        assert exc.value.message == f"App 'Budget' has no invitation with id {other}."
    assert set(Invitation.objects.values_list("status", flat=True)) == {"pending"}


def test_an_accepted_invitation_cannot_be_revoked(budget, other_user):
    invitation = invite(budget, "bob")
    invitation_accept(actor=other_user, invitation_id=invitation.pk)
    with pytest.raises(OperationFailed, match="was already accepted on "):
        invitation_revoke(actor=budget.owner, app_id=budget.id, invitation_id=invitation.pk)
    assert Membership.objects.get(app=budget, user=other_user).role == "editor"


# ---- members -----------------------------------------------------------------------------------


@pytest.fixture
def bob_editor(budget, other_user):
    invitation_accept(actor=other_user, invitation_id=invite(budget, "bob", role="editor").pk)
    return other_user


def test_members_are_listed_owner_first(budget, bob_editor, carol):
    invitation_accept(actor=carol, invitation_id=invite(budget, "carol", role="viewer").pk)
    assert [(m.username, m.role) for m in members_of(budget)] == [
        ("alice", "owner"),
        ("bob", "editor"),
        ("carol", "viewer"),
    ]


def test_the_owner_changes_a_members_role(budget, bob_editor):
    membership = membership_role_change(actor=budget.owner, app_id=budget.id, username="bob", role="viewer")

    assert membership.role == "viewer"
    assert app_for(actor=bob_editor, app_id=budget.id, need="read")[1] == "viewer"
    event = AuditEvent.objects.get(action="membership.role_change")
    assert event.details == {"app_name": "Budget", "username": "bob", "from": "editor", "to": "viewer"}


def test_setting_the_same_role_changes_and_audits_nothing(budget, bob_editor):
    membership_role_change(actor=budget.owner, app_id=budget.id, username="bob", role="editor")
    assert not AuditEvent.objects.filter(action="membership.role_change").exists()


def test_role_change_refusals(budget, bob_editor, carol):
    with pytest.raises(InvalidInput) as bad_role:
        membership_role_change(actor=budget.owner, app_id=budget.id, username="bob", role="owner")
    assert bad_role.value.message == "A shared app's role must be 'editor' or 'viewer', got 'owner'."
    with pytest.raises(InvalidInput) as owner:
        membership_role_change(actor=budget.owner, app_id=budget.id, username="alice", role="viewer")
    assert owner.value.message == "The owner's own role cannot change: an app has exactly one owner."
    with pytest.raises(NotFound) as stranger:
        membership_role_change(actor=budget.owner, app_id=budget.id, username="carol", role="viewer")
    assert stranger.value.message == "'carol' is not a member of app 'Budget'."
    with pytest.raises(AccessDenied) as editor:
        membership_role_change(actor=bob_editor, app_id=budget.id, username="bob", role="editor")
    assert editor.value.message == OWNER_ONLY.format("an editor")
    with pytest.raises(AppNotFound):
        membership_role_change(actor=carol, app_id=budget.id, username="bob", role="viewer")
    assert Membership.objects.get(app=budget, user=bob_editor).role == "editor"


def test_the_owner_removes_a_member_who_then_no_longer_sees_the_app(budget, bob_editor):
    membership_remove(actor=budget.owner, app_id=budget.id, username="bob")

    assert list(apps_visible_to(bob_editor)) == []
    with pytest.raises(AppNotFound):
        app_for(actor=bob_editor, app_id=budget.id, need="read")
    event = AuditEvent.objects.get(action="membership.remove")
    assert event.actor == budget.owner
    assert event.details == {"app_name": "Budget", "username": "bob", "role": "editor"}


def test_remove_refusals(budget, bob_editor, carol):
    with pytest.raises(InvalidInput) as owner:
        membership_remove(actor=budget.owner, app_id=budget.id, username="alice")
    assert owner.value.message == "The owner cannot be removed from app 'Budget': an app has exactly one owner."
    with pytest.raises(NotFound) as stranger:
        membership_remove(actor=budget.owner, app_id=budget.id, username="carol")
    assert stranger.value.message == "'carol' is not a member of app 'Budget'."
    with pytest.raises(AccessDenied) as editor:
        membership_remove(actor=bob_editor, app_id=budget.id, username="alice")
    assert editor.value.message == OWNER_ONLY.format("an editor")
    assert Membership.objects.filter(app=budget).count() == 2


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_a_member_leaves(budget, other_user, role):
    invitation_accept(actor=other_user, invitation_id=invite(budget, "bob", role=role).pk)

    membership_leave(actor=other_user, app_id=budget.id)

    assert list(apps_visible_to(other_user)) == []
    event = AuditEvent.objects.get(action="membership.leave")
    assert event.actor == other_user and event.details == {"app_name": "Budget", "role": role}


def test_the_owner_cannot_leave(budget):
    with pytest.raises(Forbidden) as exc:
        membership_leave(actor=budget.owner, app_id=budget.id)
    assert exc.value.kind == "forbidden"
    assert exc.value.message == (
        "You own app 'Budget' and cannot leave it: an app has exactly one owner. "
        "Delete the app instead, or remove its other members."
    )
    assert Membership.objects.get(app=budget).user == budget.owner


def test_a_stranger_cannot_leave_an_app_they_cannot_see(budget, carol):
    with pytest.raises(AppNotFound):
        membership_leave(actor=carol, app_id=budget.id)
    assert not AuditEvent.objects.exists()


def test_accepting_after_being_added_directly_takes_the_invitations_role(budget, other_user):
    invitation = invite(budget, "bob", role="editor")
    membership_set(actor=budget.owner, app=budget, user=other_user, role="viewer")

    invitation_accept(actor=other_user, invitation_id=invitation.pk)

    assert Membership.objects.get(app=budget, user=other_user).role == "editor"
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.ACCEPTED


def test_deleting_an_account_takes_its_invitations_and_memberships_along(budget, other_user, carol):
    elsewhere = make_app(owner=carol, name="Chores")
    invitation_create(actor=carol, app_id=elsewhere.id, invitee="bob", role="viewer")  # bob's, received
    invitation_accept(actor=other_user, invitation_id=invite(budget, "bob").pk)  # bob is a member of Budget
    sent_by_bob = make_app(owner=other_user, name="Bob's")
    invitation_create(actor=other_user, app_id=sent_by_bob.id, invitee="carol", role="editor")
    other_user.set_password("pw")
    other_user.save()

    account_delete(actor=other_user, password="pw")

    assert not Invitation.objects.exists()  # received ones go with bob; sent ones with bob's app
    assert [(m.username, m.role) for m in members_of(budget)] == [("alice", "owner")]
    assert invitations_pending_for(carol) == []


def test_an_email_finds_the_account_with_that_email_never_a_username_that_looks_like_it():
    from django.contrib.auth import get_user_model

    from apps_registry.services.sharing import invitation_create

    owner = UserFactory(username="olga")
    eve = UserFactory(username="eve", email="eve@example.com")
    get_user_model().objects.create_user(username="eve@example.com", email="", password="x-long-password-1")
    app = make_app(owner=owner, name="Budget")

    invitation = invitation_create(actor=owner, app_id=app.id, invitee="eve@example.com", role="editor")

    assert invitation.invitee == eve


def test_a_new_username_cannot_contain_an_at_sign():
    from apps_registry.services.accounts import account_create

    with pytest.raises(InvalidInput) as refused:
        account_create(username="eve@example.com", email="mallory@example.com", password="a-long-Passw0rd!")
    assert refused.value.errors == [
        {"path": "username", "message": "A username cannot contain '@': use letters, digits and . + - _ only."}
    ]
