"""Every problem the compiler reports when an app definition is checked: one row per message, with
the exact path and text an author sees (and the limit, for problems a limit causes). Plain Python:
no database."""

from __future__ import annotations

from typing import Any

import pytest

from apps_registry.routes.compiler import check_definition
from apps_registry.routes.limits import Limits

RETURN = {"return": "1"}
ROUTE = {"kind": "mutation", "steps": [RETURN]}

BAD_NAME_RULE = "letters, digits and underscores, not starting with a digit, at most 100 characters"
BAD_COLLECTION = "must be a collection name: " + BAD_NAME_RULE
BAD_ROUTE = "must be a route name: " + BAD_NAME_RULE
BAD_NAME = "must be a name: " + BAD_NAME_RULE
EXPECTING = (
    " expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', "
    "NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
)
ONE_OF = (
    "a step has exactly one of get, find, count, sum, aggregate, let, insert, update, upsert, delete, increment, "
    "fail, notify, return, for_each (and optionally 'as' and 'when'); found keys "
)
SCOPE = "names available here: app, caller, now, params"
STRING_OF_LIST = "string() of a list or map is not defined; use a list's join(',') or build the text yourself"


def app(**fields: Any) -> dict[str, Any]:
    """A valid definition with one route 'r' and a collection 'c'; a field given as None is removed."""
    definition: dict[str, Any] = {"name": "T", "collections": {"c": {}}, "routes": {"r": ROUTE}}
    for key, value in fields.items():
        if value is None:
            definition.pop(key, None)
        else:
            definition[key] = value
    return definition


def route(**fields: Any) -> dict[str, Any]:
    """The definition with route 'r' changed; a field given as None is removed."""
    raw: dict[str, Any] = dict(ROUTE)
    for key, value in fields.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return app(routes={"r": raw})


def steps(*items: Any, kind: str = "mutation") -> dict[str, Any]:
    return route(kind=kind, steps=list(items))


