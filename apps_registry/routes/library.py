"""The expression library: the CEL environment every route expression is checked and evaluated in
(Google's CEL runtime for Python, `cel-expr-python`, on cel-cpp), the functions it offers (`FUNCTIONS`,
the one list the docs' tables and the messages are checked against), the date helpers implemented
here, and evaluation that turns CEL's error values into `EvaluationError`.

No Django here: the worker process (routes/celworker.py) imports this module to evaluate the same
programs under the same declarations.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

# The CEL standard extension libraries, by their cel-go names (versions: the latest cel-cpp has).
_CONFIG_YAML = 'extensions:\n  - name: "strings"\n  - name: "math"\n  - name: "lists"\n'
_CONFIG = cel.NewEnvConfigFromYaml(_CONFIG_YAML)

# The declared types an expression's variables may have (a small vocabulary, so declarations are plain
# strings that pickle to the worker process).
_TYPES: dict[str, Any] = {
    "dyn": cel.Type.DYN,
    "int": cel.Type.INT,
    "timestamp": cel.Type.TIMESTAMP,
    "map(string, dyn)": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    "map(string, string)": cel.Type.Map(cel.Type.STRING, cel.Type.STRING),
}
# The variables every expression may read. params is a map of dyn: CEL has no object type with typed
# fields short of a protobuf message, so a field's type is known when the call runs, not when it is saved.
CONTEXT_DECLARATIONS: tuple[tuple[str, str], ...] = (
    ("params", "map(string, dyn)"),
    ("caller", "map(string, string)"),  # id, role
    ("app", "map(string, dyn)"),  # id
    ("now", "timestamp"),
)
Declarations = tuple[tuple[str, str], ...]

# cel-cpp bounds every evaluation's comprehension iterations (map, filter, all, exists, sortBy ...).
ITERATION_LIMIT = 10_000


class EvaluationError(Exception):
    """CEL's error value (or status) from an evaluation, e.g. 'NOT_FOUND: Key not found in map : "b"'."""


# --- the date helpers -------------------------------------------------------------------------


def _zone(name: str) -> dt.tzinfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as 'Europe/Paris' or 'UTC')") from None


def _day(text: str) -> dt.date:
    try:
        if len(text) != 10:
            raise ValueError
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text[:40]!r} is not a day written YYYY-MM-DD") from None


def date_of(moment: dt.datetime, zone: str) -> str:
    """The day (YYYY-MM-DD) a timestamp falls on in a time zone."""
    return moment.astimezone(_zone(zone)).date().isoformat()


def add_days(day: str, days: int) -> str:
    try:
        return (_day(day) + dt.timedelta(days=days)).isoformat()
    except OverflowError:
        raise ValueError(f"{day} plus {days} days is outside the years 1 to 9999") from None


def days_between(start: str, end: str) -> int:
    return (_day(end) - _day(start)).days


def total(values: list[Any]) -> Any:
    """sum(list): numbers added exactly as decimals (0.1 + 0.2 is 0.3, as aggregate's sums); ints give an int."""
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise ValueError("sum() takes a list of numbers")
    if all(isinstance(v, int) for v in values):
        return sum(values)
    return float(sum((Decimal(repr(v)) for v in values), Decimal(0)))


def substring(text: str, start: int, end: int | None = None) -> str:
    """The strings extension's substring, as cel-go defines it: code points [start, end), 0 <= start <= end <=
    size (cel-cpp 0.1.3 refuses end == size, so the engine compiles `.substring(` to this)."""
    stop = len(text) if end is None else end
    if not 0 <= start <= len(text) or not start <= stop <= len(text):
        raise ValueError(f"substring({start}, {stop}) is out of range for a string of {len(text)} characters")
    return text[start:stop]


# What `.substring(` is compiled as (see `substring`): as long as "substring", so the checker's positions stay
# those of the author's text; messages name it substring again.
SUBSTRING = "subString"

