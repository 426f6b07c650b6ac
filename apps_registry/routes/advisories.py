"""Authoring advisories: non-fatal notes about an app definition, recomputed whenever it is saved."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from apps_registry.routes.compiler import DefinitionParts, legacy_steps
from apps_registry.routes.limits import Limits
from apps_registry.routes.steps import STEP_KINDS

# The kinds named here, those the step kinds name (routes/steps.py), and failing-tests (services/definitions.py).
AUTHORING_KINDS = tuple(
    sorted(
        {
            "failing-tests",
            "legacy-bridge",
            "missing-output-schema",
            "unindexed-field",
            "unknown-collection",
            "unused-binding",
            "untested-route",
        }
        | {kind for step_kind in STEP_KINDS.values() for kind in step_kind.advisory_kinds}
    )
)
DOC_URL = "docs/authoring.md#advisories"


@dataclass(frozen=True)
class AdvisoryDraft:
    kind: str
    severity: str
    summary: str
    user_summary: str
    data: dict[str, Any] = field(default_factory=dict)


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
        bound_at: dict[str, int] = {}
        used: set[str] = set()
        for step in route.steps:
            used |= step.uses
            if step.as_name:
                bound_at[step.as_name] = step.index
            found.extend(step.kind.advisories(name, step, limits))
            if step.collection is not None and step.collection not in parts.collections:
                declared = ", ".join(sorted(parts.collections)) or "none"
                found.append(
                    AdvisoryDraft(
                        kind="unknown-collection",
                        severity="warn",
                        summary=(
                            f"Route '{name}' steps[{step.index}] uses collection '{step.collection}', which the "
                            f"definition does not declare (declared: {declared}). Fix a typo or add it to "
                            "'collections'."
                        ),
                        user_summary="One of this app's actions uses data the app does not declare.",
                        data={"route": name, "step": step.index, "collection": step.collection},
                    )
                )
        for binding, index in bound_at.items():
            if binding not in used:
                found.append(
                    AdvisoryDraft(
                        kind="unused-binding",
                        severity="info",
                        summary=(
                            f"Route '{name}' steps[{index}] binds '{binding}' but no later step reads it; "
                            "remove the 'as' (or the step, if it only reads)."
                        ),
                        user_summary="One of this app's actions does some unneeded work; it still works.",
                        data={"route": name, "step": index, "name": binding},
                    )
                )
    return found


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
        for step in route.steps:
            if step.op not in ("find", "count", "sum") or step.collection is None:
                continue
            equal = [c.path for c in step.where if c.op in ("eq", "in") and c.path != ("id",)]
            ranged = [c.path for c in step.where if c.op not in ("eq", "in") and c.path != ("id",)]
            ordered = [path for path, _descending in step.order_by if path != ("id",)]
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
                        f"Route '{name}' steps[{step.index}] filters or orders '{step.collection}' on "
                        f"{', '.join(used)}, which no index of the collection starts with; the app holds "
                        f"{records_held} records, so each call reads through all of the collection's. Declare "
                        f'one: "collections": {{"{step.collection}": {{"indexes": [{json.dumps(suggested)}]}}}}.'
                    ),
                    user_summary="One of this app's lists may get slow as the app grows.",
                    data={"route": name, "step": step.index, "collection": step.collection, "index": suggested},
                )
            )
    return found
