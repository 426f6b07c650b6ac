"""The people's pages through Django's test client: every page, its bad input, and CSRF."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from apps_registry.access import SCOPES, membership_set
from apps_registry.models import ApiToken, App, AuditEvent
from apps_registry.pages.views import NEW_TOKEN_SESSION_KEY
from apps_registry.services.accounts import account_create
from apps_registry.services.tokens import token_create
from tests.factories import UserFactory, make_app

ALL_SCOPES = list(SCOPES)

PASSWORD = "correct horse battery staple"

pytestmark = pytest.mark.django_db


@pytest.fixture
def carol():
    """A person who signed up and confirmed their address with the link mailed to them (the mail then emptied)."""
    from apps_registry.services.email_confirmation import email_confirm, email_confirmation_token

    user = account_create(username="carol", email="carol@example.com", password=PASSWORD)
    email_confirm(token=email_confirmation_token(user=user))
    mail.outbox.clear()
    user.refresh_from_db()
    return user


@pytest.fixture
def signed_in(client, carol):
    client.force_login(carol)
    return client


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


# --- home and layout ---


def test_anonymous_home_welcomes_with_sign_up_and_log_in_links(client):
    page = text(client.get("/"))
    assert "Small apps of your own" in page
    assert f'href="{reverse("signup")}"' in page and f'href="{reverse("login")}"' in page


def test_home_lists_the_users_apps_with_their_role_and_nobody_elses(signed_in, carol):
    make_app(owner=carol, name="Budget")
    olivia = UserFactory(username="olivia")
    shared = make_app(owner=olivia, name="Family to-do")
    membership_set(actor=olivia, app=shared, user=carol, role="viewer")
    make_app(owner=olivia, name="Olivia's diary")
    page = text(signed_in.get("/"))
    assert re.search(r"Budget</strong>.*?Owner", page)
    assert re.search(r"Family to-do</strong>.*?Viewer", page)
    assert "Olivia&#x27;s diary" not in page and "Olivia's diary" not in page


def test_pages_are_phone_ready_and_load_nothing_external(client):
    for url in ["/", reverse("login"), reverse("signup"), reverse("password_reset")]:
        page = client.get(url).content.decode()
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
        assert '<link rel="stylesheet" href="/static/charming/site.css">' in page
        assert not re.search(r'(src|href)="(https?:)?//', page), url
        assert "<script" not in page


# --- sign-up ---


def test_sign_up_creates_the_account_and_signs_it_in(client):
    response = client.post(
        reverse("signup"),
        {"username": "dave", "email": "dave@example.com", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert "Welcome, dave!" in text(client.get("/"))
    dave = get_user_model().objects.get(username="dave")
    assert dave.check_password(PASSWORD) and not dave.is_staff


def test_sign_up_refuses_a_taken_username(client, carol):
    response = client.post(
        reverse("signup"),
        {"username": "CAROL", "email": "c2@example.com", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert response.status_code == 200
    assert "The username &#x27;CAROL&#x27; is already taken." in text(response)
    assert get_user_model().objects.count() == 1


def test_sign_up_refuses_a_weak_password_and_differing_passwords(client):
    weak = client.post(
        reverse("signup"),
        {"username": "dave", "email": "dave@example.com", "password1": "password", "password2": "password"},
    )
    assert "This password is too common." in text(weak)
    differing = client.post(
        reverse("signup"),
        {"username": "dave", "email": "dave@example.com", "password1": PASSWORD, "password2": PASSWORD + "x"},
    )
    assert "The two passwords differ." in text(differing)
    assert not get_user_model().objects.filter(username="dave").exists()


# --- log in, log out, lockout ---


def test_log_in_and_out(client, carol):
    response = client.post(reverse("login"), {"username": "carol", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    assert "My apps" in text(client.get("/"))
    assert client.get(reverse("logout")).status_code == 405, "log-out is POST only"
    assert client.post(reverse("logout")).status_code == 302
    assert "Small apps of your own" in text(client.get("/"))


def test_log_in_with_a_wrong_password_says_so(client, carol):
    response = client.post(reverse("login"), {"username": "carol", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password." in text(response)


def test_log_in_follows_next(client, carol):
    response = client.post(
        reverse("login") + "?next=/connect/", {"username": "carol", "password": PASSWORD, "next": "/connect/"}
    )
    assert response["Location"] == "/connect/"


def test_repeated_failed_log_ins_lock_out_that_username_from_that_address(client, carol, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post(reverse("login"), {"username": "carol", "password": "guess"}).status_code == 200
    locked = client.post(reverse("login"), {"username": "carol", "password": "guess"})
    assert locked.status_code == 429
    assert "Too many failed log-ins" in text(locked)
    assert f"After {settings.AXES_FAILURE_LIMIT} failed attempts for <strong>carol</strong>" in text(locked)
    # Even the right password is refused while locked, on the site and in the admin.
    assert client.post(reverse("login"), {"username": "carol", "password": PASSWORD}).status_code == 429
    admin = client.post("/admin/login/", {"username": "carol", "password": PASSWORD})
    assert admin.status_code == 429
    # Another address is not locked out.
    other = Client(REMOTE_ADDR="10.0.0.9")
    assert other.post(reverse("login"), {"username": "carol", "password": PASSWORD}).status_code == 302


def test_the_admin_log_in_is_throttled_too(client, settings):
    get_user_model().objects.create_user(username="operator", password=PASSWORD, is_staff=True)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = client.post("/admin/login/", {"username": "operator", "password": "guess"})
    assert response.status_code == 429
    assert "Too many failed log-ins" in text(response)


def test_a_successful_log_in_resets_the_failure_count(client, carol, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(reverse("login"), {"username": "carol", "password": "guess"})
    assert client.post(reverse("login"), {"username": "carol", "password": PASSWORD}).status_code == 302
    client.post(reverse("logout"))
    assert client.post(reverse("login"), {"username": "carol", "password": "guess"}).status_code == 200


# --- passwords ---


def test_change_password(signed_in, carol):
    new = "another long passphrase 2"
    response = signed_in.post(
        reverse("password_change"), {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    assert response["Location"] == reverse("password_change_done")
    carol.refresh_from_db()
    assert carol.check_password(new)
    assert "Password changed" in text(signed_in.get(reverse("password_change_done")))


def test_change_password_refuses_a_wrong_old_password(signed_in, carol):
    response = signed_in.post(
        reverse("password_change"), {"old_password": "wrong", "new_password1": "x" * 12, "new_password2": "x" * 12}
    )
    assert "Your old password was entered incorrectly." in text(response)


def test_reset_password_by_email(client, carol, settings):
    settings.CHARMING_PUBLIC_URL = "https://charming.example.com"
    response = client.post(reverse("password_reset"), {"email": "carol@example.com"})
    assert response["Location"] == reverse("password_reset_done")
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["carol@example.com"]
    assert mail.outbox[0].subject == "Reset your Charming password"
    assert "your Charming account on charming.example.com" in mail.outbox[0].body
    link = re.search(r"https://charming.example.com(/accounts/password/reset/\S+/)", mail.outbox[0].body).group(1)
    form = client.get(link, follow=True)
    assert "Choose a new password" in text(form)
    new = "a brand new passphrase 3"
    done = client.post(form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    assert done["Location"] == reverse("password_reset_complete")
    carol.refresh_from_db()
    assert carol.check_password(new)


def test_reset_password_for_an_unknown_email_sends_nothing_and_says_the_same(client, carol):
    response = client.post(reverse("password_reset"), {"email": "nobody@example.com"}, follow=True)
    assert "If an account uses that address" in text(response)
    assert mail.outbox == []


# --- account deletion ---


def test_delete_account_after_re_entering_the_password(signed_in, carol):
    app = make_app(owner=carol, name="Budget")
    page = text(signed_in.get(reverse("account_delete")))
    assert "Budget" in page and "kept for 30 days" in page
    response = signed_in.post(reverse("account_delete"), {"password": PASSWORD})
    assert response["Location"] == "/"
    assert "The account carol and its 1 app(s) were deleted." in text(signed_in.get("/"))
    assert not get_user_model().objects.filter(username="carol").exists()
    assert not App.objects.filter(pk=app.pk).exists()
    assert AuditEvent.objects.get(action="app.delete").details["confirmed_via"] == "account_deletion"


def test_delete_account_refuses_a_wrong_password(signed_in, carol):
    response = signed_in.post(reverse("account_delete"), {"password": "wrong"})
    assert response.status_code == 200
    assert "Wrong password: the account was not deleted." in text(response)
    assert get_user_model().objects.filter(username="carol").exists()


def test_delete_account_refuses_staff_with_a_clear_message(client):
    staffer = get_user_model().objects.create_user(username="staffer", password=PASSWORD, is_staff=True)
    client.force_login(staffer)
    response = client.post(reverse("account_delete"), {"password": PASSWORD})
    assert "Staff accounts cannot delete themselves here" in text(response)
    assert get_user_model().objects.filter(username="staffer").exists()


@pytest.mark.parametrize("name", ["account_delete", "connect", "password_change", "token_created"])
def test_signed_in_pages_send_anonymous_visitors_to_log_in(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={reverse(name)}"


# --- connect an agent, personal tokens ---


def test_connect_shows_the_mcp_url_and_host_configurations(signed_in, settings):
    settings.CHARMING_PUBLIC_URL = "https://charming.example.com"
    page = text(signed_in.get(reverse("connect")))
    url = "https://charming.example.com/mcp"
    assert f'<code class="url" id="mcp-url">{url}</code>' in page
    assert (
        f"claude mcp add --transport http charming {url} --header &quot;Authorization: Bearer YOUR_TOKEN&quot;" in page
    )
    assert "&quot;servers&quot;: {" in page and "&quot;mcpServers&quot;: {" in page
    assert "~/.cursor/mcp.json" in page and ".vscode/mcp.json" in page
    assert "ChatGPT" in page and "it signs in here with OAuth" in page


def test_connect_gives_each_host_one_way_in_and_says_claude_and_chatgpt_need_a_public_https_url(signed_in, settings):
    settings.CHARMING_PUBLIC_URL = "https://charming.example.com"
    html = signed_in.get(reverse("connect")).content.decode()
    rows = re.findall(
        r'<tr><th scope="row" data-label="Host">(.*?)</th>.*?<td data-label="Needs">(.*?)</td></tr>', html, re.S
    )
    assert rows == [
        ("Claude (claude.ai, Claude Desktop)", "a public https URL"),
        ("ChatGPT", "a public https URL"),
        ("Claude Code", "this URL, from your computer"),
        ("VS Code", "this URL, from your computer"),
        ("Cursor", "this URL, from your computer"),
    ]
    page = text(signed_in.get(reverse("connect")))
    # the same advice as docs/mcp.md: Claude Code signs in with OAuth, its token configuration is the alternative
    assert "Run claude mcp add --transport http charming https://charming.example.com/mcp, then /mcp" in page
    assert "Configurations with a personal token" in page and "Instead of signing in" in page
    assert 'id="public-https"' not in page


@pytest.mark.parametrize(
    ("public_url", "why"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000, is not reachable from the internet"),
        ("https://localhost:8443", "https://localhost:8443, is not reachable from the internet"),
        ("https://10.0.0.5", "https://10.0.0.5, is not reachable from the internet"),
        ("http://charming.example.com", "http://charming.example.com, is not https"),
    ],
)
def test_connect_says_when_this_servers_url_cannot_serve_claude_or_chatgpt(signed_in, settings, public_url, why):
    settings.CHARMING_PUBLIC_URL = public_url
    page = text(signed_in.get(reverse("connect")))
    assert (
        f"The URL of this server, {why}: Claude and ChatGPT connect from their own servers, so they need a public "
        "https URL. Serve Charming behind https at a public address and set CHARMING_PUBLIC_URL to it" in page
    )
    assert "a public https URL (not this one)" in page
    assert "Claude Code, VS Code and Cursor run on your computer and work with this URL as it is." in page


def test_create_a_token_shows_its_secret_once(signed_in, carol):
    response = signed_in.post(reverse("connect"), {"name": "laptop", "expires_days": "30", "scopes": ALL_SCOPES})
    assert response["Location"] == reverse("token_created")
    token = ApiToken.objects.get(user=carol)
    assert token.name == "laptop" and token.expires_at is not None
    assert token.scopes == "apps:read apps:write apps:delete"
    shown = signed_in.get(reverse("token_created"))
    secret = re.search(r'<code id="token-secret">(chm_\w+_[\w-]+)</code>', shown.content.decode()).group(1)
    assert secret.startswith(token.prefix)
    assert f"Bearer {secret}" in shown.content.decode(), "the configurations come filled in"
    assert "no-store" in shown["Cache-Control"]
    # Shown once: the page again, and the connect page, never show it.
    again = signed_in.get(reverse("token_created"), follow=True)
    assert again.redirect_chain[-1][0] == reverse("connect")
    assert secret not in again.content.decode()
    assert "shown only once" in text(again)
    assert NEW_TOKEN_SESSION_KEY not in signed_in.session
    listing = text(signed_in.get(reverse("connect")))
    assert "laptop" in listing and f"{token.prefix}…" in listing and secret not in listing


def test_the_new_token_authenticates_until_revoked(signed_in, carol):
    make_app(owner=carol, name="Budget")
    signed_in.post(reverse("connect"), {"name": "agent", "scopes": ALL_SCOPES})
    secret = re.search(r'id="token-secret">([^<]+)<', signed_in.get(reverse("token_created")).content.decode()).group(1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/apps/").status_code == 200
    token = ApiToken.objects.get(user=carol)
    response = signed_in.post(reverse("token_revoke", args=[token.pk]))
    assert response["Location"] == reverse("connect")
    assert f"Token “agent” ({token.prefix}…) is revoked" in text(signed_in.get(reverse("connect")))
    refused = api.get("/api/apps/")
    assert refused.status_code == 401


def test_the_token_form_offers_each_scope_in_plain_words_all_ticked(signed_in):
    page = signed_in.get(reverse("connect")).content.decode()
    for scope, description in SCOPES.items():
        assert re.search(rf'<input type="checkbox" name="scopes" value="{scope}"[^>]* checked>', page), scope
        assert f"{description} ({scope})" in page


def test_a_read_only_token_reads_but_is_refused_a_mutation_naming_the_scope(signed_in, carol):
    app = make_app(owner=carol, name="Budget")
    signed_in.post(reverse("connect"), {"name": "reader", "scopes": ["apps:read"]})
    shown = signed_in.get(reverse("token_created")).content.decode()
    secret = re.search(r'id="token-secret">([^<]+)<', shown).group(1)
    assert "which may <code>apps:read</code>:" in shown
    token = ApiToken.objects.get(user=carol)
    assert token.scopes == "apps:read"
    row = re.search(
        r'<td data-label="May" class="token-scopes">(.*?)</td>', signed_in.get(reverse("connect")).content.decode()
    )
    assert row.group(1) == "<span><code>apps:read</code></span>"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/apps/").status_code == 200
    refused = api.post(f"/api/apps/{app.id}/run/add/", {"params": {}}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["kind"] == "insufficient_scope"
    assert "apps:write" in refused.json()["error"]["message"]


def test_create_token_refuses_bad_input(signed_in):
    for data in [
        {"name": "", "scopes": ALL_SCOPES},
        {"name": "x", "expires_days": "0", "scopes": ALL_SCOPES},
        {"name": "x", "expires_days": "abc", "scopes": ALL_SCOPES},
        {"name": "n" * 101, "scopes": ALL_SCOPES},
        {"name": "x"},
        {"name": "x", "scopes": ["apps:admin"]},
    ]:
        response = signed_in.post(reverse("connect"), data)
        assert response.status_code == 400, data
    assert not ApiToken.objects.exists()
    assert "Ensure this value is greater than or equal to 1." in text(
        signed_in.post(reverse("connect"), {"name": "x", "expires_days": "0", "scopes": ALL_SCOPES})
    )
    assert "Choose at least one thing the token may do." in text(signed_in.post(reverse("connect"), {"name": "x"}))


def test_revoking_another_users_token_is_not_found(signed_in):
    theirs = token_create(user=UserFactory(username="olivia"), name="olivia's").token
    assert signed_in.post(reverse("token_revoke", args=[theirs.pk])).status_code == 404
    assert signed_in.post(reverse("token_revoke", args=[999999])).status_code == 404
    theirs.refresh_from_db()
    assert not theirs.revoked


def test_revoke_is_post_only(signed_in, carol):
    token = token_create(user=carol, name="laptop").token
    assert signed_in.get(reverse("token_revoke", args=[token.pk])).status_code == 405
    token.refresh_from_db()
    assert not token.revoked


def test_the_connect_page_gives_each_of_the_users_apps_its_own_mcp_url(signed_in, carol, settings):
    settings.CHARMING_PUBLIC_URL = "https://charming.example.com"
    budget = make_app(owner=carol, name="Budget")
    shared = make_app(owner=UserFactory(username="olivia"), name="Chores")
    membership_set(actor=shared.owner, app=shared, user=carol, role="viewer")
    make_app(owner=UserFactory(username="pat"), name="Diary")

    page = text(signed_in.get(reverse("connect")))

    for app in (budget, shared):
        assert f'{app.name}</span> <code class="url">https://charming.example.com/mcp/apps/{app.id}</code>' in page
    assert "Diary" not in page


def test_the_connect_page_lists_only_the_users_tokens(signed_in, carol):
    token_create(user=carol, name="mine")
    token_create(user=UserFactory(username="olivia"), name="hers")
    page = text(signed_in.get(reverse("connect")))
    assert "mine" in page and "hers" not in page


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("signup", {"username": "eve", "email": "eve@example.com", "password1": PASSWORD, "password2": PASSWORD}),
        ("login", {"username": "carol", "password": PASSWORD}),
        ("connect", {"name": "laptop"}),
        ("account_delete", {"password": PASSWORD}),
        ("logout", {}),
    ],
)
def test_forms_need_the_csrf_token(carol, url, data):
    client = Client(enforce_csrf_checks=True)
    if url not in ("signup", "login"):
        client.force_login(carol)
    assert client.post(reverse(url), data).status_code == 403
    assert not ApiToken.objects.exists()
    assert get_user_model().objects.filter(username="carol").exists()
    assert not get_user_model().objects.filter(username="eve").exists()


def test_revoke_needs_the_csrf_token(carol):
    token = token_create(user=carol, name="laptop").token
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    assert client.post(reverse("token_revoke", args=[token.pk])).status_code == 403
    token.refresh_from_db()
    assert not token.revoked


def test_sign_up_lists_the_passwords_problems_beside_other_fields(client):
    response = client.post(
        reverse("signup"),
        {"username": "dave", "email": "not-an-email", "password1": "12345678", "password2": "12345678"},
    )
    page = text(response)
    assert "Enter a valid email address." in page
    assert "This password is too common." in page and "This password is entirely numeric." in page
