"""The author format v1: checking a whole app definition (every problem, with its path) and
compiling one route into steps holding compiled CEL programs and schema validators."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps_registry.routes.authortests import AuthorTest, check_tests
from apps_registry.routes.expressions import CONTEXT_NAMES, Expr, compile_expression
from apps_registry.routes.hints import HINT_KEYS, hint_problems, hints_of
from apps_registry.routes.library import CONTEXT_DECLARATIONS
from apps_registry.routes.limits import Limits
from apps_registry.routes.schemas import SchemaValidator, number_paths, schema_problems
from apps_registry.routes.steps import FIELD_PATH, NAME, STEP_KINDS, Step, bad_name
from apps_registry.routes.types import Problem
from apps_registry.values import json_repr, type_name

RESERVED_NAMES = frozenset(CONTEXT_NAMES) | {"true", "false", "null", "in", "as", "break", "const", "continue"}
ROUTE_KEYS = ("kind", "description", "input", "output", "steps", "handler", *HINT_KEYS)
LEGACY_ACTIONS = ("insert", "update", "delete")
DEFAULT_INPUT: dict[str, Any] = {"type": "object"}
INDEX_FIELDS = 4  # fields in one declared index
PROBLEMS_LISTED = 100  # problems one check reports by name (then a count of the rest)


@dataclass
class CompiledRoute:
    name: str
    kind: str
    steps: list[Step]
    input_validator: SchemaValidator
    output_validator: SchemaValidator | None
    input_numbers: Any


@dataclass
class RouteParts:
    """One route of a definition, as stored on the Route model."""

    name: str
    kind: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    body: dict[str, Any]  # {"steps": [...]} or {"handler": {...}}, exactly as written
    steps: list[Step] = field(default_factory=list)
    hints: dict[str, Any] = field(default_factory=dict)  # presentation hints for the pages (routes/hints.py)


@dataclass
class DefinitionParts:
    name: str
    description: str
    collections: dict[str, Any]
    routes: dict[str, RouteParts]
    tests: list[AuthorTest] = field(default_factory=list)


def legacy_steps(handler: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps equivalent to a legacy `handler` (one action; the params are the record)."""
    collection, action = handler.get("collection"), handler.get("action")
    if action == "insert":
        return [{"insert": {"collection": collection, "value": "params"}, "as": "record"}, {"return": "record"}]
    if action == "update":
        return [
            {"update": {"collection": collection, "id": "params.id", "value": "params"}, "as": "record"},
            {"return": "record"},
        ]
    return [
        {"delete": {"collection": collection, "id": "params.id"}, "as": "record"},
        {"return": "record"},
    ]


def _listed(problems: list[Problem]) -> list[Problem]:
    """At most PROBLEMS_LISTED problems, then one saying how many more: a definition repeating one mistake
    100,000 times gets a report of a readable size, not 100,000 lines."""
    if len(problems) <= PROBLEMS_LISTED:
        return problems
    more = len(problems) - PROBLEMS_LISTED
    return [
        *problems[:PROBLEMS_LISTED],
        Problem("$", f"and {more} more problems not listed: fix these and check again"),
    ]


