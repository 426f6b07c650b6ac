from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from apps_registry.models import (
    Advisory,
    ApiToken,
    App,
    AuditEvent,
    Change,
    Feedback,
    FeedbackResponse,
    Hook,
    HookDelivery,
    Invitation,
    PublicApp,
    PurgeJob,
    Record,
    Schedule,
    ScheduleRun,
    Storage,
    Template,
)
from apps_registry.services.sharing import invitation_create
from apps_registry.services.tokens import token_create
from tests.factories import AdvisoryFactory, FeedbackFactory, RecordFactory, UserFactory, make_app
from tests.retention_helpers import app_with_records, records_by_app, retained, run_purge_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def populated(staff):
    """One object of every registered model, so every change page can be opened."""
    advisory = AdvisoryFactory()
    feedback = FeedbackFactory(app=advisory.app)
    FeedbackResponse.objects.create(feedback=feedback, staff_author=staff, body="Thanks!")
    RecordFactory(storage=advisory.app.storage)
    advisory.app.routes.create(name="add", kind="mutation")
    token_create(user=advisory.app.owner)
    AuditEvent.objects.create(actor=staff, actor_repr="staffer", action="app.delete", details={})
    change = Change.objects.create(app=advisory.app, actor_repr="owner", via="mcp", route="add", records=1)
    change.entries.create(position=0, app=advisory.app, collection="items", record_id="r1", before=None, after={"n": 1})
    invitation_create(actor=advisory.app.owner, app_id=advisory.app.id, invitee=UserFactory().username, role="viewer")
    schedule = Schedule.objects.create(
        app=advisory.app, route="add", cron="0 0 * * *", time_zone="UTC", creator=advisory.app.owner
    )
    ScheduleRun.objects.create(schedule=schedule, due_at=timezone.now(), outcome="failed", error="no such record")
    hook = Hook.objects.create(
        app=advisory.app,
        route="add",
        creator=advisory.app.owner,
        secret_nonce="nonce-never-shown",
        secret_hint="whsec_Ab",
    )
    HookDelivery.objects.create(hook=hook, message="0" * 64, signed_at=timezone.now(), outcome="ok", status=200)
    Template.objects.create(app=advisory.app, definition={"name": "Budget"}, version=1, title="Budget", author_repr="o")
    PublicApp.objects.create(app=advisory.app, handle="budget", mutations=["add"], opened_by=advisory.app.owner)
    PurgeJob.objects.create(
        kind="app", target_id=advisory.app.id, target_label="Budget", requested_by=staff, requested_by_repr="staffer"
    )
    return advisory


def registered_models():
    return [model for model in admin.site._registry if model._meta.app_label == "apps_registry"]


def admin_url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_every_changelist_and_change_page_renders_for_staff(client, staff, populated):
    client.force_login(staff)
    models = registered_models()
    assert len(models) >= 9
    for model in models:
        response = client.get(admin_url(model, "changelist"))
        assert response.status_code == 200, model
        obj = model.objects.first()
        assert obj is not None, model
        response = client.get(admin_url(model, "change", obj.pk))
        assert response.status_code == 200, model


def test_admin_app_search_finds_the_matching_app_and_not_the_other(client, staff, user, other_user):
    wanted = make_app(owner=user, name="Holiday planner")
    unwanted = make_app(owner=other_user, name="Grocery list")
    client.force_login(staff)
    response = client.get(admin_url(App, "changelist"), {"q": "holiday"})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [wanted]
    body = response.content.decode()
    assert wanted.name in body and unwanted.name not in body
    # Without a query both are listed: the search, not the page, is what left the other one out.
    unfiltered = client.get(admin_url(App, "changelist"))
    assert set(unfiltered.context["cl"].result_list) == {wanted, unwanted}


def test_non_staff_is_refused_everywhere(client, populated):
    client.force_login(UserFactory(username="mallory"))
    for model in registered_models():
        for url in (admin_url(model, "changelist"), admin_url(model, "change", model.objects.first().pk)):
            response = client.get(url)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_token_pages_never_show_the_secret(client, staff, user):
    issued = token_create(user=user)
    client.force_login(staff)
    for url in (admin_url(ApiToken, "changelist"), admin_url(ApiToken, "change", issued.token.pk)):
        body = client.get(url).content.decode()
        assert issued.token.prefix in body
        assert issued.plaintext not in body and issued.token.secret_hash not in body


