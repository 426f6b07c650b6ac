"""list_apps: the caller's apps with id, name, description and role, a page at a time."""

from __future__ import annotations

from typing import Any

from apps_registry.selectors import AppListing, app_listings_page_for
from mcp_tools.results import envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def app_as_contract(listing: AppListing) -> dict[str, Any]:
    return listing.as_dict()


async def handle(call: ToolCall) -> ToolResult:
    cursor = call.arguments.get("cursor")
    page = await db(app_listings_page_for, call.user, cursor=cursor)
    apps = [app_as_contract(listing) for listing in page.apps]
    paging: dict[str, Any] = {}
    if page.next_cursor is not None:
        paging["next_cursor"] = page.next_cursor
    if page.truncated:
        paging["truncated"] = True
    if not apps and not cursor:
        return envelope_ok(apps, text="You have no Charming apps yet.")
    lines = [f"- {a['name']} (id {a['id']}, you are {a['role']}): {a['description'] or 'no description'}" for a in apps]
    text = f"Your Charming apps ({len(apps)}{' on this page' if cursor or page.next_cursor else ''}):\n" + "\n".join(
        lines
    )
    if page.next_cursor is not None:
        text += f"\n\nMore apps follow: call list_apps with cursor {page.next_cursor!r} for the next page."
    return envelope_ok(apps, text=text, paging=paging)
