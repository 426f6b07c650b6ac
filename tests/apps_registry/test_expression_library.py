"""The expression library (routes/library.py): every function runs as its documented example says, the
date helpers fail with messages an author can act on, values keep their types across steps and the
worker process, and v1 expressions the checker would refuse keep working. Runs the engine against an
in-memory store (no database)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from apps_registry.exceptions import HandlerError, OperationFailed
from apps_registry.routes import celworker, library
from apps_registry.routes.compiler import Problem, check_route, compile_parts
from apps_registry.routes.expressions import cel_compile, stored_definitions
from apps_registry.routes.limits import Limits
from tests.apps_registry.memory_store import MemoryStore
from tests.apps_registry.test_engine_in_memory import compiled, run

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def fixed_now(monkeypatch):
    monkeypatch.setattr("apps_registry.routes.runtime.timezone.now", lambda: library.EXAMPLE_NOW)


@pytest.mark.parametrize("function", library.FUNCTIONS, ids=[f.name for f in library.FUNCTIONS])
def test_each_library_function_gives_its_documented_result(fixed_now, function):
    value = run(compiled([{"let": function.example, "as": "v"}, {"return": "v"}]), MemoryStore())
    assert value == function.result
    assert type(value) is type(function.result)


@pytest.mark.parametrize("doc", ["authoring.md", "agent-guide.md"])
def test_the_docs_list_every_library_function_with_its_example(doc):
    text = (DOCS / doc).read_text()
    for function in library.FUNCTIONS:
        rows = re.findall(rf"^\| `{re.escape(function.name)}` \|.*$", text, re.MULTILINE)
        assert any(f"`{function.example}`" in row for row in rows), (
            f"{doc}: no row for {function.name} with its example"
        )


def test_a_timestamp_a_step_bound_inside_a_value_is_still_a_timestamp_later(fixed_now):
    route = compiled(
        [
            {"let": "{'at': now, 'every': duration('1h'), 'times': [now]}", "as": "plan"},
            {"return": "{'next': plan.at + plan.every, 'day': date(plan.times[0], 'UTC'), 'same': plan.at == now}"},
        ]
    )
    assert run(route, MemoryStore()) == {"next": "2026-12-01T00:30:00+00:00", "day": "2026-11-30", "same": True}


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (
            "date(now, 'Mars/Olympus')",
            "an error: unknown time zone 'Mars/Olympus' (use an IANA name such as 'Europe/Paris' or 'UTC')",
        ),
        ("addDays('1/12/2026', 1)", "an error: '1/12/2026' is not a day written YYYY-MM-DD"),
        ("daysBetween('2026-12-01', '2026-13-01')", "an error: '2026-13-01' is not a day written YYYY-MM-DD"),
        ("addDays('9999-12-31', 1)", "an error: 9999-12-31 plus 1 days is outside the years 1 to 9999"),
    ],
)
def test_a_date_helper_given_a_bad_value_fails_with_a_message_naming_it(fixed_now, expression, reason):
    with pytest.raises(HandlerError) as exc:
        run(compiled([{"return": expression}]), MemoryStore())
    assert exc.value.message == f"Route 'r' failed at steps[0].return: evaluating `{expression}` raised {reason}"


def test_library_functions_evaluate_in_the_worker_process_too(fixed_now):
    # A comprehension runs in the worker: the date helpers (Python functions) and the extensions are there.
    route = compiled(
        [{"return": "['2026-12-01', '2026-12-03'].map(d, daysBetween(date(now, 'UTC'), d)).sort()"}],
    )
    assert run(route, MemoryStore()) == [1, 3]
    assert celworker._idle  # it went through a worker


def test_replace_and_lists_range_run_in_a_worker_process(monkeypatch):
    seen = []
    real = celworker.evaluate_timed
    monkeypatch.setattr(celworker, "evaluate_timed", lambda *a, **k: seen.append(1) or real(*a, **k))
    route = compiled([{"return": "[params.s.replace('a', 'b'), size(lists.range(3))]"}])
    assert run(route, MemoryStore(), params={"s": "aa"}) == ["bb", 3]
    assert seen == [1]


def test_more_comprehension_iterations_than_cel_allows_fail_naming_the_limit():
    route = compiled([{"return": "params.xs.map(x, params.xs.filter(y, y < x).size()).size()"}])
    with pytest.raises(OperationFailed) as exc:
        run(route, MemoryStore(), params={"xs": list(range(150))})
    assert exc.value.message.startswith(
        "Route 'r' steps[0].return: its comprehensions iterated more than 10000 times, CEL's limit for one expression."
    )
    assert exc.value.details == {"limit": "cel_iterations", "max": 10000, "route": "r", "step": "steps[0].return"}


# --- v1 expressions ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 == 1.0", True),
        ("size([1, 2]) > 1.5", True),
        ("caller.id == 1", False),
        ("caller == null", False),
        ("(true ? 1 : 'one') == 1", True),
        ("2 in [1.0, 2.0]", True),
        (r"size(r'\')", 1),
        ("rb'\\' == b'\\\\'", True),
    ],
)
def test_v1_comparisons_across_types_and_raw_strings_still_save_and_run(expression, value):
    assert run(compiled([{"return": expression}]), MemoryStore()) == value


def test_a_stored_route_the_checker_would_refuse_still_runs_unchecked():
    raw = {"kind": "mutation", "steps": [{"return": "params.big ? 1 + 2.5 : 'fine'"}]}
    problems: list[Problem] = []
    assert check_route("r", raw, Limits(), problems, prefix="routes.r") is None
    assert [p.message for p in problems] == [
        "'+' is not defined for an int and a double; CEL does not mix them: write 2.0 rather than 2, "
        "or convert with double(n) or int(x)"
    ]
    with stored_definitions():
        parts = check_route("r", raw, Limits(), [], prefix="routes.r")
    assert parts is not None
    route = compile_parts(parts)
    assert run(route, MemoryStore(), params={"big": False}) == "fine"
    with pytest.raises(HandlerError, match="raised a type mismatch"):
        run(route, MemoryStore(), params={"big": True})


def test_a_long_chain_of_plus_is_regrouped_for_the_parser_and_keeps_its_value():
    # cel-cpp's parser nests one level per chained operator and stops at 32.
    source = " + ".join(f"'{i},'" for i in range(60))
    assert library.evaluate(cel_compile(source, library.CONTEXT_DECLARATIONS), {}) == "".join(
        f"{i}," for i in range(60)
    )


def test_too_deep_an_expression_is_refused_with_a_message_saying_what_to_do():
    problems: list[Problem] = []
    source = " - ".join(["1"] * 40)
    check_route("r", {"kind": "query", "steps": [{"return": source}]}, Limits(), problems, prefix="routes.r")
    assert [p.as_dict() for p in problems] == [
        {
            "path": "routes.r.steps[0].return",
            "message": "the expression nests more than 32 levels deep, the most CEL's parser reads (each bracket, "
            "call and chained operator such as a - b - c adds one); split it into let steps",
        }
    ]


def _checked_type(source: str) -> Any:
    route = compiled([{"let": source, "as": "v"}, {"return": "v"}])
    return route.steps[0].exprs["value"].type


def test_an_expression_records_its_checked_type():
    assert _checked_type("date(now, 'UTC')") == "string"
    assert _checked_type("[1, 2].sort()") == "list<int>"
    assert _checked_type("params.x") == "dyn"


def test_a_step_may_bind_a_name_the_library_uses_as_a_namespace_or_a_type_name():
    store = MemoryStore(records={"lists": {"a": {"title": "groceries"}}})
    route = compiled(
        [
            {"find": {"collection": "lists", "limit": "10"}, "as": "lists"},
            {"let": "{'pi': 3.0}", "as": "math"},
            {"let": "lists[0]", "as": "list"},
            {"let": "'kind' // a comment naming list", "as": "type"},
            {
                "return": "{'n': size(lists), 'pi': math.pi, 'titles': lists.map(l, l.title), 'r': math.round(1.4), "
                "'list': list.title, 'type': type, 'text': 'list', 'size': size(list), 'is_map': type(list) == map}"
            },
        ],
        kind="query",
    )
    assert run(route, store) == {
        "n": 1,
        "pi": 3.0,
        "titles": ["groceries"],
        "r": 1.0,
        "list": "groceries",
        "type": "kind",
        "text": "list",
        "size": 2,
        "is_map": True,
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'abc'.substring(0, 3)", "abc"),  # end == size: cel-cpp 0.1.3's own refuses it, the engine's does not
        ("'2026-11'.substring(5, 7)", "11"),
        ("'abc'.substring(3)", ""),
        ("'abc'.substring(1, 1)", ""),
        ("sum([0.1, 0.2])", 0.3),
        ("sum([1, 2, 3])", 6),
        ("sum([])", 0),
        ("sum([1, 2.5])", 3.5),
    ],
)
def test_substring_to_the_end_and_exact_sums(source, expected):
    from apps_registry.routes.expressions import compile_expression
    from apps_registry.routes.library import CONTEXT_DECLARATIONS, evaluate
    from apps_registry.routes.limits import Limits

    expr, problems = compile_expression(source, limits=Limits(), context=CONTEXT_DECLARATIONS, route="r", where="w")
    assert problems == []
    value = evaluate(expr.program, {})
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("[1.5].reduce(a, x, a + x, 0.0)", "no function 'reduce'; did you mean sum(list) for a total"),
        ("cel.bind(x, 1, x + 1)", "no function 'cel.bind'; did you mean a let step"),
        ("'abc'.substring(1, 9)", None),  # compiles; out of range at run time
    ],
)
def test_a_function_the_library_lacks_is_named_not_its_item_names(source, message):
    from apps_registry.routes.expressions import compile_expression
    from apps_registry.routes.library import CONTEXT_DECLARATIONS
    from apps_registry.routes.limits import Limits

    expr, problems = compile_expression(source, limits=Limits(), context=CONTEXT_DECLARATIONS, route="r", where="w")
    if message is None:
        assert problems == [] and expr is not None
    else:
        assert len(problems) == 1 and problems[0].message.startswith(message)
