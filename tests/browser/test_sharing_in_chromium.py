"""Sharing in Debian's Chromium, checked over MCP with the SDK client: invite a viewer on the app page, the
viewer accepts on home, is refused a mutation and sees no action forms; promoted to editor, they may mutate."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from apps_registry.models import Record
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.tokens import token_create
from tests.apps_registry.route_helpers import example
from tests.browser.conftest import ARTIFACTS, confirm_email
from tests.mcp_tools import conftest as mcp
from tests.mcp_tools.conftest import MODERN, mcp_client, run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

live_server_mcp = mcp.live_server_mcp  # the uvicorn server (the ASGI app with /mcp) on the same test database

PASSWORD = "correct horse battery staple"
BUDGET = {"limit": 300}


def sign_up(page, username: str) -> None:
    page.goto("/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_email", f"{username}@example.com")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("My apps")
    confirm_email(page, f"{username}@example.com")  # tokens need a confirmed address
    expect(page.locator(".message.success")).to_contain_text(f"{username}@example.com is confirmed")


def log_in(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]:has-text('Log in')")
    expect(page.locator("h1")).to_have_text("My apps")


def mcp_call(server, token: str, name: str, args: dict[str, Any]):
    async def call():
        async with mcp_client(server, token, MODERN) as client:
            return await client.call_tool(name, args)

    # Playwright's sync API keeps its own event loop in this thread: the SDK client runs in another one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run, call()).result()


def test_an_owner_shares_the_budget_with_a_viewer_then_makes_them_an_editor(browser, live_server, live_server_mcp):
    owner_context = browser.new_context(base_url=live_server.url)
    member_context = browser.new_context(base_url=live_server.url)
    try:
        owner = owner_context.new_page()
        sign_up(owner, "olive")
        app = app_definition_save(actor=get_user_model().objects.get(username="olive"), definition=example("budget"))
        member = member_context.new_page()
        sign_up(member, "max")
        member.click("button:has-text('Log out')")

        owner.goto(f"/apps/{app.id}/")
        owner.fill("#members [name=user]", "max")
        owner.select_option("#members select[name=role]", "viewer")
        owner.click("#members button:has-text('Invite')")
        expect(owner.locator(".message.success")).to_contain_text("max is invited as viewer")
        expect(owner.locator("#members .invitations")).to_contain_text("max as Viewer")

        log_in(member, "max")
        invitation = member.locator("#invitations li", has_text="Budget")
        expect(invitation).to_contain_text("olive invites you as Viewer")
        ARTIFACTS.mkdir(exist_ok=True)
        member.screenshot(path=str(ARTIFACTS / "desktop-home-invitation.png"), full_page=True)
        invitation.locator("button:has-text('Accept')").click()
        expect(member.locator(".message.success")).to_contain_text("You joined “Budget” as viewer.")
        expect(member.locator("h1")).to_contain_text("Budget")
        expect(member.locator("#actions")).to_have_count(0)
        expect(member.locator("#members form")).to_have_count(0)
        expect(member.locator("#members")).to_contain_text("Leave this app")
        expect(member.locator("#view-summary dl.fields")).to_be_visible()

        token = token_create(user=get_user_model().objects.get(username="max"), name="sharing-test").plaintext
        listed = mcp_call(live_server_mcp, token, "list_apps", {})
        assert listed.is_error is not True
        assert [(a["name"], a["role"]) for a in listed.structured_content["value"]] == [("Budget", "viewer")]
        args = {"app_id": str(app.id), "op": "set_budget", "params": BUDGET}
        refused = mcp_call(live_server_mcp, token, "mutate_app", args)
        assert refused.is_error is True
        assert refused.structured_content["error"]["kind"] == "forbidden"
        assert refused.structured_content["error"]["message"].startswith(
            "You are a viewer of app 'Budget'; viewers may only query"
        )
        assert not Record.objects.exists()

        owner.goto(f"/apps/{app.id}/")
        row = owner.locator("#members tr", has_text="max")
        expect(row).to_contain_text("Viewer")
        row.locator("select[name=role]").select_option("editor")
        row.locator("button:has-text('Change role')").click()
        expect(owner.locator(".message.success")).to_contain_text("max is now editor of “Budget”.")
        owner.screenshot(path=str(ARTIFACTS / "desktop-app-members.png"), full_page=True)

        allowed = mcp_call(live_server_mcp, token, "mutate_app", args)
        assert allowed.is_error is not True, allowed.content
        assert Record.objects.count() == 1
        member.reload()
        expect(member.locator("#action-add_expense form")).to_be_visible()
        expect(member.locator("#view-summary dl.fields .pair:has(dt:text-is('Limit')) dd")).to_have_text("300")
    finally:
        owner_context.close()
        member_context.close()
