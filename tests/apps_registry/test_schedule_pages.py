"""The schedules page's POSTs: only owners and editors of the app in the URL act, on that app's schedules."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.models import Schedule
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.schedules import schedule_create
from tests.apps_registry.test_schedules import CHORES
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_apps():
    owner = UserFactory()
    mine = app_definition_save(actor=owner, definition=CHORES)
    other_owner = UserFactory()
    theirs = app_definition_save(actor=other_owner, definition=CHORES)
    membership_set(actor=other_owner, app=theirs, user=owner, role="viewer")
    their_schedule = schedule_create(
        actor=other_owner, app_id=theirs.id, route="tick", cron="daily", params={"by": 1}
    ).schedule
    return owner, mine, theirs, their_schedule


def test_a_schedule_of_another_app_cannot_be_reached_through_an_apps_url(client, two_apps):
    owner, mine, _theirs, their_schedule = two_apps
    client.force_login(owner)
    url = reverse("app_schedule_change", args=[mine.id, their_schedule.id])
    response = client.post(url, {"do": "delete"}, follow=True)
    assert "That schedule no longer exists." in response.content.decode()
    assert Schedule.objects.filter(pk=their_schedule.pk).exists()


def test_a_viewer_is_refused_and_nothing_changes(client, two_apps):
    owner, _mine, theirs, their_schedule = two_apps
    client.force_login(owner)  # a viewer of `theirs`
    response = client.post(reverse("app_schedule_change", args=[theirs.id, their_schedule.id]), {"do": "pause"})
    assert response.status_code == 403
    assert "manage the schedules of app 'Chores'; you are a viewer" in html.unescape(response.content.decode())
    assert Schedule.objects.get(pk=their_schedule.pk).active
    page = client.get(reverse("app_schedules", args=[theirs.id]))
    assert page.status_code == 200 and "Add a schedule" not in page.content.decode()
    created = client.post(
        reverse("app_schedule_create", args=[theirs.id]), {"route": "tick", "cron": "daily", "params": "{}"}
    )
    assert created.status_code == 403 and Schedule.objects.count() == 1


def test_bad_json_params_show_the_form_again_with_what_to_fix(client, two_apps):
    owner, mine, _theirs, _schedule = two_apps
    client.force_login(owner)
    response = client.post(
        reverse("app_schedule_create", args=[mine.id]),
        {"route": "tick", "cron": "daily", "timezone": "UTC", "params": "{by: 1"},
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "The values to send are not JSON" in body and 'value="daily"' in body
    assert not Schedule.objects.filter(app=mine).exists()


def test_a_stranger_gets_not_found(client, two_apps):
    _owner, mine, _theirs, _schedule = two_apps
    client.force_login(UserFactory())
    assert client.get(reverse("app_schedules", args=[mine.id])).status_code == 404
