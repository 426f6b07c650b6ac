"""The engine's bounds. Each is a setting (CHARMING_ROUTES_*) with a sane default; exceeding one
fails with `operation_failed` (at run time) or `invalid_definition` (when an app is saved), and
names the limit and its value."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Limits:
    expression_length: int = 2000
    comprehension_nesting: int = 2
    expression_nesting: int = 32
    steps_per_route: int = 50
    records_read_per_call: int = 1000
    records_written_per_call: int = 100
    record_bytes: int = 64 * 1024
    records_per_app: int = 100_000
    routes_per_app: int = 100
    schema_nesting: int = 64
    params_bytes: int = 256 * 1024
    value_items: int = 10_000
    value_chars: int = 1024 * 1024
    value_nesting: int = 64
    cel_work: int = 20_000_000
    cel_ms: int = 1000


# Setting name -> Limits field.
_SETTINGS = {
    "CHARMING_ROUTES_MAX_EXPRESSION_LENGTH": "expression_length",
    "CHARMING_ROUTES_MAX_COMPREHENSION_NESTING": "comprehension_nesting",
    "CHARMING_ROUTES_MAX_EXPRESSION_NESTING": "expression_nesting",
    "CHARMING_ROUTES_MAX_STEPS": "steps_per_route",
    "CHARMING_ROUTES_MAX_RECORDS_READ": "records_read_per_call",
    "CHARMING_ROUTES_MAX_RECORDS_WRITTEN": "records_written_per_call",
    "CHARMING_ROUTES_MAX_RECORD_BYTES": "record_bytes",
    "CHARMING_ROUTES_MAX_RECORDS_PER_APP": "records_per_app",
    "CHARMING_ROUTES_MAX_ROUTES": "routes_per_app",
    "CHARMING_ROUTES_MAX_SCHEMA_NESTING": "schema_nesting",
    "CHARMING_ROUTES_MAX_PARAMS_BYTES": "params_bytes",
    "CHARMING_ROUTES_MAX_VALUE_ITEMS": "value_items",
    "CHARMING_ROUTES_MAX_VALUE_CHARS": "value_chars",
    "CHARMING_ROUTES_MAX_VALUE_NESTING": "value_nesting",
    "CHARMING_ROUTES_MAX_CEL_WORK": "cel_work",
    "CHARMING_ROUTES_MAX_CEL_MS": "cel_ms",
}


def current_limits() -> Limits:
    """The limits in force now (read from settings on each call, so tests and deployments can change them)."""
    defaults = Limits()
    values = {field: getattr(settings, name, getattr(defaults, field)) for name, field in _SETTINGS.items()}
    return Limits(**values)


def limit_details(limit: str, value: int, **extra: object) -> dict[str, object]:
    """The `details` of an error caused by a limit: which one, its value, and what was observed."""
    setting = next(name for name, field in _SETTINGS.items() if field == limit)
    return {"limit": limit, "max": value, "setting": setting, **extra}
