"""A route schema's cost is bounded when it is saved and when it runs (issue 22): nested patterns, $ref expansion,
allOf/anyOf/oneOf fan-out, and the errors one call builds. Every refusal is a clear error, never a traceback."""

from __future__ import annotations

import logging
import time

import pytest

from apps_registry.exceptions import InvalidDefinition, InvalidInput, OperationFailed
from apps_registry.models import Route
from apps_registry.routes.limits import current_limits
from apps_registry.routes.schemas import (
    ERROR_SCAN_BUDGET,
    MAX_ERRORS,
    SchemaTooLarge,
    SchemaValidator,
    expansion,
    pattern_nesting,
    schema_problems,
)
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run

pytestmark = pytest.mark.django_db

NESTED_PATTERN = "(" * 3000 + "a" + ")" * 3000  # RecursionError in the save-time checker before the bound


def with_input(schema) -> dict:
    return {"name": "Probe", "routes": {"q": {"kind": "query", "input": schema, "steps": [{"return": "{}"}]}}}


def string_property(pattern: str) -> dict:
    return {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}


def doubling_chain(depth: int) -> dict:
    """`$defs` d0..d{depth}: each refers to the next twice through allOf, so d0 expands to 2^depth leaves."""
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(depth)}
    defs[f"d{depth}"] = {"type": "string", "minLength": 3}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}


def save_errors(user, schema) -> list[dict]:
    with pytest.raises(InvalidDefinition) as refused:
        app_definition_save(actor=user, definition=with_input(schema))
    return refused.value.errors or []


# --- pattern nesting ---


def test_pattern_nesting_counts_groups_not_escaped_parentheses_or_classes():
    assert pattern_nesting("^(a(b)(c(d)))$") == 3
    assert pattern_nesting(r"\(\(\(") == 0
    assert pattern_nesting("[(((]") == 0
    assert pattern_nesting(r"[\](](a)") == 1
    assert pattern_nesting("(?:x(?:y))") == 2


def test_a_pattern_of_3000_nested_groups_is_refused_when_saved_with_its_path_and_the_limit(user):
    errors = save_errors(user, string_property(NESTED_PATTERN))

    assert [e["path"] for e in errors] == ["routes.q.input"]
    assert errors[0]["message"] == (
        f"is not usable at /properties/s/pattern: pattern {NESTED_PATTERN[:100]!r} nests groups 3000 deep; "
        "the limit is 32 (pattern_nesting, CHARMING_ROUTES_MAX_PATTERN_NESTING)"
    )


def test_schema_limit_problems_name_their_limit_like_other_limit_problems(user):
    (nested,) = save_errors(user, string_property("(" * 40 + "a" + ")" * 40))
    assert (nested["limit"], nested["max"]) == ("pattern_nesting", 32)
    (expanded,) = save_errors(user, doubling_chain(20))
    assert (expanded["limit"], expanded["max"]) == ("schema_expansion", 500)
    (looping,) = save_errors(user, {"type": "object", "allOf": [{"$ref": "#"}]})
    assert "limit" not in looping  # a loop is refused whatever the limit


def test_a_nested_pattern_property_name_is_refused_too():
    problems = schema_problems({"type": "object", "patternProperties": {NESTED_PATTERN: {}}})
    assert problems[0].startswith("is not usable at /patternProperties: pattern '((((")
    assert "nests groups 3000 deep; the limit is 32" in problems[0]


def test_patterns_up_to_the_nesting_limit_are_accepted(user, settings):
    assert schema_problems(string_property("(" * 32 + "a" + ")" * 32)) == []
    settings.CHARMING_ROUTES_MAX_PATTERN_NESTING = 3
    assert "nests groups 4 deep; the limit is 3" in schema_problems(string_property("((((a))))"))[0]


def test_a_checker_that_still_recurses_too_deeply_gives_a_clear_refusal(monkeypatch):
    def recurses(schema):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("jsonschema.Draft202012Validator.check_schema", recurses)
    assert schema_problems({"type": "object"}) == [
        "is nested too deeply to check (a pattern, or the schema itself); simplify it"
    ]