ROWS = [
    pytest.param(
        [],
        {},
        [{"path": "$", "message": "an app definition must be a JSON object, got an array"}],
        id="definition-not-object",
    ),
    pytest.param(
        app(extra=1, more=2),
        {},
        [
            {
                "path": "$",
                "message": "unknown key(s) extra, more; allowed: name, description, collections, routes, format, tests",
            }
        ],
        id="unknown-top-keys",
    ),
    pytest.param(
        app(format=2),
        {},
        [{"path": "format", "message": "unsupported format 2; this server reads 1"}],
        id="unsupported-format",
    ),
    pytest.param(
        app(name=None),
        {},
        [{"path": "name", "message": "required: the app's name, a non-empty string of at most 200 characters"}],
        id="missing-name",
    ),
    pytest.param(
        app(name="  "),
        {},
        [{"path": "name", "message": "required: the app's name, a non-empty string of at most 200 characters"}],
        id="blank-name",
    ),
    pytest.param(
        app(name="x" * 201),
        {},
        [{"path": "name", "message": "required: the app's name, a non-empty string of at most 200 characters"}],
        id="long-name",
    ),
    pytest.param(
        app(description=3), {}, [{"path": "description", "message": "must be a string"}], id="description-not-string"
    ),
    pytest.param(
        app(collections=[]),
        {},
        [{"path": "collections", "message": 'must be an object: {"expenses": {}, ...}'}],
        id="collections-not-object",
    ),
    pytest.param(
        app(collections={"1x": {}}),
        {},
        [{"path": "collections.1x", "message": BAD_COLLECTION}],
        id="bad-collection-name",
    ),
    pytest.param(
        app(collections={"c\n": {}}),
        {},
        [{"path": "collections.c\n", "message": BAD_COLLECTION}],
        id="collection-name-ending-in-a-newline",
    ),
    pytest.param(
        app(collections={"c": 1}),
        {},
        [{"path": "collections.c", "message": "must be an object (it may be empty: {})"}],
        id="collection-spec-not-object",
    ),
    pytest.param(
        app(routes=None),
        {},
        [{"path": "routes", "message": "required: an object mapping route names to routes, with at least one"}],
        id="routes-missing",
    ),
    pytest.param(
        app(routes={}),
        {},
        [{"path": "routes", "message": "required: an object mapping route names to routes, with at least one"}],
        id="routes-empty",
    ),
    pytest.param(
        app(routes={"a": ROUTE, "b": ROUTE}),
        {"routes_per_app": 1},
        [{"path": "routes", "message": "the app has 2 routes; the limit is 1", "limit": "routes_per_app", "max": 1}],
        id="routes-over-limit",
    ),
    pytest.param(
        app(routes={"my-route": ROUTE}), {}, [{"path": "routes.my-route", "message": BAD_ROUTE}], id="bad-route-name"
    ),
    pytest.param(
        app(routes={"r\n": ROUTE}),
        {},
        [{"path": "routes.r\n", "message": BAD_ROUTE}],
        id="route-name-ending-in-a-newline",
    ),
    pytest.param(
        app(routes={"r": "steps"}),
        {},
        [{"path": "routes.r", "message": "a route must be an object, got a string"}],
        id="route-not-object",
    ),
    pytest.param(
        route(when="now"),
        {},
        [
            {
                "path": "routes.r",
                "message": (
                    "unknown key(s) when; allowed: kind, description, input, output, steps, handler, "
                    "title, help, view, chart, columns, row_actions, start, form"
                ),
            }
        ],
        id="unknown-route-keys",
    ),
    pytest.param(
        route(kind="read"),
        {},
        [{"path": "routes.r.kind", "message": "must be 'query' or 'mutation', got 'read'"}],
        id="bad-kind",
    ),
    pytest.param(
        route(kind=None),
        {},
        [{"path": "routes.r.kind", "message": "must be 'query' or 'mutation', got null"}],
        id="missing-kind",
    ),
    pytest.param(
        route(kind=True),
        {},
        [{"path": "routes.r.kind", "message": "must be 'query' or 'mutation', got true"}],
        id="kind-boolean",
    ),
    pytest.param(
        route(kind={"a": [1, None]}),
        {},
        [{"path": "routes.r.kind", "message": "must be 'query' or 'mutation', got {\"a\": [1, null]}"}],
        id="kind-object",
    ),
    pytest.param(
        {**app(), "format": None},
        {},
        [{"path": "format", "message": "unsupported format null; this server reads 1"}],
        id="format-null",
    ),
    pytest.param(
        steps([RETURN]),
        {},
        [{"path": "routes.r.steps[0]", "message": 'a step must be an object such as {"get": {...}}, got an array'}],
        id="step-array",
    ),
    pytest.param(
        route(description=[]),
        {},
        [{"path": "routes.r.description", "message": "must be a string"}],
        id="route-description-not-string",
    ),
    pytest.param(
        route(input=True),
        {},
        [
            {
                "path": "routes.r.input",
                "message": 'must be a JSON Schema object, e.g. {"type": "object"}; got the boolean true',
            }
        ],
        id="input-not-object",
    ),
    pytest.param(
        route(input=[]),
        {},
        [{"path": "routes.r.input", "message": 'must be a JSON Schema object, e.g. {"type": "object"}; got an array'}],
        id="input-list",
    ),
    pytest.param(
        route(input="object"),
        {},
        [{"path": "routes.r.input", "message": 'must be a JSON Schema object, e.g. {"type": "object"}; got a string'}],
        id="input-string",
    ),
    pytest.param(
        route(input=3),
        {},
        [
            {
                "path": "routes.r.input",
                "message": 'must be a JSON Schema object, e.g. {"type": "object"}; got an integer',
            }
        ],
        id="input-number",
    ),
    pytest.param(
        route(input={"type": "objekt"}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": "is not a valid JSON Schema at type: 'objekt' is not valid under any of the given schemas",
            }
        ],
        id="input-invalid-schema",
    ),
    pytest.param(
        route(input={"type": "string"}),
        {},
        [
            {
                "path": "routes.r.input.type",
                "message": (
                    "params are always a JSON object, so 'input' must describe one: \"type\": \"object\" (got 'string')"
                ),
            }
        ],
        id="input-not-object-type",
    ),
    pytest.param(
        route(input={"type": ["string", "null"]}),
        {},
        [
            {
                "path": "routes.r.input.type",
                "message": (
                    'params are always a JSON object, so \'input\' must describe one: "type": "object" (got '
                    '["string", "null"])'
                ),
            }
        ],
        id="input-type-list-without-object",
    ),
    pytest.param(
        route(input={"type": "object", "properties": {"a": {"type": "object"}}}),
        {"schema_nesting": 3},
        [
            {
                "path": "routes.r.input.properties.a.type",
                "message": "the schema is nested more than 3 levels deep here; the limit is 3",
                "limit": "schema_nesting",
                "max": 3,
            }
        ],
        id="input-too-deep",
    ),
    pytest.param(
        route(input={"type": "object", "$ref": "http://example.com/s"}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": (
                    "is not self-contained at /$ref: 'http://example.com/s' refers outside this schema; only "
                    "'#/...' references are allowed"
                ),
            }
        ],
        id="input-external-ref",
    ),
    pytest.param(
        route(input={"type": "object", "$id": "urn:x"}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": "is not self-contained at /$id: $id is not allowed; schemas are self-contained",
            }
        ],
        id="input-id",
    ),
    pytest.param(
        route(input={"type": "object", "properties": {"a": {"type": "string", "pattern": "(?!a)b"}}}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": (
                    "is not usable at /properties/a/pattern: pattern '(?!a)b' uses lookaround or a "
                    "backreference, which are not supported"
                ),
            }
        ],
        id="input-lookaround",
    ),
    pytest.param(
        route(input={"type": "object", "properties": {"a": {"type": "string", "pattern": "(a"}}}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": "is not a valid JSON Schema at properties/a/pattern: '(a' is not a 'regex'",
            }
        ],
        id="input-bad-pattern",
    ),
    pytest.param(
        route(input={"type": "object", "properties": {"a": {"type": "string", "pattern": "(.{0,100}a){30}0"}}}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": (
                    "is not usable at /properties/a/pattern: pattern is too complex: '(.{0,100}a){30}0' "
                    "compiles to more than 10000 bytes (counted repetitions such as {0,100} multiply its size; "
                    "use maxLength for lengths)"
                ),
            }
        ],
        id="input-huge-pattern",
    ),
    pytest.param(
        route(input={"type": "object", "patternProperties": {"(a": {}}}),
        {},
        [
            {
                "path": "routes.r.input",
                "message": "is not a valid JSON Schema at patternProperties: '(a' is not a 'regex'",
            }
        ],
        id="input-bad-pattern-properties",
    ),
    pytest.param(
        route(output=[1]),
        {},
        [{"path": "routes.r.output", "message": 'must be a JSON Schema object, e.g. {"type": "object"}; got an array'}],
        id="output-not-object",
    ),
    pytest.param(
        route(output={"type": 1}),
        {},
        [
            {
                "path": "routes.r.output",
                "message": "is not a valid JSON Schema at type: 1 is not valid under any of the given schemas",
            }
        ],
        id="output-invalid-schema",
    ),
    pytest.param(
        route(output={"properties": {"a": {"minimum": "x"}}}),
        {},
        [
            {
                "path": "routes.r.output",
                "message": "is not a valid JSON Schema at properties/a/minimum: 'x' is not of type 'number'",
            }
        ],
        id="output-invalid-nested",
    ),
    pytest.param(
        route(steps=None),
        {},
        [{"path": "routes.r", "message": "a route needs exactly one of 'steps' (an array) or the legacy 'handler'"}],
        id="no-steps-nor-handler",
    ),
    pytest.param(
        route(handler={"action": "insert", "collection": "c"}),
        {},
        [{"path": "routes.r", "message": "a route needs exactly one of 'steps' (an array) or the legacy 'handler'"}],
        id="steps-and-handler",
    ),
    pytest.param(
        route(steps=None, handler="insert"),
        {},
        [{"path": "routes.r.handler", "message": 'must be {"action": "insert|update|delete", "collection": "..."}'}],
        id="handler-not-object",
    ),
    pytest.param(
        route(steps=None, handler={"action": "insert"}),
        {},
        [{"path": "routes.r.handler", "message": 'must be {"action": "insert|update|delete", "collection": "..."}'}],
        id="handler-wrong-keys",
    ),
    pytest.param(
        route(steps=None, handler={"action": "upsert", "collection": "c"}),
        {},
        [{"path": "routes.r.handler.action", "message": "must be insert, update or delete, got 'upsert'"}],
        id="handler-bad-action",
    ),
    pytest.param(
        route(steps=None, handler={"action": "insert", "collection": "a b"}),
        {},
        [{"path": "routes.r.handler.collection", "message": BAD_COLLECTION}],
        id="handler-bad-collection",
    ),
    pytest.param(
        route(steps=None, kind="query", handler={"action": "delete", "collection": "c"}),
        {},
        [{"path": "routes.r.handler", "message": "a legacy handler writes: its route must be a mutation"}],
        id="handler-in-query",
    ),
    pytest.param(
        route(steps={"return": "1"}),
        {},
        [{"path": "routes.r.steps", "message": "must be a non-empty array of steps"}],
        id="steps-not-list",
    ),
    pytest.param(
        route(steps=[]),
        {},
        [{"path": "routes.r.steps", "message": "must be a non-empty array of steps"}],
        id="steps-empty",
    ),
    pytest.param(
        steps(RETURN, RETURN),
        {"steps_per_route": 1},
        [
            {
                "path": "routes.r.steps",
                "message": "a route has 2 steps; the limit is 1",
                "limit": "steps_per_route",
                "max": 1,
            }
        ],
        id="steps-over-limit",
    ),
    pytest.param(
        steps(RETURN, {"let": "1", "as": "x"}, RETURN),
        {},
        [{"path": "routes.r.steps[1]", "message": "unreachable: it follows a return step"}],
        id="unreachable-after-return",
    ),
    pytest.param(
        steps("get"),
        {},
        [{"path": "routes.r.steps[0]", "message": 'a step must be an object such as {"get": {...}}, got a string'}],
        id="step-not-object",
    ),
    pytest.param(steps({"as": "x"}), {}, [{"path": "routes.r.steps[0]", "message": ONE_OF + "as"}], id="step-no-op"),
    pytest.param(
        steps({"let": "1", "return": "1"}),
        {},
        [{"path": "routes.r.steps[0]", "message": ONE_OF + "let, return"}],
        id="step-two-ops",
    ),
    pytest.param(
        steps({"explode": {}}), {}, [{"path": "routes.r.steps[0]", "message": ONE_OF + "explode"}], id="step-unknown-op"
    ),
    pytest.param(
        steps({"delete": {"collection": "c", "id": "1"}}, kind="query"),
        {},
        [{"path": "routes.r.steps[0].delete", "message": "a query route cannot write; make the route a mutation"}],
        id="write-in-query",
    ),
    pytest.param(
        steps({"fail": {"message": "'no'"}, "as": "x"}),
        {},
        [{"path": "routes.r.steps[0].as", "message": "a fail step binds nothing; remove 'as'"}],
        id="as-on-fail",
    ),
    pytest.param(
        steps({"return": "1", "as": "x"}),
        {},
        [{"path": "routes.r.steps[0].as", "message": "a return step binds nothing; remove 'as'"}],
        id="as-on-return",
    ),
    pytest.param(
        steps({"let": "1", "as": "a-b"}), {}, [{"path": "routes.r.steps[0].as", "message": BAD_NAME}], id="as-not-name"
    ),
    pytest.param(
        steps({"let": "1", "as": 3}), {}, [{"path": "routes.r.steps[0].as", "message": BAD_NAME}], id="as-not-string"
    ),
    pytest.param(
        steps({"let": "1", "as": "params"}),
        {},
        [{"path": "routes.r.steps[0].as", "message": "'params' is reserved; choose another name"}],
        id="as-reserved",
    ),
    pytest.param(
        steps({"let": "1", "as": "null"}),
        {},
        [{"path": "routes.r.steps[0].as", "message": "'null' is reserved; choose another name"}],
        id="as-reserved-keyword",
    ),
    pytest.param(
        steps({"let": "1", "as": "x"}, {"let": "2", "as": "x"}),
        {},
        [{"path": "routes.r.steps[1].as", "message": "'x' is already bound by steps[0]"}],
        id="as-already-bound",
    ),
    pytest.param(
        steps({"let": "1"}),
        {},
        [{"path": "routes.r.steps[0].as", "message": "a let step needs 'as': the name it binds"}],
        id="let-without-as",
    ),
    pytest.param(
        steps({"let": "1 +", "as": "x"}, {"return": "x"}),
        {},
        [
            {
                "path": "routes.r.steps[0].let",
                "message": "syntax error at column 4: mismatched input '<EOF>'" + EXPECTING,
            }
        ],
        id="broken-step-still-binds",
    ),
    pytest.param(
        steps({"let": 1, "as": "x"}),
        {},
        [{"path": "routes.r.steps[0].let", "message": "must be a CEL expression (a string), got integer"}],
        id="expr-not-string",
    ),
    pytest.param(
        steps({"return": "  "}),
        {},
        [{"path": "routes.r.steps[0].return", "message": "must be a CEL expression, got an empty string"}],
        id="expr-empty",
    ),
    pytest.param(
        steps({"return": "1 + 1"}),
        {"expression_length": 3},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "expression is 5 characters long; the limit is 3",
                "limit": "expression_length",
                "max": 3,
            }
        ],
        id="expr-too-long",
    ),
    pytest.param(
        steps({"return": "[[[1]]]"}),
        {"expression_nesting": 2},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "brackets are nested 3 deep; the limit is 2",
                "limit": "expression_nesting",
                "max": 2,
            }
        ],
        id="expr-nested-too-deep",
    ),
    pytest.param(
        steps({"return": "[[1]].map(x, x.map(y, y.map(z, z)))"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "comprehensions (map/filter/all/exists/exists_one) are nested 3 deep; the limit is 2",
                "limit": "comprehension_nesting",
                "max": 2,
            }
        ],
        id="expr-comprehensions-too-deep",
    ),
    pytest.param(
        steps({"return": "1 +* 2"}),
        {},
        [{"path": "routes.r.steps[0].return", "message": "syntax error at column 4: extraneous input '*'" + EXPECTING}],
        id="expr-syntax-error",
    ),
    pytest.param(
        steps({"return": "1 +\n* 2"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "syntax error at line 2, column 1: extraneous input '*'" + EXPECTING,
            }
        ],
        id="expr-syntax-error-line-2",
    ),
    pytest.param(
        steps({"return": "budgt.limit"}),
        {},
        [{"path": "routes.r.steps[0].return", "message": "unknown name(s) budgt; " + SCOPE}],
        id="expr-unknown-name",
    ),
    pytest.param(
        steps({"let": "y", "as": "x"}, {"let": "1", "as": "y"}, {"return": "x"}),
        {},
        [{"path": "routes.r.steps[0].let", "message": "unknown name(s) y; " + SCOPE}],
        id="expr-name-bound-later",
    ),
    # --- type checks when saved (the expression library: routes/library.py) ---
    pytest.param(
        steps({"let": "now", "as": "a"}, {"let": "1", "as": "b"}, {"let": "now.substring(0, 10)", "as": "c"}),
        {},
        [
            {
                "path": "routes.r.steps[2].let",
                "message": "no function 'substring' for a timestamp; did you mean date(now, tz)?",
            }
        ],
        id="type-substring-of-a-timestamp",
    ),
    pytest.param(
        steps({"return": "string([1, 2])"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": STRING_OF_LIST,
            }
        ],
        id="type-string-of-a-list",
    ),
    pytest.param(
        steps({"return": "'total: ' + string({'a': 1})"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": STRING_OF_LIST,
            }
        ],
        id="type-string-of-a-map",
    ),
    pytest.param(
        steps({"return": "nofunc(1)"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "no function 'nofunc' (the library's functions are listed in the authoring guide)",
            }
        ],
        id="type-unknown-function",
    ),
    pytest.param(
        steps({"return": "'Milk'.lower()"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "no function 'lower'; did you mean lowerAscii()? "
                "(the library's functions are listed in the authoring guide)",
            }
        ],
        id="type-unknown-method-from-another-language",
    ),
    pytest.param(
        steps({"return": "math.rnd(2.5)"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "no function 'math.rnd'; did you mean math.round? "
                "(the library's functions are listed in the authoring guide)",
            }
        ],
        id="type-unknown-function-close-to-one",
    ),
    pytest.param(
        steps({"return": "'abc'.substring('a')"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "no function 'substring' for a string with (string); "
                "substring takes string.substring(int) or string.substring(int, int)",
            }
        ],
        id="type-wrong-argument-type",
    ),
    pytest.param(
        steps({"return": "addDays(1, 1)"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "no function 'addDays' for (int, int); addDays takes addDays(string day, int)",
            }
        ],
        id="type-wrong-argument-type-of-a-function",
    ),
    pytest.param(
        steps({"return": "date(now)"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "wrong arguments for date(): it takes date(timestamp, string time zone)",
            }
        ],
        id="type-wrong-argument-count",
    ),
    pytest.param(
        steps({"return": "'abc'.substring(1, 2, 3)"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "wrong arguments for substring(): it takes "
                "string.substring(int) or string.substring(int, int)",
            }
        ],
        id="type-wrong-argument-count-of-a-method",
    ),
    pytest.param(
        steps({"return": "1 + 2.5"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "'+' is not defined for an int and a double; CEL does not mix them: "
                "write 2.0 rather than 2, or convert with double(n) or int(x)",
            }
        ],
        id="type-int-plus-double",
    ),
    pytest.param(
        steps({"return": "'n: ' + size(params)"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "'+' is not defined for a string and an int; convert the other side with string(x) first",
            }
        ],
        id="type-string-plus-int",
    ),
    pytest.param(
        steps({"return": "caller.id.name"}),
        {},
        [
            {
                "path": "routes.r.steps[0].return",
                "message": "a string has no fields (at column 10): '.name' reads a key of a map",
            }
        ],
        id="type-field-of-a-string",
    ),
    pytest.param(
        steps({"let": "1", "as": "x"}, {"return": "x.map(y, y + missing)"}),
        {},
        [{"path": "routes.r.steps[1].return", "message": "unknown name(s) missing; " + SCOPE + ", x"}],
        id="type-unknown-name-in-a-comprehension",
    ),
    pytest.param(
        steps({"get": "c"}),
        {},
        [{"path": "routes.r.steps[0].get", "message": "must be an object with collection, id, default, got string"}],
        id="body-not-object",
    ),
    pytest.param(
        steps({"delete": {"collection": "c", "id": "1", "soft": "true"}}),
        {},
        [{"path": "routes.r.steps[0].delete.soft", "message": "unknown key; delete takes collection, id"}],
        id="body-unknown-key",
    ),
    pytest.param(
        steps({"update": {}}),
        {},
        [
            {"path": "routes.r.steps[0].update.collection", "message": "required"},
            {"path": "routes.r.steps[0].update.id", "message": "required"},
            {"path": "routes.r.steps[0].update.value", "message": "required"},
        ],
        id="body-missing-required",
    ),
    pytest.param(
        steps({"count": {"collection": "a.b"}}),
        {},
        [{"path": "routes.r.steps[0].count.collection", "message": BAD_COLLECTION}],
        id="collection-bad-name",
    ),
    pytest.param(
        steps({"count": {"collection": 1}}),
        {},
        [{"path": "routes.r.steps[0].count.collection", "message": BAD_COLLECTION}],
        id="collection-not-string",
    ),
    pytest.param(
        steps({"sum": {"collection": "c", "field": 1}}),
        {},
        [
            {
                "path": "routes.r.steps[0].sum.field",
                "message": "must be a field name such as 'amount' or 'totals.spent' (not 'id')",
            }
        ],
        id="field-not-string",
    ),
    pytest.param(
        steps({"sum": {"collection": "c", "field": "id"}}),
        {},
        [
            {
                "path": "routes.r.steps[0].sum.field",
                "message": "must be a field name such as 'amount' or 'totals.spent' (not 'id')",
            }
        ],
        id="field-id",
    ),
    pytest.param(
        steps({"sum": {"collection": "c", "field": "a..b"}}),
        {},
        [
            {
                "path": "routes.r.steps[0].sum.field",
                "message": "must be a field name such as 'amount' or 'totals.spent' (not 'id')",
            }
        ],
        id="field-bad-path",
    ),
    pytest.param(
        steps({"increment": {"collection": "c", "id": "'x'", "field": "a.b"}}),
        {},
        [
            {
                "path": "routes.r.steps[0].increment.field",
                "message": "increment works on a top-level field, such as 'spent'",
            }
        ],
        id="increment-nested-field",
    ),
    pytest.param(
        steps({"find": {"collection": "c", "where": ["a"]}, "as": "x"}, {"return": "x"}),
        {},
        [
            {
                "path": "routes.r.steps[0].find.where",
                "message": 'must be an object: {"field": "cel expr", "other": {"gte": "cel expr"}}',
            }
        ],
        id="where-not-object",
    ),
    pytest.param(
        steps({"count": {"collection": "c", "where": {"a b": "1"}}}),
        {},
        [{"path": "routes.r.steps[0].count.where.a b", "message": "must be a field name such as 'category' or 'a.b'"}],
        id="where-bad-field",
    ),
    pytest.param(
        steps({"count": {"collection": "c", "where": {"a": {"like": "1"}}}}),
        {},
        [
            {
                "path": "routes.r.steps[0].count.where.a.like",
                "message": "unknown comparison; use eq, ne, gt, gte, lt, lte, in, contains (and when)",
            }
        ],
        id="where-unknown-comparison",
    ),
    pytest.param(
        steps({"count": {"collection": "c", "where": {"a": {"gt": "nope"}, "b": "nope"}}}),
        {},
        [
            {"path": "routes.r.steps[0].count.where.a.gt", "message": "unknown name(s) nope; " + SCOPE},
            {"path": "routes.r.steps[0].count.where.b", "message": "unknown name(s) nope; " + SCOPE},
        ],
        id="where-bad-expression",
    ),
    pytest.param(
        steps({"find": {"collection": "c", "order_by": []}}),
        {},
        [
            {
                "path": "routes.r.steps[0].find.order_by",
                "message": "must be a field name, '-field' for descending, or an array of them",
            }
        ],
        id="order-by-empty-list",
    ),
    pytest.param(
        steps({"find": {"collection": "c", "order_by": 3}}),
        {},
        [
            {
                "path": "routes.r.steps[0].find.order_by",
                "message": "must be a field name, '-field' for descending, or an array of them",
            }
        ],
        id="order-by-not-list",
    ),
    pytest.param(
        steps({"find": {"collection": "c", "order_by": ["-a", "-", 3]}}),
        {},
        [
            {
                "path": "routes.r.steps[0].find.order_by",
                "message": "'-' is not a field name (use 'amount' or '-amount')",
            },
            {"path": "routes.r.steps[0].find.order_by", "message": "3 is not a field name (use 'amount' or '-amount')"},
        ],
        id="order-by-bad-item",
    ),
    pytest.param(
        steps({"fail": {"when": "true"}}),
        {},
        [{"path": "routes.r.steps[0].fail.message", "message": "required"}],
        id="fail-missing-message",
    ),
    pytest.param(
        steps({"return": {"a": "1"}}),
        {},
        [{"path": "routes.r.steps[0].return", "message": "must be a CEL expression (a string), got object"}],
        id="return-bad-expression",
    ),
]


