"""An author's `pattern` cannot hold a call: compiled size is capped and lookaround is refused."""

from __future__ import annotations

import time

import pytest

from apps_registry.exceptions import InvalidDefinition
from apps_registry.routes.schemas import PATTERN_SIZE_LIMIT, SchemaValidator, schema_problems
from apps_registry.services.definitions import app_definition_save

pytestmark = pytest.mark.django_db

HUGE = "(?s)(.{0,100}a){30}0"  # took 36 s on a 250 KB string before the cap


def string_input(pattern: str) -> dict:
    return {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}


def definition_with_input(schema) -> dict:
    return {"name": "Probe", "routes": {"q": {"kind": "query", "input": schema, "steps": [{"return": "{}"}]}}}


def save_problems(user, schema) -> list[dict]:
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition_with_input(schema))
    return exc.value.errors or []


def test_a_pattern_that_compiles_too_big_is_refused_at_save_with_its_path(user):
    errors = save_problems(user, string_input(HUGE))
    assert [e["path"] for e in errors] == ["routes.q.input"]
    message = errors[0]["message"]
    assert message.startswith("is not usable at /properties/s/pattern: pattern is too complex:")
    assert f"compiles to more than {PATTERN_SIZE_LIMIT} bytes" in message


def test_a_too_big_pattern_in_the_output_schema_is_refused_too(user):
    definition = definition_with_input({"type": "object"})
    definition["routes"]["q"]["output"] = {"type": "object", "patternProperties": {"(.{0,100}a){30}": {}}}
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    message = " ".join(e["message"] for e in exc.value.errors or [])
    assert "/patternProperties: pattern is too complex" in message


def test_lookaround_and_backreferences_are_refused(user):
    # fancy-regex runs a lookaround from every start position: (?!a*$) took 53 s on 250 KB.
    for pattern in ["(?!a*$)", r"(\w)\1"]:
        message = " ".join(e["message"] for e in save_problems(user, string_input(pattern)))
        assert "uses lookaround or a backreference, which are not supported" in message


def test_a_nested_too_big_pattern_is_reported_where_it_is():
    schema = {"type": "object", "$defs": {"code": {"type": "string", "pattern": HUGE}}}
    assert schema_problems(schema)[0].startswith("is not usable at /$defs/code/pattern: pattern is too complex")


def test_a_pattern_key_in_const_data_is_not_compiled():
    assert schema_problems({"type": "object", "const": {"pattern": HUGE}}) == []


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        ("^[a-z0-9_-]{1,64}$", "my-slug_1", "Bad Slug"),
        (r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "a@b.co", "a@b"),
        (r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$", "x.y+z@mail.example.org", "x@y"),
        (r"^\d{4}-\d{2}-\d{2}$", "2026-11-30", "30/11/2026"),
        (r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$", "2026-11-30T07:00:00Z", "07:00"),
        (
            "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
            "123e4567-e89b-12d3-a456-426614174000",
            "123e4567",
        ),
        (r"^https?://\S+$", "https://example.org/x", "ftp://x"),
        ("^(a+)+$", "aaaa", "aaa!"),
    ],
)
def test_ordinary_patterns_are_accepted_and_validate(user, pattern, good, bad):
    schema = string_input(pattern)
    assert schema_problems(schema) == []
    app_definition_save(actor=user, definition=definition_with_input(schema))
    validator = SchemaValidator(schema)
    assert validator.errors({"s": good}) == []
    assert validator.errors({"s": bad}) == [{"path": "$.s", "message": f'"{bad}" does not match "{pattern}"'}]


def test_the_catastrophic_backtracking_pattern_stays_fast():
    validator = SchemaValidator(string_input("^(a+)+$"))
    started = time.perf_counter()
    errors = validator.errors({"s": "a" * 250_000 + "!"})
    assert time.perf_counter() - started < 1
    assert [e["path"] for e in errors] == ["$.s"]


def test_validators_for_calls_refuse_a_too_big_pattern_too():
    with pytest.raises(Exception, match="regex"):
        SchemaValidator(string_input(HUGE))


def test_every_violation_is_still_reported_from_one_pass():
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^[a-z]+$"}, "n": {"type": "integer"}},
        "required": ["s", "n"],
    }
    errors = SchemaValidator(schema).errors({"s": "A1"})
    assert sorted((e["path"], e["message"]) for e in errors) == [
        ("$", '"n" is a required property'),
        ("$.s", '"A1" does not match "^[a-z]+$"'),
    ]
    assert SchemaValidator(schema).errors({"s": "ab", "n": 1}) == []
