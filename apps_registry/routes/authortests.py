"""Author tests: the optional `tests` list of a definition, checked with the rest of it (every problem
with its path) and run against the real engine, each test on a store of its own that the caller
throws away (services/definitions.py gives each one a scratch storage in a rolled-back transaction).

A test names a route, its params, the records present before it (per collection) and what it must
give: a value (matched as a pattern: an object matches when every key it lists matches, so generated
ids and timestamps can be left out; lists match item by item and must have the same length), or an
error kind and optionally a fragment of its message. A mutation's test may also list the records
each collection must hold afterwards (in insertion order, matched the same way).

A collection's records before the call may instead be generated, so a test can run at a realistic size:
`{"generate": 2000, "like": {"title": "'Book ' + string(i)", "year": "2000 + i % 25"}}` makes 2000
records, each field the value of its CEL expression for `i` = 0, 1, ... 1999 (a field `id`, if given, is
the record's id). They are generated when the definition is checked, so every problem (an expression
that fails for some `i`, a duplicate id, a record too large, the limits on how many and how large) is a
problem of the definition with its path; the scratch store receives them in one bulk insert.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from apps_registry.exceptions import CharmingError, HandlerError, OperationFailed
from apps_registry.routes import library
from apps_registry.routes.expressions import (
    check_source,
    compile_expression,
    evaluation_failure,
    referenced_names,
    to_json,
)
from apps_registry.routes.limits import Limits
from apps_registry.routes.migrate import Migration, check_migration
from apps_registry.routes.steps import NAME
from apps_registry.routes.store import encoded_record
from apps_registry.values import clip, json_repr, text_problems

MAX_TESTS = 50
MAX_RECORDS_PER_TEST = 200
TEST_KEYS = ("name", "route", "migrate", "params", "now", "records", "expect", "records_after")
EXPECT_KEYS = ("value", "error", "message")
GENERATE_KEYS = ("generate", "like")
RECORD_ID_CHARS = 200  # the longest record id the records table holds
_SHOWN = 500  # characters of a value quoted in a failure message


class Report(Protocol):
    """Where problems go: a path, a message, and the limit a problem is about (if any)."""

    def __call__(self, path: str, message: str, limit: str | None = None, max: int | None = None) -> None: ...


class ScratchStore(Protocol):
    """What a test runs on: the engine's store, plus a bulk insert for generated records."""

    def insert(self, collection: str, record_id: str | None, data: dict[str, Any]) -> dict[str, Any]: ...

    def insert_generated(self, collection: str, rows: Sequence[tuple[str, str]]) -> None:
        """Insert (record id, compact JSON) rows, in their order."""
        ...

    def find(self, collection: str, where: Any, order_by: Any, limit: int | None) -> list[dict[str, Any]]: ...


@dataclass
class RecordTemplate:
    """A collection's `{"generate": N, "like": {...}}`, checked: each field's CEL expression, compiled."""

    path: str  # e.g. tests[0].records.books
    collection: str
    count: int
    fields: dict[str, tuple[str, Any]]  # field -> (its source, its program)


@dataclass
class AuthorTest:
    index: int
    name: str
    route: str
    params: dict[str, Any]
    records: dict[str, list[dict[str, Any]]]
    expect_value: Any = None
    has_value: bool = False
    expect_error: str | None = None
    expect_message: str | None = None
    records_after: dict[str, list[dict[str, Any]]] | None = None
    # The generated records of each collection, as (record id, compact JSON), made when the definition is checked.
    generated: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    now: datetime | None = None  # the call's `now`, when the test fixes it (else the time it runs)
    # A migration test: the `migrate` run over `records` instead of a route (its value {"migrated", "deleted"}).
    migration: Migration | None = None


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class

    name: str
    route: str
    passed: bool
    expected: dict[str, Any]
    got: dict[str, Any]
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": self.name,
            "route": self.route,
            "passed": self.passed,
            "expected": self.expected,
            "got": self.got,
        }
        if self.failures:
            found["failures"] = self.failures
        return found


