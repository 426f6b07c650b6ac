"""Authoring advisories: non-fatal notes about an app definition, recomputed whenever it is saved."""

from __future__ import annotations

import json
from typing import Any

from apps_registry.routes.compiler import DefinitionParts, legacy_steps
from apps_registry.routes.limits import LIMIT_SETTINGS, Limits
from apps_registry.routes.steps import STEP_KINDS, walk_steps
from apps_registry.routes.types import AdvisoryDraft
from apps_registry.routes.worstcase import route_risk

# The kinds named here, those the step kinds name (routes/steps.py), and failing-tests (services/definitions.py).
AUTHORING_KINDS = tuple(
    sorted(
        {
            "failing-tests",
            "legacy-bridge",
            "missing-output-schema",
            "over-limit-route",
            "unindexed-field",
            "unknown-collection",
            "unused-binding",
            "unused-input",
            "untested-route",
        }
        | {kind for step_kind in STEP_KINDS.values() for kind in step_kind.advisory_kinds}
    )
)
DOC_URL = "docs/authoring.md#advisories"


def authoring_advisories(parts: DefinitionParts, limits: Limits) -> list[AdvisoryDraft]:
    found: list[AdvisoryDraft] = []
    tested = {test.route for test in parts.tests}
    for name, route in parts.routes.items():
        if name not in tested:
            found.append(untested_route(name, route.kind))
        if "handler" in route.body:
            found.append(
                AdvisoryDraft(
                    kind="legacy-bridge",
                    severity="warn",
                    summary=(
                        f"Route '{name}' uses the legacy 'handler' form. It still runs, bridged into steps; "
                        "replace 'handler' with the equivalent 'steps' in this advisory's data."
                    ),
                    user_summary="One of this app's actions uses an older format; it still works.",
                    data={"route": name, "steps": legacy_steps(route.body["handler"])},
                )
            )
        if route.output_schema is None:
            found.append(
                AdvisoryDraft(
                    kind="missing-output-schema",
                    severity="warn",
                    summary=(
                        f"Route '{name}' has no 'output' schema, so its results are not checked and callers "
                        "cannot rely on their shape. Add an 'output' JSON Schema to the route."
                    ),
                    user_summary="One of this app's actions does not describe its result.",
                    data={"route": name},
                )
            )
        found.extend(limit_advisories(name, route.steps, limits, route.input_schema))
        bound_at: dict[str, str] = {}
        used: set[str] = set()
        read: set[str] | None = set()
        for step in walk_steps(route.steps):
            used |= step.uses
            read = None if read is None or step.params_read is None else read | step.params_read
            if step.as_name:
                bound_at[step.as_name] = step.at
            found.extend(step.kind.advisories(name, step, limits))
            if step.collection is not None and step.collection not in parts.collections:
                declared = ", ".join(sorted(parts.collections)) or "none"
                found.append(
                    AdvisoryDraft(
                        kind="unknown-collection",
                        severity="warn",
                        summary=(
                            f"Route '{name}' {step.at} uses collection '{step.collection}', which the "
                            f"definition does not declare (declared: {declared}). Fix a typo or add it to "
                            "'collections'."
                        ),
                        user_summary="One of this app's actions uses data the app does not declare.",
                        data={"route": name, "step": step.index, "collection": step.collection},
                    )
                )
        for binding, at in bound_at.items():
            if binding not in used:
                found.append(
                    AdvisoryDraft(
                        kind="unused-binding",
                        severity="info",
                        summary=(
                            f"Route '{name}' {at} binds '{binding}' but no later step reads it; "
                            "remove the 'as' (or the step, if it only reads)."
                        ),
                        user_summary="One of this app's actions does some unneeded work; it still works.",
                        data={"route": name, "step": _index(at), "name": binding},
                    )
                )
        if read is not None:
            found.extend(unused_inputs(name, route.input_schema, read))
    return found


def unused_inputs(name: str, input_schema: Any, read: set[str]) -> list[AdvisoryDraft]:
    """The input properties no expression of the route reads (`params.<name>`): a caller's value for one is
    accepted and ignored, likely a filter the author meant to apply. For authors only (no user_summary)."""
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    if not isinstance(properties, dict):
        return []
    return [
        AdvisoryDraft(
            kind="unused-input",
            severity="info",
            summary=(
                f"Route '{name}' declares input '{param}' but no step reads params.{param}: a caller's value is "
                f"accepted and ignored. Use it (for an optional filter, a condition with "
                f'"when": "has(params.{param})") or remove it from \'input\'.'
            ),
            user_summary="",
            data={"route": name, "param": param},
        )
        for param in properties
        if param not in read
    ]


