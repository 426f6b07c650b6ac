"""list_hooks, create_hook, rotate_hook_secret and delete_hook: an app's mutation routes run by signed POSTs from
outside (apps_registry/services/hooks.py)."""

from __future__ import annotations

from typing import Any

from apps_registry.services.hooks import HookWithSecret, hook_create, hook_delete, hook_rotate, hooks_for
from mcp_tools.results import envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def _line(hook: dict[str, Any]) -> str:
    about = f" ({hook['description']})" if hook["description"] else ""
    deliveries = hook["deliveries"]
    if not deliveries:
        delivered = "no deliveries yet (refused signatures are answered to the sender, not kept)"
    else:
        ok = sum(1 for d in deliveries if d["outcome"] == "ok")
        last = deliveries[0]
        delivered = (
            f"last {len(deliveries)} deliveries: {ok} ok, {len(deliveries) - ok} failed; the last, "
            f"{last['received_at']}: {last['outcome']} ({last['status']})"
        )
        if "error" in last:
            delivered += f": {last['error']}"
    overlap = ""
    if hook["previous_secret_valid_until"]:
        overlap = f"; the previous secret still signs until {hook['previous_secret_valid_until']}"
    return (
        f"- webhook {hook['id']}{about}: runs route {hook['route']} as {hook['created_by']}, at {hook['url']} "
        f"(secret {hook['secret_hint']}{overlap}); {delivered}"
    )


async def handle_list(call: ToolCall) -> ToolResult:
    app, views = await db(hooks_for, actor=call.user, app_id=call.arguments["app_id"])
    hooks = [view.as_dict() for view in views]
    if not hooks:
        text = f"App '{app.name}' has no webhooks. create_hook lets a sender outside Charming run one of its mutations."
    else:
        text = f"Webhooks of app '{app.name}':\n" + "\n".join(_line(h) for h in hooks)
    return envelope_ok(hooks, text=text)


def _with_secret(made: HookWithSecret, did: str) -> ToolResult:
    value = made.as_dict()
    return envelope_ok(
        value,
        text=(
            f"Webhook {did}:\n{_line(value)}\n"
            f"URL: {value['url']}\nSecret: {value['secret']}\n"
            "Give the person both now, to paste into the sender: the secret is not shown again. The sender POSTs the "
            "route's params as a JSON body (an empty body is {}) with the header Charming-Signature: t=<unix "
            'seconds>,v1=<hex HMAC-SHA256, keyed by the whole secret text (whsec_... as UTF-8), of "<t>." followed '
            "by the exact body bytes>. In Python: hmac.new(secret.encode(), f'{t}.'.encode() + body, "
            "hashlib.sha256).hexdigest(). The guide (charming://guide/authoring, webhooks) has the whole sender."
        ),
    )


async def handle_create(call: ToolCall) -> ToolResult:
    args = call.arguments
    made = await db(
        hook_create,
        actor=call.user,
        app_id=args["app_id"],
        route=args["route"],
        description=args.get("description", ""),
    )
    return _with_secret(made, "created")


async def handle_rotate(call: ToolCall) -> ToolResult:
    args = call.arguments
    made = await db(
        hook_rotate, actor=call.user, hook_id=args["hook_id"], keep_old_minutes=args.get("keep_old_minutes")
    )
    return _with_secret(made, "given a new secret")


async def handle_delete(call: ToolCall) -> ToolResult:
    gone = await db(hook_delete, actor=call.user, hook_id=call.arguments["hook_id"])
    value = {"id": str(gone.id), "app_id": str(gone.app_id), "route": gone.route}
    return envelope_ok(value, text=f"Webhook {value['id']} (route {gone.route}) was deleted; its URL answers 404 now.")
