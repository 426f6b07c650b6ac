"""Sign-up under abuse (issue 22): sign-ups throttled per address, and an e-mail address confirmed by its owner
before the account can create tokens, connect hosts (OAuth) or be found by an invitation sent to it; one account
per address whatever its case. The pages say what to do at each step."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail, signing
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps_registry.exceptions import Forbidden, InvalidInput, OperationFailed, RateLimited
from apps_registry.models import ApiToken, AuditEvent, ConfirmedEmail
from apps_registry.selectors import email_status_of
from apps_registry.services.accounts import account_create
from apps_registry.services.email_confirmation import (
    SALT,
    STATUS_PATH,
    email_change,
    email_confirm,
    email_confirmation_send,
    email_confirmation_token,
)
from apps_registry.services.tokens import token_create
from tests.factories import UserFactory
from tests.oauth_helpers import consent_page, register_ok

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def sign_up(client: Client, username: str, email: str | None = None, address: str = "203.0.113.5"):
    return client.post(
        reverse("signup"),
        {
            "username": username,
            "email": email or f"{username}@example.com",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
        REMOTE_ADDR=address,
    )


def mailed_link(index: int = -1) -> str:
    """The path of the confirmation link in a sent mail."""
    found = re.search(r"http://127\.0\.0\.1:8000(/accounts/email/confirm/\S+/)", mail.outbox[index].body)
    assert found, mail.outbox[index].body
    return found.group(1)


# --- sign-up: the mail, the link, the button ---


def test_sign_up_mails_a_link_and_the_pages_say_to_check_the_mail(client):
    response = sign_up(client, "dora")

    assert response.status_code == 302
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == ["dora@example.com"] and sent.subject == "Confirm your e-mail address for Charming"
    assert 'gave dora@example.com as the address of the Charming account "dora"' in sent.body
    home = text(client.get("/"))
    assert "We sent a link to dora@example.com: open it and confirm your address" in home
    assert "Check your e-mail: confirm <strong>dora@example.com</strong> with the link we sent you" in home
    assert f'href="{STATUS_PATH}"' in home and "Send it again, or change the address" in home


def test_the_link_shows_what_it_confirms_and_only_the_button_confirms_it(client):
    sign_up(client, "dora")
    link = mailed_link()
    anonymous = Client()

    page = anonymous.get(link)  # a mail scanner opening the link confirms nothing
    assert page.status_code == 200
    assert (
        "Confirm that <strong>dora@example.com</strong> is your address, for the Charming account <strong>dora</strong>"
        in text(page)
    )
    dora = get_user_model().objects.get(username="dora")
    assert not email_status_of(dora).confirmed

    confirmed = anonymous.post(link)

    assert confirmed.status_code == 302 and confirmed["Location"] == reverse("login")
    assert email_status_of(dora).confirmed
    assert "Check your e-mail" not in text(client.get("/"))  # the signed-in page no longer reminds


def test_a_forged_or_expired_link_is_refused_with_what_to_do(client, settings):
    sign_up(client, "dora")
    link = mailed_link()

    forged = client.post(link.replace("/confirm/", "/confirm/x"))
    assert forged.status_code == 400
    assert "This confirmation link is not valid: open the newest link we sent you, whole." in text(forged)

    settings.CHARMING_EMAIL_CONFIRMATION_SECONDS = -1
    expired = client.post(link)
    assert expired.status_code == 400
    assert f"This confirmation link has expired. Log in and send yourself a new one from {STATUS_PATH}" in text(expired)
    assert not ConfirmedEmail.objects.exists()


def test_the_status_path_named_in_messages_is_the_email_page():
    assert reverse("email_status") == STATUS_PATH


# --- what needs a confirmed address ---


def test_an_unconfirmed_account_cannot_create_a_token_and_the_connect_page_says_why(client):
    sign_up(client, "dora")
    dora = get_user_model().objects.get(username="dora")

    with pytest.raises(Forbidden) as refused:
        token_create(user=dora)
    assert refused.value.message == (
        "Confirm your e-mail address before you create a token: open the link we sent to dora@example.com, or send a "
        f"new one from {STATUS_PATH}."
    )
    page = client.get(reverse("connect"))
    assert "Confirm your e-mail address first: tokens, and connecting Claude or ChatGPT, need it." in text(page)
    posted = client.post(reverse("connect"), {"name": "laptop", "scopes": ["apps:read"]})
    assert posted.status_code == 403
    assert "Confirm your e-mail address before you create a token" in text(posted)
    assert not ApiToken.objects.exists()

    client.post(mailed_link())
    assert client.post(reverse("connect"), {"name": "laptop", "scopes": ["apps:read"]}).status_code == 302
    assert ApiToken.objects.filter(user=dora).count() == 1


def test_an_operator_may_issue_a_token_to_an_unconfirmed_account():
    UserFactory(username="headless", email_confirmed=False)
    call_command("create_token", "headless", "--name", "ci")
    assert ApiToken.objects.filter(user__username="headless").count() == 1


def test_an_unconfirmed_person_cannot_authorize_an_oauth_client_until_they_confirm(client):
    sign_up(client, "dora")
    client_id = register_ok(Client())["client_id"]

    refused = consent_page(client, client_id)

    assert refused.status_code == 403
    page = text(refused)
    assert "<h1>Confirm your e-mail address first</h1>" in page
    assert "Confirm your e-mail address before you connect a client: open the link we sent to dora@example.com" in page
    assert 'id="retry"' in page and "/oauth/authorize/?" in page  # back to this very request afterwards
    assert 'id="approve"' not in page

    client.post(mailed_link())
    allowed = consent_page(client, client_id)
    assert allowed.status_code == 200 and 'id="approve"' in text(allowed)


# --- one account per address, and squatting ---


def test_an_address_someone_confirmed_is_refused_to_another_sign_up(client):
    UserFactory(username="owner", email="taken@example.com")  # confirmed

    with pytest.raises(InvalidInput) as refused:
        account_create(username="second", email="TAKEN@example.com", password=PASSWORD)

    assert refused.value.errors == [
        {
            "path": "email",
            "message": "An account already uses the e-mail address 'TAKEN@example.com'. Log in to it, or reset its "
            "password (the link goes to that address).",
        }
    ]


def test_a_squatters_unconfirmed_claim_gives_way_to_the_addresses_owner(client):
    squatter = account_create(username="squatter", email="victim@example.com", password=PASSWORD)
    squatter_link = mailed_link()  # mailed to the victim's inbox: the squatter never sees it

    victim = account_create(username="victim", email="Victim@Example.com", password=PASSWORD)
    squatter.refresh_from_db()
    assert squatter.email == "" and victim.email == "Victim@example.com"
    email_confirm(token=email_confirmation_token(user=victim))

    # The squatter's link, should the victim open it, names the squatter's account, and cannot take the address.
    page = Client().get(squatter_link)
    assert "for the Charming account <strong>squatter</strong>" in text(page)
    answer = Client().post(squatter_link)
    assert answer.status_code == 409
    assert "Another account confirmed victim@example.com before you did, so it stays theirs." in text(answer)
    squatter.refresh_from_db()
    assert squatter.email == "" and email_status_of(victim).confirmed


def test_whoever_confirms_first_keeps_the_address():
    first = account_create(username="first", email="shared@example.com", password=PASSWORD)
    first_token = email_confirmation_token(user=first)
    second = account_create(username="second", email="shared@example.com", password=PASSWORD)  # takes the claim

    email_confirm(token=first_token)  # the mailbox's owner opened the first link: it still works

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.email, second.email) == ("shared@example.com", "")
    assert email_status_of(first).confirmed and not email_status_of(second).confirmed
    released = [e.details for e in AuditEvent.objects.filter(action="account.email_released").order_by("created_at")]
    assert released == [
        {"username": "first", "email": "shared@example.com", "taken_by": "second"},
        {"username": "second", "email": "shared@example.com", "taken_by": "first"},
    ]


def test_a_link_for_an_address_the_account_changed_since_is_refused():
    dora = account_create(username="dora", email="old@example.com", password=PASSWORD)
    old_token = email_confirmation_token(user=dora)
    email_change(user=dora, email="new@example.com")

    with pytest.raises(InvalidInput) as refused:
        email_confirm(token=old_token)

    assert refused.value.message == (
        "This link confirms old@example.com, but your account now uses new@example.com: open the newest link we "
        "sent you."
    )
    assert mail.outbox[-1].to == ["new@example.com"]


def test_an_address_changed_in_the_admin_is_unconfirmed_again():
    dora = UserFactory(username="dora")
    assert email_status_of(dora).confirmed
    dora.email = "elsewhere@example.com"
    dora.save()
    assert not email_status_of(dora).confirmed


# --- the e-mail page: send again (bounded), change the address ---


def test_the_email_page_sends_the_link_again_until_its_budget_is_spent(client, settings):
    settings.CHARMING_RATE_CONFIRMATION_MAILS_PER_HOUR = 1
    settings.CHARMING_RATE_CONFIRMATION_MAILS_BURST = 2
    sign_up(client, "dora")
    page = text(client.get(STATUS_PATH))
    assert "<strong>Check your e-mail.</strong> We sent a link to <strong>dora@example.com</strong>." in page

    for _ in range(2):
        sent = client.post(STATUS_PATH, {"action": "resend"}, follow=True)
        assert "We sent a new link to dora@example.com." in text(sent)
    refused = client.post(STATUS_PATH, {"action": "resend"})

    assert len(mail.outbox) == 3  # the sign-up's and two more
    assert refused.status_code == 429
    assert (
        "A confirmation link was sent to this address 2 times in a short while (its limit: 1 per hour, bursts of 2)."
        in text(refused)
    )


def test_the_email_page_changes_the_address_and_mails_the_new_one(client):
    sign_up(client, "dora", email="typo@exmaple.com")

    changed = client.post(STATUS_PATH, {"action": "change", "email": "dora@example.com"}, follow=True)

    assert "We sent a link to dora@example.com: open it to confirm the address." in text(changed)
    assert mail.outbox[-1].to == ["dora@example.com"]
    client.post(mailed_link())
    assert email_status_of(get_user_model().objects.get(username="dora")).confirmed
    assert "is confirmed (since" in text(client.get(STATUS_PATH))


def test_sending_again_for_a_confirmed_address_sends_nothing():
    dora = UserFactory(username="dora")
    with pytest.raises(OperationFailed, match="is already confirmed; nothing was sent"):
        email_confirmation_send(user=dora, again=True)
    assert mail.outbox == []


# --- sign-ups per address ---


def test_sign_ups_from_one_address_are_throttled_and_other_addresses_are_not(client, settings):
    settings.CHARMING_RATE_SIGNUPS_PER_HOUR = 20
    settings.CHARMING_RATE_SIGNUPS_BURST = 3
    statuses = [sign_up(Client(), f"bot{i}", address="198.51.100.7").status_code for i in range(5)]
    refused = sign_up(Client(), "bot5", address="198.51.100.7")
    elsewhere = sign_up(Client(), "neighbour", address="198.51.100.8")

    assert statuses == [302, 302, 302, 429, 429]
    assert refused.status_code == 429 and refused["Retry-After"] in ("179", "180")  # one interval: 3600 s / 20
    assert (
        "Too many accounts were created from your network address (its limit: 20 per hour, bursts of 3). No account "
        "was created; try again in 3 minutes." in text(refused)
    )
    assert elsewhere.status_code == 302
    assert get_user_model().objects.filter(username__startswith="bot").count() == 3


def test_an_ipv6_address_counts_by_its_64(settings):
    settings.CHARMING_RATE_SIGNUPS_PER_HOUR = 20
    settings.CHARMING_RATE_SIGNUPS_BURST = 1
    account_create(username="v6a", email="v6a@example.com", password=PASSWORD, address="2001:db8:1:2::1")
    with pytest.raises(RateLimited) as refused:
        account_create(username="v6b", email="v6b@example.com", password=PASSWORD, address="2001:db8:1:2::ffff")
    assert refused.value.details["limit"] == "signups" and refused.value.details["per_hour"] == 20


def test_an_invalid_sign_up_costs_the_address_nothing(settings):
    settings.CHARMING_RATE_SIGNUPS_PER_HOUR = 1
    settings.CHARMING_RATE_SIGNUPS_BURST = 1
    for _ in range(3):
        with pytest.raises(InvalidInput):
            account_create(username="x", email="not-an-address", password=PASSWORD, address="198.51.100.9")
    account_create(username="ok", email="ok@example.com", password=PASSWORD, address="198.51.100.9")


# --- demo accounts and the link's machinery ---


def test_demo_setup_accounts_are_confirmed(settings, tmp_path):
    from apps_registry.services.demo import demo_setup

    settings.BASE_DIR = tmp_path
    (tmp_path / "var").mkdir()
    demo_setup()
    for username in ("demo", "staff"):
        assert email_status_of(get_user_model().objects.get(username=username)).confirmed


def test_the_link_is_djangos_signing_with_its_own_salt():
    dora = UserFactory(username="dora", email_confirmed=False)
    token = email_confirmation_token(user=dora)
    assert signing.loads(token, salt=SALT) == {"u": dora.pk, "e": "dora@example.com"}
    with pytest.raises(signing.BadSignature):
        signing.loads(token, salt="another purpose")


# --- the migration: existing duplicates ---


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_each_shared_address_on_one_account_and_audits_the_others():
    from datetime import timedelta

    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    before, after = (
        [("apps_registry", "0021_collection_indexes_with_tie_breakers")],
        [("apps_registry", "0022_confirmed_email")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    try:
        User = old_apps.get_model("auth", "User")
        now = timezone.now()
        # last_login given for each account the order depends on (None: never logged in).
        User.objects.create(
            username="old", email="pat@example.com", date_joined=now - timedelta(days=9), last_login=None
        )
        User.objects.create(username="active", email="PAT@example.com", last_login=now - timedelta(hours=1))
        User.objects.create(username="idle", email="Pat@example.com", last_login=now - timedelta(days=30))
        User.objects.create(username="helper", email="desk@example.com", last_login=now)
        User.objects.create(username="staffer", email="DESK@example.com", is_staff=True)
        User.objects.create(username="alone", email="alone@example.com")
        User.objects.create(username="none1", email="")
        User.objects.create(username="none2", email="")
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    emails = dict(get_user_model().objects.values_list("username", "email"))
    assert emails == {
        "old": "",
        "active": "PAT@example.com",  # the latest log-in keeps it
        "idle": "",
        "helper": "",
        "staffer": "DESK@example.com",  # staff first
        "alone": "alone@example.com",
        "none1": "",
        "none2": "",
    }
    cleared = sorted(
        (e.details["username"], e.details["email"], e.details["kept_by"], e.actor_repr)
        for e in AuditEvent.objects.filter(action="account.email_cleared")
    )
    assert cleared == [
        ("helper", "desk@example.com", "staffer", "system"),
        ("idle", "Pat@example.com", "active", "system"),
        ("old", "pat@example.com", "active", "system"),
    ]
    assert not ConfirmedEmail.objects.exists()  # nobody's address is proven by the migration
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        get_user_model().objects.create(username="copy", email="ALONE@example.com")
