"""Opaque page cursors and the tool result budget, shared by the route engine's paged `find` and list_apps.

A cursor is a position in one query's order (the last item's sort values and id), signed with
Django's signing and bound to the query it came from (`binding`: the app, route, collection and order
for a find; the caller for list_apps), so a cursor altered, or made for another query, is refused.
Cursors are signed, not encrypted: they carry sort values of an item the caller has just been shown,
inside an app they can read (records pages and exports show members every field anyway).

A page is keyset-paginated (continue strictly after the position), never OFFSET: records inserted
between two pages do not shift what the next page returns.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core import signing

from apps_registry.exceptions import InvalidInput

_SALT = "charming.cursor"
TOOL_RESULT_BYTES_DEFAULT = 60_000


def tool_result_bytes() -> int:
    """The tool result budget: bytes of compact JSON a page of items may fill (CHARMING_TOOL_RESULT_BYTES)."""
    return int(getattr(settings, "CHARMING_TOOL_RESULT_BYTES", TOOL_RESULT_BYTES_DEFAULT))


def compact_json(value: Any) -> str:
    """`value` as compact JSON, as a tool result's text carries it (no indent: fewer of a model's tokens, and the C
    encoder, where indent takes Python's)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def json_bytes(value: Any) -> int:
    """The size of `value` as compact JSON, as a tool result would carry it."""
    return len(compact_json(value).encode())


def items_within_budget(items: list[Any], budget: int | None = None) -> int:
    """How many of `items`, from the first, fit in the tool result budget as a JSON list (at least one, so a
    page always makes progress even when one item alone is over it)."""
    budget = tool_result_bytes() if budget is None else budget
    size = 2
    for n, item in enumerate(items):
        size += json_bytes(item) + (1 if n else 0)
        if size > budget and n > 0:
            return n
    return len(items)


def cursor_make(position: list[Any], *, binding: str) -> str:
    """An opaque cursor for `position`, valid only for the query named by `binding`."""
    return signing.dumps(position, salt=f"{_SALT}:{binding}", compress=True)


def cursor_read(cursor: str, *, binding: str, length: int, what: str, path: str = "$") -> list[Any]:
    """The position (of `length` values) in `cursor`; a cursor altered, made for another query or under another
    server key, or holding a position of another shape (an older server's) is `invalid_input`.

    `what` names the query in the message ("list_apps"); `path` is where the caller sent the cursor."""
    try:
        position = signing.loads(cursor, salt=f"{_SALT}:{binding}")
    except (signing.BadSignature, ValueError, TypeError):
        position = None
    if not isinstance(position, list) or len(position) != length:
        raise InvalidInput(
            f"The cursor given to {what} is not valid for this query: it was altered, or made by another query "
            "(another app, route, order or caller). Start again without a cursor to get the first page.",
            errors=[
                {"path": path, "message": "not a valid cursor for this query; omit it to start from the first page"}
            ],
        )
    return position
