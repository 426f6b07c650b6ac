"""Renaming an app and handing it over: an offer changes nothing until its recipient accepts; then they own it with
everything in it and the former owner is an editor; offers can be declined or taken back."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.exceptions import AccessDenied, InvalidInput, NotFound, OperationFailed
from apps_registry.models import App, AuditEvent, Membership, Storage
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from apps_registry.services.schedules import schedule_create
from apps_registry.services.transfers import (
    app_rename,
    app_transfer_accept,
    app_transfer_decline,
    app_transfer_offer,
    app_transfer_revoke,
    transfers_pending_for,
)
from tests.apps_registry.route_helpers import example, records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def rosa():
    return UserFactory(username="rosa")


@pytest.fixture
def sam():
    return UserFactory(username="sam")


@pytest.fixture
def budget(rosa):
    app = app_definition_save(actor=rosa, definition=example("budget"))
    route_run(actor=rosa, app_id=app.id, op="set_budget", params={"limit": 100}, kind="mutation")
    return app


def role_of(app, user):
    return Membership.objects.get(app=app, user=user).role


def test_an_accepted_offer_makes_the_recipient_the_owner_and_the_owner_an_editor(rosa, sam, budget):
    offer = app_transfer_offer(actor=rosa, app_id=budget.id, to="sam")
    assert App.objects.get(pk=budget.pk).owner == rosa and transfers_pending_for(sam) == [offer]

    app_transfer_accept(actor=sam, transfer_id=offer.pk)

    app = App.objects.get(pk=budget.pk)
    assert app.owner == sam and Storage.objects.get(app=app).owner == sam
    assert (role_of(app, sam), role_of(app, rosa)) == ("owner", "editor")
    assert len(records(app)) == 1 and transfers_pending_for(sam) == []
    assert {"app.transfer_offer", "app.transfer_accept"} <= set(AuditEvent.objects.values_list("action", flat=True))


def test_a_member_can_take_the_app_over_too(rosa, sam, budget):
    membership_set(actor=rosa, app=budget, user=sam, role="viewer")

    app_transfer_accept(actor=sam, transfer_id=app_transfer_offer(actor=rosa, app_id=budget.id, to="sam").pk)

    assert role_of(budget, sam) == "owner" and Membership.objects.filter(app=budget).count() == 2


def test_only_the_owner_offers_and_only_the_recipient_answers(rosa, sam, budget):
    editor = UserFactory(username="ed")
    membership_set(actor=rosa, app=budget, user=editor, role="editor")
    with pytest.raises(AccessDenied):
        app_transfer_offer(actor=editor, app_id=budget.id, to="sam")
    offer = app_transfer_offer(actor=rosa, app_id=budget.id, to="sam")
    with pytest.raises(NotFound):
        app_transfer_accept(actor=editor, transfer_id=offer.pk)
    with pytest.raises(InvalidInput):
        app_transfer_offer(actor=rosa, app_id=budget.id, to="rosa")
    with pytest.raises(OperationFailed) as twice:
        app_transfer_offer(actor=rosa, app_id=budget.id, to="ed")
    assert "already offered to sam" in twice.value.message
    assert App.objects.get(pk=budget.pk).owner == rosa


def test_declined_and_taken_back_offers_change_nothing(rosa, sam, budget):
    app_transfer_decline(actor=sam, transfer_id=app_transfer_offer(actor=rosa, app_id=budget.id, to="sam").pk)
    offer = app_transfer_offer(actor=rosa, app_id=budget.id, to="sam")
    app_transfer_revoke(actor=rosa, app_id=budget.id)

    with pytest.raises(NotFound):
        app_transfer_accept(actor=sam, transfer_id=offer.pk)
    assert App.objects.get(pk=budget.pk).owner == rosa


def test_the_recipients_own_limits_apply(rosa, sam, budget, settings):
    settings.CHARMING_SCHEDULES_PER_OWNER = 1
    schedule_create(actor=rosa, app_id=budget.id, route="set_budget", cron="monthly", params={"limit": 100})
    theirs = app_definition_save(actor=sam, definition=example("budget"))
    schedule_create(actor=sam, app_id=theirs.id, route="set_budget", cron="monthly", params={"limit": 5})
    offer = app_transfer_offer(actor=rosa, app_id=budget.id, to="sam")

    with pytest.raises(OperationFailed) as refused:
        app_transfer_accept(actor=sam, transfer_id=offer.pk)

    assert "CHARMING_SCHEDULES_PER_OWNER" in refused.value.message
    assert App.objects.get(pk=budget.pk).owner == rosa


def test_rename_by_an_owner_or_editor_not_a_viewer(rosa, budget):
    viewer = UserFactory(username="vi")
    membership_set(actor=rosa, app=budget, user=viewer, role="viewer")

    assert app_rename(actor=rosa, app_id=budget.id, name="  Household   budget ").name == "Household budget"
    assert App.objects.get(pk=budget.pk).name == "Household budget"
    assert Storage.objects.get(app=budget).app_name == "Household budget"
    with pytest.raises(AccessDenied):
        app_rename(actor=viewer, app_id=budget.id, name="Mine")
    with pytest.raises(InvalidInput):
        app_rename(actor=rosa, app_id=budget.id, name=" ")


def test_the_pages_offer_accept_and_rename(client, rosa, sam, budget):
    client.force_login(rosa)
    client.post(reverse("app_rename", args=[budget.id]), {"name": "Our budget"})
    page = client.post(reverse("app_transfer", args=[budget.id]), {"do": "offer", "user": "sam"}, follow=True)
    assert "Offered to sam" in page.content.decode()

    client.force_login(sam)
    home = client.get(reverse("home")).content.decode()
    assert "Our budget" in home and "Take it over" in home
    offer = transfers_pending_for(sam)[0]
    taken = client.post(reverse("transfer_answer", args=[offer.pk]), {"do": "accept"}, follow=True)
    assert "“Our budget” is yours now." in taken.content.decode()
    assert App.objects.get(pk=budget.pk).owner == sam


def test_the_recipients_limit_of_declared_indexes_applies(rosa, sam, settings):
    def indexed(fields):
        definition = example("budget")
        name = next(iter(definition["collections"]))
        definition["collections"][name] = {"indexes": [[field] for field in fields]}
        return definition

    settings.CHARMING_ROUTES_MAX_INDEXES_PER_OWNER = 3
    app = app_definition_save(actor=rosa, definition=indexed(["a", "b"]))
    app_definition_save(actor=sam, definition=indexed(["c", "d"]))
    offer = app_transfer_offer(actor=rosa, app_id=app.id, to="sam")

    with pytest.raises(OperationFailed) as refused:
        app_transfer_accept(actor=sam, transfer_id=offer.pk)

    assert "would give your apps 4 declared indexes" in refused.value.message
    assert refused.value.details == {"limit": "indexes_per_owner", "max": 3}
    assert App.objects.get(pk=app.pk).owner == rosa
    settings.CHARMING_ROUTES_MAX_INDEXES_PER_OWNER = 4
    assert app_transfer_accept(actor=sam, transfer_id=offer.pk).owner == sam