def untested_route(name: str, kind: str) -> AdvisoryDraft:
    """A route no test of the definition calls: a save cannot tell whether it still works. For authors only
    (no user_summary): the app works the same."""
    writes = " and records_after for the records it writes" if kind == "mutation" else ""
    return AdvisoryDraft(
        kind="untested-route",
        severity="info",
        summary=(
            f"Route '{name}' has no test: no entry of the definition's 'tests' calls it, so a save cannot tell "
            f'whether it still works. Add one to \'tests\': {{"route": "{name}", "params": {{...}}, "expect": '
            f'{{"value": ...}}}} (or "expect": {{"error": "<kind>"}}){writes}.'
        ),
        user_summary="",
        data={"route": name},
    )


def unindexed_advisories(parts: DefinitionParts, limits: Limits, *, records_held: int) -> list[AdvisoryDraft]:
    """For an app holding at least `unindexed_advisory_records` records: the find, count and sum steps that
    filter or order on fields no declared index of their collection starts with (each such call reads every
    record of the collection), with the index to declare."""
    if records_held < limits.unindexed_advisory_records:
        return []
    found: list[AdvisoryDraft] = []
    for name, route in parts.routes.items():
        for step in walk_steps(route.steps):
            if step.op not in ("find", "count", "sum", "aggregate") or step.collection is None:
                continue
            equal = [c.path for c in step.where if c.op in ("eq", "in") and c.path != ("id",)]
            # contains is served by the GIN index on data (PostgreSQL), not by a declared one.
            ranged = [c.path for c in step.where if c.op not in ("eq", "in", "contains") and c.path != ("id",)]
            # An aggregate orders its rows by their keys, not by record fields.
            ordered = [] if step.op == "aggregate" else [p for p, _descending in step.order_by if p != ("id",)]
            used = list(dict.fromkeys(".".join(p) for p in [*equal, *ranged, *ordered[:1]]))
            if not used:
                continue
            spec = parts.collections.get(step.collection)
            declared = spec.get("indexes", []) if isinstance(spec, dict) else []
            if any(index and index[0] in used for index in declared):
                continue
            suggested = list(dict.fromkeys(".".join(p) for p in [*equal, *ranged[:1], *ordered]))[:4]
            found.append(
                AdvisoryDraft(
                    kind="unindexed-field",
                    severity="warn",
                    summary=(
                        f"Route '{name}' {step.at} filters or orders '{step.collection}' on "
                        f"{', '.join(used)}, which no index of the collection starts with; the app holds "
                        f"{records_held} records, so each call reads through all of the collection's. Declare "
                        f'one: "collections": {{"{step.collection}": {{"indexes": [{json.dumps(suggested)}]}}}}.'
                    ),
                    user_summary="One of this app's lists may get slow as the app grows.",
                    data={"route": name, "step": step.index, "collection": step.collection, "index": suggested},
                )
            )
    return found


def _index(at: str) -> int:
    """The top-level step's index in a step's place ("steps[2].for_each.steps[0]" is in steps[2])."""
    return int(at.split("]", 1)[0].removeprefix("steps["))


_RISK_HINTS = {
    "cel_work": (
        "compute totals with an aggregate step (or count and sum) rather than map/filter over the records, filter "
        "them in the find's where, or give the find a smaller limit"
    ),
    "records_read_per_call": "give its finds a limit (and a cursor, to page), or compute totals with aggregate",
    "value_items": "give the find a smaller limit and page with a cursor, or compute totals with aggregate",
    "for_each_items": "loop over fewer items per call (a find with a limit, or params the caller splits)",
    "records_written_per_call": "write fewer records per call (split the work over several calls)",
}


def limit_advisories(
    name: str, steps: list[Any], limits: Limits, input_schema: dict[str, Any] | None = None
) -> list[AdvisoryDraft]:
    """The `over-limit-route` advisory of a route whose call would fail once its finds return enough records
    (routes/worstcase.py), with the size at which it does."""
    risk = route_risk(name, steps, limits, input_schema or {})
    if risk is None:
        return []
    at_fault = next((s for s in walk_steps(steps) if s.at == risk.at), None)
    if at_fault is not None and at_fault.op == "find" and "limit" not in at_fault.exprs:
        return []  # the find's own unbounded-find advisory says it
    setting = next(s for s in LIMIT_SETTINGS if s.field == risk.limit)
    collections = ", ".join(f"'{c}'" for c in risk.collections)
    return [
        AdvisoryDraft(
            kind="over-limit-route",
            severity="warn",
            summary=(
                f"Route '{name}' {risk.at}: once its finds (or groups) reach about {risk.records} records of "
                f"{collections}, "
                f"a call passes the limit {risk.limit} ({getattr(limits, risk.limit)}, {setting.setting}) and fails. "
                f"To stay under it, {_RISK_HINTS[risk.limit]}. (An estimate from the route's steps, with records of "
                "about a dozen short fields; a test with generated records shows the real size.)"
            ),
            # For the author only (pages show advisories with a user_summary): an estimate, which a passing test
            # with generated records at that size settles (services/definitions.py drops it then).
            user_summary="",
            data={
                "route": name,
                "step": risk.at,
                "limit": risk.limit,
                "records": risk.records,
                "collections": list(risk.collections),
            },
        )
    ]