def test_revoke_action_revokes_the_selected_tokens_only(client, staff, user):
    issued = token_create(user=user)
    kept = token_create(user=user, name="other laptop")
    client.force_login(staff)
    response = client.post(
        admin_url(ApiToken, "changelist"), {"action": "revoke_selected", "_selected_action": [issued.token.pk]}
    )
    assert response.status_code == 302
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Revoked 1 token(s)."]
    assert ApiToken.objects.get(pk=issued.token.pk).revoked
    assert not ApiToken.objects.get(pk=kept.token.pk).revoked


def test_resolve_action_resolves_the_selected_advisories_only(client, staff, populated):
    other = AdvisoryFactory(app=populated.app, kind="find-without-limit")
    client.force_login(staff)
    response = client.post(
        admin_url(Advisory, "changelist"), {"action": "resolve_selected", "_selected_action": [populated.pk]}
    )
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Resolved 1 advisory."]
    populated.refresh_from_db()
    assert populated.resolved and populated.resolved_at is not None
    other.refresh_from_db()
    assert not other.resolved and other.resolved_at is None


def test_staff_answer_on_the_feedback_page_records_who_answered(client, staff):
    feedback = FeedbackFactory()
    client.force_login(staff)
    response = client.post(
        admin_url(type(feedback), "change", feedback.pk),
        {
            "responses-TOTAL_FORMS": "1",
            "responses-INITIAL_FORMS": "0",
            "responses-MIN_NUM_FORMS": "0",
            "responses-MAX_NUM_FORMS": "1000",
            "responses-0-body": "Fixed in the next version.",
            "_save": "Save",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    answer = feedback.responses.get()
    assert answer.staff_author == staff and answer.body == "Fixed in the next version." and answer.read_at is None


def test_records_and_audit_are_read_only_in_admin(client, staff, populated):
    client.force_login(staff)
    storage = Storage.objects.first()
    assert client.get(admin_url(Storage, "delete", storage.pk)).status_code == 403
    assert client.post(admin_url(Storage, "delete", storage.pk), {"post": "yes"}).status_code == 403
    assert Storage.objects.filter(pk=storage.pk).exists()
    record = Record.objects.first()
    assert client.post(admin_url(Record, "delete", record.pk), {"post": "yes"}).status_code == 403
    assert Record.objects.filter(pk=record.pk).exists()
    event = AuditEvent.objects.first()
    assert client.post(admin_url(AuditEvent, "delete", event.pk), {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


# ---- deletion lifecycle and feedback loop (issue 5) ---------------------------------------------


def grant(user, *codenames):
    from django.contrib.auth.models import Permission

    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="apps_registry", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)  # drop the permission cache


def offered_actions(client, model) -> set[str]:
    form = client.get(admin_url(model, "changelist")).context["action_form"]
    return set() if form is None else {name for name, _ in form.fields["action"].choices if name}


def post_action(client, model, action, pks, **extra):
    return client.post(
        admin_url(model, "changelist"), {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    )


def test_stock_app_delete_is_replaced_by_the_audited_purge(client, staff):
    app = make_app(name="Budget")
    client.force_login(staff)
    assert client.get(admin_url(App, "delete", app.pk)).status_code == 403
    assert client.post(admin_url(App, "delete", app.pk), {"post": "yes"}).status_code == 403
    assert App.objects.filter(pk=app.pk).exists()
    assert offered_actions(client, App) == {"purge_selected"}


@pytest.mark.django_db(transaction=True)  # the worker commits, as in production
def test_purge_app_action_confirms_first_then_purges_and_audits(client, staff, user, other_user):
    app = app_with_records(user, "Spam", 3)
    app_with_records(other_user, "Innocent", 2)
    before = records_by_app(exclude_storage=app.storage)
    client.force_login(staff)
    page = post_action(client, App, "purge_selected", [app.pk])
    assert page.status_code == 200
    body = page.content.decode()
    assert "deleted now, for good" in body and f"Spam ({app.id}) of alice: 3 records" in body
    assert App.objects.filter(pk=app.pk).exists()

    response = post_action(client, App, "purge_selected", [app.pk], confirmed="yes")
    assert response.status_code == 302
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(shown) == 1 and shown[0].startswith("Queued 1 app purge(s); the worker runs them now.")
    # Queued, not run: the request returned before anything was deleted.
    job = PurgeJob.objects.get()
    assert (job.status, job.kind, job.target_id, job.requested_by) == ("queued", "app", app.id, staff)
    assert App.objects.filter(pk=app.pk).exists() and not AuditEvent.objects.filter(action="app.purge").exists()

    run_purge_worker()
    assert not App.objects.filter(pk=app.pk).exists() and not Storage.objects.filter(app_uuid=app.id).exists()
    assert records_by_app() == before == {"Innocent": 2}
    event = AuditEvent.objects.get(action="app.purge")
    assert event.actor_repr == "staffer" and event.details["confirmed_via"] == "admin"
    job.refresh_from_db()
    assert (job.status, job.records_purged, job.records_total) == ("done", 3, 3)
    assert job.message == "Purged app 'Spam': 3 records." and job.finished_at is not None
    page = client.get(admin_url(PurgeJob, "changelist")).content.decode()
    assert "Spam (" in page and "Done" in page and "3 of 3" in page


def test_purge_and_restore_actions_need_their_permissions(client, user):
    storage = retained(user, days_ago=1)
    app = make_app(owner=user, name="Target")
    clerk = grant(UserFactory(username="clerk", is_staff=True), "view_app", "view_storage")
    client.force_login(clerk)
    assert offered_actions(client, App) == set() and offered_actions(client, Storage) == set()
    for model, pk in ((App, app.pk), (Storage, storage.pk)):
        # With no action allowed, the POST is ignored: the plain list comes back, with no message.
        ignored = post_action(client, model, "purge_selected", [pk], confirmed="yes")
        assert ignored.status_code == 200 and ignored.context["cl"].model is model, model
        assert list(get_messages(ignored.wsgi_request)) == [], model
    assert App.objects.filter(pk=app.pk).exists() and Storage.objects.filter(pk=storage.pk).exists()
    assert not AuditEvent.objects.filter(action__in=["app.purge", "storage.purge"]).exists()

    clerk = grant(clerk, "purge_storage", "restore_storage", "purge_app")
    client.force_login(clerk)
    assert offered_actions(client, Storage) == {"restore_to_app", "purge_selected"}
    assert offered_actions(client, App) == {"purge_selected"}


def test_staff_sees_a_deleted_apps_retained_storage_with_its_record_count(client, staff, user):
    storage = retained(user, name="Old budget", count=4, days_ago=3)
    make_app(owner=user, name="Live app")
    client.force_login(staff)
    response = client.get(admin_url(Storage, "changelist"), {"state": "retained"})
    rows = response.context["cl"].result_list
    assert [s.pk for s in rows] == [storage.pk]
    body = response.content.decode()
    assert "Old budget" in body and "Live app" not in body
    assert response.context["cl"].model_admin.record_count(rows[0]) == 4


def test_restore_action_offers_only_the_owners_apps_and_restores(client, staff, user, other_user):
    storage = retained(user, name="Old budget", count=2, days_ago=3)
    mine = make_app(owner=user, name="Budget again")
    make_app(owner=other_user, name="Not alice's")
    client.force_login(staff)
    page = post_action(client, Storage, "restore_to_app", [storage.pk])
    assert page.status_code == 200
    choices = [label for _, label in page.context["form"].fields["app"].choices]
    assert choices == ["---------", "Budget again"]

    response = post_action(client, Storage, "restore_to_app", [storage.pk], confirmed="yes", app=str(mine.pk))
    assert response.status_code == 302
    storage.refresh_from_db()
    assert storage.app == mine and storage.detached_at is None
    assert AuditEvent.objects.get(action="storage.restore").details["confirmed_via"] == "admin"


def test_restore_action_outside_the_window_shows_the_refusal(client, staff, user, settings):
    settings.CHARMING_STORAGE_RETENTION_DAYS = 30
    storage = retained(user, name="Ancient", days_ago=40)
    target = make_app(owner=user, name="Target")
    client.force_login(staff)
    response = post_action(client, Storage, "restore_to_app", [storage.pk], confirmed="yes", app=str(target.pk))
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("outside the 30-day retention window" in m for m in shown), shown
    assert Storage.objects.get(pk=storage.pk).detached_at is not None


@pytest.mark.django_db(transaction=True)  # the worker commits, as in production
def test_purge_storage_action_purges_retained_and_refuses_attached(client, staff, user):
    storage = retained(user, name="Old", count=3, days_ago=3)
    live = app_with_records(user, "Live", 2)
    client.force_login(staff)
    page = post_action(client, Storage, "purge_selected", [storage.pk, live.storage.pk])
    assert "Old (" in page.content.decode() and "3 records" in page.content.decode()
    response = post_action(client, Storage, "purge_selected", [storage.pk, live.storage.pk], confirmed="yes")
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(shown) == 1 and shown[0].startswith("Queued 2 retained storage purge(s)")
    assert PurgeJob.objects.filter(status="queued").count() == 2

    run_purge_worker()
    assert not Storage.objects.filter(pk=storage.pk).exists()
    assert Record.objects.filter(storage=live.storage).count() == 2
    done, refused = PurgeJob.objects.get(target_id=storage.pk), PurgeJob.objects.get(target_id=live.storage.pk)
    assert (done.status, done.records_purged) == ("done", 3)
    assert AuditEvent.objects.get(action="storage.purge").details["confirmed_via"] == "admin"
    # The refusal is recorded on its job and shown in the admin's list of purge jobs.
    assert refused.status == "failed" and "belongs to the live app 'Live'" in refused.message
    page = client.get(admin_url(PurgeJob, "changelist"), {"status": "failed"}).content.decode()
    assert "belongs to the live app" in page and "Old (" not in page


def test_feedback_list_shows_whether_and_when_answers_were_read(client, staff):
    unanswered = FeedbackFactory(body="No answer yet")
    unread = FeedbackFactory(body="Answered, unread")
    FeedbackResponse.objects.create(feedback=unread, staff_author=staff, body="On it")
    read = FeedbackFactory(body="Answered and read")
    read_at = timezone.now() - timedelta(hours=2)
    FeedbackResponse.objects.create(feedback=read, staff_author=staff, body="Done", read_at=read_at)
    client.force_login(staff)
    for status, expected in (("unanswered", unanswered), ("unread", unread), ("read", read)):
        rows = client.get(admin_url(Feedback, "changelist"), {"status": status}).context["cl"].result_list
        assert [f.pk for f in rows] == [expected.pk], status
    rows = {f.pk: f for f in client.get(admin_url(Feedback, "changelist")).context["cl"].result_list}
    model_admin = admin.site._registry[Feedback]
    assert model_admin.last_read_at(rows[read.pk]) == read_at and model_admin.last_read_at(rows[unread.pk]) is None
    assert (
        model_admin.answered_and_read(rows[read.pk]) is True and model_admin.answered_and_read(rows[unread.pk]) is False
    )
    page = client.get(admin_url(Feedback, "change", read.pk)).content.decode()
    assert f"Read {read_at:%Y-%m-%d %H:%M} UTC" in page
    page = client.get(admin_url(Feedback, "change", unread.pk)).content.decode()
    assert "Not yet: delivered with the app&#x27;s next tool result" in page


def test_app_list_links_to_its_open_advisories(client, staff, populated):
    client.force_login(staff)
    body = client.get(admin_url(App, "changelist")).content.decode()
    assert f"?app__id__exact={populated.app.pk}&amp;resolved__exact=0" in body
    rows = client.get(admin_url(Advisory, "changelist"), {"app__id__exact": populated.app.pk, "resolved__exact": 0})
    assert [a.pk for a in rows.context["cl"].result_list] == [populated.pk]


def test_restore_action_on_attached_storage_explains_instead_of_failing(client, staff, user):
    live = make_app(owner=user, name="Live")
    client.force_login(staff)
    response = post_action(client, Storage, "restore_to_app", [live.storage.pk])
    assert response.status_code == 302
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown == [
        "Storage of 'Live' is attached to that live app; only retained storage of a deleted app can be restored."
    ]


def test_restore_action_needs_exactly_one_storage(client, staff, user):
    first, second = retained(user, name="A", days_ago=1), retained(user, name="B", days_ago=1)
    client.force_login(staff)
    response = post_action(client, Storage, "restore_to_app", [first.pk, second.pk])
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Select exactly one retained storage to restore."]


def test_staff_cannot_change_an_apps_owner_members_or_routes_behind_the_services(client, staff, populated):
    app = populated.app
    client.force_login(staff)
    page = client.get(admin_url(type(app), "change", app.pk)).content.decode()
    assert 'name="owner"' not in page and 'name="collections"' not in page  # shown, not editable
    assert 'name="routes-0-definition"' not in page and 'name="memberships-0-role"' not in page
    assert client.get(admin_url(type(app), "add")).status_code == 403
    route = app.routes.get()
    response = client.post(admin_url(type(route), "change", route.pk), {"name": "renamed", "kind": "query"})
    assert response.status_code == 403
    route.refresh_from_db()
    assert route.name == "add" and route.kind == "mutation"


def test_the_app_page_shows_the_history_of_its_definition_with_a_diff(client, staff, user):
    import copy

    from apps_registry.services.definitions import definition_save
    from tests.apps_registry.route_helpers import example

    app = definition_save(actor=user, definition=example("todo")).app
    edited = copy.deepcopy(example("todo"))
    edited["description"] = "Chores, mostly."
    definition_save(actor=user, definition=edited, app_id=app.id, expected_version=1)
    client.force_login(staff)
    response = client.get(admin_url(App, "change", app.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert "history of the definition (newest first)" in page.lower()
    assert "Changed description." in page
    assert "+  &quot;description&quot;: &quot;Chores, mostly.&quot;," in page
    assert (
        "-  &quot;description&quot;: &quot;A to-do list: add items, tick them off, see what is still open.&quot;,"
        in page
    )
    assert 'name="versions-0-summary"' not in page  # read-only: no form fields


def test_the_app_page_shows_members_and_invitations_read_only(client, staff, user, other_user):
    app = make_app(owner=user, name="Budget")
    invitation_create(actor=user, app_id=app.id, invitee="bob", role="editor")
    client.force_login(staff)
    page = client.get(admin_url(App, "change", app.pk)).content.decode()
    assert "Invitations" in page and "pending" in page and "editor" in page
    assert 'name="invitations-0-role"' not in page and 'name="invitations-0-status"' not in page
    invitation = Invitation.objects.get()
    assert client.post(admin_url(Invitation, "change", invitation.pk), {"status": "accepted"}).status_code == 403
    assert client.get(admin_url(Invitation, "add")).status_code == 403
    invitation.refresh_from_db()
    assert invitation.status == "pending"
    listing = client.get(admin_url(Invitation, "changelist"), {"status__exact": "pending"})
    assert list(listing.context["cl"].result_list) == [invitation]


def test_a_hooks_admin_page_never_shows_what_its_secret_is_derived_from(client, staff, populated):
    client.force_login(staff)
    hook = Hook.objects.get()

    page = client.get(admin_url(Hook, "change", hook.pk)).content.decode()

    assert "whsec_Ab" in page and "nonce-never-shown" not in page
    assert client.post(admin_url(Hook, "delete", hook.pk), {"post": "yes"}).status_code == 403


def test_the_audit_trail_filters_by_area(client, staff):
    for action in ("membership.invite", "token.create", "oauth.disconnect", "hook.rotate", "schedule.pause"):
        AuditEvent.objects.create(actor=None, actor_repr="system", action=action, details={})
    client.force_login(staff)

    def shown(area: str) -> list[str]:
        page = client.get(admin_url(AuditEvent, "changelist"), {"area": area})
        return sorted(event.action for event in page.context["cl"].result_list)

    assert shown("tokens") == ["oauth.disconnect", "token.create"]
    assert shown("hooks") == ["hook.rotate"]
    assert shown("sharing") == ["membership.invite"]
    assert shown("schedules") == ["schedule.pause"]


@pytest.mark.parametrize(("data", "saved"), [("[1, 2]", False), ('"a note"', False), ('{"field": "amount"}', True)])
def test_staff_can_save_an_advisorys_data_only_as_an_object(client, staff, data, saved):
    """Every tool result carries an advisory's data as an object: a list or a string there would make the
    results fail their contracts in the agents' clients."""
    advisory = AdvisoryFactory()
    client.force_login(staff)
    url = reverse("admin:apps_registry_advisory_change", args=[advisory.pk])
    form = {
        "app": str(advisory.app_id),
        "kind": advisory.kind,
        "severity": advisory.severity,
        "summary": advisory.summary,
        "user_summary": advisory.user_summary,
        "doc_url": advisory.doc_url,
        "data": data,
    }
    response = client.post(url, form)
    advisory.refresh_from_db()
    if saved:
        assert response.status_code == 302 and advisory.data == {"field": "amount"}
    else:
        assert response.status_code == 200 and "Must be a JSON object" in response.content.decode()
        assert advisory.data != json.loads(data)
