from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from apps_registry.access import membership_set
from apps_registry.exceptions import Forbidden, InvalidInput, OperationFailed
from apps_registry.models import ApiToken, App, AuditEvent, Feedback, FeedbackResponse, Membership, Storage
from apps_registry.services.accounts import account_create, account_delete
from apps_registry.services.apps import app_delete
from apps_registry.services.tokens import token_create
from tests.factories import FeedbackFactory, RecordFactory, UserFactory, make_app

PASSWORD = "correct horse battery staple"

pytestmark = pytest.mark.django_db


def person(username: str = "carol"):
    """A person who signed up and opened the confirmation link mailed to them."""
    from apps_registry.services.email_confirmation import email_confirm, email_confirmation_token

    user = account_create(username=username, email=f"{username}@example.com", password=PASSWORD)
    email_confirm(token=email_confirmation_token(user=user))
    user.refresh_from_db()
    return user


def test_account_create_makes_a_person_who_can_log_in_with_the_password():
    user = person()
    assert user.check_password(PASSWORD)
    assert (user.email, user.is_staff, user.is_superuser) == ("carol@example.com", False, False)


def test_account_create_refuses_a_taken_username_whatever_its_case():
    person("carol")
    with pytest.raises(InvalidInput) as caught:
        account_create(username="Carol", email="other@example.com", password=PASSWORD)
    assert caught.value.errors == [{"path": "username", "message": "The username 'Carol' is already taken."}]
    assert get_user_model().objects.count() == 1


def test_account_create_applies_the_password_validators():
    with pytest.raises(InvalidInput) as caught:
        account_create(username="dave", email="dave@example.com", password="12345678")
    messages = [e["message"] for e in caught.value.errors if e["path"] == "password"]
    assert "This password is too common." in messages
    assert "This password is entirely numeric." in messages
    assert not get_user_model().objects.filter(username="dave").exists()


def test_account_create_refuses_a_password_like_the_username_and_a_bad_email():
    with pytest.raises(InvalidInput) as caught:
        account_create(username="zanzibar-dave", email="not-an-email", password="zanzibar-dave")
    paths = {e["path"] for e in caught.value.errors}
    assert paths == {"email", "password"}
    assert "The password is too similar to the username." in caught.value.message


def test_account_delete_deletes_owned_apps_through_app_delete_and_keeps_their_storage():
    carol = person()
    budget = make_app(owner=carol, name="Budget")
    RecordFactory(storage=budget.storage)
    token_create(user=carol, name="laptop")
    FeedbackFactory(app=budget, author=carol)

    result = account_delete(actor=carol, password=PASSWORD)

    assert result.username == "carol"
    assert [r.app_name for r in result.apps] == ["Budget"]
    assert not get_user_model().objects.filter(username="carol").exists()
    assert not App.objects.exists() and not ApiToken.objects.exists() and not Feedback.objects.exists()
    storage = Storage.objects.get(app_uuid=budget.id)
    assert storage.is_detached and storage.owner is None and storage.records.count() == 1
    assert storage.owner_name == "(deleted account)"
    app_event = AuditEvent.objects.get(action="app.delete")
    assert app_event.details["confirmed_via"] == "account_deletion"
    assert app_event.actor is None and app_event.actor_repr == "carol"
    account_event = AuditEvent.objects.get(action="account.delete")
    assert account_event.details == {"username": "carol", "apps_deleted": [str(budget.id)], "purge_storage": False}


def test_account_delete_can_purge_the_apps_storage_at_once():
    carol = person()
    budget = make_app(owner=carol, name="Budget")
    RecordFactory(storage=budget.storage)
    account_delete(actor=carol, password=PASSWORD, purge_storage=True)
    assert not Storage.objects.exists()
    assert AuditEvent.objects.get(action="app.delete").details["records_purged"] == 1


def test_account_delete_leaves_other_peoples_apps_and_drops_only_the_membership():
    carol = person()
    owner = UserFactory(username="olivia")
    shared = make_app(owner=owner, name="Shared list")
    membership_set(actor=owner, app=shared, user=carol, role="editor")
    account_delete(actor=carol, password=PASSWORD)
    assert App.objects.get(pk=shared.pk).owner == owner
    assert list(Membership.objects.filter(app=shared).values_list("user__username", flat=True)) == ["olivia"]


def test_account_delete_refuses_a_wrong_password_and_keeps_everything():
    carol = person()
    make_app(owner=carol, name="Budget")
    with pytest.raises(InvalidInput) as caught:
        account_delete(actor=carol, password="not my password")
    assert caught.value.message == "Wrong password: the account was not deleted."
    assert get_user_model().objects.filter(username="carol").exists()
    assert App.objects.filter(owner=carol).count() == 1
    assert not AuditEvent.objects.exists()


def test_account_delete_refuses_staff_who_keep_using_the_admin():
    staffer = get_user_model().objects.create_user(username="staffer", password=PASSWORD, is_staff=True)
    with pytest.raises(Forbidden) as caught:
        account_delete(actor=staffer, password=PASSWORD)
    assert "Staff accounts cannot delete themselves here" in caught.value.message
    assert get_user_model().objects.filter(username="staffer").exists()


def test_account_delete_also_frees_storage_retained_from_earlier_deletions():
    carol = person()
    old = make_app(owner=carol, name="Old")
    app_delete(actor=carol, app_id=old.id, purge_storage=False, confirmed_via="confirm_parameter")
    account_delete(actor=carol, password=PASSWORD)
    assert Storage.objects.get(app_uuid=old.id).owner is None


def test_account_delete_undoes_everything_when_something_still_needs_the_account():
    carol = person()
    budget = make_app(owner=carol, name="Budget")
    # A former staff member's answer to feedback protects their account (FeedbackResponse.staff_author).
    FeedbackResponse.objects.create(feedback=FeedbackFactory(), staff_author=carol, body="Fixed.")
    with pytest.raises(OperationFailed) as caught:
        account_delete(actor=carol, password=PASSWORD)
    assert caught.value.message.startswith("The account changed while it was being deleted")
    assert App.objects.filter(pk=budget.pk).exists()
    assert get_user_model().objects.filter(username="carol").exists()
    assert not AuditEvent.objects.exists()
