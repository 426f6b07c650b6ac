"""list_changes and revert_change: an app's change log (who changed which records, before and after) and undo."""

from __future__ import annotations

from typing import Any

from apps_registry.cursors import compact_json
from apps_registry.models import ChangeVia
from apps_registry.selectors import CHANGE_PAGE_SIZE, change_moment_read, changes_page_for
from apps_registry.services.advisories import advisories_after_commit
from apps_registry.services.changes import change_revert
from mcp_tools.results import advisories_as_contract, envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def _change_line(change: dict[str, Any]) -> str:
    if "reverts" in change:
        what = f"revert of change {change['reverts']}"
    elif change["via"] == ChangeVia.MIGRATION:
        what = "record migration (not revertible)"
    else:
        what = f"route {change['route']}"
    records = ", ".join(f"{e['collection']}/{e['id']}" for e in change["entries"])
    more = change["records"] - len(change["entries"])
    reverted = f" (reverted by change {', '.join(change['reverted_by'])})" if change.get("reverted_by") else ""
    return (
        f"- change {change['id']} at {change['at']} by {change['by']} via {change['via']}, {what}: "
        f"{records}{f' and {more} more' if more > 0 else ''}{reverted}"
    )


async def handle_list(call: ToolCall) -> ToolResult:
    args = call.arguments
    since = change_moment_read(args.get("since"), name="since")
    until = change_moment_read(args.get("until"), name="until")
    page = await db(
        changes_page_for,
        call.user,
        app_id=args["app_id"],
        collection=args.get("collection"),
        record_id=args.get("record_id"),
        since=since,
        until=until,
        cursor=args.get("cursor"),
        limit=args.get("limit", CHANGE_PAGE_SIZE),
    )
    changes = [change.as_dict() for change in page.changes]
    paging: dict[str, Any] = {}
    if page.next_cursor is not None:
        paging["next_cursor"] = page.next_cursor
    if page.truncated:
        paging["truncated"] = True
    of = f"record {args['collection']}/{args['record_id']}" if args.get("record_id") else f"app '{page.app.name}'"
    if since is not None:
        of += f" since {since.isoformat()}"
    if until is not None:
        of += f" before {until.isoformat()}"
    if not changes:
        return envelope_ok(changes, text=f"No changes of {of} on this page.", paging=paging)
    text = f"Changes of {of}, newest first:\n" + "\n".join(_change_line(c) for c in changes)
    text += "\n\nEach record's data before and after is in the structured result."
    if page.next_cursor is not None:
        text += f"\nOlder changes follow: call list_changes with cursor {page.next_cursor!r}."
    text += "\nTo undo one, call revert_change with its id."
    return envelope_ok(changes, text=text, paging=paging)


def _revert(user: Any, change_id: str, force: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    result = change_revert(actor=user, change_id=change_id, force=force, via=ChangeVia.MCP)
    value: dict[str, Any] = {
        "app_id": str(result.app.id),
        "reverted": str(result.reverted_id),
        "change_id": None if result.change_id is None else str(result.change_id),
        "records": result.restored,
    }
    if result.forced_over:
        value["forced_over"] = result.forced_over
    return value, advisories_as_contract(advisories_after_commit(actor=user, app=result.app))


async def handle_revert(call: ToolCall) -> ToolResult:
    args = call.arguments
    value, advisories = await db(_revert, call.user, args["change_id"], bool(args.get("force", False)))
    if value["change_id"] is None:
        text = f"The records of change {value['reverted']} already are as they were before it; nothing was written."
    else:
        text = (
            f"Change {value['reverted']} was reverted by the new change {value['change_id']} "
            f"({_records_put_back(len(value['records']))}; revert_change {value['change_id']} would redo it):\n"
            + compact_json(value["records"])
        )
    return envelope_ok(value, advisories=advisories, text=text)


def _records_put_back(count: int) -> str:
    return f"{count} record{'' if count == 1 else 's'} put back"
