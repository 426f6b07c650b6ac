"""JSON Schemas of routes: checked with `jsonschema` (Draft 2020-12) when an app is saved, and run
on every call with `jsonschema-rs` validators built once per route version.

`pattern` (and `patternProperties`) are matched by Rust's `regex` engine only: it never backtracks,
so `^(a+)+$` is harmless, and its time is linear in the text but also proportional to the size of
the compiled pattern, which counted repetitions multiply (`(.{0,100}a){30}0` compiles to megabytes
and took 36 s on a 250 KB string). So every pattern's compiled size is capped at
PATTERN_SIZE_LIMIT bytes, at save time and in the validators built for calls. Lookaround and
backreferences are refused: they need fancy-regex, which runs a lookaround from every position
(`(?!a*$)` took 53 s on 250 KB of "a", quadratic, with no backtracking to count).

Schemas are self-contained: a `$ref` may only point inside the same schema ("#..."). Validators
are built with a retriever that refuses everything, so no schema can make the server read
a file or fetch a URL.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema_rs

from apps_registry.values import type_name

MAX_ERRORS = 50
# The formats documented (docs/authoring.md) as checked on every call's params and result; jsonschema-rs
# asserts the other Draft 2020-12 formats too (ipv4, hostname, regex, duration, ...). Unknown formats pass.
FORMATS_ASSERTED = ("date", "date-time", "time", "email", "uri", "uuid")
# Bytes of compiled program a `pattern` may take in the `regex` engine. Typical author patterns
# (`^[a-z0-9_-]{1,64}$`, emails, dates, UUIDs) take a few KB; the worst pattern admitted measured
# ~250 ms on a 256 KiB string (the params cap), against tens of seconds without the cap.
PATTERN_SIZE_LIMIT = 10_000
_PATTERN_OPTIONS = jsonschema_rs.RegexOptions(size_limit=PATTERN_SIZE_LIMIT)
# Where a "pattern" key is data rather than a keyword, so not compiled.
_DATA_KEYWORDS = ("const", "enum", "examples", "default")
_MAX_MESSAGE = 300
_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")


def _refuse_retrieval(uri: str) -> Any:
    raise ValueError(f"external schema references are not allowed ({uri[:100]!r}); use a '#/...' reference")


def _build_validator(schema: dict[str, Any] | bool) -> Any:
    # `format` is asserted (Draft 2020-12 makes it an annotation by default): a route declaring
    # "format": "date" must not accept "yesterday". See FORMATS_ASSERTED.
    return jsonschema_rs.validator_for(
        schema, retriever=_refuse_retrieval, pattern_options=_PATTERN_OPTIONS, validate_formats=True
    )


def _compiles(pattern: str, options: Any) -> bool:
    try:
        jsonschema_rs.validator_for({"pattern": pattern}, pattern_options=options)
    except Exception:
        return False
    return True


def _pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is refused (None when it is accepted)."""
    if _compiles(pattern, _PATTERN_OPTIONS):
        return None
    shown = repr(pattern[:100])
    if _compiles(pattern, jsonschema_rs.RegexOptions()):
        return (
            f"pattern is too complex: {shown} compiles to more than {PATTERN_SIZE_LIMIT} bytes "
            "(counted repetitions such as {0,100} multiply its size; use maxLength for lengths)"
        )
    if _compiles(pattern, jsonschema_rs.FancyRegexOptions()):
        return f"pattern {shown} uses lookaround or a backreference, which are not supported"
    return f"pattern {shown} is not a valid regular expression"


def _pattern_problems(schema: Any, path: str = "") -> list[str]:
    """Every refused `pattern` / `patternProperties` key in `schema`, with where it is."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            where = f"{path}/{key}"
            if key == "pattern" and isinstance(value, str):
                problem = _pattern_problem(value)
                if problem:
                    found.append(f"{where}: {problem}")
                continue
            if key == "patternProperties" and isinstance(value, dict):
                for name in value:
                    problem = _pattern_problem(name)
                    if problem:
                        found.append(f"{where}: {problem}")
            if key not in _DATA_KEYWORDS:
                found.extend(_pattern_problems(value, where))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(_pattern_problems(item, f"{path}/{index}"))
    return found


def _external_references(schema: Any, path: str = "") -> list[str]:
    """Where `schema` refers outside itself: a non-local $ref/$dynamicRef, or an $id (a new base URI)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            where = f"{path}/{key}"
            if key in _REFERENCE_KEYWORDS and isinstance(value, str) and not value.startswith("#"):
                found.append(
                    f"{where}: {value[:100]!r} refers outside this schema; only '#/...' references are allowed"
                )
            elif key == "$id" and isinstance(value, str):
                found.append(f"{where}: $id is not allowed; schemas are self-contained")
            else:
                found.extend(_external_references(value, where))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(_external_references(item, f"{path}/{index}"))
    return found


def schema_problems(schema: Any) -> list[str]:
    """Why `schema` is not a valid Draft 2020-12 JSON Schema (empty when it is)."""
    if not isinstance(schema, (dict, bool)):
        return [f"must be a JSON Schema (an object), got {type_name(schema)}"]
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return [f"is not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"]
    external = _external_references(schema)
    if external:
        return [f"is not self-contained at {problem}" for problem in external]
    # Checked one by one (also in unreferenced $defs), so the error names the pattern and why.
    patterns = _pattern_problems(schema)
    if patterns:
        return [f"is not usable at {problem}" for problem in patterns]
    try:
        _build_validator(schema)
    except Exception as exc:  # e.g. a pattern the Rust regex engine cannot compile, or too big
        return [f"is not usable: {exc}"]
    return []


class SchemaValidator:
    """A compiled validator that reports every violation as {"path": "$.a[0]", "message": ...}."""

    def __init__(self, schema: dict[str, Any] | bool) -> None:
        self._validator = _build_validator(schema)

    def errors(self, instance: Any) -> list[dict[str, str]]:
        # iter_errors alone, not is_valid first: a failing instance would run every pattern twice.
        found: list[dict[str, str]] = []
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
