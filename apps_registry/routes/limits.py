"""The engine's bounds, each declared once here: its name, default, setting (an environment variable of
the same name, read in charming/settings.py) and one line saying what it bounds. `.env.example` and
the Limits table in docs/authoring.md are checked against these declarations by the tests.

Exceeding a bound fails with `operation_failed` (at run time) or `invalid_definition` (when an app is
saved), and names the limit and its value."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from django.conf import settings


def _limit(default: int, setting: str, doc: str) -> Any:
    return dataclasses.field(default=default, metadata={"setting": setting, "doc": doc})


@dataclass(frozen=True)
class Limits:
    expression_length: int = _limit(
        2000, "CHARMING_ROUTES_MAX_EXPRESSION_LENGTH", "characters in one CEL expression of a route"
    )
    comprehension_nesting: int = _limit(
        2, "CHARMING_ROUTES_MAX_COMPREHENSION_NESTING", "map/filter/all/exists/exists_one nested inside each other"
    )
    expression_nesting: int = _limit(
        32, "CHARMING_ROUTES_MAX_EXPRESSION_NESTING", "bracket nesting depth in one CEL expression"
    )
    steps_per_route: int = _limit(50, "CHARMING_ROUTES_MAX_STEPS", "steps in one route")
    records_read_per_call: int = _limit(
        1000,
        "CHARMING_ROUTES_MAX_RECORDS_READ",
        "records one route call may read (get, find, increment's re-read, each group an aggregate returns; "
        "count and sum read none)",
    )
    in_values: int = _limit(
        1000, "CHARMING_ROUTES_MAX_IN_VALUES", "values in one `in` condition of a where (find, count, sum, ...)"
    )
    records_written_per_call: int = _limit(
        100,
        "CHARMING_ROUTES_MAX_RECORDS_WRITTEN",
        "records one route call may write (insert, update, upsert, delete, increment)",
    )
    for_each_items: int = _limit(
        100, "CHARMING_ROUTES_MAX_FOR_EACH_ITEMS", "items one for_each step runs its steps for, in one call"
    )
    notices_per_call: int = _limit(5, "CHARMING_ROUTES_MAX_NOTICES", "notify steps one route call may run")
    migrate_inline_records: int = _limit(
        1000,
        "CHARMING_ROUTES_MIGRATE_INLINE_RECORDS",
        "records a save's migration may touch to run inside the save's transaction (more run as a background task)",
    )
    record_bytes: int = _limit(65536, "CHARMING_ROUTES_MAX_RECORD_BYTES", "bytes of one record's JSON data")
    records_per_app: int = _limit(
        100_000, "CHARMING_ROUTES_MAX_RECORDS_PER_APP", "records one app may hold across all its collections"
    )
    routes_per_app: int = _limit(100, "CHARMING_ROUTES_MAX_ROUTES", "routes in one app definition")
    test_generated_records: int = _limit(
        5000,
        "CHARMING_ROUTES_MAX_TEST_GENERATED_RECORDS",
        "records one author test may generate (its `generate` counts)",
    )
    test_seconds: int = _limit(
        10,
        "CHARMING_ROUTES_MAX_TEST_SECONDS",
        "seconds the author tests of one definition may run together on a save or check (the rest are not run)",
    )
    generated_records: int = _limit(
        20_000,
        "CHARMING_ROUTES_MAX_GENERATED_RECORDS",
        "records the author tests of one definition may generate together (made and inserted on every save)",
    )
    generated_bytes: int = _limit(
        8_388_608,
        "CHARMING_ROUTES_MAX_GENERATED_BYTES",
        "bytes of compact JSON the generated records of one definition's tests may hold together",
    )
    generated_expression_chars: int = _limit(
        10_000_000,
        "CHARMING_ROUTES_MAX_GENERATED_EXPRESSION_CHARS",
        "characters of CEL one definition's generated records evaluate together (each expression once a record)",
    )
    indexes_per_app: int = _limit(
        10, "CHARMING_ROUTES_MAX_INDEXES", "indexes one app definition declares across all its collections"
    )
    indexes_per_owner: int = _limit(
        30,
        "CHARMING_ROUTES_MAX_INDEXES_PER_OWNER",
        "indexes all of one owner's app definitions declare together (built in the table every app shares)",
    )
    unindexed_advisory_records: int = _limit(
        10_000,
        "CHARMING_ROUTES_UNINDEXED_ADVISORY_RECORDS",
        "records an app holds from which a save advises indexes for steps that filter or order on unindexed fields",
    )
    schema_nesting: int = _limit(
        64, "CHARMING_ROUTES_MAX_SCHEMA_NESTING", "levels of JSON nesting in a route's input or output schema"
    )
    pattern_nesting: int = _limit(
        32,
        "CHARMING_ROUTES_MAX_PATTERN_NESTING",
        "groups nested inside each other in one pattern (or patternProperties name) of a route's schema",
    )
    schema_expansion: int = _limit(
        500,
        "CHARMING_ROUTES_MAX_SCHEMA_EXPANSION",
        "subschemas a route's input or output schema applies with every $ref expanded (allOf/anyOf/oneOf included)",
    )
    params_bytes: int = _limit(
        262144, "CHARMING_ROUTES_MAX_PARAMS_BYTES", "bytes of the compact JSON of one call's params"
    )
    value_items: int = _limit(
        10_000, "CHARMING_ROUTES_MAX_VALUE_ITEMS", "items in a value a step binds (as) or a route returns"
    )
    value_chars: int = _limit(
        1048576,
        "CHARMING_ROUTES_MAX_VALUE_CHARS",
        "characters of text in a value a step binds (as) or a route returns",
    )
    value_nesting: int = _limit(
        64,
        "CHARMING_ROUTES_MAX_VALUE_NESTING",
        "levels of list/map nesting in params and in a value a step binds or a route returns",
    )
    cel_work: int = _limit(
        20_000_000,
        "CHARMING_ROUTES_MAX_CEL_WORK",
        "estimated CEL work in one route call, about 1 s of CPU at the default (see docs/authoring.md, Limits)",
    )
    cel_ms: int = _limit(
        1000,
        "CHARMING_ROUTES_MAX_CEL_MS",
        "milliseconds one route call may spend evaluating CEL in worker processes (comprehensions, large estimates)",
    )


@dataclass(frozen=True)
class LimitSetting:
    field: str  # the Limits field
    setting: str  # the Django setting, read from the environment variable of the same name
    default: int
    doc: str  # what it bounds, in one line


def _declared(f: dataclasses.Field[Any]) -> LimitSetting:
    assert isinstance(f.default, int)
    return LimitSetting(field=f.name, setting=f.metadata["setting"], default=f.default, doc=f.metadata["doc"])


LIMIT_SETTINGS: tuple[LimitSetting, ...] = tuple(_declared(f) for f in dataclasses.fields(Limits))
_SETTING_OF = {limit.field: limit.setting for limit in LIMIT_SETTINGS}


def current_limits() -> Limits:
    """The limits in force now (read from settings on each call, so tests and deployments can change them)."""
    return Limits(**{limit.field: getattr(settings, limit.setting, limit.default) for limit in LIMIT_SETTINGS})


def limit_details(limit: str, value: int, **extra: object) -> dict[str, object]:
    """The `details` of an error caused by a limit: which one, its value, and what was observed."""
    return {"limit": limit, "max": value, "setting": _SETTING_OF[limit], **extra}