def test_the_nested_pattern_over_rest_is_a_400_with_nothing_logged(api, caplog):
    with caplog.at_level(logging.ERROR):
        response = api.post("/api/apps/definitions/", with_input(string_property(NESTED_PATTERN)), format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["kind"] == "invalid_definition"
    assert error["errors"][0]["path"] == "routes.q.input"
    assert "nests groups 3000 deep; the limit is 32" in error["errors"][0]["message"]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


# --- $ref expansion and fan-out ---


def test_refs_that_double_at_each_of_20_levels_are_refused_when_saved_with_the_path_and_the_limit(user):
    started = time.perf_counter()
    errors = save_errors(user, doubling_chain(20))

    assert time.perf_counter() - started < 2
    assert [e["path"] for e in errors] == ["routes.q.input"]
    assert errors[0]["message"].startswith(
        "is too large with its $refs expanded: it applies more than 500 subschemas at /$defs/d13; the limit is 500 "
        "(schema_expansion, CHARMING_ROUTES_MAX_SCHEMA_EXPANSION)."
    )


def test_a_schema_that_applies_itself_twice_at_every_level_is_refused():
    branch = {"properties": {"x": {"$ref": "#/$defs/n"}}}
    schema = {"type": "object", "$defs": {"n": {"allOf": [branch, branch]}}, "properties": {"x": {"$ref": "#/$defs/n"}}}
    (problem,) = schema_problems(schema)
    assert problem.startswith(
        "is too large with its $refs expanded: it applies more than 500 subschemas (reaching $.x.x"
    )


def test_a_ref_that_loops_in_place_is_refused():
    assert schema_problems({"type": "object", "allOf": [{"$ref": "#"}]}) == [
        "is not usable at /allOf/0: it applies the schema's root again at the same place in the value "
        "(its $refs loop without descending into the value)"
    ]
    looping = {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}
    assert schema_problems({**looping, "properties": {"x": {"$ref": "#/$defs/a"}}})[0].startswith(
        "is not usable at /$defs/b: it applies /$defs/a again at the same place"
    )


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                }
            },
            "properties": {"root": {"$ref": "#/$defs/node"}},
        },
        {
            "type": "object",
            "$defs": {"n": {"type": "object", "properties": {"l": {"$ref": "#/$defs/n"}, "r": {"$ref": "#/$defs/n"}}}},
            "properties": {"tree": {"$ref": "#/$defs/n"}},
        },
        {"type": "object", "properties": {"child": {"$ref": "#"}}},
        {"type": "object", "$defs": {"a": {"$anchor": "A", "type": "string"}}, "properties": {"x": {"$ref": "#A"}}},
        doubling_chain(5),
    ],
    ids=["tree", "binary-tree", "root-recursion", "anchor", "doubling-5"],
)
def test_recursive_and_modest_schemas_are_accepted(user, schema):
    assert schema_problems(schema) == []
    app_definition_save(actor=user, definition=with_input(schema))


def test_the_expansion_counts_each_place_once():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
    }
    assert expansion(schema, current_limits()).total == 5  # the root, a, b and its two options
    assert expansion(schema, current_limits()).widest == 3


def test_the_expansion_limit_is_a_setting(settings):
    settings.CHARMING_ROUTES_MAX_SCHEMA_EXPANSION = 40
    assert schema_problems(doubling_chain(5)) == [
        "is too large with its $refs expanded: it applies more than 40 subschemas at /$defs/d1; the limit is 40 "
        "(schema_expansion, CHARMING_ROUTES_MAX_SCHEMA_EXPANSION). A $ref counts as its target's whole size each "
        "time it is used: refer to a definition once, not from several branches of allOf/anyOf/oneOf"
    ]
    with pytest.raises(SchemaTooLarge):
        expansion(doubling_chain(5), current_limits())


# --- at call time ---


def stored_with_input(user, schema):
    """An app whose route 'q' was saved valid and then given `schema` behind the services' back, as a route
    saved under older code or laxer limits would be."""
    app = app_definition_save(actor=user, definition=with_input({"type": "object"}))
    Route.objects.filter(app=app, name="q").update(input_schema=schema, version=2)
    return app


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (string_property(NESTED_PATTERN), "nests groups 3000 deep"),
        (doubling_chain(20), "is too large with its $refs expanded"),
    ],
    ids=["nested-pattern", "doubling-refs"],
)
def test_a_stored_schema_over_the_bounds_fails_each_call_clearly_and_fast(user, schema, reason):
    app = stored_with_input(user, schema)

    started = time.perf_counter()
    with pytest.raises(OperationFailed) as refused:
        route_run(actor=user, app_id=app.id, op="q", params={"x": 5, "s": "b"}, kind="query")

    assert time.perf_counter() - started < 2
    assert refused.value.message.startswith("Route 'q' cannot run under the current limits: routes.q.input: ")
    assert reason in refused.value.message