def check_definition(definition: Any, limits: Limits) -> tuple[DefinitionParts | None, list[Problem]]:
    """Check a whole app definition; return its parts and every problem found (with paths)."""
    problems: list[Problem] = []
    if not isinstance(definition, dict):
        return None, [Problem("$", f"an app definition must be a JSON object, got {json_type(definition)}")]
    unknown = sorted(set(definition) - {"name", "description", "collections", "routes", "format", "tests"})
    if unknown:
        problems.append(
            Problem(
                "$",
                f"unknown key(s) {', '.join(unknown)}; allowed: name, description, collections, routes, format, tests",
            )
        )
    if definition.get("format", 1) != 1:
        problems.append(
            Problem("format", f"unsupported format {json_repr(definition.get('format'))}; this server reads 1")
        )
    name = definition.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        problems.append(Problem("name", "required: the app's name, a non-empty string of at most 200 characters"))
    description = definition.get("description", "")
    if not isinstance(description, str):
        problems.append(Problem("description", "must be a string"))
        description = ""
    collections = definition.get("collections", {})
    if not isinstance(collections, dict):
        problems.append(Problem("collections", 'must be an object: {"expenses": {}, ...}'))
        collections = {}
    indexes = 0
    for cname, spec in collections.items():
        if not NAME.match(cname):
            problems.append(Problem(f"collections.{cname}", bad_name("a collection name")))
        if not isinstance(spec, dict):
            problems.append(Problem(f"collections.{cname}", "must be an object (it may be empty: {})"))
            continue
        declared = spec.get("indexes")
        if isinstance(declared, list) and indexes + len(declared) > limits.indexes_per_app:
            indexes += len(declared)  # counted, not walked: over the limit, that alone refuses the definition
            continue
        indexes += _check_collection(cname, spec, problems)
    if indexes > limits.indexes_per_app:
        problems.append(
            Problem(
                "collections",
                f"the definition declares {indexes} indexes; the limit is {limits.indexes_per_app}",
                limit="indexes_per_app",
                max=limits.indexes_per_app,
            )
        )
    raw_routes = definition.get("routes")
    routes: dict[str, RouteParts] = {}
    if not isinstance(raw_routes, dict) or not raw_routes:
        problems.append(Problem("routes", "required: an object mapping route names to routes, with at least one"))
    elif len(raw_routes) > limits.routes_per_app:
        problems.append(
            Problem(
                "routes",
                f"the app has {len(raw_routes)} routes; the limit is {limits.routes_per_app}",
                limit="routes_per_app",
                max=limits.routes_per_app,
            )
        )
    else:
        for rname, raw in raw_routes.items():
            parts = check_route(rname, raw, limits, problems, prefix=f"routes.{rname}")
            if parts is not None:
                routes[rname] = parts
        problems.extend(Problem(p["path"].removeprefix("$."), p["message"]) for p in hint_problems(definition))
    route_kinds = (
        {str(rname): str(raw.get("kind")) for rname, raw in raw_routes.items() if isinstance(raw, dict)}
        if isinstance(raw_routes, dict)
        else {}
    )

    def report(path: str, message: str, limit: str | None = None, max: int | None = None) -> None:
        problems.append(Problem(path, message, limit, max))

    tests = check_tests(definition.get("tests"), route_kinds, report, limits)
    if problems:
        return None, _listed(problems)
    assert isinstance(name, str)
    return (
        DefinitionParts(
            name=name.strip(), description=description, collections=collections, routes=routes, tests=tests
        ),
        [],
    )


def _check_collection(name: str, spec: dict[str, Any], problems: list[Problem]) -> int:
    """Check one collection's options (`indexes`, `hidden`); returns how many indexes it declares."""
    path = f"collections.{name}"
    unknown = sorted(set(spec) - {"indexes", "hidden"})
    if unknown:
        problems.append(Problem(path, f"unknown key(s) {', '.join(unknown)}; a collection takes: indexes, hidden"))
    if "hidden" in spec and not isinstance(spec["hidden"], bool):
        # A presentation hint: a hidden collection is left off the app's page (routes still use it).
        problems.append(Problem(f"{path}.hidden", f"must be true or false, got {json_repr(spec['hidden'])}"))
    indexes = spec.get("indexes", [])
    shape = 'must be an array of indexes, each an array of field names: [["habit_id", "date"], ["email"]]'
    if not isinstance(indexes, list):
        problems.append(Problem(f"{path}.indexes", shape))
        return 0
    seen: dict[tuple[str, ...], int] = {}
    for i, fields in enumerate(indexes):
        where = f"{path}.indexes[{i}]"
        if not isinstance(fields, list) or not fields:
            problems.append(Problem(where, shape))
            continue
        if len(fields) > INDEX_FIELDS:
            problems.append(Problem(where, f"an index has at most {INDEX_FIELDS} fields, got {len(fields)}"))
            continue
        good = True
        for j, field_name in enumerate(fields):
            if not isinstance(field_name, str) or not FIELD_PATH.match(field_name) or field_name == "id":
                problems.append(
                    Problem(
                        f"{where}[{j}]",
                        "must be a field name such as 'habit_id' or 'meta.date' (not 'id': records are always "
                        "indexed by id)",
                    )
                )
                good = False
        if not good:
            continue
        if len(set(fields)) != len(fields):
            problems.append(Problem(where, "names a field more than once"))
            continue
        if tuple(fields) in seen:
            problems.append(Problem(where, f"is the same index as {path}.indexes[{seen[tuple(fields)]}]"))
            continue
        seen[tuple(fields)] = i
    return len(indexes)


