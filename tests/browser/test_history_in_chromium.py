"""A person undoes an agent's wrong mutation from the app page, in Debian's Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps_registry.services.accounts import account_create
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from tests.apps_registry.route_helpers import records
from tests.apps_registry.test_changes import TASKS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"


def test_a_person_reverts_an_agents_wrong_mutation_from_the_page(page):
    person = account_create(username="rosa", email="rosa@example.com", password=PASSWORD)
    app = app_definition_save(actor=person, definition=TASKS)
    for task_id, title in (("milk", "Buy milk"), ("bike", "Fix bike")):
        route_run(actor=person, app_id=app.id, op="add", params={"id": task_id, "title": title}, kind="mutation")
    # The agent deletes the wrong task.
    wrong = route_run(actor=person, app_id=app.id, op="remove", params={"id": "bike"}, kind="mutation", via="mcp")
    assert "bike" not in records(app, "tasks")

    page.goto("/accounts/login/")
    page.fill("#id_username", "rosa")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]:has-text('Log in')")
    page.goto(f"/apps/{app.id}/")
    page.click("text=Activity and undo")
    expect(page.locator("h1")).to_have_text("Activity")
    newest = page.locator(f"#change-{wrong.change_id}")
    expect(newest).to_contain_text("remove by rosa through an AI agent")
    expect(newest).to_contain_text("tasks/bike")
    expect(newest.locator("td[data-label=What]")).to_have_text("deleted")
    newest.get_by_role("button", name=f"Revert change {wrong.change_id}").click()

    expect(page.locator(".messages")).to_contain_text(f"Change {wrong.change_id} was reverted: tasks/bike brought back")
    assert records(app, "tasks")["bike"] == {"title": "Fix bike", "done": False}
    # The revert is itself a change, shown first; reverting the first change again is refused and names the revert.
    revert = page.locator("ol.timeline > li").first
    expect(revert).to_contain_text(f"revert of change {wrong.change_id}")
    revert_id = revert.get_attribute("id").removeprefix("change-")
    expect(page.locator(f"#change-{wrong.change_id}")).to_contain_text(f"reverted by change {revert_id}")
    page.locator(f"#change-{wrong.change_id}").get_by_role("button", name=f"Revert change {wrong.change_id}").click()
    conflict = page.locator("#revert-conflict")
    expect(conflict).to_contain_text(f"already reverted, by change {revert_id}")
    expect(conflict).to_contain_text("Nothing was changed")
    expect(conflict.get_by_role("button", name=f"Revert change {wrong.change_id} anyway")).to_have_count(0)
    assert "bike" in records(app, "tasks")
    conflict.get_by_role("link", name=f"change {revert_id}").click()
    expect(page.locator(f"#change-{revert_id}")).to_be_in_viewport()

    # The record's history, from the timeline's link.
    page.locator(f"#change-{revert_id} a:has-text('tasks/bike')").click()
    expect(page.locator("h1")).to_contain_text("History of tasks/bike")
    expect(page.locator("ol.timeline > li")).to_have_count(3)  # added, deleted, brought back
