"""The authoring tools: create_app, update_app, get_app_source and check_app. Each checks its arguments,
calls one service of apps_registry.services.definitions and shapes the envelope."""

from __future__ import annotations

import json
from typing import Any

from apps_registry import selectors
from apps_registry.exceptions import InvalidInput
from apps_registry.redaction import redact_value
from apps_registry.routes.advisories import AdvisoryDraft
from apps_registry.routes.authortests import TestResult
from apps_registry.services.advisories import AdvisoryNote, advisories_deliver
from apps_registry.services.definitions import (
    SavedDefinition,
    app_source_get,
    app_version_restore,
    definition_dry_run,
    definition_save,
)
from mcp_tools.guide import GUIDE_URI
from mcp_tools.results import advisories_as_contract, advisory_as_contract, envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


def _routes(saved: SavedDefinition) -> list[dict[str, Any]]:
    return [{"name": r.name, "kind": r.kind, "version": r.version} for r in selectors.routes_of(saved.app)]


def tests_text(results: list[TestResult]) -> str:
    if not results:
        return f"It has no tests; add some (see {GUIDE_URI}) so every save proves the routes still work."
    failing = [r for r in results if not r.passed]
    text = f"Tests: {len(results) - len(failing)} of {len(results)} passed."
    for result in failing:
        text += f"\n- FAILED '{result.name}' ({result.route}): {' and '.join(result.failures)}"
    return text


def saved_value(saved: SavedDefinition) -> dict[str, Any]:
    return {
        "id": str(saved.app.id),
        "name": saved.app.name,
        "version": saved.version,
        "routes": _routes(saved),
        "summary": saved.summary,
        "tests": [r.as_dict() for r in saved.tests],
    }


def _create(user: Any, args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], SavedDefinition]:
    saved = definition_save(
        actor=user, definition=args["definition"], allow_failing_tests=bool(args.get("allow_failing_tests"))
    )
    return saved_value(saved), advisories_as_contract(advisories_deliver(actor=user, app=saved.app)), saved


async def handle_create(call: ToolCall) -> ToolResult:
    value, advisories, saved = await db(_create, call.user, call.arguments)
    routes = ", ".join(f"{r['name']} ({r['kind']})" for r in value["routes"])
    text = (
        f"Created the app '{value['name']}' (id {value['id']}, version {value['version']}) with routes {routes}. "
        f"Use it with query_app and mutate_app; change it with update_app (expected_version {value['version']}).\n"
        + tests_text(saved.tests)
    )
    return envelope_ok(value, advisories=advisories, text=text)


def _update(user: Any, args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], SavedDefinition]:
    has_definition, has_restore = "definition" in args, "restore_version" in args
    if has_definition == has_restore:
        raise InvalidInput(
            "Invalid arguments for update_app: give exactly one of definition (the complete new definition) or "
            "restore_version (a version number from get_app_source's history).",
            errors=[
                {"path": "$.definition", "message": "give exactly one of definition or restore_version"},
                {"path": "$.restore_version", "message": "give exactly one of definition or restore_version"},
            ],
        )
    allow = bool(args.get("allow_failing_tests"))
    if has_restore:
        saved = app_version_restore(
            actor=user,
            app_id=args["app_id"],
            version=args["restore_version"],
            expected_version=args["expected_version"],
            allow_failing_tests=allow,
        )
    else:
        saved = definition_save(
            actor=user,
            definition=args["definition"],
            app_id=args["app_id"],
            expected_version=args["expected_version"],
            allow_failing_tests=allow,
            create_missing=False,
            migrate=args.get("migrate"),
        )
    value = saved_value(saved)
    if saved.migration is not None:
        value["migration"] = saved.migration.as_dict()
    value["previous_version"] = args["expected_version"]
    value["changes"] = saved.changes
    if has_restore:
        value["restored_from"] = args["restore_version"]
    return value, advisories_as_contract(advisories_deliver(actor=user, app=saved.app)), saved


