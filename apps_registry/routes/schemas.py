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

Two more bounds keep a schema's cost proportional to its size (both declared in routes/limits.py):

- `pattern_nesting`: groups nested in one pattern. Python's `re` (which the save-time checker uses
  for `format: regex`) parses groups recursively, so 3,000 nested groups raised RecursionError;
  the Rust engine refuses more than 250 with an unhelpful "invalid regex".
- `schema_expansion`: the subschemas a schema applies with every `$ref` expanded (`expansion`). A
  `$ref` costs nothing to write but its target's whole size to run, so twenty `$defs` that each
  reference the next twice through `allOf` are 2^20 subschemas for one value: one call with
  invalid params took 87 s. The count follows the keywords that apply a subschema at the same
  place in the value (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`,
  `$ref`) and the ones that descend into it (`properties`, `items`, ...), one place at a time, to
  the value nesting limit, so a recursive schema (a tree) counts each distinct place once while
  one that doubles at every level is refused. A `$ref` that comes back to itself without
  descending is a loop and refused.

At call time a validator lists at most MAX_ERRORS errors, then how many more there are; when the
errors could be too many to count cheaply (jsonschema-rs builds every error before handing out
the first), it lists the first and says more may follow.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import jsonschema
import jsonschema_rs

from apps_registry.routes.limits import Limits, current_limits
from apps_registry.values import type_name

MAX_ERRORS = 50
# Errors one validation may build to list and count them (each costs jsonschema-rs ~10 us): past this estimate
# only the first is listed. The estimate is the value's items times the most subschemas applied at one place.
ERROR_SCAN_BUDGET = 20_000
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


def pattern_nesting(pattern: str) -> int:
    """How deeply groups nest in `pattern`: `(` not escaped and not in a character class."""
    depth = deepest = 0
    in_class = escaped = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(depth - 1, 0)
    return deepest


def _patterns_in(schema: Any) -> list[tuple[str, str]]:
    """(where, pattern) for every `pattern` and `patternProperties` key in `schema`, without recursion."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                where = f"{path}/{key}"
                if key == "pattern" and isinstance(item, str):
                    found.append((where, item))
                    continue
                if key == "patternProperties" and isinstance(item, dict):
                    found.extend((where, name) for name in item if isinstance(name, str))
                if key not in _DATA_KEYWORDS:
                    stack.append((item, where))
        elif isinstance(value, list):
            stack.extend((item, f"{path}/{index}") for index, item in enumerate(value))
    return sorted(found)


class LimitProblem(str):
    """A problem message that names the engine limit it is over (`limit`, `max`), which the compiler puts on the
    definition's problem as the other limit problems have them. Compares and prints as its message."""

    limit: str
    max: int

    def __new__(cls, message: str, *, limit: str, max: int) -> LimitProblem:
        problem = super().__new__(cls, message)
        problem.limit = limit
        problem.max = max
        return problem


def _pattern_nesting_problems(schema: Any, limits: Limits) -> list[str]:
    problems: list[str] = []
    for where, pattern in _patterns_in(schema):
        depth = pattern_nesting(pattern)
        if depth > limits.pattern_nesting:
            problems.append(
                LimitProblem(
                    f"is not usable at {where}: pattern {pattern[:100]!r} nests groups {depth} deep; the limit is "
                    f"{limits.pattern_nesting} (pattern_nesting, CHARMING_ROUTES_MAX_PATTERN_NESTING)",
                    limit="pattern_nesting",
                    max=limits.pattern_nesting,
                )
            )
    return problems


def schema_problems(schema: Any, limits: Limits | None = None) -> list[str]:
    """Why `schema` is not a valid Draft 2020-12 JSON Schema within the limits (empty when it is)."""
    if not isinstance(schema, (dict, bool)):
        return [f"must be a JSON Schema (an object), got {type_name(schema)}"]
    try:
        return _schema_problems(schema, limits or current_limits())
    except RecursionError:
        # Defence in depth: the nesting limits above should make this unreachable; a checker that recursed too
        # deeply still gets a clear refusal, not a traceback.
        return ["is nested too deeply to check (a pattern, or the schema itself); simplify it"]


def _schema_problems(schema: dict[str, Any] | bool, limits: Limits) -> list[str]:
    # Before the checker, which compiles each pattern with Python's recursive `re` parser.
    nested = _pattern_nesting_problems(schema, limits)
    if nested:
        return nested
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
    except Exception as exc:  # e.g. a reference to nothing, or a pattern the Rust regex engine cannot compile
        return [f"is not usable: {_clip_message(str(exc))}"]
    try:
        expansion(schema, limits)
    except SchemaTooLarge as exc:
        if not exc.over_limit:
            return [str(exc)]
        return [LimitProblem(str(exc), limit="schema_expansion", max=limits.schema_expansion)]
    return []


class ValidationErrors(list[dict[str, str]]):
    """The errors a validator lists, and `total`: how many the value has (None when only the first was looked
    for). Past MAX_ERRORS the list ends with one entry saying how many more, so its length is not the count."""

    def __init__(self, entries: list[dict[str, str]] = (), *, total: int | None) -> None:  # type: ignore[assignment]
        super().__init__(entries)
        self.total = total


class SchemaValidator:
    """A compiled validator that reports violations as {"path": "$.a[0]", "message": ...}: the first
    MAX_ERRORS, then one saying how many more (see the module's docstring)."""

    def __init__(self, schema: dict[str, Any] | bool) -> None:
        self._validator = _build_validator(schema)
        try:
            self._widest = expansion(schema, current_limits()).widest
        except (SchemaTooLarge, RecursionError):  # saved under other limits: assume the worst for the estimate
            self._widest = ERROR_SCAN_BUDGET

    def errors(self, instance: Any) -> ValidationErrors:
        try:
            return self._errors(instance)
        except RecursionError:  # defence in depth: params and values are nested no deeper than their limit
            return ValidationErrors(
                [{"path": "$", "message": "the value is nested too deeply to check against the schema"}], total=1
            )

    def _errors(self, instance: Any) -> ValidationErrors:
        if _items_within(instance, ERROR_SCAN_BUDGET // max(self._widest, 1)):
            # Every error, in one pass (is_valid first would run every pattern twice on a failing value).
            found: list[dict[str, str]] = []
            more = 0
            for error in self._validator.iter_errors(instance):
                if len(found) < MAX_ERRORS:
                    found.append(_error_entry(error))
                else:
                    more += 1
            total = len(found) + more
            if more:
                found.append({"path": "$", "message": f"and {more} more errors not listed"})
            return ValidationErrors(found, total=total)
        # Too many errors may be possible to build them all: the first one only (validate stops at it).
        try:
            self._validator.validate(instance)
        except jsonschema_rs.ValidationError as error:
            return ValidationErrors(
                [
                    _error_entry(error),
                    {"path": "$", "message": "further errors may follow, not checked: fix this one and send it again"},
                ],
                total=None,
            )
        return ValidationErrors([], total=0)


def _error_entry(error: Any) -> dict[str, str]:
    return {"path": json_path(error.instance_path), "message": _clip_message(_worded(error))}


def _worded(error: Any) -> str:
    """jsonschema-rs's message, with its one misleading wording fixed: an exclusive bound says so ("-3.0 is less
    than or equal to the exclusive minimum of 0", where jsonschema-rs says "the minimum of 0")."""
    message = str(error.message)
    kind = type(error.kind).__name__
    if kind == "ExclusiveMinimum":
        return message.replace("the minimum of", "the exclusive minimum of")
    if kind == "ExclusiveMaximum":
        return message.replace("the maximum of", "the exclusive maximum of")
    return message


def _items_within(value: Any, budget: int) -> bool:
    """Whether `value` holds at most `budget` items (scalars, lists, maps and keys), counted until it passes."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        if count > budget:
            return False
    return True


class SchemaTooLarge(Exception):
    """A schema over `schema_expansion`, or one whose `$ref`s loop in place; the message says where, and
    `over_limit` whether it is the limit (a loop is refused whatever the limit)."""

    def __init__(self, message: str, *, over_limit: bool = True) -> None:
        super().__init__(message)
        self.over_limit = over_limit


@dataclass(frozen=True)
class Expansion:
    """What a schema applies with every `$ref` expanded: `total` subschemas over the distinct places of a value,
    and `widest`, the most applied at any one place."""

    total: int
    widest: int


# Keywords whose subschemas apply at the same place in the value, and those that descend into it.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")  # `dependencies`: draft 7, for a schema naming $schema
_ANY_PROPERTY = ("additionalProperties", "unevaluatedProperties")
_ANY_ITEM = ("contains", "unevaluatedItems", "additionalItems")
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")

Node = tuple[str | int, ...]  # where a subschema is, as JSON pointer segments


def expansion(schema: Any, limits: Limits) -> Expansion:
    """The size of `schema` with its `$ref`s expanded, or SchemaTooLarge past `limits.schema_expansion`."""
    return _Expander(schema, limits).run()


class _Expander:
    def __init__(self, schema: Any, limits: Limits) -> None:
        self.root = schema
        self.limit = limits.schema_expansion
        self.depth = limits.value_nesting
        self.anchors = _anchors(schema)
        self.closures: dict[Node, Counter[Node]] = {}

    def run(self) -> Expansion:
        total = widest = 0
        seen: dict[frozenset[tuple[Node, int]], int] = {}  # a place's subschemas -> the most levels left below it
        stack: list[tuple[Counter[Node], str, int]] = [(self.closure(()), "$", 1)]
        while stack:
            state, where, level = stack.pop()
            key = frozenset(state.items())
            left = self.depth - level
            if key in seen and seen[key] >= left:
                continue
            if key not in seen:
                size = sum(state.values())
                total += size
                widest = max(widest, size)
                if total > self.limit:
                    what = f"applies more than {self.limit} subschemas (reaching {where})"
                    raise SchemaTooLarge(self._too_large(what))
            seen[key] = left
            if left > 0:
                stack.extend((child, where + label, level + 1) for label, child in self.children(state) if child)
        return Expansion(total=total, widest=widest)

    def _too_large(self, what: str) -> str:
        return (
            f"is too large with its $refs expanded: it {what}; the limit is {self.limit} (schema_expansion, "
            "CHARMING_ROUTES_MAX_SCHEMA_EXPANSION). A $ref counts as its target's whole size each time it is used: "
            "refer to a definition once, not from several branches of allOf/anyOf/oneOf"
        )

    def node(self, where: Node) -> Any:
        value = self.root
        for part in where:
            value = value[part]  # type: ignore[index]
        return value

    def in_place(self, where: Node) -> list[Node]:
        schema = self.node(where)
        if not isinstance(schema, dict):
            return []
        found: list[Node] = []
        for key in _IN_PLACE_ONE:
            if key in schema:
                found.append((*where, key))
        for key in _IN_PLACE_LISTS:
            if isinstance(schema.get(key), list):
                found.extend((*where, key, index) for index in range(len(schema[key])))
        for key in _IN_PLACE_MAPS:
            if isinstance(schema.get(key), dict):
                found.extend((*where, key, name) for name, sub in schema[key].items() if isinstance(sub, dict | bool))
        for key in _REFERENCES:
            target = self.resolve(schema.get(key))
            if target is not None:
                found.append(target)
        return found

    def resolve(self, reference: Any) -> Node | None:
        """The node a local reference names ("#", "#/json/pointer", "#anchor"); None for anything else."""
        if not isinstance(reference, str) or not reference.startswith("#"):
            return None
        fragment = unquote(reference[1:])
        if fragment and not fragment.startswith("/"):
            return self.anchors.get(fragment)
        where: list[str | int] = []
        value = self.root
        for raw in fragment.split("/")[1:] if fragment else []:
            part: str | int = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(value, list) and isinstance(part, str) and part.isdigit():
                part = int(part)
            try:
                value = value[part]  # type: ignore[index]
            except (KeyError, IndexError, TypeError):
                return None
            where.append(part)
        return tuple(where)

    def closure(self, start: Node) -> Counter[Node]:
        """Every subschema `start` applies at its place, with multiplicity (iterative: chains may be long)."""
        if start in self.closures:
            return self.closures[start]
        active: set[Node] = set()
        stack: list[tuple[Node, bool]] = [(start, False)]
        while stack:
            where, finished = stack.pop()
            if where in self.closures:
                continue
            if finished:
                found: Counter[Node] = Counter({where: 1})
                for child in self.in_place(where):
                    found.update(self.closures[child])
                active.discard(where)
                if sum(found.values()) > self.limit:
                    what = f"applies more than {self.limit} subschemas at {_pointer(where)}"
                    raise SchemaTooLarge(self._too_large(what))
                self.closures[where] = found
                continue
            active.add(where)
            stack.append((where, True))
            for child in self.in_place(where):
                if child in active:
                    raise SchemaTooLarge(
                        f"is not usable at {_pointer(where)}: it applies {_pointer(child)} again at the same place "
                        "in the value (its $refs loop without descending into the value)",
                        over_limit=False,
                    )
                if child not in self.closures:
                    stack.append((child, False))
        return self.closures[start]

    def children(self, state: Counter[Node]) -> list[tuple[str, Counter[Node]]]:
        """The subschemas applied one level down, by the place they apply to: each property named by some
        `properties`, any other property, the property names, each position named by some `prefixItems`, any
        other position. Patterns are taken to match every name (an overestimate, never an underestimate)."""
        schemas = [(where, count, self.node(where)) for where, count in state.items()]
        schemas = [(where, count, schema) for where, count, schema in schemas if isinstance(schema, dict)]
        names = sorted({name for _w, _c, schema in schemas for name in _mapping(schema, "properties")})
        positions = max((_prefix(schema)[1] for _w, _c, schema in schemas), default=0)
        places: list[tuple[str, Counter[Node]]] = []
        for name in [*names, None]:
            found: Counter[Node] = Counter()
            for where, count, schema in schemas:
                targets = [(*where, "patternProperties", p) for p in _mapping(schema, "patternProperties")]
                if name is not None and name in _mapping(schema, "properties"):
                    targets.append((*where, "properties", name))
                else:
                    targets.extend((*where, key) for key in _ANY_PROPERTY if key in schema)
                self._add(found, targets, count)
            places.append((f".{name}" if name is not None else ".*", found))
        names_found: Counter[Node] = Counter()
        for where, count, schema in schemas:
            self._add(names_found, [(*where, "propertyNames")] if "propertyNames" in schema else [], count)
        places.append(("(a property name)", names_found))
        for position in [*range(positions), None]:
            found = Counter()
            for where, count, schema in schemas:
                key, length = _prefix(schema)
                targets = [(*where, any_item) for any_item in _ANY_ITEM if any_item in schema]
                if position is not None and position < length:
                    targets.append((*where, key, position))
                elif isinstance(schema.get("items"), dict | bool):
                    targets.append((*where, "items"))
                self._add(found, targets, count)
            places.append((f"[{position}]" if position is not None else "[*]", found))
        return places

    def _add(self, found: Counter[Node], targets: list[Node], count: int) -> None:
        for target in targets:
            for where, times in self.closure(target).items():
                found[where] += times * count
        if sum(found.values()) > self.limit:
            raise SchemaTooLarge(self._too_large(f"applies more than {self.limit} subschemas at one place"))


def _mapping(schema: dict[str, Any], key: str) -> dict[str, Any]:
    value = schema.get(key)
    return value if isinstance(value, dict) else {}


def _prefix(schema: dict[str, Any]) -> tuple[str, int]:
    """("prefixItems", n) or, in a draft-7 schema, ("items", n): the positional item schemas (n = 0 when none)."""
    for key in ("prefixItems", "items"):
        if isinstance(schema.get(key), list):
            return (key, len(schema[key]))
    return ("prefixItems", 0)


def _anchors(schema: Any) -> dict[str, Node]:
    found: dict[str, Node] = {}
    stack: list[tuple[Any, Node]] = [(schema, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(value.get(key), str):
                    found.setdefault(value[key], where)
            stack.extend((item, (*where, key)) for key, item in value.items() if key not in _DATA_KEYWORDS)
        elif isinstance(value, list):
            stack.extend((item, (*where, index)) for index, item in enumerate(value))
    return found


def _pointer(where: Node) -> str:
    return "/" + "/".join(str(part) for part in where) if where else "the schema's root"


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
