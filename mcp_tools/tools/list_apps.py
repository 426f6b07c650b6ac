"""list_apps: the caller's apps with id, name, description and role."""

from __future__ import annotations

from typing import Any

from apps_registry.selectors import app_memberships_for
from mcp_tools.results import envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def _apps_of(user: Any) -> list[dict[str, Any]]:
    return [
        {"id": str(m.app.id), "name": m.app.name, "description": m.app.description, "role": m.role}
        for m in app_memberships_for(user)
    ]


async def handle(call: ToolCall) -> ToolResult:
    apps = await db(_apps_of, call.user)
    if not apps:
        return envelope_ok(apps, text="You have no Charming apps yet.")
    lines = [f"- {a['name']} (id {a['id']}, you are {a['role']}): {a['description'] or 'no description'}" for a in apps]
    return envelope_ok(apps, text=f"Your Charming apps ({len(apps)}):\n" + "\n".join(lines))