def check_tests(raw: Any, routes: dict[str, str], report: Report, limits: Limits) -> list[AuthorTest]:
    """Parse a definition's `tests` (routes: name -> kind), reporting every problem with its path, and generate
    the records they declare with `generate`, within the limits on how many and how large."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        report("tests", "must be an array of tests")
        return []
    if len(raw) > MAX_TESTS:
        report("tests", f"the definition has {len(raw)} tests; the limit is {MAX_TESTS}")
        return []
    tests = []
    templates: list[tuple[AuthorTest, RecordTemplate]] = []
    for index, item in enumerate(raw):
        declared: list[RecordTemplate] = []
        test = _check_test(index, item, routes, report, declared, limits)
        if test is not None:
            tests.append(test)
            templates.extend((test, template) for template in declared)
    total = sum(template.count for _test, template in templates)
    if total > limits.generated_records:
        report(
            "tests",
            f"the tests generate {total} records together; the limit is {limits.generated_records}",
            "generated_records",
            limits.generated_records,
        )
        return tests
    # What evaluating them costs grows with the text evaluated (measured: 7-28 ns a character, at most ~50 µs
    # for one expression at the length limit), bounded here before anything runs; cheap expressions are bounded
    # by the bytes they make.
    chars = sum(
        template.count * sum(len(source) for source, _ in template.fields.values()) for _, template in templates
    )
    if chars > limits.generated_expression_chars:
        report(
            "tests",
            f"the tests' generated records evaluate {chars} characters of CEL together (each field's expression "
            f"once per record); the limit is {limits.generated_expression_chars}: generate fewer records or write "
            "shorter expressions",
            "generated_expression_chars",
            limits.generated_expression_chars,
        )
        return tests
    budget = _Bytes(limits.generated_bytes)
    for test, template in templates:
        rows = _generate(template, report, limits, budget)
        if rows is None:
            break  # reported; the templates after it are not made (a byte budget passed stays passed)
        test.generated[template.collection] = rows
    return tests


def _check_test(
    index: int, item: Any, routes: dict[str, str], report: Report, templates: list[RecordTemplate], limits: Limits
) -> AuthorTest | None:
    path = f"tests[{index}]"
    problems_before = _Counter(report)
    if not isinstance(item, dict):
        report(path, 'a test must be an object: {"route": ..., "params": {...}, "expect": {"value": ...}}')
        return None
    unknown = sorted(set(item) - set(TEST_KEYS))
    if unknown:
        problems_before.report(path, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TEST_KEYS)}")
    name = item.get("name", path)
    if not isinstance(name, str):
        problems_before.report(f"{path}.name", "must be a string")
        name = path
    route = item.get("route")
    migration = None
    if "migrate" in item:
        migration, found = check_migration(item["migrate"], limits)
        for problem in found:
            problems_before.report(f"{path}.{problem.path}", problem.message, problem.limit, problem.max)
        if "route" in item:
            problems_before.report(f"{path}.route", "a migration test runs its migrate, not a route: give one of them")
        for key in ("params", "now"):
            if key in item:
                problems_before.report(f"{path}.{key}", "a migration test takes no params or now; it migrates records")
        route = "(migrate)"
    elif not isinstance(route, str) or route not in routes:
        known = ", ".join(sorted(routes)) or "none"
        problems_before.report(
            f"{path}.route", f"must name one of the definition's routes ({known}), got {json_repr(route)}"
        )
    params = item.get("params", {})
    if not isinstance(params, dict):
        problems_before.report(f"{path}.params", "must be an object (the route's params)")
    records = _check_records(item.get("records", {}), f"{path}.records", problems_before, templates, limits)
    expect = item.get("expect")
    test = AuthorTest(
        index=index,
        name=name,
        route=str(route),
        params=params if isinstance(params, dict) else {},
        records=records,
        migration=migration,
    )
    if not isinstance(expect, dict):
        problems_before.report(
            f"{path}.expect",
            'required: {"value": <what the route returns>} or {"error": "<kind>", "message": "<fragment>"}',
        )
    else:
        unknown = sorted(set(expect) - set(EXPECT_KEYS))
        if unknown:
            problems_before.report(
                f"{path}.expect", f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(EXPECT_KEYS)}"
            )
        if ("value" in expect) == ("error" in expect):
            problems_before.report(f"{path}.expect", "needs exactly one of 'value' or 'error'")
        elif "value" in expect:
            test.expect_value, test.has_value = expect["value"], True
            if "message" in expect:
                problems_before.report(f"{path}.expect.message", "goes with 'error' only")
        else:
            if not isinstance(expect["error"], str) or not expect["error"]:
                problems_before.report(f"{path}.expect.error", "must be an error kind, e.g. 'handler_error'")
            test.expect_error = str(expect["error"])
            message = expect.get("message")
            if message is not None and not isinstance(message, str):
                problems_before.report(f"{path}.expect.message", "must be a string (a fragment of the message)")
            test.expect_message = message if isinstance(message, str) else None
    if "now" in item:
        test.now = _test_now(item["now"], f"{path}.now", problems_before)
    if "records_after" in item:
        if isinstance(route, str) and routes.get(route) == "query":
            problems_before.report(
                f"{path}.records_after", "a query writes nothing; only a mutation's (or a migration's) test has it"
            )
        test.records_after = _check_records(item["records_after"], f"{path}.records_after", problems_before)
    if problems_before.count:
        templates.clear()
        return None
    return test


def _test_now(value: Any, path: str, problems: _Counter) -> datetime | None:
    """A test's fixed `now`: an ISO 8601 timestamp with its offset ("2026-12-02T09:30:00+01:00" or "...Z")."""
    shape = 'must be an ISO 8601 timestamp with its offset, such as "2026-12-02T09:30:00Z"'
    if not isinstance(value, str):
        problems.report(path, f"{shape}, got {json_repr(value)}")
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        problems.report(path, f"{shape}, got {json_repr(value)}")
        return None
    if moment.tzinfo is None:
        problems.report(path, f"{shape} (this one has no offset), got {json_repr(value)}")
        return None
    return moment


