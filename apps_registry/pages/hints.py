"""How the app page applies a route's presentation hints (checked and stored at save time by the domain:
apps_registry.routes.hints, `Route.hints`). Never code; docs/pages.md, "Presentation hints"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps_registry.models import Route
from apps_registry.pages.words import humanize
from apps_registry.routes.hints import HINT_KEYS, VIEWS, hint_problems, row_action_of

__all__ = ["HINT_KEYS", "RouteHints", "hint_problems", "hints_from", "route_hints", "route_title"]


@dataclass(frozen=True)
class RouteHints:
    title: str = ""
    view: str = ""
    columns: tuple[tuple[str, str], ...] = ()  # (key, label); label "" means the schema's
    start: bool = False
    form: bool = True
    help: str = ""
    chart: Mapping[str, Any] | None = None
    row_actions: tuple[tuple[str, str], ...] = ()  # (mutation, the param the row's id goes in)


def hints_from(raw: Any) -> RouteHints:
    """The hints of one route (already checked by `hint_problems`); anything malformed is ignored."""
    if not isinstance(raw, Mapping):
        return RouteHints()
    title = raw.get("title")
    columns = []
    listed = raw.get("columns")
    for column in listed if isinstance(listed, list) else []:
        key = column.get("key") if isinstance(column, Mapping) else column
        label = column.get("label", "") if isinstance(column, Mapping) else ""
        if isinstance(key, str) and key:
            columns.append((key, label if isinstance(label, str) else ""))
    help_text = raw.get("help")
    chart = raw.get("chart")
    listed_actions = raw.get("row_actions")
    actions = [row_action_of(item) for item in (listed_actions if isinstance(listed_actions, list) else [])]
    return RouteHints(
        title=title.strip() if isinstance(title, str) else "",
        help=help_text.strip() if isinstance(help_text, str) else "",
        chart=chart if isinstance(chart, Mapping) and raw.get("view") == "chart" else None,
        row_actions=tuple(action for action in actions if action is not None),
        view=str(raw["view"]) if raw.get("view") in VIEWS else "",
        columns=tuple(columns),
        start=raw.get("start") is True,
        form=raw.get("form") is not False,
    )


def route_hints(route: Route) -> RouteHints:
    """The hints stored with a route when its app was saved."""
    return hints_from(getattr(route, "hints", None))


def route_title(route: Route) -> str:
    """The route's `title` hint, else its name made readable (`add_expense` -> `Add expense`)."""
    return route_hints(route).title or humanize(route.name)
