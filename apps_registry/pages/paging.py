"""Paged views on the app page: a query route that takes a `cursor` and returns a `next_cursor` (the
convention docs/authoring.md's "Paging a find" teaches) is shown a page at a time, with a link to the next
page instead of a "Cursor" box in its filter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CURSOR = "cursor"
NEXT_CURSOR = "next_cursor"
# What a paged find's binding adds beside its items: not part of what the person reads.
PAGING_KEYS = (NEXT_CURSOR, "truncated")


def _properties(schema: Any) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def is_paged(input_schema: Any, output_schema: Any) -> bool:
    """Whether a route takes a `cursor` param and answers an object with a `next_cursor`."""
    return CURSOR in _properties(input_schema) and NEXT_CURSOR in _properties(output_schema)


def without_cursor(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema the filter form is drawn from: the cursor travels in the page links, not in a box."""
    schema = dict(input_schema)
    schema["properties"] = {k: v for k, v in _properties(input_schema).items() if k != CURSOR}
    if isinstance(schema.get("required"), list):
        schema["required"] = [name for name in schema["required"] if name != CURSOR]
    return schema


def page_parts(value: Any, output_schema: Any) -> tuple[Any, Any, str]:
    """(what to show, its schema, the next page's cursor or "") of a paged route's value. Without the paging
    keys, a value holding one list (a page's items) is shown as that list, so the page reads as a table."""
    if not isinstance(value, Mapping):
        return value, output_schema, ""
    next_cursor = value.get(NEXT_CURSOR)
    shown = {k: v for k, v in value.items() if k not in PAGING_KEYS}
    properties = {k: v for k, v in _properties(output_schema).items() if k not in PAGING_KEYS}
    if len(shown) == 1:
        ((key, only),) = shown.items()
        if isinstance(only, list):
            return only, properties.get(key, {}), next_cursor if isinstance(next_cursor, str) else ""
    return shown, {"type": "object", "properties": properties}, next_cursor if isinstance(next_cursor, str) else ""
