from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps_registry.models import Advisory, ApiToken, App, AuditEvent, FeedbackResponse, Storage
from apps_registry.services.tokens import token_create
from tests.browser.conftest import STAFF_PASSWORD, log_in
from tests.factories import AdvisoryFactory, FeedbackFactory, UserFactory, make_app
from tests.retention_helpers import app_with_records, retained, run_purge_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def run_action(page, label: str) -> None:
    page.select_option("select[name=action]", label=label)
    page.click("button[name=index]")


def expect_success(page, text: str) -> None:
    expect(page.locator("ul.messagelist li.success")).to_contain_text(text)


def test_staff_finds_an_app_by_name_and_resolves_one_of_its_advisories(page, staff_login):
    owner = UserFactory(username="alice")
    app = make_app(owner=owner, name="Holiday budget")
    make_app(owner=owner, name="Groceries")
    stale = AdvisoryFactory(app=app, summary="Route add_expense has no output schema.")
    other = AdvisoryFactory(app=app, kind="find-without-limit", summary="Route list_all has a find without a limit.")

    log_in(page, "operator")
    expect(page.locator("#site-name")).to_contain_text("Charming staff console")
    page.click("a[href='/admin/apps_registry/app/']")
    page.fill("#searchbar", "Holiday")
    page.click("input[type=submit][value=Search]")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Holiday budget")

    rows.first.locator("td.field-open_advisory_count a").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    page.locator("#result_list tbody tr", has_text="no output schema").locator("input.action-select").check()
    run_action(page, "Resolve selected advisories")
    expect_success(page, "Resolved 1 advisory.")
    assert Advisory.objects.get(pk=stale.pk).resolved
    assert not Advisory.objects.get(pk=other.pk).resolved


def test_staff_answers_feedback_and_sees_when_it_was_read(page, staff_login):
    feedback = FeedbackFactory(body="The add button is confusing.")
    log_in(page, "operator")
    page.goto("/admin/apps_registry/feedback/?status=unanswered")
    page.click("text=The add button is confusing.")
    page.fill("textarea[name='responses-0-body']", "Thanks! It is renamed to 'Add expense' now.")
    page.click("input[name=_save]")
    expect_success(page, "was changed successfully")
    answer = FeedbackResponse.objects.get(feedback=feedback)
    assert answer.staff_author == staff_login and answer.read_at is None

    page.goto("/admin/apps_registry/feedback/?status=unread")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    # The user's agent receives the answer with its next tool result (MCP side), which stamps read_at.
    FeedbackResponse.objects.filter(pk=answer.pk).update(read_at=answer.created_at)
    page.goto(f"/admin/apps_registry/feedback/{feedback.pk}/change/")
    expect(page.locator("#responses-0 div.field-read_status")).to_contain_text(
        f"Read {answer.created_at:%Y-%m-%d %H:%M} UTC"
    )


def test_staff_revokes_a_token(page, staff_login):
    issued = token_create(user=UserFactory(username="alice"), name="laptop")
    log_in(page, "operator")
    page.goto("/admin/apps_registry/apitoken/")
    row = page.locator("#result_list tbody tr", has_text=issued.token.prefix)
    row.locator("input.action-select").check()
    run_action(page, "Revoke selected tokens")
    expect_success(page, "Revoked 1 token(s).")
    assert ApiToken.objects.get(pk=issued.token.pk).revoked
    expect(page.locator("body")).not_to_contain_text(issued.plaintext)


def test_staff_sees_a_deleted_apps_retained_storage_and_restores_it(page, staff_login):
    owner = UserFactory(username="alice")
    storage = retained(owner, name="Old budget", count=3, days_ago=2)
    target = make_app(owner=owner, name="Budget again")
    log_in(page, "operator")
    page.goto("/admin/apps_registry/storage/")
    page.click("text=Retained (deleted app, restorable)")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Old budget")
    expect(rows.first.locator("td.field-record_count")).to_have_text("3")

    rows.first.locator("input.action-select").check()
    run_action(page, "Restore the selected retained storage to an app…")
    page.select_option("select[name=app]", label="Budget again")
    page.click("input[type=submit][value=Restore]")
    expect_success(page, "Restored 3 records of 'Old budget' into 'Budget again' (attached).")
    storage.refresh_from_db()
    assert storage.app == target
    assert AuditEvent.objects.get(action="storage.restore").actor_repr == "operator"


def test_staff_purges_an_app_after_confirming(page, staff_login):
    owner = UserFactory(username="alice")
    doomed = app_with_records(owner, "Spam app", 4)
    app_with_records(owner, "Keeper", 2)
    log_in(page, "operator")
    page.goto("/admin/apps_registry/app/")
    page.locator("#result_list tbody tr", has_text="Spam app").locator("input.action-select").check()
    run_action(page, "Purge selected apps and all their data…")
    expect(page.locator("p.confirmation-warning")).to_contain_text("deleted now, for good")
    expect(page.locator("ul.confirmation-items")).to_contain_text("Spam app")
    page.click("input[type=submit][value='Yes, purge']")
    expect_success(page, "Queued 1 app purge(s); the worker runs them now.")
    assert App.objects.filter(pk=doomed.pk).exists()  # queued: the request did not purge

    run_purge_worker()
    page.click("ul.messagelist a:text('Purge jobs')")
    row = page.locator("#result_list tbody tr", has_text="Spam app")
    expect(row.locator("td.field-status")).to_have_text("Done")
    expect(row.locator("td.field-progress")).to_have_text("4 of 4")
    expect(row.locator("td.field-message")).to_have_text("Purged app 'Spam app': 4 records.")
    assert not App.objects.filter(pk=doomed.pk).exists()
    assert not Storage.objects.filter(app_uuid=doomed.pk).exists()
    assert App.objects.get(name="Keeper").storage.records.count() == 2


def test_a_non_staff_user_is_refused(page, transactional_db, django_user_model):
    django_user_model.objects.create_user(username="mallory", password=STAFF_PASSWORD)
    log_in(page, "mallory")
    expect(page.locator(".errornote")).to_contain_text("staff account")
    page.goto("/admin/apps_registry/app/")
    assert "/admin/login/" in page.url
    expect(page.locator("#result_list")).to_have_count(0)
