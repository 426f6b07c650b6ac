"""Templates and remix: an owner publishes an app's definition (never its records); anyone finds it and a signed-in
person makes their own app from it, linked to its origin; staff unlist; the owner updates or takes it down."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.exceptions import AccessDenied, InvalidInput, NotFound
from apps_registry.models import App, AuditEvent, Template
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from apps_registry.services.templates import (
    template_get,
    template_publish,
    template_remix,
    template_unpublish,
    templates_list_set,
    templates_search,
)
from tests.apps_registry.route_helpers import example, records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return UserFactory(username="rosa")


@pytest.fixture
def budget(owner):
    app = app_definition_save(actor=owner, definition=example("budget"))
    route_run(actor=owner, app_id=app.id, op="set_budget", params={"limit": 500}, kind="mutation")
    route_run(actor=owner, app_id=app.id, op="add_expense", params={"amount": 9.5, "category": "food"}, kind="mutation")
    return app


@pytest.fixture
def published(owner, budget):
    return template_publish(
        actor=owner,
        app_id=budget.id,
        title="Monthly budget",
        description="Track spending against a monthly limit.",
        starter_prompt="Set my budget to 400 and add today's groceries.",
    )


def test_a_template_holds_the_definition_and_never_the_records(budget, published):
    template = Template.objects.get()

    assert template.definition["routes"].keys() == example("budget")["routes"].keys()
    assert "9.5" not in json.dumps(template.definition) and "records" not in template.definition
    value = published.as_dict()
    assert (value["title"], value["author"], value["remixes"]) == ("Monthly budget", "rosa", 0)
    assert {r["name"] for r in value["routes"]} == set(example("budget")["routes"])


def test_another_person_remixes_it_into_their_own_empty_app_linked_to_its_origin(budget, published):
    sam = UserFactory(username="sam")

    saved = template_remix(actor=sam, template_id=published.template.id, name="Sam's budget")

    mine = App.objects.get(pk=saved.app.id)
    assert (mine.owner, mine.name, mine.remixed_from_id) == (sam, "Sam's budget", published.template.id)
    assert records(mine) == {} and len(records(budget)) == 2
    assert route_run(actor=sam, app_id=mine.id, op="set_budget", params={"limit": 50}, kind="mutation").value
    assert template_get(template_id=published.template.id).remixes == 1
    assert AuditEvent.objects.filter(action="template.remix", app_id=mine.id).exists()


def test_only_the_owner_publishes_and_takes_it_down(owner, budget):
    editor = UserFactory(username="ed")
    membership_set(actor=owner, app=budget, user=editor, role="editor")

    with pytest.raises(AccessDenied):
        template_publish(actor=editor, app_id=budget.id, title="Mine now")
    with pytest.raises(NotFound):
        template_publish(actor=UserFactory(username="mallory"), app_id=budget.id, title="x")
    with pytest.raises(InvalidInput) as untitled:
        template_publish(actor=owner, app_id=budget.id, title="  ")
    assert untitled.value.errors[0]["path"] == "$.title"
    assert not Template.objects.exists()


def test_publishing_again_updates_the_snapshot_and_taking_it_down_keeps_the_remixes(owner, budget, published):
    remix = template_remix(actor=UserFactory(username="sam"), template_id=published.template.id).app
    definition = example("budget")
    definition["description"] = "Now with notes."
    app_definition_save(actor=owner, definition=definition, app_id=budget.id)

    again = template_publish(actor=owner, app_id=budget.id, title="Monthly budget v2")

    assert Template.objects.count() == 1 and again.template.id == published.template.id
    assert again.template.definition["description"] == "Now with notes." and again.template.version == 2
    template_unpublish(actor=owner, app_id=budget.id)
    assert not Template.objects.exists()
    remix.refresh_from_db()
    assert remix.remixed_from_id is None and App.objects.filter(pk=remix.pk).exists()


def test_search_finds_every_word_newest_first_and_pages(owner):
    for n in range(25):
        app = app_definition_save(actor=owner, definition={**example("budget"), "name": f"Budget {n}"})
        template_publish(actor=owner, app_id=app.id, title=f"Budget {n}", description="money" if n % 2 else "cash")

    first = templates_search(query="budget money")
    assert [v.template.title for v in first.templates][:3] == ["Budget 23", "Budget 21", "Budget 19"]
    assert len(first.templates) == 12 and first.next_cursor is None
    page = templates_search(query="")
    assert len(page.templates) == 20 and page.next_cursor
    rest = templates_search(query="", cursor=page.next_cursor)
    assert len(rest.templates) == 5 and rest.next_cursor is None
    with pytest.raises(InvalidInput):
        templates_search(query="money", cursor=page.next_cursor)  # a cursor of another search


def test_staff_unlist_a_template_and_it_leaves_search_and_remix(owner, budget, published, staff):
    templates_list_set(actor=staff, template_ids=[published.template.id], listed=False)

    assert templates_search(query="").templates == []
    with pytest.raises(NotFound):
        template_remix(actor=UserFactory(username="sam"), template_id=published.template.id)
    assert AuditEvent.objects.filter(action="template.unlist").exists()


def test_deleting_the_app_deletes_its_template(owner, budget, published):
    from apps_registry.services.apps import app_delete

    app_delete(actor=owner, app_id=budget.id, purge_storage=True, confirmed_via="command")

    assert not Template.objects.exists()


def test_the_gallery_and_a_template_page_are_open_and_remix_needs_an_account(client, published):
    gallery = client.get(reverse("templates"), {"q": "monthly"}).content.decode()
    assert "Monthly budget" in gallery and "by rosa" in gallery
    page = client.get(reverse("template_page", args=[published.template.id])).content.decode()
    assert "Set my budget to 400" in page and "Log in" in page and "add_expense" in page

    anonymous = client.post(reverse("template_remix", args=[published.template.id]))
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert App.objects.count() == 1

    client.force_login(UserFactory(username="sam"))
    made = client.post(reverse("template_remix", args=[published.template.id]), {"name": "Ours"}, follow=True)
    assert "Your app &#x27;Ours&#x27; is ready" in made.content.decode()
    assert App.objects.filter(name="Ours", remixed_from=published.template).exists()


def test_the_owner_publishes_from_the_apps_page_and_an_editor_is_refused(client, owner, budget):
    editor = UserFactory(username="ed")
    membership_set(actor=owner, app=budget, user=editor, role="editor")
    client.force_login(editor)
    assert client.get(reverse("app_template", args=[budget.id])).status_code == 403
    assert client.post(reverse("app_template", args=[budget.id]), {"title": "x"}).status_code == 403

    client.force_login(owner)
    assert (
        reverse("app_template", args=[budget.id]) in client.get(reverse("app_page", args=[budget.id])).content.decode()
    )
    missing = client.post(reverse("app_template", args=[budget.id]), {"title": ""})
    assert missing.status_code == 400 and "title is required" in missing.content.decode()
    client.post(reverse("app_template", args=[budget.id]), {"title": "Budget", "description": "d"})
    assert Template.objects.get().title == "Budget"
    client.post(reverse("app_template", args=[budget.id]), {"do": "unpublish"})
    assert not Template.objects.exists()


def test_an_unknown_or_unlisted_template_page_is_404(client, published, staff):
    templates_list_set(actor=staff, template_ids=[published.template.id], listed=False)

    assert client.get(reverse("template_page", args=[published.template.id])).status_code == 404


def test_staff_unlist_from_the_admin(client, staff, published):
    client.force_login(staff)
    url = reverse("admin:apps_registry_template_changelist")

    client.post(url, {"action": "unlist_selected", "_selected_action": [str(published.template.id)]})

    assert Template.objects.get().listed is False
