"""Presentation hints an author may give (all optional): for now a route's `title`."""

from __future__ import annotations

from apps_registry.models import Route
from apps_registry.pages.schema_forms import humanize


def route_title(route: Route) -> str:
    """The route's `title` when its definition has one, else its name made readable (`add_expense` -> `Add expense`)."""
    definition = route.definition if isinstance(route.definition, dict) else {}
    title = definition.get("title")
    return title.strip() if isinstance(title, str) and title.strip() else humanize(route.name)
