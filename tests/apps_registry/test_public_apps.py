"""Public apps: an owner opens an app under a handle; anyone sees its views and uses only the actions opened to
visitors, within their own limits; nothing else of the app leaks; turning it off takes effect at once."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.exceptions import AccessDenied, AppNotFound, InvalidInput, NotFound
from apps_registry.models import Change, PublicApp
from apps_registry.routes import celworker
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.public_apps import (
    public_app_close,
    public_app_set,
    public_route_run,
    public_visit,
    visitor_for,
)
from tests.apps_registry.public_app_defs import GUEST_BOOK
from tests.apps_registry.route_helpers import records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return UserFactory(username="rosa")


@pytest.fixture
def book(owner):
    app = app_definition_save(actor=owner, definition=GUEST_BOOK)
    public_app_set(actor=owner, app_id=app.id, handle="Our-Wedding", mutations=["sign", "vote"])
    return app


def sign(client, name="Ann", message="Congratulations!", address="203.0.113.5", **extra):
    return client.post(
        "/p/our-wedding/run/sign/",
        {"name": name, "message": message, "_place": "action-sign", **extra},
        REMOTE_ADDR=address,
    )


def test_anyone_sees_the_views_and_the_opened_actions_and_nothing_else(client, owner, book):
    editor = UserFactory(username="eddie-the-editor")
    membership_set(actor=owner, app=book, user=editor, role="editor")
    assert sign(client).status_code == 302
    page = client.get("/p/our-wedding/")
    html = page.content.decode()
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    assert "Congratulations!" in html and "Sign the guest book" in html and 'action="/p/our-wedding/run/vote/"' in html
    # Not opened, so not offered: the row's Remove button, the members, the owner, the records, the activity.
    assert "remove_entry" not in html and ">Remove" not in html
    for secret in ("rosa", "eddie-the-editor", "Members", "Stored records", "Activity", f"/apps/{book.id}/"):
        assert secret not in html
    assert "<script" not in html


def test_a_visitors_action_runs_as_a_visitor_and_the_log_says_so(client, book):
    done = sign(client)
    assert done.status_code == 302 and done["Location"].startswith("/p/our-wedding/?_done=")
    assert done["Location"].endswith("#action-sign")
    (entry,) = records(book, "entries").values()
    assert entry["name"] == "Ann" and entry["role"] == "visitor" and entry["by"].startswith("visitor-")
    change = Change.objects.get(app=book)
    assert (change.via, change.actor_id, change.actor_repr) == ("public", None, "visitor")
    client.force_login(book.owner)
    assert (
        "by <strong>visitor</strong> through its public page"
        in client.get(reverse("app_activity", args=[book.id])).content.decode()
    )
    client.logout()
    shown = client.get(done["Location"]).content.decode()
    assert "Sign the guest book: done." in shown
    # The note is signed: an altered one is ignored.
    assert "done." not in client.get("/p/our-wedding/?_done=forged").content.decode()


def test_a_mutation_not_opened_or_a_query_or_another_route_is_refused_with_nothing_written(client, owner, book):
    sign(client)
    (entry_id,) = records(book, "entries")
    for op in ("remove_entry", "entries", "no_such_route"):
        refused = client.post(f"/p/our-wedding/run/{op}/", {"id": entry_id}, REMOTE_ADDR="203.0.113.5")
        assert refused.status_code == 404
    assert list(records(book, "entries")) == [entry_id]
    visit = public_visit(handle="our-wedding", address="203.0.113.5")
    with pytest.raises(Exception) as refused:
        public_route_run(visit=visit, op="remove_entry", params={"id": entry_id}, kind="mutation")
    assert refused.value.kind == "forbidden" and "not open to visitors" in refused.value.message
    assert list(records(book, "entries")) == [entry_id]


def test_a_visitors_errors_come_back_in_the_form_and_an_oversized_form_is_refused(client, book):
    missing = sign(client, name="")
    assert missing.status_code == 400 and "Name" in missing.content.decode()
    with override_settings(CHARMING_PUBLIC_PARAMS_BYTES=100):
        big = sign(client, message="x" * 200)
    assert big.status_code == 400
    assert "a visitor may send at most 100" in big.content.decode()
    assert records(book, "entries") == {}
    client.post("/p/our-wedding/run/vote/", {"song": "At Last"}, REMOTE_ADDR="203.0.113.5")
    again = client.post("/p/our-wedding/run/vote/", {"song": "Moon River"}, REMOTE_ADDR="203.0.113.5")
    assert again.status_code == 422 and "You have voted already." in again.content.decode()
    other = client.post("/p/our-wedding/run/vote/", {"song": "Moon River"}, REMOTE_ADDR="198.51.100.7")
    assert other.status_code == 302
    assert sorted(v["song"] for v in records(book, "votes").values()) == ["At Last", "Moon River"]


def test_a_visitors_id_is_stable_per_address_and_app_and_unrelated_across_apps(owner, book):
    other = app_definition_save(actor=owner, definition=GUEST_BOOK)
    one = visitor_for(app=book, address="203.0.113.5")
    assert one.caller_id == visitor_for(app=book, address="203.0.113.5").caller_id
    assert one.caller_id != visitor_for(app=book, address="203.0.113.6").caller_id
    assert one.caller_id != visitor_for(app=other, address="203.0.113.5").caller_id
    # An IPv6 address counts by its /64.
    assert (
        visitor_for(app=book, address="2001:db8::1").caller_id == visitor_for(app=book, address="2001:db8::2").caller_id
    )


def test_a_signed_in_stranger_is_a_visitor_too(client, book):
    client.force_login(UserFactory(username="sam"))
    html = client.get("/p/our-wedding/").content.decode()
    assert "visitor-" in html and ">visitor<" in html
    assert client.get(reverse("app_page", args=[book.id])).status_code == 404


def test_turning_it_off_takes_effect_at_once_even_for_a_visit_already_admitted(client, owner, book):
    visit = public_visit(handle="our-wedding", address="203.0.113.5")
    public_app_close(actor=owner, app_id=book.id)
    assert client.get("/p/our-wedding/").status_code == 404
    assert sign(client).status_code == 404
    with pytest.raises(AppNotFound):  # the route lookup joins the listing: gone, nothing runs
        public_route_run(visit=visit, op="sign", params={"name": "a", "message": "b"}, kind="mutation")
    with pytest.raises(AppNotFound):
        public_route_run(visit=visit, op="entries", params={}, kind="query")
    assert records(book, "entries") == {}
    with pytest.raises(NotFound):
        public_app_close(actor=owner, app_id=book.id)


@override_settings(CHARMING_RATE_VISITOR_WRITES_PER_HOUR=1, CHARMING_RATE_VISITOR_WRITES_BURST=2)
def test_an_address_has_its_own_budget_of_actions(client, book):
    assert sign(client, name="a").status_code == 302
    assert sign(client, name="b").status_code == 302
    refused = sign(client, name="c")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Nothing was done; try again in" in refused.content.decode()
    assert sign(client, name="d", address="198.51.100.7").status_code == 302
    assert sorted(e["name"] for e in records(book, "entries").values()) == ["a", "b", "d"]


@override_settings(CHARMING_RATE_PUBLIC_APP_PER_MINUTE=1, CHARMING_RATE_PUBLIC_APP_BURST=3)
def test_an_app_has_one_budget_for_all_its_visitors_and_its_members_keep_theirs(client, owner, book):
    for n in range(3):
        assert client.get("/p/our-wedding/", REMOTE_ADDR=f"198.51.100.{n}").status_code == 200
    refused = client.get("/p/our-wedding/", REMOTE_ADDR="198.51.100.9")
    assert refused.status_code == 429 and "too many visitors" in refused.content.decode()
    client.force_login(owner)
    assert client.get(reverse("app_page", args=[book.id])).status_code == 200


@override_settings(CHARMING_RATE_VISITOR_PER_MINUTE=1, CHARMING_RATE_VISITOR_BURST=2)
def test_an_address_has_a_budget_of_page_views(client, book):
    assert client.get("/p/our-wedding/").status_code == 200
    assert client.get("/p/our-wedding/").status_code == 200
    assert client.get("/p/our-wedding/").status_code == 429
    assert client.get("/p/our-wedding/", REMOTE_ADDR="198.51.100.7").status_code == 200


def test_a_visitors_cel_work_takes_the_owners_share(monkeypatch, owner, book):
    shares = []
    real = celworker.share
    monkeypatch.setattr(celworker, "share", lambda key, n: shares.append(key) or real(key, n))
    visit = public_visit(handle="our-wedding", address="203.0.113.5")
    public_route_run(visit=visit, op="whoami", params={}, kind="query")
    assert shares == [str(owner.pk)]


def test_only_the_owner_opens_changes_or_closes_it_and_handles_are_checked(owner, book):
    editor, stranger = UserFactory(username="ed"), UserFactory(username="st")
    membership_set(actor=owner, app=book, user=editor, role="editor")
    with pytest.raises(AccessDenied):
        public_app_set(actor=editor, app_id=book.id, handle="mine", mutations=[])
    with pytest.raises(AccessDenied):
        public_app_close(actor=editor, app_id=book.id)
    with pytest.raises(NotFound):
        public_app_set(actor=stranger, app_id=book.id, handle="mine", mutations=[])
    for handle in ("ab", "-abc", "abc-", "a--b", "x" * 41, "ünï", "a b", 7):
        with pytest.raises(InvalidInput) as bad:
            public_app_set(actor=owner, app_id=book.id, handle=handle, mutations=[])
        assert bad.value.errors[0]["path"] == "$.handle"
    with pytest.raises(InvalidInput) as query:
        public_app_set(actor=owner, app_id=book.id, handle="our-wedding", mutations=["entries", "nope"])
    assert "queries are always public" in query.value.message
    assert [e["path"] for e in query.value.errors] == ["$.mutations[0]", "$.mutations[1]"]
    other = app_definition_save(actor=stranger, definition=GUEST_BOOK)
    with pytest.raises(InvalidInput) as taken:
        public_app_set(actor=stranger, app_id=other.id, handle="OUR-wedding", mutations=[])
    assert "taken by another public app" in taken.value.message
    changed = public_app_set(actor=owner, app_id=book.id, handle="wedding-2027", mutations=["sign"])
    assert (changed.handle, changed.mutations, PublicApp.objects.count()) == ("wedding-2027", ["sign"], 1)


def test_the_owner_turns_it_on_and_off_from_the_apps_page(client, owner):
    app = app_definition_save(actor=owner, definition=GUEST_BOOK)
    client.force_login(owner)
    page = client.get(reverse("app_page", args=[app.id])).content.decode()
    assert "Make public" in page and 'value="vote"' in page and 'value="entries"' not in page
    made = client.post(reverse("app_public", args=[app.id]), {"handle": "guests", "mutations": ["sign"]}, follow=True)
    shown = made.content.decode()
    assert "The app is public" in shown and "/p/guests/" in shown, shown[shown.find("<main") :][:800]
    assert PublicApp.objects.get(app=app).mutations == ["sign"]
    bad = client.post(reverse("app_public", args=[app.id]), {"handle": "no"}, follow=True)
    assert "is not one: use 3 to 40" in bad.content.decode()
    client.post(reverse("app_public", args=[app.id]), {"action": "close"})
    assert not PublicApp.objects.exists()
    assert client.get("/p/guests/").status_code == 404


def test_deleting_the_app_ends_its_public_page(client, owner, book):
    from apps_registry.services.apps import app_delete

    app_delete(actor=owner, app_id=book.id, purge_storage=False, confirmed_via="page")
    assert not PublicApp.objects.exists()
    assert client.get("/p/our-wedding/").status_code == 404


def test_staff_with_the_permission_turn_a_public_page_off_from_the_admin(client, owner, book, staff):
    from django.contrib.auth.models import Permission

    from apps_registry.models import AuditEvent

    looker = UserFactory(username="looker", is_staff=True)
    looker.user_permissions.add(Permission.objects.get(codename="view_publicapp"))
    listing_url = reverse("admin:apps_registry_publicapp_changelist")
    action = {"action": "close_selected", "_selected_action": [str(book.id)]}
    client.force_login(looker)
    assert "our-wedding" in client.get(listing_url).content.decode()
    client.post(listing_url, action)
    assert PublicApp.objects.exists()  # without the change permission the action is not offered
    client.force_login(staff)
    client.post(listing_url, action)
    assert not PublicApp.objects.exists()
    assert AuditEvent.objects.filter(action="public.close", actor=staff, app_id=book.id).exists()
    assert client.get("/p/our-wedding/").status_code == 404
