"""The two CEL libraries side by side: common-expression-language 0.10.0 (module `cel`, Rust-backed, the
engine's library until issue 19) and Google's cel-expr-python 0.1.3 (cel-cpp, the engine's library now,
through routes/library.py).

    .venv/bin/python benchmarks/cel_libraries.py            # figures for docs/performance.md
    .venv/bin/python benchmarks/cel_libraries.py --quick    # a smoke run (seconds)

The old library is no longer a requirement: install it beside the new one to compare
(`.venv/bin/pip install common-expression-language==0.10.0`); without it only the new one is measured.

Printed, with the load average:
  evaluation    microseconds per evaluation of typical route expressions over params, a record and lists of
                100 records (median over rounds, min-max); the new side goes through library.evaluate (the
                engine's path: the error check and the conversion of the result to Python);
  compile       microseconds to compile each expression (new: parse only, and parse + type check);
  checks        what each library reports for common mistakes: at compile time, at run time, or nothing;
  conversions   what Python values become and come back as (int64 range, double, null, bytes, timestamps,
                durations, a timestamp inside a map);
  errors        what a missing key, a division by zero and an overflow raise;
  worker        whether a compiled program can be sent to another process, and the cost of doing so;
  the GIL       whether other threads run while an evaluation does (they do not: both hold it, so the engine
                keeps evaluating expensive expressions in a worker process).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import pickle
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from measure import banner, load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apps_registry.routes import library  # noqa: E402  (after the path)
from apps_registry.routes.expressions import cel_compile  # noqa: E402

old_cel: Any
try:
    import cel as old_cel  # common-expression-language
except ImportError:  # not installed: only the new library is measured
    old_cel = None

NOW = dt.datetime(2026, 11, 30, 23, 30, tzinfo=dt.UTC)
RECORDS = [
    {"id": f"r{i}", "amount": float(i), "category": "food" if i % 2 else "rent", "done": i % 3 == 0} for i in range(100)
]
CONTEXT = {
    "params": {"amount": 12.5, "category": "food", "note": "lunch", "n": 3},
    "caller": {"id": "42", "role": "owner"},
    "app": {"id": "a1"},
    "now": NOW,
    "budget": {"id": "current", "limit": 100.0, "spent": 10.0},
    "items": RECORDS,
}
# (label, expression, the bound names it reads besides the context)
EXPRESSIONS = [
    ("comparison", "params.amount <= 0.0", ()),
    ("record literal", "{'amount': params.amount, 'category': params.category}", ()),
    ("arithmetic on a record", "budget.limit - budget.spent - params.amount", ("budget",)),
    ("optional field", "has(params.note) ? params.note : ''", ()),
    ("string concatenation", "'by ' + caller.id + ' (' + caller.role + ')'", ()),
    ("filter 100 records", "items.filter(x, x.done).size()", ("items",)),
    ("map 100 records", "items.map(x, x.amount)", ("items",)),
    ("exists over 100", "items.exists(x, x.category == params.category)", ("items",)),
]
MISTAKES = [
    ("unknown function", "nofunc(1)"),
    ("extension function (strings)", "'Milk'.lowerAscii()"),
    ("wrong argument type", "'abc'.substring('a')"),
    ("wrong argument count", "size(1, 2)"),
    ("string() of a list", "string([1, 2])"),
    ("int + double literal", "1 + 2.5"),
    ("undeclared variable", "budgt.limit"),
    ("timestamp accessor with a zone", "now.getDayOfWeek('Europe/Paris')"),
]


def _median_us(run: Callable[[], Any], calls: int, rounds: int) -> tuple[float, float, float]:
    """Per-call time over `rounds` rounds of at most `calls` calls (fewer for slow expressions: ~0.2 s a round)."""
    start = time.perf_counter()
    run()
    calls = max(10, min(calls, int(0.2 / max(time.perf_counter() - start, 1e-7))))
    results = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        results.append((time.perf_counter() - start) / calls * 1e6)
    results.sort()
    return statistics.median(results), results[0], results[-1]


def _show(figure: tuple[float, float, float]) -> str:
    median, low, high = figure
    return f"{median:8.1f} ({low:.1f}-{high:.1f})"


def _declarations(names: tuple[str, ...]) -> library.Declarations:
    return library.CONTEXT_DECLARATIONS + tuple((name, "dyn") for name in names)


def evaluation(calls: int, rounds: int) -> None:
    banner("evaluation, µs per evaluation: median (min-max) over rounds")
    print(f"{'expression':28} {'common-expression-language':>30} {'cel-expr-python':>26}")
    for label, source, names in EXPRESSIONS:
        inputs = {name: CONTEXT[name] for name in ("params", "caller", "app", "now", *names)}
        new_program = cel_compile(source, _declarations(names))
        new = _median_us(functools.partial(library.evaluate, new_program, inputs), calls, rounds)
        old = "not installed"
        if old_cel is not None:
            old_program = old_cel.compile(source)
            old = _show(_median_us(functools.partial(old_program.execute, inputs), calls, rounds))
        print(f"{label:28} {old:>30} {_show(new):>26}")


def compiling(calls: int, rounds: int) -> None:
    banner("compile, µs per expression: median (min-max) over rounds")
    print(f"{'expression':28} {'common-expression-language':>30} {'new: parse only':>26} {'new: parse + check':>26}")
    for label, source, names in EXPRESSIONS:
        declarations = _declarations(names)
        library.environment(declarations)  # built once per set of declarations (~1 ms), then cached
        parse = _median_us(functools.partial(cel_compile, source, declarations, check=False), calls, rounds)
        check = _median_us(functools.partial(cel_compile, source, declarations), calls, rounds)
        old = "not installed"
        if old_cel is not None:
            old = _show(_median_us(functools.partial(old_cel.compile, source), calls, rounds))
        print(f"{label:28} {old:>30} {_show(parse):>26} {_show(check):>26}")
    fresh = []
    for i in range(20):
        start = time.perf_counter()
        library.environment(library.CONTEXT_DECLARATIONS + ((f"fresh_{i}_{time.monotonic_ns()}", "dyn"),))
        fresh.append((time.perf_counter() - start) * 1e3)
    print(f"a new environment (a new set of declared names): {statistics.median(fresh):.2f} ms median")


def _old_outcome(source: str) -> str:
    assert old_cel is not None
    try:
        program = old_cel.compile(source)
    except Exception as exc:
        return f"compile: {type(exc).__name__}: {str(exc)[:60]}"
    try:
        return f"runs: {program.execute(dict(CONTEXT))!r}"[:80]
    except Exception as exc:
        return f"run time: {type(exc).__name__}: {str(exc)[:60]}"


def _new_outcome(source: str) -> str:
    try:
        program = cel_compile(source, library.CONTEXT_DECLARATIONS)
    except RuntimeError as exc:
        return f"compile: {str(exc).splitlines()[0].split(': ', 3)[-1][:70]}"
    try:
        return f"runs: {library.evaluate(program, dict(CONTEXT))!r}"[:80]
    except library.EvaluationError as exc:
        return f"run time: {str(exc)[:70]}"


def checks() -> None:
    banner("checks: what each library says about common mistakes")
    for label, source in MISTAKES:
        print(f"{label} `{source}`")
        if old_cel is not None:
            print(f"    common-expression-language: {_old_outcome(source)}")
        print(f"    cel-expr-python:            {_new_outcome(source)}")


def conversions() -> None:
    banner("conversions: a Python value handed in as `x` (dyn) and what comes back")
    values: list[tuple[str, Any]] = [
        ("int64 max", 2**63 - 1),
        ("int64 max + 1", 2**63),
        ("int64 min - 1", -(2**63) - 1),
        ("double", 2.5),
        ("whole double", 2.0),
        ("null", None),
        ("bytes", b"ab"),
        ("timestamp", NOW),
        ("duration", dt.timedelta(seconds=90)),
        ("timestamp in a map", {"at": NOW}),
    ]
    for label, value in values:
        row = f"{label:20}"
        if old_cel is not None:
            try:
                got = old_cel.compile("x").execute({"x": value})
                row += f" old: {got!r} ({type(got).__name__})"[:60].ljust(62)
            except Exception as exc:
                row += f" old: {type(exc).__name__}: {str(exc)[:40]}".ljust(62)
        program = library.compile_program("x", (("x", "dyn"),))
        try:
            got = library.evaluate(program, {"x": value})
            row += f" new: {got!r} ({type(got).__name__})"[:70]
        except library.EvaluationError as exc:
            row += f" new: error: {str(exc)[:60]}"
        print(row)
    print("results: int stays int, double stays double on both (the engine's to_json relies on it); the new library")
    print(
        "returns bytes as bytearray; a datetime inside a dyn value is refused by it, so library.evaluate retries with"
    )
    print("protobuf Timestamp/Duration messages (the row above went through that retry)")


def errors() -> None:
    banner("errors at run time")
    for label, source in [
        ("missing key", "{'a': 1}.b"),
        ("division by zero", "params.n / 0"),
        ("int overflow", "9223372036854775807 + params.n"),
        ("index out of range", "[1][params.n]"),
    ]:
        print(f"{label} `{source}`")
        if old_cel is not None:
            print(f"    common-expression-language: {_old_outcome(source)}")
        print(f"    cel-expr-python:            {_new_outcome(source)}")


def worker(calls: int) -> None:
    banner("worker: sending a compiled program to another process")
    source = "items.filter(x, x.done).map(x, x.amount)"
    declarations = _declarations(("items",))
    program = cel_compile(source, declarations)
    if old_cel is not None:
        try:
            pickle.dumps(old_cel.compile(source))
            print("common-expression-language: a Program pickles")
        except Exception as exc:
            print(f"common-expression-language: a Program does not pickle ({exc}); the worker recompiles the source")
    serialized = program.serialize()
    start = time.perf_counter()
    for _ in range(calls):
        program.serialize()
    per_serialize = (time.perf_counter() - start) / calls * 1e6
    start = time.perf_counter()
    for _ in range(calls):
        library.program_load(serialized, declarations)
    per_load = (time.perf_counter() - start) / calls * 1e6
    print(
        f"cel-expr-python: Expression.serialize() is {len(serialized)} bytes (the checked AST), "
        f"{per_serialize:.1f} µs; Env.deserialize {per_load:.1f} µs"
    )


def gil() -> None:
    banner("the GIL: do other threads run during an evaluation?")
    data = {"xs": list(range(1000)), "s": "x" * 250_000}
    sides: list[tuple[str, Callable[[], Any]]] = []
    if old_cel is not None:
        old_program = old_cel.compile("xs.map(x, size(s + s)).size()")
        sides.append(("common-expression-language", lambda: old_program.execute(data)))
    new_program = library.compile_program("xs.map(x, size(s + s)).size()", (("xs", "dyn"), ("s", "dyn")))
    sides.append(("cel-expr-python", lambda: library.evaluate(new_program, data)))
    for label, run in sides:
        ticks: list[float] = []
        done = threading.Event()

        def tick(ticks: list[float] = ticks, done: threading.Event = done) -> None:
            while not done.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.005)

        thread = threading.Thread(target=tick)
        thread.start()
        time.sleep(0.02)
        before = len(ticks)
        start = time.perf_counter()
        run()
        spent = time.perf_counter() - start
        during = len(ticks) - before
        done.set()
        thread.join()
        print(
            f"{label}: {spent:.2f} s of evaluation, {during} ticks of a 5 ms thread meanwhile "
            f"(~{spent / 0.005:.0f} if it ran freely)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run: few calls, three rounds")
    args = parser.parse_args()
    calls, rounds = (200, 3) if args.quick else (5000, 9)
    print(f"load average at the start: {load()}")
    evaluation(calls, rounds)
    compiling(max(calls // 5, 20), rounds)
    checks()
    conversions()
    errors()
    worker(calls)
    if not args.quick:
        gil()
    print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    main()
