"""The activity page, a record's history and Revert, through Django's test client."""

from __future__ import annotations

import html as html_module

import pytest
from django.test import Client

from apps_registry.access import membership_set
from apps_registry.models import Change
from apps_registry.services.definitions import app_definition_save, definition_save
from apps_registry.services.routes import route_run
from tests.apps_registry.route_helpers import records
from tests.apps_registry.test_changes import TASKS
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def app(user):
    return app_definition_save(actor=user, definition=TASKS)


def browser_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def mutate(actor, app, op, **params):
    return route_run(actor=actor, app_id=app.id, op=op, params=params, kind="mutation", via="mcp").change_id


def test_the_activity_page_shows_each_change_with_its_records_and_a_revert_button(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    page = browser_of(user).get(f"/apps/{app.id}/activity/")
    html = page.content.decode()
    assert page.status_code == 200
    assert f"Change {added}" in html and "through an AI agent" in html and "tasks/t1" in html
    assert "&quot;title&quot;: &quot;Milk&quot;" in html  # the record after, escaped
    assert f"Revert change {added}" in html


def test_a_page_submitted_mutation_is_recorded_as_made_on_the_page(user, app):
    response = browser_of(user).post(f"/apps/{app.id}/run/add/", {"id": "t5", "title": "Bread"})
    assert response.status_code in (200, 302)
    assert Change.objects.get().via == "page"


def test_revert_from_the_page_restores_and_says_what(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    removed = mutate(user, app, "remove", id="t1")
    client = browser_of(user)
    response = client.post(f"/apps/{app.id}/changes/{removed}/revert/", follow=True)
    assert response.status_code == 200
    assert f"Change {removed} was reverted: tasks/t1 brought back" in response.content.decode()
    assert records(app, "tasks") == {"t1": {"title": "Milk", "done": False}}
    assert Change.objects.latest("id").via == "page"


def test_a_conflict_names_the_record_and_offers_revert_anyway(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    later = mutate(user, app, "finish", id="t1")
    client = browser_of(user)
    response = client.post(f"/apps/{app.id}/changes/{added}/revert/")
    html = response.content.decode()
    assert response.status_code == 409
    assert "tasks/t1" in html and f"changed again by change {later}" in html and "Nothing was changed" in html
    assert f"Revert change {added} anyway" in html
    assert "t1" in records(app, "tasks")
    client.post(f"/apps/{app.id}/changes/{added}/revert/", {"force": "1"})
    assert records(app, "tasks") == {}


def test_the_record_history_lists_only_that_records_changes(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    mutate(user, app, "add", id="t2", title="Eggs")
    finished = mutate(user, app, "finish", id="t1")
    html = browser_of(user).get(f"/apps/{app.id}/records/tasks/t1/history/").content.decode()
    assert "History of" in html and f"Change {finished}" in html
    assert "tasks/t2" not in html


def test_a_viewer_sees_the_activity_without_revert_and_cannot_post_one(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    viewer = UserFactory(username="vera")
    membership_set(actor=user, app=app, user=viewer, role="viewer")
    client = browser_of(viewer)
    html = client.get(f"/apps/{app.id}/activity/").content.decode()
    assert f"Change {added}" in html and "Revert change" not in html
    assert client.post(f"/apps/{app.id}/changes/{added}/revert/").status_code == 403
    assert "t1" in records(app, "tasks")


def test_another_person_gets_not_found_and_a_change_of_another_app_is_not_found(user, other_user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    assert browser_of(other_user).get(f"/apps/{app.id}/activity/").status_code == 404
    assert browser_of(other_user).post(f"/apps/{app.id}/changes/{added}/revert/").status_code == 404
    mine = app_definition_save(actor=other_user, definition=TASKS)
    assert browser_of(other_user).post(f"/apps/{mine.id}/changes/{added}/revert/").status_code == 404
    assert "t1" in records(app, "tasks")


def test_a_bad_change_id_is_said_on_the_page_and_nothing_happens(user, app):
    mutate(user, app, "add", id="t1", title="Milk")
    response = browser_of(user).post(f"/apps/{app.id}/changes/nope/revert/", follow=True)
    assert "positive whole number" in response.content.decode()
    assert "t1" in records(app, "tasks")


def test_every_way_a_change_is_made_has_words_on_the_activity_page():
    from apps_registry.models import ChangeVia
    from apps_registry.pages.history_views import VIA_WORDS

    assert set(VIA_WORDS) == set(ChangeVia.values)


def test_a_migration_shows_as_records_migrated_without_a_revert_button(user, app):
    added = mutate(user, app, "add", id="t1", title="Milk")
    definition_save(
        actor=user,
        definition=TASKS,
        app_id=app.id,
        expected_version=app.version,
        migrate={"tasks": "{'title': record.title.upperAscii()}"},
    )
    migration = Change.objects.latest("id")
    html = browser_of(user).get(f"/apps/{app.id}/activity/").content.decode()
    assert f"<strong>Change {migration.pk}</strong>:\n          records migrated" in html
    assert "through a definition save" in html and "&quot;title&quot;: &quot;MILK&quot;" in html
    assert f"Revert change {migration.pk}" not in html and f"Revert change {added}" in html
    refused = browser_of(user).post(f"/apps/{app.id}/changes/{migration.pk}/revert/", follow=True)
    assert (
        f"Change {migration.pk} changed the app's stored records when its design was changed, and is not reverted"
        in html_module.unescape(refused.content.decode())
    )
    earlier = browser_of(user).post(f"/apps/{app.id}/changes/{added}/revert/", follow=True).content.decode()
    earlier = html_module.unescape(earlier)
    assert f"Change {added} was not reverted: the app's records were reshaped since" in earlier
    assert f"(change {migration.pk})" in earlier and "update_app" not in earlier
    assert records(app, "tasks")["t1"]["title"] == "MILK"