_T = cel.Type
_HELPERS = [
    cel.FunctionDecl("sum", [cel.Overload("sum_list", _T.DYN, [_T.List(_T.DYN)], impl=total)]),
    cel.FunctionDecl(
        SUBSTRING,
        [
            cel.Overload("substring_from", _T.STRING, [_T.STRING, _T.INT], is_member=True, impl=substring),
            cel.Overload("substring_range", _T.STRING, [_T.STRING, _T.INT, _T.INT], is_member=True, impl=substring),
        ],
    ),
    cel.FunctionDecl(
        "date", [cel.Overload("date_timestamp_string", _T.STRING, [_T.TIMESTAMP, _T.STRING], impl=date_of)]
    ),
    cel.FunctionDecl("addDays", [cel.Overload("addDays_string_int", _T.STRING, [_T.STRING, _T.INT], impl=add_days)]),
    cel.FunctionDecl(
        "daysBetween", [cel.Overload("daysBetween_string_string", _T.INT, [_T.STRING, _T.STRING], impl=days_between)]
    ),
]


# --- the catalog --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryFunction:
    name: str  # as written in an expression: 'substring', 'math.round', 'lists.range'
    group: str  # strings, math, lists, timestamps, dates, standard
    signatures: tuple[str, ...]  # 'string.substring(int, int) -> string'
    example: str  # a CEL expression over the example context (EXAMPLE_CONTEXT)
    result: Any  # what the example evaluates to (the tests check every row)

    @property
    def member(self) -> bool:
        """Called on a value (`'a'.upperAscii()`) rather than as a function (`size(x)`)."""
        return all(re.match(r"^[\w()]+\.\w+\(", s) and not s.startswith(("math.", "lists.")) for s in self.signatures)


def _ts(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)


# The examples read `now` = 2026-11-30T23:30:00Z (a Monday in UTC, already Tuesday in Paris).
EXAMPLE_NOW = _ts("2026-11-30T23:30:00")
_ACCESSOR_TZ = "timestamp.{}() -> int", "timestamp.{}(string time zone) -> int"


def _accessor(name: str, example: str, result: int) -> LibraryFunction:
    return LibraryFunction(name, "timestamps", tuple(s.format(name) for s in _ACCESSOR_TZ), example, result)