def check_route(name: str, raw: Any, limits: Limits, problems: list[Problem], *, prefix: str) -> RouteParts | None:
    before = len(problems)
    if not NAME.match(name):
        problems.append(Problem(prefix, bad_name("a route name")))
    if not isinstance(raw, dict):
        problems.append(Problem(prefix, f"a route must be an object, got {json_type(raw)}"))
        return None
    unknown = sorted(set(raw) - set(ROUTE_KEYS))
    if unknown:
        problems.append(Problem(prefix, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(ROUTE_KEYS)}"))
    kind = raw.get("kind")
    if kind not in ("query", "mutation"):
        problems.append(Problem(f"{prefix}.kind", f"must be 'query' or 'mutation', got {json_repr(kind)}"))
    description = raw.get("description", "")
    if not isinstance(description, str):
        problems.append(Problem(f"{prefix}.description", "must be a string"))
    input_schema = raw.get("input", DEFAULT_INPUT)
    if _schema_ok(input_schema, f"{prefix}.input", limits, problems):
        found = schema_problems(input_schema)
        for message in found:
            problems.append(_schema_problem(f"{prefix}.input", message))
        declared = input_schema.get("type", "object")
        if not found and declared != "object" and not (isinstance(declared, list) and "object" in declared):
            problems.append(
                Problem(
                    f"{prefix}.input.type",
                    f"params are always a JSON object, so 'input' must describe one: "
                    f'"type": "object" (got {json_repr(declared)})',
                )
            )
    output_schema = raw.get("output")
    if output_schema is not None and _schema_ok(output_schema, f"{prefix}.output", limits, problems):
        for message in schema_problems(output_schema):
            problems.append(_schema_problem(f"{prefix}.output", message))
    has_steps, has_handler = "steps" in raw, "handler" in raw
    body: dict[str, Any] = {}
    steps: list[Step] = []
    if has_steps == has_handler:
        problems.append(Problem(prefix, "a route needs exactly one of 'steps' (an array) or the legacy 'handler'"))
    elif has_handler:
        handler = raw["handler"]
        body = {"handler": handler}
        if not isinstance(handler, dict) or set(handler) != {"action", "collection"}:
            problems.append(
                Problem(f"{prefix}.handler", 'must be {"action": "insert|update|delete", "collection": "..."}')
            )
        else:
            if handler["action"] not in LEGACY_ACTIONS:
                problems.append(
                    Problem(
                        f"{prefix}.handler.action",
                        f"must be insert, update or delete, got {json_repr(handler['action'])}",
                    )
                )
            if not isinstance(handler["collection"], str) or not NAME.match(handler["collection"]):
                problems.append(Problem(f"{prefix}.handler.collection", bad_name("a collection name")))
            if kind == "query":
                problems.append(Problem(f"{prefix}.handler", "a legacy handler writes: its route must be a mutation"))
        if len(problems) == before:
            steps = parse_steps(name, str(kind), legacy_steps(handler), limits, problems, prefix=f"{prefix}.handler")
    else:
        body = {"steps": raw["steps"]}
        steps = parse_steps(name, str(kind), raw["steps"], limits, problems, prefix=prefix)
    if len(problems) > before:
        return None
    return RouteParts(
        name=name,
        kind=str(kind),
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        body=body,
        steps=steps,
        hints=hints_of(raw),
    )


def _schema_problem(path: str, message: str) -> Problem:
    """A schema's problem; one over a limit (routes/schemas.py LimitProblem) names it, as other limit problems do."""
    return Problem(path, message, limit=getattr(message, "limit", None), max=getattr(message, "max", None))


def _schema_ok(schema: Any, path: str, limits: Limits, problems: list[Problem]) -> bool:
    """A route's schema must be a JSON object (get_app's contract publishes it as one) nested no deeper
    than the limit (checked without recursion, before the schema checker recurses into it)."""
    if not isinstance(schema, dict):
        problems.append(
            Problem(path, f'must be a JSON Schema object, e.g. {{"type": "object"}}; got {json_type(schema)}')
        )
        return False
    stack: list[tuple[Any, str, int]] = [(schema, path, 1)]
    while stack:
        value, where, depth = stack.pop()
        if depth > limits.schema_nesting:
            problems.append(
                Problem(
                    where,
                    f"the schema is nested more than {limits.schema_nesting} levels deep here; "
                    f"the limit is {limits.schema_nesting}",
                    limit="schema_nesting",
                    max=limits.schema_nesting,
                )
            )
            return False
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    return True


def json_type(value: Any) -> str:
    """A JSON value's type in JSON's words, with its article: "an object", "an array", "the boolean true"."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    name = type_name(value)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def parse_steps(
    route: str,
    kind: str,
    raw_steps: Any,
    limits: Limits,
    problems: list[Problem],
    *,
    prefix: str,
    bound: dict[str, int] | None = None,
    at: str = "",
) -> list[Step]:
    """Parse and compile a route's steps (or a for_each's: `at` is where they are, `bound` the names bound
    around them), appending every problem found."""
    if not isinstance(raw_steps, list) or not raw_steps:
        problems.append(Problem(f"{prefix}.steps", "must be a non-empty array of steps"))
        return []
    if len(raw_steps) > limits.steps_per_route:
        problems.append(
            Problem(
                f"{prefix}.steps",
                f"a route has {len(raw_steps)} steps; the limit is {limits.steps_per_route}",
                limit="steps_per_route",
                max=limits.steps_per_route,
            )
        )
        return []
    bound = dict(bound or {})
    steps: list[Step] = []
    for index, raw in enumerate(raw_steps):
        path = f"{prefix}.steps[{index}]"
        if steps and steps[-1].kind.ends and steps[-1].when is None:
            problems.append(Problem(path, "unreachable: it follows a return step"))
            break
        step = _parse_step(route, kind, raw, index, path, bound, limits, problems, at=f"{at}steps[{index}]")
        if step is not None:
            steps.append(step)
            if step.as_name:
                bound[step.as_name] = index
        elif isinstance(raw, dict) and isinstance(raw.get("as"), str):
            # Bind the name anyway, so one broken step does not cascade into "unknown name" reports.
            bound.setdefault(raw["as"], index)
    return steps


def _parse_step(
    route: str,
    kind: str,
    raw: Any,
    index: int,
    path: str,
    bound: dict[str, int],
    limits: Limits,
    problems: list[Problem],
    *,
    at: str,
) -> Step | None:
    """The step envelope (one kind's key, `as` and `when`); the kind parses its own body."""
    if not isinstance(raw, dict):
        problems.append(Problem(path, f'a step must be an object such as {{"get": {{...}}}}, got {json_type(raw)}'))
        return None
    ops = [key for key in raw if key in STEP_KINDS]
    unknown = sorted(set(raw) - set(STEP_KINDS) - {"as", "when"})
    if unknown or len(ops) != 1:
        problems.append(
            Problem(
                path,
                f"a step has exactly one of {', '.join(STEP_KINDS)} (and optionally 'as' and 'when'); "
                f"found keys {', '.join(raw)}",
            )
        )
        return None
    op = ops[0]
    step_kind = STEP_KINDS[op]
    step = Step(index=index, kind=step_kind, at=at)
    before = len(problems)
    if step_kind.writes and kind == "query":
        problems.append(Problem(f"{path}.{op}", "a query route cannot write; make the route a mutation"))
    as_name = raw.get("as")
    if as_name is not None:
        if step_kind.binding == "none":
            problems.append(Problem(f"{path}.as", f"a {op} step binds nothing; remove 'as'"))
        elif not isinstance(as_name, str) or not NAME.match(as_name):
            problems.append(Problem(f"{path}.as", bad_name("a name")))
        elif as_name in RESERVED_NAMES:
            problems.append(Problem(f"{path}.as", f"'{as_name}' is reserved; choose another name"))
        elif as_name in bound:
            problems.append(Problem(f"{path}.as", f"'{as_name}' is already bound by steps[{bound[as_name]}]"))
        else:
            step.as_name = as_name
    elif step_kind.binding == "required":
        problems.append(Problem(f"{path}.as", f"a {op} step needs 'as': the name it binds"))
    parser = _StepParser(route, kind, step, path, bound, limits, problems)
    if "when" in raw:
        step.when = parser.expression(raw["when"], "when")
        if step.when is not None and step.when.type not in ("bool", "dyn"):
            problems.append(Problem(f"{path}.when", f"must be a condition (a boolean), but it gives {step.when.type}"))
    step_kind.parse(step, raw[op], path, parser)
    return step if len(problems) == before else None


class _StepParser:
    """What a step kind's `parse` reports problems to, and compiles its expressions with."""

    def __init__(
        self,
        route: str,
        kind: str,
        step: Step,
        path: str,
        bound: dict[str, int],
        limits: Limits,
        problems: list[Problem],
    ) -> None:
        self.route, self.kind, self.step, self.path, self.bound = route, kind, step, path, bound
        self.limits, self.problems = limits, problems
        self.scope = set(CONTEXT_NAMES) | set(bound)

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def steps(self, raw: Any, where: str, names: tuple[str, ...]) -> list[Step]:
        bound = dict(self.bound)
        for name in names:
            at = f"{self.path}.{where.rsplit('.', 1)[0]}.as"
            if name in RESERVED_NAMES:
                self.problems.append(Problem(at, f"'{name}' is reserved; choose another name"))
            elif name in bound:
                self.problems.append(Problem(at, f"'{name}' is already bound by steps[{bound[name]}]"))
            bound[name] = self.step.index
        before = len(self.problems)
        steps = parse_steps(
            self.route,
            self.kind,
            raw,
            self.limits,
            self.problems,
            prefix=f"{self.path}.{where.rsplit('.', 1)[0]}",
            bound=bound,
            at=f"{self.step.at}.{where.rsplit('.', 1)[0]}.",
        )
        if len(self.problems) == before:
            for inner in steps:
                self.step.uses |= inner.uses & set(self.bound)
        return steps

    def expression(self, source: Any, where: str) -> Expr | None:
        expr, found = compile_expression(
            source,
            limits=self.limits,
            context=CONTEXT_DECLARATIONS,
            bound=set(self.bound),
            route=self.route,
            where=f"{self.step.at}.{where}",
        )
        for problem in found:
            self.problems.append(Problem(f"{self.path}.{where}", problem.message, problem.limit, problem.max))
        if expr is not None:
            self.step.uses |= set(expr.names) & set(self.bound)
            if expr.params_fields is None:
                self.step.params_read = None
            elif self.step.params_read is not None:
                self.step.params_read |= expr.params_fields
        return expr


def compile_parts(parts: RouteParts) -> CompiledRoute:
    """Build the run-time form of a checked route: its validators and the number-coercion map."""
    return CompiledRoute(
        name=parts.name,
        kind=parts.kind,
        steps=parts.steps,
        input_validator=SchemaValidator(parts.input_schema),
        output_validator=SchemaValidator(parts.output_schema) if parts.output_schema is not None else None,
        input_numbers=number_paths(parts.input_schema),
    )
