"""list_schedules, create_schedule, update_schedule and delete_schedule: an app's mutation routes run on their own
at set times (apps_registry/services/schedules.py)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from apps_registry.services.schedules import (
    ScheduleView,
    schedule_create,
    schedule_delete,
    schedule_update,
    schedules_for,
)
from mcp_tools.results import envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def _line(schedule: dict[str, Any]) -> str:
    if schedule["active"]:
        runs = ", ".join(datetime.fromisoformat(t).strftime("%a %d %b %Y %H:%M") for t in schedule["next_runs"])
        state = f"next runs, {schedule['timezone']} time: {runs}"
    else:
        state = f"paused: {schedule['paused_reason']}"
    last = schedule["runs"][0] if schedule["runs"] else None
    ran = "" if last is None else f"; last run {last['due_at']}: {last['outcome']}"
    if last is not None and "error" in last:
        ran += f" ({last['error']})"
    return (
        f"- schedule {schedule['id']}: route {schedule['route']} at '{schedule['cron']}' ({schedule['timezone']}) "
        f"with params {json.dumps(schedule['params'], ensure_ascii=False)}, as {schedule['created_by']}; {state}{ran}"
    )


async def handle_list(call: ToolCall) -> ToolResult:
    app, views = await db(schedules_for, actor=call.user, app_id=call.arguments["app_id"])
    schedules = [view.as_dict() for view in views]
    if not schedules:
        text = f"App '{app.name}' has no schedules. create_schedule runs one of its mutation routes at set times."
    else:
        text = f"Schedules of app '{app.name}':\n" + "\n".join(_line(s) for s in schedules)
    return envelope_ok(schedules, text=text)


def _saved(view: ScheduleView, did: str) -> ToolResult:
    value = view.as_dict()
    return envelope_ok(
        value,
        text=f"Schedule {did}:\n{_line(value)}\nCheck those times against what the person asked for (cron fields are "
        "minute hour day-of-month month day-of-week).",
    )


async def handle_create(call: ToolCall) -> ToolResult:
    args = call.arguments
    view = await db(
        schedule_create,
        actor=call.user,
        app_id=args["app_id"],
        route=args["route"],
        cron=args["cron"],
        time_zone=args.get("timezone", "UTC"),
        params=args.get("params", {}),
    )
    return _saved(view, "created")


_UPDATABLE = {"route": "route", "cron": "cron", "timezone": "time_zone", "params": "params", "active": "active"}


async def handle_update(call: ToolCall) -> ToolResult:
    args = call.arguments
    changes = {field: args[name] for name, field in _UPDATABLE.items() if name in args}
    view = await db(schedule_update, actor=call.user, schedule_id=args["schedule_id"], **changes)
    return _saved(view, "changed")


async def handle_delete(call: ToolCall) -> ToolResult:
    schedule = await db(schedule_delete, actor=call.user, schedule_id=call.arguments["schedule_id"])
    value = {"id": str(schedule.id), "app_id": str(schedule.app_id), "route": schedule.route}
    return envelope_ok(value, text=f"Schedule {value['id']} (route {schedule.route} at '{schedule.cron}') was deleted.")
