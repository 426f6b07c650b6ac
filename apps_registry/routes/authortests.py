"""Author tests: the optional `tests` list of a definition, checked with the rest of it (every problem
with its path) and run against the real engine, each test on a store of its own that the caller
throws away (services/definitions.py gives each one a scratch storage in a rolled-back transaction).

A test names a route, its params, the records present before it (per collection) and what it must
give: a value (matched as a pattern: an object matches when every key it lists matches, so generated
ids and timestamps can be left out; lists match item by item and must have the same length), or an
error kind and optionally a fragment of its message. A mutation's test may also list the records
each collection must hold afterwards (in insertion order, matched the same way).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from apps_registry.exceptions import CharmingError
from apps_registry.routes.steps import NAME
from apps_registry.values import json_repr

MAX_TESTS = 50
MAX_RECORDS_PER_TEST = 200
TEST_KEYS = ("name", "route", "params", "records", "expect", "records_after")
EXPECT_KEYS = ("value", "error", "message")
_SHOWN = 500  # characters of a value quoted in a failure message


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


def check_tests(raw: Any, routes: dict[str, str], report: Callable[[str, str], None]) -> list[AuthorTest]:
    """Parse a definition's `tests` (routes: name -> kind), reporting every problem with its path."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        report("tests", "must be an array of tests")
        return []
    if len(raw) > MAX_TESTS:
        report("tests", f"the definition has {len(raw)} tests; the limit is {MAX_TESTS}")
        return []
    tests = []
    for index, item in enumerate(raw):
        test = _check_test(index, item, routes, report)
        if test is not None:
            tests.append(test)
    return tests


def _check_test(index: int, item: Any, routes: dict[str, str], report: Callable[[str, str], None]) -> AuthorTest | None:
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
    if not isinstance(route, str) or route not in routes:
        known = ", ".join(sorted(routes)) or "none"
        problems_before.report(
            f"{path}.route", f"must name one of the definition's routes ({known}), got {json_repr(route)}"
        )
    params = item.get("params", {})
    if not isinstance(params, dict):
        problems_before.report(f"{path}.params", "must be an object (the route's params)")
    records = _check_records(item.get("records", {}), f"{path}.records", problems_before)
    expect = item.get("expect")
    test = AuthorTest(
        index=index, name=name, route=str(route), params=params if isinstance(params, dict) else {}, records=records
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
    if "records_after" in item:
        if isinstance(route, str) and routes.get(route) == "query":
            problems_before.report(f"{path}.records_after", "a query writes nothing; only a mutation's test has it")
        test.records_after = _check_records(item["records_after"], f"{path}.records_after", problems_before)
    return None if problems_before.count else test


class _Counter:
    def __init__(self, report: Callable[[str, str], None]) -> None:
        self._report, self.count = report, 0

    def report(self, path: str, message: str) -> None:
        self.count += 1
        self._report(path, message)


def _check_records(raw: Any, path: str, problems: _Counter) -> dict[str, list[dict[str, Any]]]:
    if not isinstance(raw, dict):
        problems.report(path, 'must be an object mapping collections to lists of records: {"todos": [{...}]}')
        return {}
    total = 0
    for collection, records in raw.items():
        where = f"{path}.{collection}"
        if not NAME.match(collection):
            problems.report(where, "must be a collection name (letters, digits and _)")
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            problems.report(where, "must be an array of records (objects)")
            continue
        total += len(records)
        for i, record in enumerate(records):
            if "id" in record and not isinstance(record["id"], str):
                problems.report(f"{where}[{i}].id", "must be a string")
    if total > MAX_RECORDS_PER_TEST:
        problems.report(path, f"a test lists {total} records; the limit is {MAX_RECORDS_PER_TEST}")
    return raw


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
    test: AuthorTest, *, scratch: Callable[[], AbstractContextManager[Any]], run: Callable[[Any, AuthorTest], Any]
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