@pytest.mark.parametrize(("definition", "limits", "expected"), ROWS)
def test_check_definition_reports_exactly_these_problems(definition, limits, expected):
    parts, problems = check_definition(definition, Limits(**limits))
    assert parts is None
    assert [problem.as_dict() for problem in problems] == expected


def test_every_row_has_its_own_name():
    names = [row.id for row in ROWS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    "definition",
    [
        pytest.param(app(), id="minimal"),
        pytest.param(route(input=None), id="input-omitted-is-an-object"),
        pytest.param(route(input={"type": ["object", "null"]}), id="input-type-list-with-object"),
        pytest.param(route(steps=None, handler={"action": "update", "collection": "c"}), id="legacy-handler"),
        pytest.param(
            steps(
                {"find": {"collection": "c", "where": {"a": {"in": "[1]"}}, "order_by": "-a", "limit": "5"}, "as": "f"},
                {"sum": {"collection": "c", "field": "totals.spent"}, "as": "s"},
                {"fail": {"when": "s > 1.0", "message": "'too much'", "details": "{'n': size(f)}"}},
                {"return": "f"},
            ),
            id="every-optional-key",
        ),
    ],
)
def test_a_valid_definition_has_no_problems(definition):
    parts, problems = check_definition(definition, Limits())
    assert problems == []
    assert parts is not None


def test_a_definition_far_over_the_index_limit_is_refused_on_its_count_without_walking_each_index():
    definition = app(collections={"c": {"indexes": [["a"]] * 100_000}})

    _parts, problems = check_definition(definition, Limits())

    assert [(p.path, p.message) for p in problems] == [
        ("collections", "the definition declares 100000 indexes; the limit is 10")
    ]


def test_a_report_lists_a_hundred_problems_then_counts_the_rest():
    definition = app(routes={f"r{i}": {"kind": "query", "steps": "x"} for i in range(150)})

    _parts, problems = check_definition(definition, Limits(routes_per_app=200))

    assert len(problems) == 101
    assert (problems[-1].path, problems[-1].message) == (
        "$",
        "and 50 more problems not listed: fix these and check again",
    )