FUNCTIONS: tuple[LibraryFunction, ...] = (
    # strings (the standard ones, then the strings extension)
    LibraryFunction(
        "size",
        "standard",
        ("size(string) -> int", "size(list) -> int", "size(map) -> int", "string.size() -> int"),
        "size('héllo')",
        5,
    ),
    LibraryFunction("contains", "standard", ("string.contains(string) -> bool",), "'groceries'.contains('cer')", True),
    LibraryFunction(
        "startsWith", "standard", ("string.startsWith(string) -> bool",), "'2026-12-01'.startsWith('2026')", True
    ),
    LibraryFunction(
        "endsWith", "standard", ("string.endsWith(string) -> bool",), "'report.pdf'.endsWith('.pdf')", True
    ),
    LibraryFunction(
        "matches", "standard", ("string.matches(string regex) -> bool",), "'AB-12'.matches('^[A-Z]+-[0-9]+$')", True
    ),
    LibraryFunction("lowerAscii", "strings", ("string.lowerAscii() -> string",), "'Hello'.lowerAscii()", "hello"),
    LibraryFunction("upperAscii", "strings", ("string.upperAscii() -> string",), "'Hello'.upperAscii()", "HELLO"),
    LibraryFunction("trim", "strings", ("string.trim() -> string",), "'  milk  '.trim()", "milk"),
    LibraryFunction(
        "split",
        "strings",
        ("string.split(string) -> list(string)", "string.split(string, int) -> list(string)"),
        "'a,b,c'.split(',')",
        ["a", "b", "c"],
    ),
    LibraryFunction(
        "join",
        "strings",
        ("list(string).join() -> string", "list(string).join(string) -> string"),
        "['a', 'b'].join(', ')",
        "a, b",
    ),
    LibraryFunction(
        "replace",
        "strings",
        ("string.replace(string, string) -> string", "string.replace(string, string, int) -> string"),
        "'a-b-c'.replace('-', '/')",
        "a/b/c",
    ),
    LibraryFunction(
        "substring",
        "strings",
        ("string.substring(int) -> string", "string.substring(int, int) -> string"),
        "'2026-12-01'.substring(0, 7)",
        "2026-12",
    ),
    LibraryFunction(
        "indexOf",
        "strings",
        ("string.indexOf(string) -> int", "string.indexOf(string, int) -> int"),
        "'banana'.indexOf('an')",
        1,
    ),
    LibraryFunction(
        "lastIndexOf",
        "strings",
        ("string.lastIndexOf(string) -> int", "string.lastIndexOf(string, int) -> int"),
        "'banana'.lastIndexOf('an')",
        3,
    ),
    LibraryFunction("charAt", "strings", ("string.charAt(int) -> string",), "'abc'.charAt(1)", "b"),
    LibraryFunction(
        "format",
        "strings",
        ("string.format(list) -> string",),
        "'%s: %d items, %.2f'.format(['milk', 3, 2.5])",
        "milk: 3 items, 2.50",
    ),
    # conversions
    LibraryFunction(
        "string",
        "standard",
        (
            "string(int) -> string",
            "string(double) -> string",
            "string(bool) -> string",
            "string(timestamp) -> string",
            "string(duration) -> string",
            "string(bytes) -> string",
        ),
        "string(42) + ' items'",
        "42 items",
    ),
    LibraryFunction(
        "int",
        "standard",
        ("int(string) -> int", "int(double) -> int", "int(timestamp) -> int (seconds since 1970)"),
        "int('42') + int(2.9)",
        44,
    ),
    LibraryFunction(
        "double", "standard", ("double(int) -> double", "double(string) -> double"), "double(3) / 2.0", 1.5
    ),
    LibraryFunction(
        "timestamp",
        "standard",
        ("timestamp(string RFC 3339) -> timestamp",),
        "timestamp('2026-12-01T09:00:00Z') > now",
        True,
    ),
    LibraryFunction(
        "duration",
        "standard",
        ("duration(string) -> duration",),
        "string(now + duration('1h30m'))",
        "2026-12-01T01:00:00Z",
    ),
    # math
    LibraryFunction("math.round", "math", ("math.round(double) -> double",), "math.round(2.5)", 3.0),
    LibraryFunction("math.ceil", "math", ("math.ceil(double) -> double",), "math.ceil(1.2)", 2.0),
    LibraryFunction("math.floor", "math", ("math.floor(double) -> double",), "math.floor(1.8)", 1.0),
    LibraryFunction("math.abs", "math", ("math.abs(int) -> int", "math.abs(double) -> double"), "math.abs(-3)", 3),
    LibraryFunction(
        "math.greatest",
        "math",
        ("math.greatest(number, ...) -> number", "math.greatest(list) -> number"),
        "math.greatest(1, 5, 3)",
        5,
    ),
    LibraryFunction(
        "math.least",
        "math",
        ("math.least(number, ...) -> number", "math.least(list) -> number"),
        "math.least([4.5, 2.0, 8.0])",
        2.0,
    ),
    # lists
    LibraryFunction("sort", "lists", ("list.sort() -> list",), "[3, 1, 2].sort()", [1, 2, 3]),
    LibraryFunction(
        "sortBy",
        "lists",
        ("list.sortBy(x, key) -> list",),
        "[{'n': 'b', 'at': 2}, {'n': 'a', 'at': 1}].sortBy(e, e.at).map(e, e.n)",
        ["a", "b"],
    ),
    LibraryFunction("distinct", "lists", ("list.distinct() -> list",), "['a', 'b', 'a'].distinct()", ["a", "b"]),
    LibraryFunction("slice", "lists", ("list.slice(int start, int end) -> list",), "[1, 2, 3, 4].slice(1, 3)", [2, 3]),
    LibraryFunction(
        "flatten",
        "lists",
        ("list.flatten() -> list", "list.flatten(int depth) -> list"),
        "[[1], [2, 3]].flatten()",
        [1, 2, 3],
    ),
    LibraryFunction("lists.range", "lists", ("lists.range(int n) -> list(int)",), "lists.range(3)", [0, 1, 2]),
    # timestamps (UTC without a time zone; with one, an IANA name or an offset such as '+05:30')
    _accessor("getFullYear", "now.getFullYear('Europe/Paris')", 2026),
    _accessor("getMonth", "now.getMonth('Europe/Paris')", 11),  # 0-11
    _accessor("getDate", "now.getDate('Europe/Paris')", 1),  # 1-31
    _accessor("getDayOfMonth", "now.getDayOfMonth('Europe/Paris')", 0),  # 0-30
    _accessor("getDayOfWeek", "now.getDayOfWeek('Europe/Paris')", 2),  # 0 = Sunday
    _accessor("getDayOfYear", "now.getDayOfYear()", 333),  # 0-365
    _accessor("getHours", "now.getHours('Europe/Paris')", 0),
    _accessor("getMinutes", "now.getMinutes()", 30),
    _accessor("getSeconds", "now.getSeconds()", 0),
    _accessor("getMilliseconds", "now.getMilliseconds()", 0),
    # dates: days as 'YYYY-MM-DD' strings (Charming's helpers)
    LibraryFunction(
        "date", "dates", ("date(timestamp, string time zone) -> string",), "date(now, 'Europe/Paris')", "2026-12-01"
    ),
    LibraryFunction(
        "addDays", "dates", ("addDays(string day, int) -> string",), "addDays('2026-12-31', 1)", "2027-01-01"
    ),
    LibraryFunction("sum", "lists", ("sum(list) -> int or double",), "sum([0.1, 0.2, 2.5])", 2.8),
    LibraryFunction(
        "daysBetween",
        "dates",
        ("daysBetween(string day, string day) -> int",),
        "daysBetween('2026-12-01', '2026-12-25')",
        24,
    ),
)
FUNCTION_NAMES = frozenset(f.name for f in FUNCTIONS)
# Macros: written like functions, expanded by the parser (their first argument names an item).
MACROS = ("has", "all", "exists", "exists_one", "map", "filter", "sortBy")