class _Counter:
    def __init__(self, report: Report) -> None:
        self._report, self.count = report, 0

    def report(self, path: str, message: str, limit: str | None = None, max: int | None = None) -> None:
        self.count += 1
        self._report(path, message, limit, max)


def _check_records(
    raw: Any,
    path: str,
    problems: _Counter,
    templates: list[RecordTemplate] | None = None,
    limits: Limits | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The literal records of each collection. Given `templates` and `limits` (the records before a call, not
    those expected after it), a collection may instead be `{"generate": N, "like": {...}}`: checked, and
    appended to `templates`."""
    if not isinstance(raw, dict):
        problems.report(path, 'must be an object mapping collections to arrays of records: {"todos": [{...}]}')
        return {}
    literal: dict[str, list[dict[str, Any]]] = {}
    total = generated = 0
    for collection, records in raw.items():
        where = f"{path}.{collection}"
        if not NAME.match(collection):
            problems.report(where, "must be a collection name (letters, digits and _)")
        if isinstance(records, dict) and "generate" in records:
            if templates is None or limits is None:
                problems.report(where, "must be an array of records (objects): records_after lists them literally")
                continue
            template = _check_template(records, where, collection, problems, limits)
            if template is not None:
                templates.append(template)
                generated += template.count
            continue
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            also = ', or {"generate": N, "like": {"field": "<CEL over i>"}}' if templates is not None else ""
            problems.report(where, f"must be an array of records (objects){also}")
            continue
        total += len(records)
        literal[collection] = records
        for i, record in enumerate(records):
            if "id" in record and not isinstance(record["id"], str):
                problems.report(f"{where}[{i}].id", "must be a string")
    if total > MAX_RECORDS_PER_TEST:
        problems.report(path, f"a test lists {total} records; the limit is {MAX_RECORDS_PER_TEST}")
    if limits is not None and generated > limits.test_generated_records:
        problems.report(
            path,
            f"a test generates {generated} records; the limit is {limits.test_generated_records}",
            "test_generated_records",
            limits.test_generated_records,
        )
    return literal


def _check_template(
    raw: dict[str, Any], path: str, collection: str, problems: _Counter, limits: Limits
) -> RecordTemplate | None:
    """A `{"generate": N, "like": {field: CEL over i}}`: its count and each field's compiled expression."""
    before = problems.count
    unknown = sorted(set(raw) - set(GENERATE_KEYS))
    if unknown:
        problems.report(path, f"unknown key(s) {', '.join(unknown)}; generated records take: generate, like")
    count = raw["generate"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        problems.report(f"{path}.generate", f"must be a positive integer (how many records), got {json_repr(count)}")
    elif count > limits.test_generated_records:
        problems.report(
            f"{path}.generate",
            f"a test generates at most {limits.test_generated_records} records, got {count}",
            "test_generated_records",
            limits.test_generated_records,
        )
    like = raw.get("like")
    fields: dict[str, tuple[str, Any]] = {}
    if not isinstance(like, dict):
        problems.report(
            f"{path}.like",
            "required: an object mapping each field to a CEL expression over i (0, 1, ...), e.g. "
            """{"title": "'Book ' + string(i)", "year": "2000 + i % 25"}""",
        )
    else:
        for name, source in like.items():
            program = _field_program(source, f"{path}.like.{name}", problems, limits)
            if program is not None:
                fields[name] = (source, program)
    if problems.count > before:
        return None
    return RecordTemplate(path=path, collection=collection, count=count, fields=fields)


def _field_program(source: Any, path: str, problems: _Counter, limits: Limits) -> Any:
    """One field's expression compiled, or None with its problems reported."""
    if not isinstance(source, str):
        problems.report(
            path, f"""must be a CEL expression over i, as a string (e.g. "i * 2" or "'x'"), got {json_repr(source)}"""
        )
        return None
    program, found, scan = check_source(source, limits)
    for problem in found:
        problems.report(path, problem.message, problem.limit, problem.max)
    if program is None or scan is None:
        return None
    if scan.comprehensions or scan.regex:
        # Each runs once per record in the server process: none may cost more than its text.
        problems.report(
            path,
            "runs once for every generated record, so it may not use map, filter, all, exists, exists_one or matches",
        )
        return None
    unknown = sorted(referenced_names(scan, {"i"}) - {"i"})
    if unknown:
        problems.report(
            path, f"unknown name(s) {', '.join(unknown)}; a generated record's expressions know only i (0, 1, ...)"
        )
        return None
    expr, found = compile_expression(source, limits=limits, context=(("i", "int"),), route="tests", where=path)
    for problem in found:
        problems.report(path, problem.message, problem.limit, problem.max)
    if expr is None:
        return None
    return expr.program


@dataclass
class _Bytes:
    """How many bytes of compact JSON the definition's generated records may still hold."""

    left: int


def _generate(template: RecordTemplate, report: Report, limits: Limits, budget: _Bytes) -> list[tuple[str, str]] | None:
    """The template's records as (record id, compact JSON), or None with the first problem reported."""
    path, collection = template.path, template.collection
    rows: list[tuple[str, str]] = []
    first_with: dict[str, int] = {}  # record id -> the i that gave it
    for i in range(template.count):
        data: dict[str, Any] = {}
        for name, (source, program) in template.fields.items():
            try:
                data[name] = to_json(library.evaluate(program, {"i": i}))
            except HandlerError as exc:  # a value JSON cannot hold: a non-string key, an infinite double
                report(f"{path}.like.{name}", f"for i = {i}, its value cannot be stored: {exc.message}")
                return None
            except Exception as exc:  # CEL's own: a division by zero, a missing key, a type mismatch, an overflow
                report(f"{path}.like.{name}", f"for i = {i}, evaluating `{clip(source, 200)}` failed: {_failure(exc)}")
                return None
        record_id = _generated_id(data, i, path, first_with, report)
        if record_id is None:
            return None
        unstorable = text_problems(data, f"{path}.like", 1)
        if unstorable:
            report(unstorable[0]["path"], f"for i = {i}, its text {unstorable[0]['message']}")
            return None
        try:
            encoded = encoded_record(collection, record_id, data, limits.record_bytes)
        except OperationFailed:
            size = len(json.dumps(data, separators=(",", ":")).encode())
            report(
                f"{path}.like",
                f"for i = {i}, the record would be {size} bytes of JSON; the limit is {limits.record_bytes}",
                "record_bytes",
                limits.record_bytes,
            )
            return None
        budget.left -= len(encoded)
        if budget.left < 0:
            report(
                path,
                f"the tests' generated records pass {limits.generated_bytes} bytes of JSON together here (at i = {i}); "
                "generate fewer or smaller records",
                "generated_bytes",
                limits.generated_bytes,
            )
            return None
        rows.append((record_id, encoded))
    return rows


def _generated_id(data: dict[str, Any], i: int, path: str, first_with: dict[str, int], report: Report) -> str | None:
    """The record's id: the value of `like.id` (taken out of its data), else a new one; None once reported."""
    if "id" not in data:
        return str(uuid.uuid4())
    record_id = data.pop("id")
    if not isinstance(record_id, str) or not record_id or len(record_id) > RECORD_ID_CHARS:
        report(
            f"{path}.like.id",
            f"must give a non-empty string of at most {RECORD_ID_CHARS} characters (the record's id); for i = {i} it "
            f"gives {json_repr(record_id, 40)}",
        )
        return None
    if record_id in first_with:
        report(
            f"{path}.like.id",
            f"gives the id {json_repr(record_id, 40)} for both i = {first_with[record_id]} and i = {i}; each record "
            """needs an id of its own (e.g. "'b' + string(i)")""",
        )
        return None
    first_with[record_id] = i
    return record_id


def _failure(exc: Exception) -> str:
    """CEL's error, worded as the engine words it at run time ("division by zero", "a missing key: ...")."""
    return evaluation_failure(exc)


def matches(expected: Any, got: Any) -> bool:
    """Whether `got` matches the pattern `expected` (objects: the keys listed; lists: item by item)."""
    if isinstance(expected, dict):
        return isinstance(got, dict) and all(k in got and matches(v, got[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(map(matches, expected, got))
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and expected == got
    if isinstance(expected, (int, float)):
        return isinstance(got, (int, float)) and expected == got
    return bool(expected == got)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def run_test(
    test: AuthorTest,
    *,
    scratch: Callable[[], AbstractContextManager[ScratchStore]],
    run: Callable[[Any, AuthorTest], Any],
) -> TestResult:
    """Run one test on a store from `scratch()` (discarded afterwards); `run(store, test)` runs its route."""
    expected: dict[str, Any] = (
        {"value": test.expect_value} if test.has_value else {"error": test.expect_error, "message": test.expect_message}
    )
    if not test.has_value and test.expect_message is None:
        expected.pop("message")
    if test.records_after is not None:
        expected["records_after"] = test.records_after
    got: dict[str, Any] = {}
    failures: list[str] = []
    with scratch() as store:
        try:
            for collection, records in test.records.items():
                for record in records:
                    data = {k: v for k, v in record.items() if k != "id"}
                    store.insert(collection, record.get("id"), data)
            for collection, rows in test.generated.items():
                store.insert_generated(collection, rows)
        except CharmingError as exc:
            failures.append(f"its records could not be stored: {exc.message}")
            return TestResult(test.name, test.route, False, expected, {}, failures)
        try:
            got = {"value": run(store, test)}
        except CharmingError as exc:
            got = {"error": exc.kind, "message": exc.message}
        except Exception as exc:  # noqa: BLE001 - an engine bug must fail the test, not the save
            got = {"error": "internal_error", "message": type(exc).__name__}
        if test.records_after is not None:
            got["records_after"] = {c: store.find(c, [], [], None) for c in test.records_after}
    failures.extend(_compare(test, got))
    return TestResult(test.name, test.route, not failures, expected, got, failures)


def _compare(test: AuthorTest, got: dict[str, Any]) -> list[str]:
    failures = []
    if test.has_value:
        if "error" in got:
            failures.append(
                f"expected the value {_shown(test.expect_value)}, got the error {got['error']}: {got['message']}"
            )
        elif not matches(test.expect_value, got["value"]):
            failures.append(f"expected the value {_shown(test.expect_value)}, got {_shown(got['value'])}")
    else:
        if "error" not in got:
            failures.append(f"expected the error {test.expect_error}, got the value {_shown(got['value'])}")
        elif got["error"] != test.expect_error:
            failures.append(f"expected the error {test.expect_error}, got the error {got['error']}: {got['message']}")
        elif test.expect_message is not None and test.expect_message not in got["message"]:
            failures.append(f"expected an error message containing {test.expect_message!r}, got {got['message']!r}")
    for collection, wanted in (test.records_after or {}).items():
        found = got.get("records_after", {}).get(collection, [])
        if not matches(wanted, found):
            failures.append(f"expected {collection} to hold {_shown(wanted)} afterwards, got {_shown(found)}")
    return failures


def failure_summary(results: list[TestResult]) -> str:
    """One line per failing test, for messages and advisories."""
    failing = [r for r in results if not r.passed]
    return "; ".join(f"'{r.name}' ({r.route}): {' and '.join(r.failures)}" for r in failing[:5]) + (
        f"; and {len(failing) - 5} more" if len(failing) > 5 else ""
    )
