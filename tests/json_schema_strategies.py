"""A small hypothesis strategy builder: values valid against a JSON Schema (the subset our contracts and
example apps use: type, enum, const, string bounds/pattern/uuid format, number bounds, object properties/
required/additionalProperties, array items/bounds, anyOf/oneOf).

hypothesis-jsonschema 0.23.1 (its latest release) breaks on the pinned hypothesis 6.170 (it calls the
removed internal `many.more`), hence this. Unknown keywords are ignored, so callers validate what matters.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
ANY_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def from_schema(schema: Any) -> st.SearchStrategy[Any]:
    """Values valid against `schema`."""
    if schema is True or schema == {}:
        return ANY_JSON
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of(*(from_schema({**_without(schema, key), **option}) for option in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of(*(from_schema({**schema, "type": k}) for k in kind))
    builder = _BUILDERS.get(kind)
    return builder(schema) if builder else ANY_JSON


def _without(schema: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != key}


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    if "pattern" in schema:
        base = st.from_regex(schema["pattern"], fullmatch=True)
    elif schema.get("format") == "uuid":
        base = st.uuids().map(str)
    else:
        base = st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 40))
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    return base.filter(lambda s: len(s) >= low and (high is None or len(s) <= high))


def _number(schema: dict[str, Any], *, integer: bool) -> st.SearchStrategy[Any]:
    low, high = schema.get("minimum"), schema.get("maximum")
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    lows = [math.ceil(low)] if low is not None else []
    lows += [math.floor(ex_low) + 1] if ex_low is not None else []
    highs = [math.floor(high)] if high is not None else []
    highs += [math.ceil(ex_high) - 1] if ex_high is not None else []
    int_low, int_high = (max(lows) if lows else None), (min(highs) if highs else None)
    integers = st.integers(min_value=int_low, max_value=int_high)
    if integer:
        return integers
    floats = st.floats(
        min_value=ex_low if low is None else low,
        max_value=ex_high if high is None else high,
        exclude_min=low is None and ex_low is not None,
        exclude_max=high is None and ex_high is not None,
        allow_nan=False,
        allow_infinity=False,
    )
    return floats | integers  # JSON integers are numbers too


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = [name for name in schema.get("required", []) if name in properties]
    optional = {name: from_schema(sub) for name, sub in properties.items() if name not in required}
    extra = schema.get("additionalProperties", True)
    fixed = st.fixed_dictionaries({name: from_schema(properties[name]) for name in required}, optional=optional)
    if extra is False:
        return fixed
    values = ANY_JSON if extra in (True, {}) else from_schema(extra)
    more = st.dictionaries(st.text(max_size=8).filter(lambda k: k not in properties), values, max_size=2)
    return st.tuples(fixed, more).map(lambda pair: {**pair[1], **pair[0]})


def _array(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    items = schema.get("items", {})
    return st.lists(from_schema(items), min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 4))


_BUILDERS = {
    "string": _string,
    "number": lambda s: _number(s, integer=False),
    "integer": lambda s: _number(s, integer=True),
    "boolean": lambda s: st.booleans(),
    "null": lambda s: st.none(),
    "object": _object,
    "array": _array,
}
