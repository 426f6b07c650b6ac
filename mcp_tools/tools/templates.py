"""search_templates and remix_app: apps people published as a starting point, and the caller's own app made from one
(apps_registry/services/templates.py)."""

from __future__ import annotations

from typing import Any

from apps_registry.services.advisories import advisories_deliver
from apps_registry.services.templates import template_remix, templates_search
from mcp_tools.results import advisories_as_contract, envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db
from mcp_tools.tools.authoring import saved_value, tests_text


async def handle_search(call: ToolCall) -> ToolResult:
    args = call.arguments
    page = await db(templates_search, query=args.get("query", ""), cursor=args.get("cursor"))
    found = [view.as_dict() for view in page.templates]
    if not found:
        text = "No template matches. Try fewer or other words, or write the app with create_app."
    else:
        text = "Templates (remix_app makes the person's own, empty app from one):\n" + "\n".join(
            f"- {t['title']} (template_id {t['id']}, by {t['author']}, remixed {t['remixes']}x): "
            f"{t['description'] or 'no description'}; routes: {', '.join(r['name'] for r in t['routes'])}"
            for t in found
        )
    paging = {} if page.next_cursor is None else {"next_cursor": page.next_cursor}
    return envelope_ok(found, text=text, paging=paging)


def _remix(user: Any, args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    saved = template_remix(actor=user, template_id=args["template_id"], name=args.get("name"))
    return saved_value(saved), advisories_as_contract(advisories_deliver(actor=user, app=saved.app)), saved


async def handle_remix(call: ToolCall) -> ToolResult:
    value, advisories, saved = await db(_remix, call.user, call.arguments)
    template = saved.app.remixed_from
    prompt = f"\nThe template suggests asking next: {template.starter_prompt}" if template.starter_prompt else ""
    text = (
        f"Created the app '{value['name']}' (id {value['id']}, version {value['version']}) from the template "
        f"'{template.title}'. It is the caller's own and starts with no records; use it with query_app and mutate_app, "
        f"change it with update_app (expected_version {value['version']}).\n" + tests_text(saved.tests) + prompt
    )
    return envelope_ok(value, advisories=advisories, text=text)
