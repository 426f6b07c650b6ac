"""Checking a call's arguments against its tool's own inputSchema (the SDK does not).

Valid arguments (nearly every call) are confirmed by jsonschema-rs, the validator the routes use (~1 µs a
call against ~60 µs); only arguments it refuses, or cannot take (a lone surrogate has no Rust string), go
through jsonschema's own walk, which names each problem with the wording callers and tests rely on. The two
agree on what is valid (tests/mcp_tools/test_tool_properties.py checks it on generated arguments).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from apps_registry.exceptions import InvalidInput
from apps_registry.values import clip, clip_repr, type_name
from mcp_tools.registry import TOOLS

EXAMPLE_UUID = "123e4567-e89b-42d3-a456-426614174000"
MESSAGE_CHARS = 300
_VALIDATORS = {
    tool.name: Draft202012Validator(tool.contract["inputSchema"], format_checker=Draft202012Validator.FORMAT_CHECKER)
    for tool in TOOLS
}
_FAST_VALIDATORS = {
    tool.name: jsonschema_rs.validator_for(tool.contract["inputSchema"], validate_formats=True) for tool in TOOLS
}


def _path(error: ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    if error.validator == "required":
        missing = re.match(r"'([^']*)' is a required property", error.message)
        if missing:
            path += f".{missing.group(1)}"
    return path


def _message(error: ValidationError) -> str:
    field = error.absolute_path[-1] if error.absolute_path else None
    if error.validator == "required":
        return "is required"
    if field == "app_id" and error.validator in ("pattern", "format"):
        return f"must be an app's UUID as list_apps returns it (e.g. {EXAMPLE_UUID}), got {clip_repr(error.instance)}"
    if field == "change_id" and error.validator == "pattern":
        return (
            f"must be a change id (digits), as list_changes or mutate_app's _meta io.charming/change-id gives it, "
            f"got {clip_repr(error.instance)}"
        )
    if error.validator == "type":
        return f"must be of type {error.validator_value}, got {type_name(error.instance)}"
    if error.validator == "maxLength" and isinstance(error.instance, str):
        return f"must be at most {error.validator_value} characters, got {len(error.instance)}"
    if error.validator == "minLength" and isinstance(error.instance, str):
        return f"must be at least {error.validator_value} characters, got {len(error.instance)}"
    if error.validator in ("pattern", "format"):
        return f"{clip_repr(error.instance)} does not match the expected {error.validator}"
    # jsonschema's own wording quotes the whole value: a caller's 100 KB string is not sent back.
    return clip(error.message, MESSAGE_CHARS)


def arguments_valid_fast(tool: str, args: dict[str, Any]) -> bool:
    """Whether jsonschema-rs finds `args` valid for `tool`; False also when it cannot take them."""
    try:
        return bool(_FAST_VALIDATORS[tool].is_valid(args))
    except Exception:  # e.g. a string with a lone surrogate, which no Rust string can hold
        return False


def arguments_check(tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments, or InvalidInput listing every problem with its JSON path."""
    args = dict(arguments or {})
    if arguments_valid_fast(tool, args):
        return args
    problems = sorted(_VALIDATORS[tool].iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    if problems:
        errors: list[dict[str, Any]] = []
        for problem in problems:
            error = {"path": _path(problem), "message": _message(problem)}
            if error not in errors:  # `pattern` and `format` both flag a bad UUID
                errors.append(error)
        listing = "; ".join(f"{e['path']} {e['message']}" for e in errors)
        raise InvalidInput(
            f"Invalid arguments for {tool}: {listing}. Fix them as its inputSchema says and call again.",
            errors=errors,
        )
    return args
