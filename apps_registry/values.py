"""Small helpers for values as callers send them and as messages quote them, written once.

Plain functions with no Django import, so the route engine (apps_registry/routes/) can use them too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from apps_registry.redaction import redact

ELLIPSIS = "…"

# How much of a caller's value a message quotes: enough to recognise it, never the whole of a 100 KB string.
QUOTE_CHARS = 100


def parse_uuid(value: object) -> uuid.UUID | None:
    """`value` as a UUID (a UUID, or any string `uuid.UUID` reads), or None when it is not one."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


# What is redacted beyond a cut before cutting: more than any secret the redactor recognises is long.
_REDACT_MARGIN = 200


def _redacted_head(text: str, limit: int) -> str:
    # Redacted before it is cut: a secret cut in two is no longer recognised, and its first part would show.
    return redact(text[: limit + _REDACT_MARGIN])[:limit]


def clip(value: object, limit: int = QUOTE_CHARS) -> str:
    """`value` as text of at most `limit` characters; a cut one ends with an ellipsis (and has no secret cut in
    two: the redactor sees it whole first)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return _redacted_head(text, max(limit - 1, 0)) + ELLIPSIS


def clip_repr(value: object, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` for a message, clipped: the quoted form of a caller's value, bounded."""
    if isinstance(value, str) and len(value) > limit:
        return repr(_redacted_head(value, limit)) + ELLIPSIS
    return clip(repr(value), limit + 2)


def json_repr(value: object, limit: int = QUOTE_CHARS) -> str:
    """A caller's JSON value quoted for a message in JSON's words, clipped: a string in quotes (as `clip_repr`),
    anything else as compact JSON (`null`, `true`, `1.5`, `[1, 2]`, `{"a": 1}`), never Python's None or True."""
    if isinstance(value, str):
        return clip_repr(value, limit)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON data (a value of the engine's own): its Python form
        text = repr(value)
    return clip(text, limit + 2)


_JSON_TYPE_NAMES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),  # before int: bool is an int
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (type(None), "null"),
    (Mapping, "object"),
    ((list, tuple), "array"),
)


def type_name(value: object) -> str:
    """The JSON name of a value's type (object, array, string, integer, number, boolean, null), as callers
    who send JSON know them; the Python name for anything else."""
    for types, name in _JSON_TYPE_NAMES:
        if isinstance(value, types):
            return name
    return type(value).__name__


def _path_and_message(problem: Any) -> tuple[str, str]:
    if isinstance(problem, Mapping):
        return str(problem.get("path", "$")), str(problem.get("message", ""))
    return str(getattr(problem, "path", "$")), str(getattr(problem, "message", problem))


def first_problems(problems: Iterable[Any], n: int = 3) -> str:
    """The first `n` problems as "path: message; ..." and " (and M more)" when there are more.

    A problem is a mapping with `path` and `message`, or an object with those attributes.
    """
    listed = list(problems)
    shown = "; ".join("{}: {}".format(*_path_and_message(p)) for p in listed[:n])
    more = f" (and {len(listed) - n} more)" if len(listed) > n else ""
    return shown + more


def _text_fault(text: str) -> str | None:
    """What makes `text` unstorable (PostgreSQL refuses NUL in text and jsonb; UTF-8 has no lone surrogates)."""
    index = text.find("\x00")
    if index >= 0:
        return f"contains a NUL character (U+0000) at index {index}"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains a lone surrogate (U+{ord(text[exc.start]):04X}) at index {exc.start}, which is not valid Unicode"
        )
    return None


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def text_problems(value: object, path: str = "$", limit: int = 20) -> list[dict[str, str]]:
    """Each string (or object key) in a JSON value that cannot be stored as text, with its JSON path: a NUL
    character or a lone surrogate. At most `limit` problems; never the offending text itself."""
    problems: list[dict[str, str]] = []
    stack: list[tuple[str, object]] = [(path, value)]
    while stack and len(problems) < limit:
        where, item = stack.pop()
        if isinstance(item, str):
            fault = _text_fault(item)
            if fault:
                problems.append({"path": where, "message": fault})
        elif isinstance(item, Mapping):
            children = []
            for position, (key, child) in enumerate(item.items()):
                key_fault = _text_fault(key) if isinstance(key, str) else None
                if key_fault:
                    problems.append({"path": where, "message": f"key #{position} {key_fault}"})
                    continue
                children.append((_key_path(where, str(key)), child))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(f"{where}[{i}]", child) for i, child in enumerate(item)]))
    return problems
