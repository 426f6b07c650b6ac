"""The PostgreSQL cursor the settings name: server-side binding that prepares only plan-stable statements."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]

from apps_registry.plans import is_plan_stable


class PlanStableCursor(ServerBindingCursor):  # type: ignore[misc]
    """Django's server-side binding cursor; a statement not declared `plan_stable` (apps_registry/plans.py) is
    never prepared, so PostgreSQL plans it for its own values on every execution."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        if prepare is None and not is_plan_stable(query):
            prepare = False
        return super().execute(query, params, prepare=prepare, binary=binary)
