"""JSON Schemas of routes: checked with `jsonschema` (Draft 2020-12) when an app is saved, and run
on every call with `jsonschema-rs` validators built once per route version.

`jsonschema-rs` matches `pattern` with a regex engine that does not backtrack catastrophically
(patterns needing backtracking features fall back to fancy-regex, which has a backtrack limit),
so an author's `^(a+)+$` cannot hang a call.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema_rs

MAX_ERRORS = 50
_MAX_MESSAGE = 300


def schema_problems(schema: Any) -> list[str]:
    """Why `schema` is not a valid Draft 2020-12 JSON Schema (empty when it is)."""
    if not isinstance(schema, (dict, bool)):
        return [f"must be a JSON Schema (an object), got {type(schema).__name__}"]
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return [f"is not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"]
    try:
        jsonschema_rs.validator_for(schema)
    except Exception as exc:  # e.g. a pattern the Rust regex engines cannot compile
        return [f"is not usable: {exc}"]
    return []


class SchemaValidator:
    """A compiled validator that reports every violation as {"path": "$.a[0]", "message": ...}."""

    def __init__(self, schema: dict[str, Any] | bool) -> None:
        self._validator = jsonschema_rs.validator_for(schema)

    def errors(self, instance: Any) -> list[dict[str, str]]:
        if self._validator.is_valid(instance):
            return []
        found = []
        for error in self._validator.iter_errors(instance):
            found.append({"path": json_path(error.instance_path), "message": _clip_message(error.message)})
            if len(found) >= MAX_ERRORS:
                break
        return found


def json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _clip_message(message: str) -> str:
    # Messages quote the offending value, which may be huge; keep both ends (the end names the rule).
    if len(message) <= _MAX_MESSAGE:
        return message
    return message[:120] + " … " + message[-150:]


def number_paths(schema: Any) -> Any:
    """Where `schema` declares `"type": "number"`, as a tree used by `coerce_numbers`; None if nowhere.

    JSON has one number type but CEL has two (int and double, never mixed), so an integer sent
    where the schema says `number` is handed to routes as a double.
    """
    if not isinstance(schema, dict):
        return None
    declared = schema.get("type")
    if declared == "number" or (isinstance(declared, list) and "number" in declared and "integer" not in declared):
        return True
    tree: dict[str, Any] = {}
    for name, sub in (schema.get("properties") or {}).items():
        found = number_paths(sub)
        if found is not None:
            tree[name] = found
    items = number_paths(schema.get("items"))
    if items is not None:
        tree["[]"] = items
    return tree or None


def coerce_numbers(value: Any, paths: Any) -> Any:
    if paths is None:
        return value
    if paths is True:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(value, dict):
        return {k: coerce_numbers(v, paths.get(k)) for k, v in value.items()}
    if isinstance(value, list) and "[]" in paths:
        return [coerce_numbers(v, paths["[]"]) for v in value]
    return value