async def handle_update(call: ToolCall) -> ToolResult:
    value, advisories, saved = await db(_update, call.user, call.arguments)
    text = (
        f"Saved the app '{value['name']}' (id {value['id']}) as version {value['version']} "
        f"(was {value['previous_version']}). {value['summary']}\n"
        + (f"{saved.migration.text}\n" if saved.migration is not None else "")
        + tests_text(saved.tests)
    )
    return envelope_ok(value, advisories=advisories, text=text)


def _source(user: Any, args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    source = app_source_get(actor=user, app_id=args["app_id"], version=args.get("version"))
    history = []
    for row in source.history:
        item: dict[str, Any] = {
            "version": row.number,
            "author": row.author_repr,
            "saved_at": row.created_at.isoformat(),
            "summary": row.summary,
        }
        if row.restored_from is not None:
            item["restored_from"] = row.restored_from
        history.append(item)
    value = {
        "id": str(source.app.id),
        "name": source.app.name,
        "role": source.role,
        "version": source.version,
        "current_version": source.app.version,
        "definition": source.definition,
        "saved_at": source.saved_at.isoformat(),
        "author": source.author,
        "summary": source.summary,
        "history": history,
    }
    return value, advisories_as_contract(advisories_deliver(actor=user, app=source.app))


async def handle_source(call: ToolCall) -> ToolResult:
    value, advisories = await db(_source, call.user, call.arguments)
    stale = "" if value["version"] == value["current_version"] else f" (the app is now at {value['current_version']})"
    text = (
        f"App '{value['name']}' (id {value['id']}), definition version {value['version']}{stale}, saved by "
        f"{value['author']} at {value['saved_at']}. To change it, call update_app with the edited definition and "
        f"expected_version {value['current_version']}.\n"
        + json.dumps(value["definition"], ensure_ascii=False, indent=2)
    )
    return envelope_ok(value, advisories=advisories, text=text)


def _draft_as_contract(draft: AdvisoryDraft) -> dict[str, Any]:
    return advisory_as_contract(
        AdvisoryNote(
            kind=draft.kind,
            severity=draft.severity,
            summary=draft.summary,
            user_summary=draft.user_summary,
            data=draft.data,
        )
    )


def _check(user: Any, args: dict[str, Any]) -> dict[str, Any]:
    checked = definition_dry_run(actor=user, definition=args["definition"])
    valid = not checked.problems
    return {
        "valid": valid,
        "passed": valid and all(r.passed for r in checked.tests),
        # A report of the definition's problems, worded like create_app's errors: redacted like them.
        "problems": redact_value(checked.problems),
        "advisories": [_draft_as_contract(d) for d in checked.advisories],
        "tests": redact_value([r.as_dict() for r in checked.tests]),
    }


async def handle_check(call: ToolCall) -> ToolResult:
    value = await db(_check, call.user, call.arguments)
    if not value["valid"]:
        lines = [f"The definition has {len(value['problems'])} problem(s); fix every one:"]
        lines += [f"- {p['path']}: {p['message']}" for p in value["problems"]]
    else:
        # check_app writes nothing: its text says what create_app / update_app would do, never "saved".
        failing = [t for t in value["tests"] if not t["passed"]]
        if failing:
            lines = [
                f"The definition is valid, but {len(failing)} of {len(value['tests'])} test(s) fail: create_app and "
                "update_app refuse it until they pass (or take it with allow_failing_tests)."
            ]
        else:
            lines = ["The definition is valid" + (" and every test passed" if value["tests"] else "") + "."]
        lines += [f"- FAILED '{t['name']}' ({t['route']}): {' and '.join(t['failures'])}" for t in failing]
        if not value["tests"]:
            lines.append(f"It has no tests; add some (see {GUIDE_URI}).")
        lines += [f"- advisory [{a['severity']}] {a['kind']}: {a['summary']}" for a in value["advisories"]]
    return envelope_ok(value, text="\n".join(lines))
