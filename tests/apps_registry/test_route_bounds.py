"""Bounds on the work one route call can do, and caller or author input that must come back as a
contract error (never internal_error): the expression scanner is not fooled by comments or string
forms, values and params are size-capped, comprehensions are refused before an over-budget run."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest

from apps_registry.exceptions import HandlerError, InvalidDefinition, InvalidInput, OperationFailed, UnknownOp
from apps_registry.models import Route
from apps_registry.routes import celworker
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example, one_route_app, records, run
from tests.factories import RecordFactory

pytestmark = pytest.mark.django_db

THREE_DEEP = "[[[1]]].map(a, a.map(b, b.filter(c, c > 0)))"


# --- the expression scanner ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        # A comment between a macro's name and its parenthesis.
        "[[[1]]].map // c\n (a, a.map // c\n (b, b.filter // c\n (c, c > 0)))",
        # A quote inside a comment must not open a string that hides the rest.
        "// don't\n" + THREE_DEEP,
        # A raw string's backslash is not an escape: r'\' ends at its second quote.
        r"size(r'\') + size(" + THREE_DEEP + ") + size('x')",
        # The same with a raw bytes literal and a raw triple-quoted string.
        r"size(rb'\') + size(" + THREE_DEEP + ") + size('x')",
        r"size(r'''\''') + size(" + THREE_DEEP + ") + size('''x''')",
    ],
)
def test_comments_and_string_forms_cannot_hide_nested_comprehensions(user, settings, source):
    settings.CHARMING_ROUTES_MAX_COMPREHENSION_NESTING = 2
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": source}])
    error = exc.value.errors[0]
    assert error["limit"] == "comprehension_nesting", error
    assert "nested 3 deep" in error["message"]


def test_macro_names_and_quotes_inside_comments_and_strings_do_not_count(user, settings):
    settings.CHARMING_ROUTES_MAX_COMPREHENSION_NESTING = 1
    app = one_route_app(
        user,
        [{"return": "[1, 2].map(a, a * 2) // .map(.filter( it's\n + [r'\\'.size(), b'x'.size(), '''a'b'''.size()]"}],
    )
    assert run(user, app) == [2, 4, 1, 1, 3]


def test_comprehension_variables_after_a_comment_are_not_unknown_names(user):
    app = one_route_app(user, [{"return": "[1, 2].map( // the doubled values\n x, x * 2)"}])
    assert run(user, app) == [2, 4]


# --- run-time size bounds ------------------------------------------------------------------------
def test_a_value_growing_past_the_item_limit_fails_at_the_step_that_made_it(user, settings):
    settings.CHARMING_ROUTES_MAX_VALUE_ITEMS = 1000
    growth = " + ".join(["a"] * 20)
    app = one_route_app(
        user,
        [
            {"let": "[" + ", ".join(str(i) for i in range(40)) + "]", "as": "a"},
            {"let": growth, "as": "b"},  # 800 items: under the limit
            {"let": "b + b", "as": "c"},  # 1600: over
            {"insert": {"collection": "items", "value": "{'n': size(c)}"}},
        ],
    )
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.message.startswith("Route 'r' steps[2] (let): the value holds more than 1000 items")
    assert exc.value.details == {
        "limit": "value_items",
        "max": 1000,
        "setting": "CHARMING_ROUTES_MAX_VALUE_ITEMS",
        "route": "r",
        "step": "steps[2] (let)",
    }
    assert records(app) == {}


def test_a_returned_value_over_the_text_limit_fails(user, settings):
    settings.CHARMING_ROUTES_MAX_VALUE_CHARS = 100
    app = one_route_app(user, [{"return": "params.s + params.s"}], input_schema={"type": "object"})
    assert run(user, app, params={"s": "x" * 50}) == "x" * 100
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"s": "x" * 51})
    assert "more than 100 characters of text" in exc.value.message
    assert exc.value.details["limit"] == "value_chars"
    assert exc.value.details["step"] == "steps[0] (return)"


def test_records_read_by_a_find_count_towards_the_value_limit(user, settings):
    settings.CHARMING_ROUTES_MAX_VALUE_ITEMS = 50
    app = one_route_app(user, [{"find": {"collection": "items"}, "as": "all"}, {"return": "size(all)"}], kind="query")
    for i in range(10):
        RecordFactory(storage=app.storage, collection="items", record_id=f"r{i}", data={"n": i})
    with pytest.raises(OperationFailed) as exc:
        run(user, app, kind="query")
    assert exc.value.details["limit"] == "value_items"
    assert exc.value.details["step"] == "steps[0] (find)"


def test_a_value_nested_past_the_limit_fails_instead_of_exhausting_recursion(user):
    # 45 steps each wrapping the last value in 30 lists: 1,350 levels, which made to_json raise
    # RecursionError (a 500) when returned.
    steps = [{"let": "[" * 30 + "1" + "]" * 30, "as": "v0"}]
    steps += [{"let": "[" * 30 + f"v{i - 1}" + "]" * 30, "as": f"v{i}"} for i in range(1, 45)]
    app = one_route_app(user, [*steps, {"return": "v44"}])
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.message.startswith(
        "Route 'r' steps[2] (let): the value is nested more than 64 levels deep; the limit is 64."
    )
    assert exc.value.details["limit"] == "value_nesting"
    assert exc.value.details["setting"] == "CHARMING_ROUTES_MAX_VALUE_NESTING"


def test_params_nested_past_the_limit_are_refused(user):
    app = one_route_app(user, [{"return": "1"}], input_schema={"type": "object"})
    nested: dict = {}
    for _ in range(70):
        nested = {"a": nested}
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params=nested)
    assert exc.value.message.startswith("params of route 'r' are nested more than 64 levels deep (at $.a.a.a")
    assert exc.value.details["limit"] == "value_nesting"


def test_params_over_the_size_limit_are_refused(user, settings):
    settings.CHARMING_ROUTES_MAX_PARAMS_BYTES = 100
    app = one_route_app(user, [{"return": "params.s"}], input_schema={"type": "object"})
    assert run(user, app, params={"s": "é" * 46}) == "é" * 46  # 100 bytes of UTF-8 JSON
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"s": "é" * 47})
    assert exc.value.message == (
        "params of route 'r' are 102 bytes of JSON; the limit is 100. Send less data per call."
    )
    assert exc.value.details == {
        "limit": "params_bytes",
        "max": 100,
        "setting": "CHARMING_ROUTES_MAX_PARAMS_BYTES",
        "route": "r",
        "size": 102,
    }


# --- the comprehension work budget ---------------------------------------------------------------
def _list_then(expression: str) -> list[dict[str, str]]:
    return [
        {"let": "[" + ", ".join(str(i) for i in range(50)) + "]", "as": "a"},
        {"let": "a + a + a + a + a + a", "as": "b"},  # 300 items
        {"return": expression},
    ]


def _spent(message: str) -> int:
    match = re.search(
        r"an estimated work of (\d+) with (\d+) already spent by this call; the limit is (\d+)\.", message
    )
    assert match, message
    return int(match.group(2))


def test_nested_comprehensions_over_large_lists_are_refused_before_they_run(user):
    # 300 items mapped inside a map over them took about 1.7 s in CEL; the estimate refuses it up front.
    # The span counts the '+' (it might concatenate): 300 * 2 items, iterated 600 * 600 times.
    app = one_route_app(user, _list_then("b.map(x, b.map(y, x + y)).size()"))
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.message.startswith(
        "Route 'r' steps[2].return: its comprehensions could iterate over 600 items (nested 2 deep), "
        "an estimated work of "
    )
    assert exc.value.message.endswith(
        "the limit is 20000000. Work on fewer items (filter records with 'where' and 'limit'), avoid nesting "
        "map/filter, or build large values with fewer '+'."
    )
    assert exc.value.details["limit"] == "cel_work"
    assert exc.value.details["max"] == 20_000_000
    assert exc.value.details["setting"] == "CHARMING_ROUTES_MAX_CEL_WORK"
    assert exc.value.details["step"] == "steps[2].return"
    assert exc.value.details["estimate"] > 600**3


def test_one_comprehension_over_the_same_list_runs(user):
    app = one_route_app(user, _list_then("b.filter(x, x > 47).size()"))
    assert run(user, app) == 12


def test_the_work_budget_is_per_call_not_per_expression(user, settings):
    settings.CHARMING_ROUTES_MAX_CEL_WORK = 150_000  # one map over b's 300 items: about 90,000 + conversions
    steps = _list_then("b.map(x, x).size()")
    app = one_route_app(user, steps)
    assert run(user, app) == 300
    steps.insert(2, {"let": "b.all(x, x >= 0)", "as": "ok"})
    steps[-1] = {"return": "ok ? b.map(x, x).size() : 0"}
    app = one_route_app(user, steps)
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.details["step"] == "steps[3].return"
    estimate, spent = exc.value.details["estimate"], _spent(exc.value.message)
    assert estimate <= 150_000 < estimate + spent  # the step alone fits; the call's earlier steps spent the rest


def test_a_long_concatenation_of_large_values_is_refused_before_it_runs(user, settings):
    settings.CHARMING_ROUTES_MAX_VALUE_CHARS = 10**9
    app = one_route_app(user, [{"let": " + ".join(["params.s"] * 100), "as": "t"}], input_schema={"type": "object"})
    assert run(user, app, params={"s": "x" * 1000}) is None
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"s": "x" * 200_000})
    # 95 copies of 200 KB took 0.63 s; 1,000 operands of a 1 MB string would take minutes.
    assert exc.value.message.startswith("Route 'r' steps[0].let: it concatenates 100 operands, an estimated work of ")
    assert _spent(exc.value.message) == 0
    assert exc.value.details["limit"] == "cel_work"


def test_reading_a_large_value_in_many_expressions_is_charged(user, settings):
    settings.CHARMING_ROUTES_MAX_CEL_WORK = 1_000_000
    records_for = [{"find": {"collection": "items", "limit": "1000"}, "as": "all"}]
    checks = [{"fail": {"when": "all == []", "message": "'none'"}} for _ in range(40)]
    app = one_route_app(user, [*records_for, *checks, {"return": "size(all)"}], kind="query")
    for i in range(1000):
        RecordFactory(storage=app.storage, collection="items", record_id=f"r{i}", data={"n": i, "s": "abc"})
    with pytest.raises(OperationFailed) as exc:
        run(user, app, kind="query")
    assert "it reads large values, an estimated work of" in exc.value.message
    assert exc.value.details["limit"] == "cel_work"


def test_a_concatenation_inside_a_comprehension_expression_counts_towards_its_estimate(user):
    # (b + b + b) is 900 items: iterating it twice nested is refused, though b alone is 300.
    app = one_route_app(user, _list_then("(b + b + b).map(x, x).size()"))
    assert run(user, app) == 900
    app = one_route_app(user, _list_then("(b + b + b).map(x, b.exists(y, y == x)).size()"))
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert "could iterate over 900 items (nested 2 deep)" in exc.value.message


# --- the CEL deadline (comprehensions run in a worker process) ----------------------------------------
def _slow_app(user):
    # Each iteration of this map builds a 2 MB string: seconds of CEL for 1,000 items, which the work
    # estimate cannot see (it depends on what each iteration builds).
    return one_route_app(
        user,
        [
            {"insert": {"collection": "items", "value": "{'n': 1}"}},
            {"let": "params.s + params.s + params.s + params.s", "as": "s"},
            {"return": "params.xs.map(x, size(s + s)).size()"},
        ],
    )


def test_an_expression_running_past_the_calls_cel_deadline_is_stopped(user, settings):
    settings.CHARMING_ROUTES_MAX_CEL_MS = 300
    app = _slow_app(user)
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"xs": list(range(1000)), "s": "x" * 250_000})
    assert exc.value.message.startswith(
        "Route 'r' steps[2].return: CEL evaluation took longer than this call's 300 ms and was stopped."
    )
    assert exc.value.details == {
        "limit": "cel_ms",
        "max": 300,
        "setting": "CHARMING_ROUTES_MAX_CEL_MS",
        "route": "r",
        "step": "steps[2].return",
    }
    assert records(app) == {}


def test_other_threads_run_while_a_slow_expression_is_evaluated(user, settings):
    # In the server process the evaluator would hold the interpreter lock for the whole evaluation.
    settings.CHARMING_ROUTES_MAX_CEL_MS = 500
    app = _slow_app(user)
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        with pytest.raises(OperationFailed):
            run(user, app, params={"xs": list(range(1000)), "s": "x" * 250_000})
    finally:
        done.set()
        thread.join()
    assert len(ticks) >= 10


def test_cel_errors_in_a_worker_process_read_as_in_the_server(user):
    app = one_route_app(user, [{"return": "[{'a': 1}].map(x, x.b)"}])
    with pytest.raises(HandlerError) as exc:
        run(user, app)
    assert exc.value.message == (
        "Route 'r' failed at steps[0].return: evaluating `[{'a': 1}].map(x, x.b)` raised a missing key: "
        "no key 'b' in the map (use has(x.key) to test first)"
    )
    app = one_route_app(user, [{"return": "[2, 0].map(x, 4 / x)"}])
    with pytest.raises(HandlerError) as exc:
        run(user, app)
    assert exc.value.message.endswith("raised division by zero")


def test_a_dead_worker_process_is_replaced(user):
    app = one_route_app(user, [{"return": "[1, 2].map(x, x * 2)"}])
    assert run(user, app) == [2, 4]
    dead = list(celworker._idle)
    assert dead
    for child in dead:
        child.process.kill()
        child.process.wait()
    assert run(user, app) == [2, 4]
    assert all(child.process.stdout is not None and child.process.stdout.closed for child in dead)


def test_a_worker_that_dies_mid_call_is_retried_once_with_a_fresh_one(user, monkeypatch):
    """The child is killed but not reaped, so it still looks alive when taken from the pool."""
    app = one_route_app(user, [{"return": "[1, 2].map(x, x * 2)"}])
    assert run(user, app) == [2, 4]
    started = []
    real_start = celworker._start
    monkeypatch.setattr(celworker, "_start", lambda: started.append(1) or real_start())
    for child in list(celworker._idle):
        monkeypatch.setattr(child.process, "poll", lambda: None)  # looks alive
        child.process.kill()
        child.process.wait()
    assert run(user, app) == [2, 4]
    assert started == [1]


def test_expressions_calling_matches_run_in_a_worker_process(user, monkeypatch):
    seen = []
    real = celworker.evaluate_timed
    monkeypatch.setattr(
        celworker, "evaluate_timed", lambda program, *a, **k: seen.append(program) or real(program, *a, **k)
    )
    app = one_route_app(user, [{"return": "params.s.matches('^[a-z]+$')"}], input_schema={"type": "object"})
    assert run(user, app, params={"s": "abc"}) is True
    [(serialized, declarations)] = seen  # the checked program, serialized, with what it was checked against
    assert isinstance(serialized, bytes) and ("params", "map(string, dyn)") in declarations


def _idle_workers_dropped() -> None:
    with celworker._lock:
        idle = list(celworker._idle)
        celworker._idle.clear()
    for child in idle:
        child.kill()


def test_a_slow_worker_start_does_not_count_against_the_calls_cel_deadline(user, settings, monkeypatch):
    """Issue 12 finding 11: the first comprehension on a fresh server failed with cel_ms because the worker
    process's start-up (slow under load) was counted as the call's CEL time."""
    settings.CHARMING_ROUTES_MAX_CEL_MS = 200
    app = one_route_app(user, [{"return": "[1, 2].map(x, x * 2)"}])
    _idle_workers_dropped()
    # A child that takes 0.5 s before its usual start (the interpreter and the CEL extension loading on a busy
    # machine): longer than the whole deadline.
    worker = "apps_registry.routes.celworker"
    slow = f"import runpy, time; time.sleep(0.5); runpy.run_module({worker!r}, run_name='__main__')"
    monkeypatch.setattr(celworker._Child, "command", (sys.executable, "-c", slow))
    assert run(user, app) == [2, 4]


def test_prestart_leaves_a_ready_worker_for_the_first_call(user, monkeypatch):
    app = one_route_app(user, [{"return": "[1, 2].map(x, x * 2)"}])
    _idle_workers_dropped()
    assert celworker.prestart() == 1
    assert celworker.prestart() == 0  # already there: a second server start adds none
    started = []
    monkeypatch.setattr(celworker, "_start", lambda: started.append(1))
    assert run(user, app) == [2, 4]
    assert started == []


def test_the_worker_evaluates_the_checked_program_without_loading_django():
    script = (
        "import sys; from apps_registry.routes import celworker, library; "
        "program = library.compile_program('[1].map(x, x + params.n)', library.CONTEXT_DECLARATIONS); "
        "print(library.evaluate(celworker._load((program.serialize(), library.CONTEXT_DECLARATIONS), {}), "
        "{'params': {'n': 1}}), 'django' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["[2]", "False"]


def test_a_worker_answer_over_the_reply_cap_is_refused_and_the_worker_dropped():
    with pytest.raises(celworker.WorkerFailed, match="over the 1000-byte cap"):
        celworker.evaluate("s + s", {"s": "x" * 5000}, 5.0, max_reply=1000)
    # The dropped worker was killed, never put back; a fresh one may have been started in its place (WARM).
    assert all(child.process.poll() is None for child in celworker._idle)


def test_when_every_worker_slot_is_busy_a_call_fails_after_waiting(monkeypatch):
    monkeypatch.setattr(celworker, "QUEUE_SECONDS", 0.1)
    taken = 0
    while celworker._running.acquire(blocking=False):
        taken += 1
    try:
        with pytest.raises(celworker.WorkerFailed, match="CEL worker processes stayed busy"):
            celworker.evaluate("1 + 1", {}, 5.0)
    finally:
        for _ in range(taken):
            celworker._running.release()
    assert celworker.evaluate("1 + 1", {}, 5.0) == 2


def test_a_runaway_evaluation_stops_by_itself_if_the_server_never_kills_it():
    """The CPU limit set per evaluation ends it soon after its deadline, e.g. when the server died."""
    child = celworker._Child()
    try:
        body = celworker.pickle.dumps(("xs.map(x, xs.map(y, x * y)).size()", {"xs": list(range(20000))}, 0.2))
        assert child.process.stdin is not None
        child.process.stdin.write(celworker._HEADER.pack(len(body)) + body)
        child.process.stdin.flush()
        started = time.monotonic()
        child.process.wait(timeout=30)
        assert time.monotonic() - started < 10
        assert child.process.returncode != 0
    finally:
        child.kill()


def test_a_long_fail_message_is_clipped_and_huge_details_are_refused(user):
    app = one_route_app(
        user,
        [
            {"let": "params.s + params.s + params.s + params.s", "as": "b"},
            {"fail": {"message": "b", "details": "{'x': params.big ? [b, b, b, b] : []}"}},
        ],
        input_schema={"type": "object"},
    )
    with pytest.raises(HandlerError) as exc:
        run(user, app, params={"s": "y" * 1000, "big": False})
    assert len(exc.value.message) == 2000 and exc.value.message.endswith("…")
    with pytest.raises(OperationFailed) as refused:
        run(user, app, params={"s": "y" * 250_000, "big": True})
    assert "steps[1].fail.details: the value holds more than" in refused.value.message


# --- numbers in params ---------------------------------------------------------------------------
@pytest.fixture
def budget(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 100})
    return app


def test_a_number_too_large_for_a_double_is_invalid_input(user, budget):
    with pytest.raises(InvalidInput) as exc:
        run(user, budget, "add_expense", {"amount": 10**400, "category": "food"})
    assert exc.value.errors[0]["path"] == "$.amount"
    assert "outside the 64-bit range of CEL's int" in exc.value.errors[0]["message"]
    assert exc.value.message.startswith("params of route 'add_expense' hold numbers the engine cannot represent")


def test_an_integer_beyond_int64_is_refused_not_rounded(user):
    app = one_route_app(
        user,
        [{"return": "params.n"}],
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    assert run(user, app, params={"n": 2**63 - 1}) == 2**63 - 1
    with pytest.raises(InvalidInput) as exc:
        run(user, app, params={"n": 10**30})
    assert exc.value.errors == [
        {
            "path": "$.n",
            "message": "the integer 1000000000000000000000000000000 is outside the 64-bit range of CEL's int "
            "(-9223372036854775808 to 9223372036854775807); send it as a string, or as a decimal number (1e30) "
            "if approximate is fine",
        }
    ]


def test_a_non_finite_double_in_params_is_invalid_input(user):
    app = one_route_app(user, [{"return": "1"}], input_schema={"type": "object"})
    with pytest.raises(InvalidInput) as exc:
        run(user, app, params={"xs": [1.0, float("inf")]})
    assert exc.value.errors[0]["path"] == "$.xs[1]"


# --- where values of the wrong type ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ({"gt": "null"}, "a number or a string to compare with gt, got null"),
        ({"lte": "{'a': 1}"}, "a number or a string to compare with lte, got object"),
        ({"eq": "[1]"}, "a string, number, boolean or null, got array"),
        ({"in": "[1, {'a': 1}]"}, "an array of strings, numbers, booleans or nulls, got object"),
    ],
)
def test_a_where_value_of_the_wrong_type_is_a_handler_error_naming_the_field(user, test, expected):
    app = one_route_app(user, [{"find": {"collection": "items", "where": {"n": test}, "limit": "5"}}], kind="query")
    RecordFactory(storage=app.storage, collection="items", record_id="a", data={"n": 1})
    op = next(iter(test))
    with pytest.raises(HandlerError) as exc:
        run(user, app, kind="query")
    where = f"steps[0].find.where.n.{op}"
    assert exc.value.message == f"Route 'r' failed at {where}: the expression must evaluate to {expected}"
    assert exc.value.details == {"route": "r", "step": where}


@pytest.mark.parametrize("field", ["n", "id"])
def test_an_in_list_over_the_limit_fails_naming_the_limit_and_one_at_it_runs(user, settings, field):
    settings.CHARMING_ROUTES_MAX_IN_VALUES = 1200
    steps = [{"count": {"collection": "items", "where": {field: {"in": "params.xs"}}}, "as": "n"}, {"return": "n"}]
    app = one_route_app(user, steps, kind="query", input_schema={"type": "object"})
    RecordFactory(storage=app.storage, collection="items", record_id="7", data={"n": 7})
    # At the limit: about as many values as once overflowed SQLite's expression tree (one OR per value).
    assert run(user, app, params={"xs": list(range(1200))}, kind="query") == 1
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"xs": list(range(1201))}, kind="query")
    where = f"steps[0].count.where.{field}.in"
    assert exc.value.message == (
        f"Route 'r' failed at {where}: the `in` list holds 1201 values; the limit is 1200. "
        "Filter with fewer values per call, or page through them."
    )
    assert exc.value.details == {
        "limit": "in_values",
        "max": 1200,
        "setting": "CHARMING_ROUTES_MAX_IN_VALUES",
        "route": "r",
        "step": where,
    }


@pytest.mark.parametrize("source", ["{'a': 1}", "null", "[1]"])
def test_an_id_condition_of_the_wrong_type_is_a_handler_error(user, source):
    app = one_route_app(user, [{"count": {"collection": "items", "where": {"id": source}}}], kind="query")
    with pytest.raises(HandlerError) as exc:
        run(user, app, kind="query")
    assert "find" not in exc.value.message
    assert exc.value.message.startswith(
        "Route 'r' failed at steps[0].count.where.id: the expression must evaluate to a string or an integer"
    )


# --- route and schema checks when saved -----------------------------------------------------------
def _nested_schema(levels: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_deeply_nested_input_schema_is_refused_with_its_path(user, settings):
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": "1"}], input_schema=_nested_schema(150))
    [error] = exc.value.errors
    assert error["limit"] == "schema_nesting" and error["max"] == 64
    assert error["path"].startswith("routes.r.input.properties.a.properties.a")
    assert error["message"] == "the schema is nested more than 64 levels deep here; the limit is 64"
    one_route_app(user, [{"return": "1"}], input_schema=_nested_schema(30))


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("input", True, "the boolean true"),
        ("input", False, "the boolean false"),
        ("output", True, "the boolean true"),
        ("output", [], "an array"),
    ],
)
def test_a_route_schema_must_be_a_json_object(user, key, value, shown):
    kwargs = {"input_schema": value} if key == "input" else {"output": value}
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": "1"}], **kwargs)
    assert exc.value.errors == [
        {"path": f"routes.r.{key}", "message": f'must be a JSON Schema object, e.g. {{"type": "object"}}; got {shown}'}
    ]


def test_an_input_schema_must_describe_an_object(user):
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": "1"}], input_schema={"type": "array"})
    assert exc.value.errors == [
        {
            "path": "routes.r.input.type",
            "message": 'params are always a JSON object, so \'input\' must describe one: "type": "object" '
            "(got 'array')",
        }
    ]


def test_an_app_with_more_routes_than_the_limit_is_refused(user, settings):
    settings.CHARMING_ROUTES_MAX_ROUTES = 3
    extra = {f"r{i}": {"kind": "query", "steps": [{"return": "1"}]} for i in range(2)}
    one_route_app(user, [{"return": "1"}], **extra)
    extra["r2"] = {"kind": "query", "steps": [{"return": "1"}]}
    with pytest.raises(InvalidDefinition) as exc:
        one_route_app(user, [{"return": "1"}], **extra)
    assert exc.value.errors == [
        {"path": "routes", "message": "the app has 4 routes; the limit is 3", "limit": "routes_per_app", "max": 3}
    ]


# --- messages and values ----------------------------------------------------------------------------
def test_an_unknown_op_is_clipped_in_the_message(user):
    app = one_route_app(user, [{"return": "1"}])
    with pytest.raises(UnknownOp) as exc:
        run(user, app, op="x" * 100_000)
    assert f"has no route '{'x' * 100}…'" in exc.value.message
    assert len(exc.value.message) < 400


def test_a_map_with_non_string_keys_is_refused_naming_the_step(user):
    app = one_route_app(user, [{"return": "{'k': {1: 'a'}}"}])
    with pytest.raises(HandlerError) as exc:
        run(user, app)
    assert exc.value.message.startswith("Route 'r' failed at steps[0].return: a map has the int key 1, but JSON")
    assert exc.value.details == {"route": "r", "step": "steps[0].return"}
    stored = one_route_app(user, [{"insert": {"collection": "items", "value": "{'m': {true: 1}}"}}])
    with pytest.raises(HandlerError) as exc:
        run(user, stored)
    assert "steps[0].insert.value: a map has the bool key true" in exc.value.message
    assert records(stored) == {}


# --- increment results the readers could not load ------------------------------------------------------
@pytest.mark.parametrize(
    ("start", "by"),
    [(2**63 - 1, "1"), (-(2**63), "-1"), (1e308, "1e308")],
)
def test_an_increment_beyond_int64_or_finite_doubles_fails_and_changes_nothing(user, start, by):
    app = one_route_app(
        user,
        [
            {"insert": {"collection": "counters", "id": "'other'", "value": "{'n': 1}"}},
            {"increment": {"collection": "counters", "id": "'c'", "field": "n", "by": by}},
        ],
    )
    RecordFactory(storage=app.storage, collection="counters", record_id="c", data={"n": start})
    with pytest.raises(OperationFailed) as exc:
        run(user, app)
    assert exc.value.message.startswith("Cannot increment counters/c.n by ")
    assert "outside the range of a 64-bit integer (for ints) or of a finite double" in exc.value.message
    # (PostgreSQL's jsonb gives 1e308 back as the integer it equals: compare numerically.)
    assert {k: float(v["n"]) for k, v in records(app, "counters").items()} == {"c": float(start)}


def test_an_increment_up_to_int64_max_is_kept_exact(user):
    app = one_route_app(
        user, [{"increment": {"collection": "counters", "id": "'c'", "field": "n"}, "as": "c"}, {"return": "c.n"}]
    )
    RecordFactory(storage=app.storage, collection="counters", record_id="c", data={"n": 2**63 - 2})
    assert run(user, app) == 2**63 - 1
    assert Route.objects.filter(app=app).count() == 1


def test_an_expensive_regex_is_stopped_at_the_calls_cel_deadline(user, settings):
    settings.CHARMING_ROUTES_MAX_CEL_MS = 300
    # RE2 (cel-cpp's regex engine) runs in linear time, but this pattern's automaton is large: seconds on 250 KB.
    app = one_route_app(user, [{"return": "params.s.matches('(.{0,100}a){9}0')"}], input_schema={"type": "object"})
    started = time.monotonic()
    with pytest.raises(OperationFailed) as exc:
        run(user, app, params={"s": "a" * 250_000})
    assert time.monotonic() - started < 5
    assert exc.value.details is not None and exc.value.details["limit"] == "cel_ms"
