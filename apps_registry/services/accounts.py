"""Accounts for people: sign-up and self-service deletion (staff accounts are managed in the admin)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from apps_registry.exceptions import Forbidden, InvalidInput, OperationFailed
from apps_registry.models import App
from apps_registry.services.apps import DeletionResult, app_delete, audit_record
from apps_registry.services.email_confirmation import email_address_checked, email_claim, email_confirmation_send
from apps_registry.services.rate_limits import signup_budget_take

# How app_delete records the confirmation when the owner deletes their whole account.
ACCOUNT_DELETION = "account_deletion"


@dataclass(frozen=True)
class AccountDeletionResult:
    username: str
    apps: list[DeletionResult]


def account_create(*, username: str, email: str, password: str, address: str | None = None) -> Any:
    """Create a person's account (not staff) after checking the username, email and password rules, then mail the
    link confirming its address (services/email_confirmation.py).

    Raises InvalidInput with one `errors` entry per bad field ({"path": field, "message": ...}); RateLimited when
    client `address` has created too many accounts lately (checked once the fields are valid, so a mistyped form
    costs nothing). An address another account has confirmed is refused; one only claimed by another account (not
    confirmed) is taken from it: an unconfirmed claim proves nothing, and whoever confirms first keeps it.
    """
    user_model = get_user_model()
    username = user_model.normalize_username(username.strip())
    email = user_model.objects.normalize_email(email.strip())
    errors: list[dict[str, str]] = []
    try:
        user_model._meta.get_field("username").run_validators(username)  # type: ignore[union-attr]
        if not username:
            raise ValidationError("A username is required.")
        if "@" in username:  # an email is how people are invited: a username must never pass for someone's email
            raise ValidationError("A username cannot contain '@': use letters, digits and . + - _ only.")
    except ValidationError as error:
        errors += [{"path": "username", "message": m} for m in error.messages]
    if username and user_model.objects.filter(username__iexact=username).exists():
        errors.append({"path": "username", "message": f"The username {username!r} is already taken."})
    try:
        email = email_address_checked(email)
    except InvalidInput as error:
        errors += error.errors or []
    try:
        password_validation.validate_password(password, user=user_model(username=username, email=email))
    except ValidationError as error:
        errors += [{"path": "password", "message": m} for m in error.messages]
    if errors:
        raise InvalidInput("The account could not be created: " + " ".join(e["message"] for e in errors), errors=errors)
    signup_budget_take(address=address)
    try:
        with transaction.atomic():
            user = user_model.objects.create_user(username=username, email="", password=password)
            email_claim(user=user, email=email)
    except IntegrityError:
        # Another sign-up took the name (or confirmed the address) between the checks and the insert.
        if user_model.objects.filter(username__iexact=username).exists():
            message = f"The username {username!r} is already taken."
            raise InvalidInput(message, errors=[{"path": "username", "message": message}]) from None
        email_address_checked(email)  # names the account that confirmed it meanwhile
        raise
    # A mail that cannot be sent is logged there; the account's pages say the address is unconfirmed and offer to
    # send the link again.
    with contextlib.suppress(OperationFailed):
        email_confirmation_send(user=user, again=False)
    return user


@transaction.atomic
def account_delete(*, actor: Any, password: str, purge_storage: bool = False) -> AccountDeletionResult:
    """Delete the actor's own account after re-checking their password.

    Every app they own goes through `app_delete` (retention or purge, audited with confirmed_via
    "account_deletion"); their tokens, memberships and feedback go with the account; audit events keep
    the username (actor_repr); retained storage keeps no owner and is purged after the retention window.
    """
    user_model = get_user_model()
    user = user_model.objects.select_for_update().filter(pk=actor.pk).first()
    if user is None:
        raise InvalidInput("This account no longer exists.")
    if not user.check_password(password):
        message = "Wrong password: the account was not deleted."
        raise InvalidInput(message, errors=[{"path": "password", "message": message}])
    if user.is_staff or user.is_superuser:
        # Staff answer feedback and act in the audit trail; another staff member removes them in the admin.
        raise Forbidden("Staff accounts cannot delete themselves here; ask another staff member to use the admin.")
    username = user.get_username()
    owned = list(App.objects.filter(owner=user).order_by("name", "id").values_list("id", flat=True))
    deleted = [
        app_delete(actor=user, app_id=app_id, purge_storage=purge_storage, confirmed_via=ACCOUNT_DELETION)
        for app_id in owned
    ]
    audit_record(
        actor=user,
        action="account.delete",
        app_id=None,
        details={
            "username": username,
            "apps_deleted": [str(result.app_id) for result in deleted],
            "purge_storage": purge_storage,
        },
    )
    try:
        user.delete()
    except ProtectedError:
        # Something the account still holds appeared meanwhile (an agent created an app): undo it all.
        raise OperationFailed(
            "The account changed while it was being deleted (for example an agent created an app); nothing was "
            "deleted. Try again."
        ) from None
    return AccountDeletionResult(username=username, apps=deleted)
