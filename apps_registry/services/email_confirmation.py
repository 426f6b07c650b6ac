"""E-mail confirmation: a person proves they read the address their account names by opening a link mailed to it
and confirming there. Until they do, the account cannot create tokens, authorize an OAuth client (connect a host)
or be found by an invitation sent to that address (services/tokens.py, apps_registry/oauth/views.py,
services/sharing.py ask `confirmed_email_require` / look up confirmed addresses only).

The link is Django's own signing (`django.core.signing`, salted, timestamped, checked against
CHARMING_EMAIL_CONFIRMATION_SECONDS): it carries the account and the address, so it stays valid while another
sign-up claims the same address (an unconfirmed claim proves nothing, so the newest sign-up gets it and its own
link), and whoever confirms first keeps the address. An address can belong to one account only, whatever its case
(a unique index, migration 0021); an address an account has confirmed is refused to every other sign-up.

Confirming takes a POST from the page the link opens (a button), never the GET itself: mail scanners open links,
and a scanner opening the link an attacker had sent to someone else's address must not confirm it for them.
"""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from apps_registry.exceptions import Forbidden, InvalidInput, OperationFailed
from apps_registry.models import ConfirmedEmail
from apps_registry.selectors import email_status_of
from apps_registry.services.apps import audit_record
from apps_registry.services.rate_limits import confirmation_mail_budget_take
from apps_registry.values import clip_repr

logger = logging.getLogger(__name__)

SALT = "charming.email-confirmation"
STATUS_PATH = "/accounts/email/"  # where a person sends a link again or changes the address (pages/urls.py)


@dataclass(frozen=True)
class Confirmation:
    """What a link says: the account (its id and username) and the address to confirm."""

    user: Any
    email: str


def email_confirmation_token(*, user: Any, email: str | None = None) -> str:
    """The signed token of a link confirming `email` (the account's address by default) for `user`."""
    return signing.dumps({"u": user.pk, "e": email if email is not None else user.email}, salt=SALT, compress=True)


def email_confirmation_url(*, user: Any) -> str:
    token = email_confirmation_token(user=user)
    return settings.CHARMING_PUBLIC_URL + reverse("email_confirm", kwargs={"token": token})


def email_confirmation_send(*, user: Any, again: bool) -> None:
    """Mail `user` the link confirming their address. `again` (a person asking for it once more) counts against the
    account's budget of confirmation mails (RateLimited when spent); the sign-up's own mail does not."""
    if not user.email:
        raise InvalidInput(
            "Your account has no e-mail address yet: enter one, and we will send the link to it.",
            errors=[{"path": "email", "message": "is empty"}],
        )
    if email_status_of(user).confirmed:
        raise OperationFailed(f"Your address {user.email} is already confirmed; nothing was sent.")
    if again:
        confirmation_mail_budget_take(user_id=user.pk)
    context = {
        "user": user,
        "email": user.email,
        "url": email_confirmation_url(user=user),
        "hours": settings.CHARMING_EMAIL_CONFIRMATION_SECONDS // 3600,
    }
    subject = render_to_string("accounts/email_confirmation_subject.txt", context).strip()
    body = render_to_string("accounts/email_confirmation_email.txt", context)
    try:
        send_mail(subject, body, None, [user.email])
    except (OSError, smtplib.SMTPException) as error:
        logger.warning("Could not send the e-mail confirmation link of user %s: %s", user.pk, error)
        raise OperationFailed(
            "The confirmation link could not be sent just now (our mail server did not take it). Try again in a few "
            "minutes."
        ) from None


def email_confirmation_read(*, token: str) -> Confirmation:
    """The account and address of a confirmation link; InvalidInput when it is forged, expired, or no longer what
    its account uses (the account changed its address since: its newest link is the one to open)."""
    try:
        signed = signing.loads(token, salt=SALT, max_age=settings.CHARMING_EMAIL_CONFIRMATION_SECONDS)
    except signing.SignatureExpired:
        raise InvalidInput(
            "This confirmation link has expired. Log in and send yourself a new one from "
            f"{STATUS_PATH} (your e-mail page)."
        ) from None
    except signing.BadSignature:
        raise InvalidInput("This confirmation link is not valid: open the newest link we sent you, whole.") from None
    user_id, email = (signed.get("u"), signed.get("e")) if isinstance(signed, dict) else (None, None)
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first() if isinstance(user_id, int) else None
    if user is None or not isinstance(email, str) or not email:
        raise InvalidInput("This confirmation link is for an account that no longer exists.")
    if user.email and user.email.lower() != email.lower():
        raise InvalidInput(
            f"This link confirms {email}, but your account now uses {user.email}: open the newest link we sent you."
        )
    return Confirmation(user=user, email=email)


