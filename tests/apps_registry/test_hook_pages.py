"""The webhooks page: owners and editors see their app's hooks and a new secret once (never cached, never again);
viewers are refused; a hook of another app cannot be reached through an app's URL."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.models import Hook
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import hook_create
from tests.apps_registry.test_hooks import BUDGET
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return UserFactory(username="rosa")


@pytest.fixture
def app(owner):
    return app_definition_save(actor=owner, definition=BUDGET)


def test_a_new_hooks_secret_is_shown_once_uncached_then_only_its_hint(client, owner, app):
    client.force_login(owner)

    made = client.post(
        reverse("app_hook_create", args=[app.id]), {"route": "add_expense", "description": "bank"}, follow=True
    )

    assert made.redirect_chain[-1][0].endswith("#new-secret")  # shown on a GET: a reload makes no second secret
    assert made.status_code == 200 and "no-store" in made["Cache-Control"]
    hook = Hook.objects.get()
    page = made.content.decode()
    secret = page.split('<code id="hook-secret">', 1)[1].split("</code>", 1)[0]
    assert secret.startswith("whsec_") and f"/hooks/{hook.id}/" in page
    assert "openssl dgst -sha256 -hmac" in page
    again = client.get(reverse("app_hooks", args=[app.id])).content.decode()
    assert secret not in again and f"{hook.secret_hint}…" in again and "bank" in again


def test_rotating_on_the_page_shows_the_new_secret_and_the_overlap(client, owner, app):
    first = hook_create(actor=owner, app_id=app.id, route="add_expense")
    client.force_login(owner)

    rotated = client.post(reverse("app_hook_change", args=[app.id, first.view.hook.id]), {"do": "rotate"}, follow=True)

    page = rotated.content.decode()
    assert rotated.status_code == 200 and "no-store" in rotated["Cache-Control"]
    assert first.secret not in page and "The previous secret still works until" in page
    assert Hook.objects.get().secret_nonce != first.view.hook.secret_nonce


def test_a_mistake_keeps_the_form_and_says_what_to_fix(client, owner, app):
    client.force_login(owner)

    refused = client.post(reverse("app_hook_create", args=[app.id]), {"route": "total", "description": "x"})

    assert refused.status_code == 400
    assert "&#x27;total&#x27; is a query; webhooks run mutations" in refused.content.decode()
    assert not Hook.objects.exists()


def test_viewers_are_refused_the_page_and_its_buttons(client, owner, app):
    viewer = UserFactory(username="vic")
    membership_set(actor=owner, app=app, user=viewer, role="viewer")
    made = hook_create(actor=owner, app_id=app.id, route="add_expense")
    client.force_login(viewer)

    page = client.get(reverse("app_hooks", args=[app.id]))
    rotate = client.post(reverse("app_hook_change", args=[app.id, made.view.hook.id]), {"do": "rotate"})
    create = client.post(reverse("app_hook_create", args=[app.id]), {"route": "add_expense"})
    detail = client.get(reverse("app_page", args=[app.id])).content.decode()

    assert (page.status_code, rotate.status_code, create.status_code) == (403, 403, 403)
    assert "manage the webhooks of app &#x27;Budget&#x27;; you are a viewer" in page.content.decode()
    assert made.secret not in rotate.content.decode()
    assert Hook.objects.get().secret_nonce == made.view.hook.secret_nonce and Hook.objects.count() == 1
    assert reverse("app_hooks", args=[app.id]) not in detail


def test_a_hook_of_another_app_cannot_be_reached_through_an_apps_url(client, owner, app):
    other_owner = UserFactory(username="sam")
    theirs = app_definition_save(actor=other_owner, definition=BUDGET)
    membership_set(actor=other_owner, app=theirs, user=owner, role="editor")
    their_hook = hook_create(actor=other_owner, app_id=theirs.id, route="add_expense")
    client.force_login(owner)

    answer = client.post(
        reverse("app_hook_change", args=[app.id, their_hook.view.hook.id]), {"do": "rotate"}, follow=True
    )

    assert "That webhook no longer exists." in answer.content.decode()
    assert Hook.objects.get().secret_nonce == their_hook.view.hook.secret_nonce


def test_a_stranger_gets_404(client, app):
    client.force_login(UserFactory(username="mallory"))

    assert client.get(reverse("app_hooks", args=[app.id])).status_code == 404


def test_ending_the_old_secret_now_from_the_page(client, owner, app):
    first = hook_create(actor=owner, app_id=app.id, route="add_expense")
    client.force_login(owner)

    answer = client.post(
        reverse("app_hook_change", args=[app.id, first.view.hook.id]), {"do": "rotate-now"}, follow=True
    )

    hook = Hook.objects.get()
    assert hook.previous_nonce == "" and hook.previous_until is None
    assert "The previous secret still works" not in answer.content.decode()
    assert '<code id="hook-secret">whsec_' in answer.content.decode()
