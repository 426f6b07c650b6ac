"""notify steps: a subject and a text to the app's members by role, on their home page and by e-mail to confirmed
addresses, sent exactly when the mutation commits; bounded per call and per app per day; each member can turn an
app's notices off. No address but members' is reachable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from apps_registry.access import membership_set
from apps_registry.exceptions import HandlerError, InvalidDefinition, NotFound, OperationFailed
from apps_registry.models import ChangeVia, ConfirmedEmail, Notice, NoticeReceipt
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import hook_create
from apps_registry.services.notices import notice_read, notices_mute_set, notices_unread_for
from apps_registry.services.routes import route_run
from apps_registry.services.schedules import schedule_create, schedule_run_due
from tests.apps_registry.route_helpers import records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CHORES = {
    "name": "Chores",
    "collections": {"chores": {}},
    "routes": {
        "done": {
            "kind": "mutation",
            "input": {
                "type": "object",
                "properties": {"chore": {"type": "string"}, "to": {"type": "string"}},
                "required": ["chore"],
                "additionalProperties": False,
            },
            "steps": [
                {"insert": {"collection": "chores", "value": "{'chore': params.chore}"}},
                {
                    "notify": {
                        "to": ["owner", "editors"],
                        "subject": "params.chore + ' is done'",
                        "text": "caller.id + ' did ' + params.chore + '.'",
                    }
                },
                {"fail": {"when": "params.chore == 'nothing'", "message": "'that is not a chore'"}},
                {"return": "1"},
            ],
        },
        "remind_viewers": {
            "kind": "mutation",
            "steps": [
                {"notify": {"to": "viewers", "subject": "'Chores today'", "text": "'Look at the rota.'"}},
                {"return": "1"},
            ],
        },
        "shout": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "steps": [
                {
                    "for_each": {
                        "in": "[1, 2, 3, 4, 5, 6].filter(i, i <= params.n)",
                        "as": "i",
                        "steps": [{"notify": {"to": ["owner"], "subject": "'again'", "text": "string(i)"}}],
                    }
                },
                {"return": "1"},
            ],
        },
        "quiet_unless": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"late": {"type": "boolean"}}},
            "steps": [
                {"notify": {"to": ["owner"], "subject": "'late'", "text": "'late'"}, "when": "params.late"},
                {"return": "1"},
            ],
        },
    },
}


def confirmed(user):
    ConfirmedEmail.objects.update_or_create(user=user, defaults={"email": user.email})
    return user


@pytest.fixture
def household():
    owner = confirmed(UserFactory(username="rosa", email="rosa@example.com"))
    editor = confirmed(UserFactory(username="ed", email="ed@example.com"))
    viewer = confirmed(UserFactory(username="vi", email="vi@example.com"))
    app = app_definition_save(actor=owner, definition=CHORES)
    membership_set(actor=owner, app=app, user=editor, role="editor")
    membership_set(actor=owner, app=app, user=viewer, role="viewer")
    return app, owner, editor, viewer


def receivers(notice: Notice) -> list[str]:
    return sorted(r.user.username for r in notice.receipts.select_related("user"))


def test_a_notice_reaches_the_members_in_its_roles_on_commit(household, django_capture_on_commit_callbacks):
    app, owner, editor, viewer = household

    with django_capture_on_commit_callbacks(execute=True):
        route_run(actor=editor, app_id=app.id, op="done", params={"chore": "dishes"}, kind="mutation", via="page")

    (notice,) = Notice.objects.all()
    assert (notice.subject, notice.text, notice.roles, notice.route, notice.via) == (
        "dishes is done",
        f"{editor.pk} did dishes.",
        "owner,editors",
        "done",
        "page",
    )
    assert notice.change_id is not None
    assert receivers(notice) == ["ed", "rosa"]
    assert sorted(m.to[0] for m in mail.outbox) == ["ed@example.com", "rosa@example.com"]
    assert mail.outbox[0].subject == "Chores: dishes is done"
    assert "turn off this app's notices on its page" in mail.outbox[0].body


def test_a_failed_mutation_sends_nothing(household, django_capture_on_commit_callbacks):
    app, owner, _editor, _viewer = household

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(HandlerError):
        route_run(actor=owner, app_id=app.id, op="done", params={"chore": "nothing"}, kind="mutation")

    assert not Notice.objects.exists() and not NoticeReceipt.objects.exists() and mail.outbox == []
    assert records(app, "chores") == {}


def test_only_confirmed_addresses_are_mailed_and_deactivated_or_muted_members_get_nothing(
    household, django_capture_on_commit_callbacks
):
    app, owner, editor, viewer = household
    unconfirmed = UserFactory(username="un", email="someone-else@example.com")
    ConfirmedEmail.objects.filter(user=unconfirmed).delete()
    membership_set(actor=owner, app=app, user=unconfirmed, role="viewer")
    gone = confirmed(UserFactory(username="gone", email="gone@example.com"))
    membership_set(actor=owner, app=app, user=gone, role="viewer")
    gone.is_active = False
    gone.save()
    notices_mute_set(actor=viewer, app_id=app.id, muted=True)

    with django_capture_on_commit_callbacks(execute=True):
        route_run(actor=owner, app_id=app.id, op="remind_viewers", params={}, kind="mutation")

    (notice,) = Notice.objects.all()
    assert receivers(notice) == ["un"]  # on their home page, but no e-mail to an address they did not confirm
    assert mail.outbox == []


def test_a_member_turns_an_apps_notices_off_and_on_again(household):
    app, owner, editor, _viewer = household
    notices_mute_set(actor=editor, app_id=app.id, muted=True)
    route_run(actor=owner, app_id=app.id, op="done", params={"chore": "bins"}, kind="mutation")
    notices_mute_set(actor=editor, app_id=app.id, muted=False)
    route_run(actor=owner, app_id=app.id, op="done", params={"chore": "floor"}, kind="mutation")

    first, second = Notice.objects.order_by("created_at", "id")
    assert receivers(first) == ["rosa"] and receivers(second) == ["ed", "rosa"]


def test_when_makes_a_notice_conditional(household):
    app, owner, _editor, _viewer = household
    route_run(actor=owner, app_id=app.id, op="quiet_unless", params={"late": False}, kind="mutation")
    assert not Notice.objects.exists()
    route_run(actor=owner, app_id=app.id, op="quiet_unless", params={"late": True}, kind="mutation")
    assert Notice.objects.count() == 1


def test_a_call_sends_at_most_five_notices(household):
    app, owner, _editor, _viewer = household
    route_run(actor=owner, app_id=app.id, op="shout", params={"n": 5}, kind="mutation")
    assert Notice.objects.count() == 5

    with pytest.raises(OperationFailed) as refused:
        route_run(actor=owner, app_id=app.id, op="shout", params={"n": 6}, kind="mutation")

    assert "more than 5 notices (notify steps)" in refused.value.message
    assert refused.value.details["limit"] == "notices_per_call"
    assert Notice.objects.count() == 5


def test_past_the_daily_bound_notices_are_skipped_the_action_runs_and_the_owner_is_told_once(household, settings):
    app, owner, editor, _viewer = household
    settings.CHARMING_NOTICES_PER_APP_PER_DAY = 2
    for chore in ("a", "b", "c", "d"):
        route_run(actor=editor, app_id=app.id, op="done", params={"chore": chore}, kind="mutation")

    assert len(records(app, "chores")) == 4
    sent = list(Notice.objects.order_by("created_at", "id").values_list("subject", "route"))
    assert sent == [("a is done", "done"), ("b is done", "done"), ("'Chores' sent its notices for today", "")]
    told = Notice.objects.get(route="")
    assert receivers(told) == ["rosa"] and "CHARMING_NOTICES_PER_APP_PER_DAY" in told.text
    Notice.objects.update(created_at=timezone.now() - timedelta(hours=25))
    route_run(actor=editor, app_id=app.id, op="done", params={"chore": "e"}, kind="mutation")
    assert Notice.objects.filter(subject="e is done").exists()


def test_schedules_and_webhooks_notify_too(household):
    app, owner, _editor, _viewer = household
    schedule = schedule_create(actor=owner, app_id=app.id, route="remind_viewers", cron="daily").schedule
    schedule_run_due(schedule_id=str(schedule.id), due_at=schedule.next_run_at.isoformat(), now=schedule.next_run_at)
    made = hook_create(actor=owner, app_id=app.id, route="remind_viewers")
    from tests.apps_registry.test_hooks import deliver

    assert deliver(made, {}).status_code == 200

    assert sorted(Notice.objects.values_list("via", flat=True)) == [ChangeVia.HOOK, ChangeVia.SCHEDULE]


@pytest.mark.parametrize(
    ("notify", "says"),
    [
        ({"to": ["everyone"], "subject": "'s'", "text": "'t'"}, "'everyone' is not a role to tell"),
        ({"to": [], "subject": "'s'", "text": "'t'"}, "must be a list of roles to tell"),
        ({"to": ["owner", "owner"], "subject": "'s'", "text": "'t'"}, "names a role twice"),
        ({"to": ["owner"], "text": "'t'"}, "required"),
        ({"to": ["owner"], "subject": "'s'", "text": "'t'", "cc": "'x@example.com'"}, "unknown key"),
    ],
)
def test_a_notify_step_is_checked_when_saved(user, notify, says):
    definition = {
        "name": "N",
        "collections": {},
        "routes": {"r": {"kind": "mutation", "steps": [{"notify": notify}, {"return": "1"}]}},
    }

    with pytest.raises(InvalidDefinition) as refused:
        app_definition_save(actor=user, definition=definition)

    assert any(says in problem["message"] for problem in refused.value.errors), refused.value.errors


def test_a_query_cannot_notify(user):
    definition = {
        "name": "N",
        "collections": {},
        "routes": {
            "r": {
                "kind": "query",
                "steps": [{"notify": {"to": ["owner"], "subject": "'s'", "text": "'t'"}}, {"return": "1"}],
            }
        },
    }

    with pytest.raises(InvalidDefinition) as refused:
        app_definition_save(actor=user, definition=definition)

    assert any("a query route cannot write" in p["message"] for p in refused.value.errors)


@pytest.mark.parametrize(("text", "says"), [("1", "a string"), ("'   '", "a string that is not empty")])
def test_a_subject_or_text_that_is_not_text_fails_the_call(user, text, says):
    definition = {
        "name": "N",
        "collections": {},
        "routes": {
            "r": {
                "kind": "mutation",
                "steps": [{"notify": {"to": ["owner"], "subject": "'s'", "text": text}}, {"return": "1"}],
            }
        },
    }
    app = app_definition_save(actor=user, definition=definition)

    with pytest.raises(HandlerError) as failed:
        route_run(actor=user, app_id=app.id, op="r", params={}, kind="mutation")

    assert "notify.text" in failed.value.message and says in failed.value.message
    assert not Notice.objects.exists()


def test_home_shows_unread_notices_and_marks_them_read(client, household):
    app, owner, editor, _viewer = household
    route_run(actor=editor, app_id=app.id, op="done", params={"chore": "dishes"}, kind="mutation", via="page")
    route_run(actor=editor, app_id=app.id, op="done", params={"chore": "bins"}, kind="mutation", via="page")
    client.force_login(owner)

    home = client.get(reverse("home")).content.decode()

    assert "dishes is done" in home and "bins is done" in home and "through this page" in home
    assert "(2 unread)" in home
    first = NoticeReceipt.objects.filter(user=owner).order_by("id").first()
    client.post(reverse("notice_read", args=[first.id]))
    assert notices_unread_for(owner).total == 1
    client.post(reverse("notices_read_all"))
    assert notices_unread_for(owner).total == 0
    assert 'id="notices"' not in client.get(reverse("home")).content.decode()


def test_nobody_reads_another_members_notice_and_a_left_apps_notices_are_hidden(household):
    app, owner, editor, _viewer = household
    route_run(actor=owner, app_id=app.id, op="done", params={"chore": "dishes"}, kind="mutation")
    theirs = NoticeReceipt.objects.get(user=owner)

    with pytest.raises(NotFound):
        notice_read(actor=editor, receipt_id=theirs.id)
    assert NoticeReceipt.objects.get(pk=theirs.pk).read_at is None

    from apps_registry.services.sharing import membership_leave

    assert notices_unread_for(editor).total == 1
    membership_leave(actor=editor, app_id=app.id)
    assert notices_unread_for(editor).total == 0


def test_the_app_page_turns_a_members_notices_off(client, household):
    app, _owner, _editor, viewer = household
    client.force_login(viewer)

    page = client.get(reverse("app_page", args=[app.id])).content.decode()
    assert "Turn my notices off" in page
    client.post(reverse("app_notices_mute", args=[app.id]), {"muted": "1"})
    assert "Turn my notices on" in client.get(reverse("app_page", args=[app.id])).content.decode()
    client.post(reverse("app_notices_mute", args=[app.id]), {"muted": "0"})
    assert "Turn my notices off" in client.get(reverse("app_page", args=[app.id])).content.decode()


def test_a_stranger_cannot_mute_an_app_they_cannot_see(client, household):
    app, *_ = household
    client.force_login(UserFactory(username="mallory"))

    assert client.post(reverse("app_notices_mute", args=[app.id]), {"muted": "1"}).status_code == 404


def test_author_tests_run_a_notify_step_but_send_nothing(household):
    app, owner, _editor, _viewer = household
    definition = {
        **CHORES,
        "tests": [{"name": "done notifies", "route": "done", "params": {"chore": "dishes"}, "expect": {"value": 1}}],
    }

    app_definition_save(actor=owner, definition=definition, app_id=app.id)

    assert not Notice.objects.exists() and mail.outbox == []