@transaction.atomic
def email_confirm(*, token: str) -> Confirmation:
    """Confirm the address a link names for its account: the address becomes the account's (an unconfirmed claim of
    it by another account is dropped, audited) and confirmed. Refused when another account confirmed it first."""
    read = email_confirmation_read(token=token)
    users = get_user_model().objects
    user = users.select_for_update().get(pk=read.user.pk)
    others = list(users.select_for_update().filter(email__iexact=read.email).exclude(pk=user.pk))
    for other in others:
        if email_status_of(other).confirmed:
            raise OperationFailed(
                f"Another account confirmed {read.email} before you did, so it stays theirs. If it is your address, "
                "reset that account's password instead (the reset link goes to this address)."
            )
        _email_release(other, taken_by=user)
    if user.email != read.email:
        user.email = read.email
        user.save(update_fields=["email"])
    # When is the row's confirmed_at; the audit trail keeps the claims it dropped (account.email_released).
    ConfirmedEmail.objects.update_or_create(user=user, defaults={"email": read.email, "confirmed_at": timezone.now()})
    return Confirmation(user=user, email=read.email)


def email_change(*, user: Any, email: str) -> None:
    """Set the address of `user`'s account (unconfirmed until its link is opened) and mail it the link. Refused: an
    invalid address, one another account has confirmed; an unconfirmed claim by another account is dropped."""
    address = email_address_checked(email, exclude=user)
    with transaction.atomic():
        email_claim(user=user, email=address)
    email_confirmation_send(user=user, again=True)


def email_claim(*, user: Any, email: str) -> None:
    """Give `user`'s account the (checked) address `email`, unconfirmed: any other account's unconfirmed claim of it
    is dropped (audited). In the caller's transaction; the unique index refuses a concurrent claim."""
    for other in get_user_model().objects.select_for_update().filter(email__iexact=email).exclude(pk=user.pk):
        _email_release(other, taken_by=user)
    user.email = email
    user.save(update_fields=["email"])
    ConfirmedEmail.objects.filter(user=user).delete()


def email_address_checked(email: str, *, exclude: Any = None) -> str:
    """`email` normalized, or InvalidInput (path "email") when it is not an address or another account (not
    `exclude`) has confirmed it."""
    address = get_user_model().objects.normalize_email(str(email).strip())
    try:
        validate_email(address)
    except ValidationError as error:
        errors = [{"path": "email", "message": m} for m in error.messages]
        raise InvalidInput(" ".join(error.messages), errors=errors) from None
    holders = ConfirmedEmail.objects.filter(user__email__iexact=address, email__iexact=address)
    if exclude is not None:
        holders = holders.exclude(user=exclude)
    if holders.exists():
        message = (
            f"An account already uses the e-mail address {clip_repr(address)}. Log in to it, or reset its password "
            "(the link goes to that address)."
        )
        raise InvalidInput(message, errors=[{"path": "email", "message": message}])
    return address


def _email_release(other: Any, *, taken_by: Any) -> None:
    """Drop an unconfirmed claim of an address (a sign-up or a change by `taken_by` claims it, or confirms it)."""
    audit_record(
        actor=taken_by,
        action="account.email_released",
        app_id=None,
        details={"username": other.get_username(), "email": other.email, "taken_by": taken_by.get_username()},
    )
    other.email = ""
    other.save(update_fields=["email"])


def email_confirmed_by_operator(*, user: Any) -> None:
    """Mark `user`'s current address confirmed without a link: for accounts an operator vouches for (the demo
    accounts `manage.py demo_setup` makes) and the tests' users."""
    if user.email:
        ConfirmedEmail.objects.update_or_create(
            user=user, defaults={"email": user.email, "confirmed_at": timezone.now()}
        )


def confirmed_email_require(*, user: Any, to: str) -> None:
    """Forbidden unless `user` has confirmed their address; the message says what to do (`to`: what they tried)."""
    status = email_status_of(user)
    if status.confirmed:
        return
    if status.email:
        how = f"open the link we sent to {status.email}, or send a new one from {STATUS_PATH}"
    else:
        how = f"enter your address on {STATUS_PATH} and open the link we send to it"
    raise Forbidden(f"Confirm your e-mail address before you {to}: {how}.")