# --- the environment ---------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def environment(declarations: Declarations) -> Any:
    """The CEL environment declaring these variables (one per distinct set; building one costs ~1 ms)."""
    env = cel.NewEnv(
        config=_CONFIG,
        variables={name: _TYPES[kind] for name, kind in declarations},
        functions=_HELPERS,
    )
    # The declared types reach the evaluator's input conversion only once the environment has compiled
    # something: a program deserialized into a fresh one (the worker's) would read a timestamp as dyn.
    env.compile("null")
    return env


def compile_program(source: str, declarations: Declarations, *, check: bool = True) -> Any:
    """The program for `source`, type-checked against `declarations` (or only parsed, check=False).
    Raises RuntimeError with cel-cpp's report ('ERROR: <input>:1:4: ...' lines) when it does not compile."""
    return environment(declarations).compile(source, disable_check=not check)


def program_load(serialized: bytes, declarations: Declarations) -> Any:
    return environment(declarations).deserialize(serialized)


_ERROR = cel.Type.ERROR


def evaluate(program: Any, data: dict[str, Any]) -> Any:
    """The program's value as plain Python data (timestamps as datetimes, durations as timedeltas), or
    EvaluationError with CEL's message."""
    try:
        value = program.eval(data=data)
        if value.type() == _ERROR:
            message = value.plain_value()
            if "Non-CEL value type" in message and _holds_times(data):
                value = program.eval(data=_with_proto_times(data))
                if value.type() == _ERROR:
                    raise EvaluationError(value.plain_value())
            else:
                raise EvaluationError(message)
        return value.plain_value()
    except EvaluationError:
        raise
    except RuntimeError as exc:  # a status, e.g. 'INTERNAL: Iteration budget exceeded [INTERNAL]'
        raise EvaluationError(str(exc)) from None


def _holds_times(value: Any) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, (dt.datetime, dt.timedelta)):
            return True
        if isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


def _with_proto_times(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every timestamp and duration below a variable's top level as a protobuf message: the
    runtime converts a Python datetime only where a variable is declared a timestamp, while a value an
    earlier step bound (a `dyn`) may hold them (`let: {'at': now}`)."""
    from google.protobuf import duration_pb2, timestamp_pb2

    def convert(value: Any, top: bool) -> Any:
        if isinstance(value, dt.datetime) and not top:
            message = timestamp_pb2.Timestamp()
            message.FromDatetime(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
            return message
        if isinstance(value, dt.timedelta):
            duration = duration_pb2.Duration()
            duration.FromTimedelta(value)
            return duration
        if isinstance(value, dict):
            return {k: convert(v, False) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v, False) for v in value]
        return value

    return {name: convert(value, name == "now") for name, value in data.items()}