def test_a_validator_that_recurses_too_deeply_reports_an_error_not_a_traceback(monkeypatch):
    validator = SchemaValidator({"type": "object"})

    class Recursing:
        def iter_errors(self, instance):
            raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(validator, "_validator", Recursing())
    assert validator.errors({}) == [
        {"path": "$", "message": "the value is nested too deeply to check against the schema"}
    ]


def test_errors_past_the_first_fifty_are_counted_not_listed():
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}
    errors = SchemaValidator(schema).errors({"xs": ["a"] * 80})

    assert len(errors) == MAX_ERRORS + 1
    assert errors[0] == {"path": "$.xs[0]", "message": '"a" is not of type "integer"'}
    assert errors[-1] == {"path": "$", "message": "and 30 more errors not listed"}


def test_a_calls_message_counts_every_error_not_the_entries_listed(user):
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}
    app = app_definition_save(actor=user, definition=with_input(schema))

    with pytest.raises(InvalidInput) as refused:
        route_run(actor=user, app_id=app.id, op="q", params={"xs": ["a"] * 80}, kind="query")

    # 80 errors: three quoted, 77 more (the list holds 50 and a counting entry, which is not an error).
    assert refused.value.message.endswith('$.xs[2]: "a" is not of type "integer"; and 77 more')
    assert len(refused.value.errors) == MAX_ERRORS + 1


def test_a_calls_message_says_more_may_follow_when_only_the_first_was_looked_for(user):
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"allOf": [{"minimum": i} for i in range(100)]}}},
    }
    app = app_definition_save(actor=user, definition=with_input(schema))

    with pytest.raises(InvalidInput) as refused:
        route_run(actor=user, app_id=app.id, op="q", params={"xs": [-1] * 50_000}, kind="query")

    assert refused.value.message == (
        "params do not match the input schema of route 'q': $.xs[0]: -1 is less than the minimum of 0; "
        "further errors may follow, not checked"
    )


def test_a_call_whose_errors_would_number_in_millions_lists_the_first_fast(user):
    # 100 checks on each of 50,000 items, all failing: building every error took 54 s in jsonschema-rs.
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"allOf": [{"minimum": i} for i in range(100)]}}},
    }
    app = app_definition_save(actor=user, definition=with_input(schema))

    started = time.perf_counter()
    with pytest.raises(InvalidInput) as refused:
        route_run(actor=user, app_id=app.id, op="q", params={"xs": [-1] * 50_000}, kind="query")

    assert time.perf_counter() - started < 2
    assert refused.value.errors == [
        {"path": "$.xs[0]", "message": "-1 is less than the minimum of 0"},
        {"path": "$", "message": "further errors may follow, not checked: fix this one and send it again"},
    ]


def test_the_error_budget_follows_the_values_size_and_the_schemas_width():
    validator = SchemaValidator({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}})
    small = validator.errors([1] * 10)
    assert len(small) == 10 and small[0]["path"] == "$[0]"  # every error listed
    large = validator.errors([1] * ERROR_SCAN_BUDGET)
    assert len(large) == 2 and large[1]["message"].startswith("further errors may follow")


def test_an_exclusive_bound_is_named_exclusive():
    from apps_registry.routes.schemas import SchemaValidator

    validator = SchemaValidator(
        {
            "type": "object",
            "properties": {"a": {"exclusiveMinimum": 0}, "b": {"exclusiveMaximum": 5}, "c": {"minimum": 1}},
        }
    )
    assert validator.errors({"a": -3.0, "b": 7, "c": 0}) == [
        {"path": "$.a", "message": "-3.0 is less than or equal to the exclusive minimum of 0"},
        {"path": "$.b", "message": "7 is greater than or equal to the exclusive maximum of 5"},
        {"path": "$.c", "message": "0 is less than the minimum of 1"},
    ]
