"""list_apps: the caller's apps with id, name, description and role."""

from __future__ import annotations

from typing import Any

from apps_registry.selectors import AppListing, app_listings_for
from mcp_tools.results import envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def app_as_contract(listing: AppListing) -> dict[str, Any]:
    return {"id": str(listing.id), "name": listing.name, "description": listing.description, "role": listing.role}


async def handle(call: ToolCall) -> ToolResult:
    apps = [app_as_contract(listing) for listing in await db(app_listings_for, call.user)]
    if not apps:
        return envelope_ok(apps, text="You have no Charming apps yet.")
    lines = [f"- {a['name']} (id {a['id']}, you are {a['role']}): {a['description'] or 'no description'}" for a in apps]
    return envelope_ok(apps, text=f"Your Charming apps ({len(apps)}):\n" + "\n".join(lines))
