"""CEL expressions: authoring-time checks (syntax, length, nesting, names, types) and run-time
evaluation that turns every failure into a `handler_error` naming the route, the step and the
expression. The CEL environment and its function library are routes/library.py's."""

from __future__ import annotations

import base64
import contextlib
import contextvars
import difflib
import functools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from apps_registry.exceptions import CharmingError, HandlerError, OperationFailed
from apps_registry.routes import library
from apps_registry.routes.limits import Limits
from apps_registry.values import clip, type_name

if TYPE_CHECKING:
    from apps_registry.routes.steps import Call

# The range of CEL's int (a signed 64-bit integer): params, records and increments stay inside it.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Variables every expression may use, besides the names bound by earlier steps.
CONTEXT_NAMES = ("params", "caller", "app", "now")
# Identifiers that read like variables although they are type names or the library's namespaces.
_BUILTIN_IDENTS = frozenset(
    {"string", "int", "uint", "double", "bool", "bytes", "list", "map", "null_type", "type", "dyn", "google"}
    | {"math", "lists", "strings", "true", "false", "null", "in"}
)
# CEL's type names: a step may bind one ("as": "list"), which CEL cannot declare as a variable; the
# expression is compiled with the name renamed (`renamed`), and the value handed in under that name.
CEL_TYPE_NAMES = frozenset(
    {"string", "int", "uint", "double", "bool", "bytes", "list", "map", "null_type", "type", "dyn"}
)
# Macros that iterate over a list or map (sortBy: the lists extension's, one key per item).
COMPREHENSION_MACROS = ("map", "filter", "all", "exists", "exists_one", "sortBy")
_MACRO_VARIABLE = re.compile(r"\.\s*(?:" + "|".join(COMPREHENSION_MACROS) + r")\s*\(\s*([A-Za-z_]\w*)\s*,")
_SYNTAX_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*(.*)", re.DOTALL)


@dataclass(frozen=True)
class ExpressionProblem:
    message: str
    limit: str | None = None
    max: int | None = None


@dataclass(frozen=True)
class Scan:
    """What the checker needs from an expression's text, read by a tokenizer for CEL's lexical
    structure (string and bytes literals with their r/b prefixes, triple quotes and escapes, and
    `//` line comments), so neither a string nor a comment can hide brackets or macro calls."""

    nesting: int  # deepest bracket nesting: ( [ {
    comprehensions: int  # deepest comprehension nesting: macro calls open inside each other
    plus: int  # `+` operators (each may concatenate lists: a + a + a grows a value)
    commas: int  # commas: a list literal has at most commas + 1 items
    refs: int  # identifiers not after a '.': variable (and function) references
    code: str  # the source with comments and string contents blanked out (same length)
    names: frozenset[str] = frozenset()  # identifiers not after a '.' and not called: variables

    @property
    def regex(self) -> bool:
        """Whether the expression calls `matches` (a regex compiled and run on every evaluation,
        whose cost grows with the pattern's compiled size times the text's length), `replace` or
        `lists.range` (whose results can be far larger than their inputs: they run where memory and
        time are bounded)."""
        return _ISOLATED_CALL.search(self.code) is not None


_ISOLATED_CALL = re.compile(r"\b(?:matches|replace|range)\s*\(")


def _scan(source: str) -> Scan:
    """Scan `source`. A comprehension is a macro call `.map(`, `.filter(`, `.all(`, `.exists(`,
    `.exists_one(` (whitespace and comments may sit between its parts); its nesting is how many such
    calls are open at once."""
    depth = max_depth = 0
    comprehension_depth = max_comprehension = 0
    plus = commas = refs = 0
    names: set[str] = set()
    stack: list[bool] = []  # per open bracket: is it a comprehension's parenthesis?
    code = list(source)
    tokens: list[str] = ["", ""]  # the last two significant tokens
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch.isspace():
            i += 1
            continue
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            code[i:end] = " " * (end - i)
            i = end
            continue
        quote_at = _string_start(source, i)
        if quote_at is not None:
            prefix = source[i:quote_at].lower()
            quote = source[quote_at] * 3 if source.startswith(source[quote_at] * 3, quote_at) else source[quote_at]
            j = quote_at + len(quote)
            while j < n and not source.startswith(quote, j):
                j += 2 if source[j] == "\\" and "r" not in prefix else 1
            end = min(n, j + len(quote))
            code[i:end] = " " * (end - i)
            tokens = [tokens[1], "string"]
            i = end
            continue
        if ch.isdigit():  # a number (1, 2.5, 1e-3, 0xFF, 3u): no identifier inside it
            j = i + 1
            while j < n and (source[j].isalnum() or source[j] in "._" or (source[j] in "+-" and source[j - 1] in "eE")):
                if source[j] == "." and not (j + 1 < n and source[j + 1].isdigit()):
                    break
                j += 1
            tokens = [tokens[1], "number"]
            i = j
            continue
        if ch.isalpha() or ch == "_":
            j = i + 1
            while j < n and (source[j].isalnum() or source[j] == "_"):
                j += 1
            if tokens[1] != ".":
                refs += 1
                after = j
                while after < n and source[after].isspace():
                    after += 1
                if after >= n or source[after] != "(":
                    names.add(source[i:j])
            tokens = [tokens[1], source[i:j]]
            i = j
            continue
        if ch in "([{":
            is_macro = ch == "(" and tokens[0] == "." and tokens[1] in COMPREHENSION_MACROS
            stack.append(is_macro)
            depth += 1
            max_depth = max(max_depth, depth)
            if is_macro:
                comprehension_depth += 1
                max_comprehension = max(max_comprehension, comprehension_depth)
        elif ch in ")]}" and stack:
            if stack.pop():
                comprehension_depth -= 1
            depth -= 1
        elif ch == "+":
            plus += 1
        elif ch == ",":
            commas += 1
        tokens = [tokens[1], ch]
        i += 1
    return Scan(
        nesting=max_depth,
        comprehensions=max_comprehension,
        plus=plus,
        commas=commas,
        refs=refs,
        code="".join(code),
        names=frozenset(names),
    )


def _string_start(source: str, i: int) -> int | None:
    """Where the quote of a string or bytes literal starting at `i` is (after an r/b prefix), or None."""
    j = i
    if i > 0 and (source[i - 1].isalnum() or source[i - 1] == "_"):
        return None  # inside an identifier or a number
    while j < len(source) and j - i < 2 and source[j] in "rRbB":
        j += 1
    if j < len(source) and source[j] in "'\"":
        return j
    return None


def check_source(source: Any, limits: Limits) -> tuple[Any, list[ExpressionProblem], Scan | None]:
    """Parse `source` if it passes the authoring limits. Returns (parsed program or None, problems, scan);
    `check_types` then type-checks it against the names in scope."""
    if not isinstance(source, str):
        return None, [ExpressionProblem(f"must be a CEL expression (a string), got {type_name(source)}")], None
    if not source.strip():
        return None, [ExpressionProblem("must be a CEL expression, got an empty string")], None
    if len(source) > limits.expression_length:
        return (
            None,
            [
                ExpressionProblem(
                    f"expression is {len(source)} characters long; the limit is {limits.expression_length}",
                    limit="expression_length",
                    max=limits.expression_length,
                )
            ],
            None,
        )
    problems: list[ExpressionProblem] = []
    scan = _scan(source)
    nesting, comprehensions = scan.nesting, scan.comprehensions
    if nesting > limits.expression_nesting:
        problems.append(
            ExpressionProblem(
                f"brackets are nested {nesting} deep; the limit is {limits.expression_nesting}",
                limit="expression_nesting",
                max=limits.expression_nesting,
            )
        )
    if comprehensions > limits.comprehension_nesting:
        problems.append(
            ExpressionProblem(
                f"comprehensions (map/filter/all/exists/exists_one) are nested {comprehensions} deep; "
                f"the limit is {limits.comprehension_nesting}",
                limit="comprehension_nesting",
                max=limits.comprehension_nesting,
            )
        )
    if problems:
        return None, problems, scan
    try:
        program = cel_compile(source, library.CONTEXT_DECLARATIONS, check=False)
    except RuntimeError as exc:
        return None, [ExpressionProblem(syntax_error_message(str(exc)))], scan
    return program, [], scan


def syntax_error_message(raw: str) -> str:
    """'syntax error at column 14: ...' from the CEL parser's message (first problem only)."""
    if _RECURSION in raw:
        return (
            "the expression nests more than 32 levels deep, the most CEL's parser reads (each bracket, call "
            "and chained operator such as a - b - c adds one); split it into let steps"
        )
    match = _SYNTAX_POSITION.search(raw)
    if not match:
        return f"syntax error: {raw}"
    line, column, rest = int(match.group(1)), int(match.group(2)), match.group(3)
    rest = rest.split("\n", 1)[0].strip()
    rest = re.sub(r"^Syntax error:\s*", "", rest)
    where = f"column {column}" if line == 1 else f"line {line}, column {column}"
    return f"syntax error at {where}: {rest}"


def referenced_names(scan: Scan, scope: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """Top-level names an expression reads: comprehension variables excluded, and type names and the
    library's namespaces (`math`, `lists`) unless a step bound that name (`"as": "lists"`, `"as": "list"`)."""
    local = set(_MACRO_VARIABLE.findall(scan.code))
    return {name for name in scan.names if name not in local and (name not in _BUILTIN_IDENTS or name in scope)}


# --- what cel-cpp's parser is given ---------------------------------------------------------------
# Two v1 forms the old parser read and cel-cpp's does not, rewritten to equivalents before parsing: a raw
# string ending in a backslash (r'\', which cel-cpp reads as escaping the quote), and a chain of more `+`
# than its parser's recursion depth (32) allows, regrouped into parenthesized runs.
_PLUS_RUN = 16
_RECURSION = "Exceeded max recursion depth"


_SUBSTRING_CALL = re.compile(r"\.(\s*)substring(\s*)\(")


def parseable(source: str) -> str:
    """`source` with raw string literals ending in a backslash written as ordinary escaped literals, and the
    strings extension's `.substring(` as the engine's own (library.substring: cel-cpp 0.1.3 refuses an end
    index equal to the string's size)."""
    if "substring" in source:
        code = _scan(source).code  # strings and comments blanked: only calls are rewritten
        for match in reversed(list(_SUBSTRING_CALL.finditer(code))):
            source = (
                source[: match.start()]
                + f".{match.group(1)}{library.SUBSTRING}{match.group(2)}("
                + source[match.end() :]
            )
    if "\\" not in source:
        return source
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append(source[i:end])
            i = end
            continue
        quote_at = _string_start(source, i)
        if quote_at is None:
            out.append(source[i])
            i += 1
            continue
        prefix = source[i:quote_at]
        quote = source[quote_at] * 3 if source.startswith(source[quote_at] * 3, quote_at) else source[quote_at]
        j = quote_at + len(quote)
        raw = "r" in prefix.lower()
        while j < n and not source.startswith(quote, j):
            j += 2 if source[j] == "\\" and not raw else 1
        body = source[quote_at + len(quote) : j]
        if raw and body.endswith("\\"):
            plain = prefix.replace("r", "").replace("R", "")
            out.append(plain + quote + body.replace("\\", "\\\\") + quote)
        else:
            out.append(source[i : j + len(quote)])
        i = j + len(quote)
    return "".join(out)


def regrouped(source: str) -> str:
    """`source` with every run of more than 16 operands joined by `+` (and no `-` beside them) written as
    parenthesized runs of 16: `a + b + ... ` nests one level per operand in cel-cpp's parser."""
    code = _scan(source).code
    inserts: list[tuple[int, str]] = []
    frames: list[dict[str, Any]] = [{"start": 0, "plus": [], "minus": False}]

    def close(frame: dict[str, Any], end: int) -> None:
        if frame["minus"] or len(frame["plus"]) < _PLUS_RUN:
            return
        bounds = [frame["start"], *frame["plus"], end]
        spans = [(bounds[k] + (1 if k else 0), bounds[k + 1]) for k in range(len(bounds) - 1)]
        while len(spans) > _PLUS_RUN:
            grouped = []
            for k in range(0, len(spans), _PLUS_RUN):
                chunk = spans[k : k + _PLUS_RUN]
                if len(chunk) > 1:
                    inserts.append((chunk[0][0], "("))
                    inserts.append((chunk[-1][1], ")"))
                grouped.append((chunk[0][0], chunk[-1][1]))
            spans = grouped

    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        frame = frames[-1]
        two = code[i : i + 2]
        if ch in "([{":
            frames.append({"start": i + 1, "plus": [], "minus": False})
        elif ch in ")]}":
            close(frame, i)
            if len(frames) > 1:
                frames.pop()
        elif two in ("||", "&&", "==", "!=", "<=", ">="):
            close(frame, i)
            frame.update(start=i + 2, plus=[], minus=False)
            i += 2
            continue
        elif ch in ",?:<>" or (two == "in" and not _word(code, i - 1) and not _word(code, i + 2)):
            close(frame, i)
            width = 2 if two == "in" else 1
            frame.update(start=i + width, plus=[], minus=False)
            i += width
            continue
        elif ch == "+":
            frame["plus"].append(i)
        elif ch == "-":
            frame["minus"] = True
        i += 1
    close(frames[0], n)
    for at, text in sorted(inserts, key=lambda item: item[0], reverse=True):
        source = source[:at] + text + source[at:]
    return source


def _word(code: str, at: int) -> bool:
    return 0 <= at < len(code) and (code[at].isalnum() or code[at] == "_")


def renamed(source: str, names: set[str] | frozenset[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`source` with each variable in `names` (identifiers not after '.' and not called) written
    `charming__<name>`, and the (new name, name) pairs."""
    if not names:
        return source, ()
    code = _scan(source).code
    pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, names))) + r")\b(?!\s*\()")
    spans = [(m.start(1), m.end(1)) for m in pattern.finditer(code)]
    for start, end in reversed(spans):
        source = source[:start] + ALIAS_PREFIX + source[start:end] + source[end:]
    return source, tuple((ALIAS_PREFIX + name, name) for name in sorted(names))


ALIAS_PREFIX = "charming__"


def cel_compile(source: str, declarations: library.Declarations, *, check: bool = True) -> Any:
    """library.compile_program on the parseable form of `source` (see `parseable`, `regrouped`)."""
    text = parseable(source)
    try:
        return library.compile_program(text, declarations, check=check)
    except RuntimeError as exc:
        if _RECURSION not in str(exc) or "+" not in source:
            raise
    return library.compile_program(regrouped(text), declarations, check=check)


# --- type checking --------------------------------------------------------------------------------


@contextlib.contextmanager
def stored_definitions() -> Iterator[None]:
    """Compile definitions saved before the type checker existed (a stored route compiled on its first
    call): an expression the checker refuses still runs, unchecked, as it always did (it fails at run time
    where it always would have). Saving a definition always checks."""
    token = _STORED.set(True)
    try:
        yield
    finally:
        _STORED.reset(token)


_STORED: contextvars.ContextVar[bool] = contextvars.ContextVar("charming_stored_definitions", default=False)


@dataclass(frozen=True)
class Checked:
    program: Any
    type: str  # the checked result type, lower case ('int', 'list<string>', 'dyn')
    problems: list[str]


def check_types(source: str, declarations: library.Declarations) -> Checked:
    """Type-check `source` against the declared variables. A refused expression gets one message per
    error, worded for the author; comparisons across types (1 == 1.0, x == null) are not refused: CEL's
    run time defines them, and v1 expressions rely on it."""
    try:
        program = cel_compile(source, declarations)
        return Checked(program, program.return_type().name().lower(), [])
    except RuntimeError as exc:
        errors = _cel_errors(str(exc))
    errors = [(line, column, text.replace(library.SUBSTRING, "substring")) for line, column, text in errors]
    messages = [_check_message(source, line, column, text) for line, column, text in errors]
    if _STORED.get() or all(message is None for message in messages):
        return Checked(cel_compile(source, declarations, check=False), "dyn", [])
    return Checked(None, "dyn", list(dict.fromkeys(m for m in messages if m is not None)))


_SELECT = re.compile(r"expression of type '(.*)' cannot be the operand of a select operation")
_CEL_ERROR = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")
_NO_OVERLOAD = re.compile(r"found no matching overload for '([^']+)' applied to '\((.*)\)'")
# Comparisons across types, which the checker refuses and the run time defines (heterogeneous equality,
# numeric comparison across int, uint and double): `caller.id == 1` is false, `size(x) > 0.5` compares.
_CROSS_TYPE = frozenset({"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in", "_?_:_"})
_OPERATORS = {
    "_+_": "+",
    "_-_": "-",
    "_*_": "*",
    "_/_": "/",
    "_%_": "%",
    "-_": "-",
    "!_": "!",
    "_&&_": "&&",
    "_||_": "||",
    "_[_]": "[]",
}
_NAMESPACES = frozenset({"math", "lists", "strings"})
# Names from other languages, with the library's own.
_INSTEAD = {
    "reduce": "sum(list) for a total, or an aggregate step over records",
    "cel.bind": "a let step, which names a value for the steps after it",
    "transformMap": "map(x, ...) over a list, or a let step building the map",
    "fold": "sum(list) for a total, or an aggregate step over records",
    "len": "size(x)",
    "length": "size(x)",
    "lower": "lowerAscii()",
    "toLowerCase": "lowerAscii()",
    "upper": "upperAscii()",
    "toUpperCase": "upperAscii()",
    "strip": "trim()",
    "round": "math.round(x)",
    "ceil": "math.ceil(x)",
    "floor": "math.floor(x)",
    "abs": "math.abs(x)",
    "max": "math.greatest(a, b) or math.greatest(list)",
    "min": "math.least(a, b) or math.least(list)",
    "range": "lists.range(n)",
    "sorted": "sort()",
    "unique": "distinct()",
    "str": "string(x)",
    "float": "double(x)",
    "today": "date(now, tz)",
    "now": "now, without parentheses (it is a value)",
    "find": "indexOf(s)",
    "concat": "a + b",
}
_TEXT_FUNCTIONS = frozenset(
    {"substring", "split", "indexOf", "lastIndexOf", "startsWith", "endsWith", "contains", "replace", "trim"}
    | {"lowerAscii", "upperAscii", "charAt", "matches", "format"}
)
_GUIDE = "the library's functions are listed in the authoring guide"


def _cel_errors(raw: str) -> list[tuple[int, int, str]]:
    return [(int(m.group(1)), int(m.group(2)), m.group(3).strip()) for m in _CEL_ERROR.finditer(raw)]


def _check_message(source: str, line: int, column: int, text: str) -> str | None:
    """An author's message for one checker error, or None for a comparison across types (allowed)."""
    undeclared = _UNDECLARED.match(text)
    if undeclared:
        return _undeclared_message(source, line, column, undeclared.group(1))
    overload = _NO_OVERLOAD.match(text)
    if overload:
        function, types = overload.group(1), _split_types(overload.group(2))
        if function in _CROSS_TYPE:
            return None
        return _overload_message(source, line, column, function, types)
    select = _SELECT.match(text)
    if select:
        return (
            f"{_a(_type_word(select.group(1)))} has no fields (at {_where(line, column)}): '.name' reads a key of a map"
        )
    text = re.sub(r"'([^']*)'", lambda m: f"'{_type_word(m.group(1))}'", text)
    return f"type error at {_where(line, column)}: {text}"


def _where(line: int, column: int) -> str:
    return f"column {column}" if line == 1 else f"line {line}, column {column}"


def _call_at(source: str, line: int, column: int) -> tuple[str | None, bool]:
    """The name of the function called at the checker's position (it points at the call's parenthesis)
    and whether it is a member call (`x.f(...)`); (None, False) when the position is not a call."""
    lines = source.split("\n")
    if not 1 <= line <= len(lines):
        return None, False
    at = sum(len(text) + 1 for text in lines[: line - 1]) + column - 1
    if not 0 <= at < len(source) or source[at] != "(":
        return None, False
    match = re.search(r"(?:([A-Za-z_]\w*)\s*\.\s*)?([A-Za-z_]\w*)\s*$", source[:at])
    if match is None:
        return None, False
    qualifier, name = match.group(1), match.group(2)
    if qualifier in _NAMESPACES:
        return f"{qualifier}.{name}", False
    before = source[: match.start(2)].rstrip()
    return name, before.endswith(".")


def _undeclared_message(source: str, line: int, column: int, name: str) -> str | None:
    called, member = _call_at(source, line, column)
    if name in _NAMESPACES and called is None:
        return None  # reported with the function after it (math.foo)
    if called is not None and called.endswith(f".{name}"):
        name = called
    known = _FUNCTIONS.get(name)
    if known is not None:
        return f"wrong arguments for {name}(): it takes {_signatures(known)}"
    return no_function_message(name)


def no_function_message(name: str) -> str:
    """ "no function 'x'", with the library's nearest name or what to use instead, and where the list is."""
    instead = _INSTEAD.get(name)
    if instead is None:
        close = difflib.get_close_matches(name, sorted(library.FUNCTION_NAMES), n=1, cutoff=0.75)
        instead = close[0] if close else None
    hint = f"; did you mean {instead}?" if instead else ""
    return f"no function '{name}'{hint} ({_GUIDE})"


# A method call whose first argument names an item (`xs.reduce(a, x, ...)`, `cel.bind(x, ...)`): when the method
# is not the library's, its "unknown names" are that function's item names, and the function is what is missing.
_ITEM_CALL = re.compile(r"(?:\.\s*|\b(cel)\s*\.\s*)([A-Za-z_]\w*)\s*\(\s*([A-Za-z_]\w*)\s*,")


def _unknown_function(code: str, missing: list[str]) -> str | None:
    for match in _ITEM_CALL.finditer(code):
        qualifier, name, item = match.groups()
        called = f"{qualifier}.{name}" if qualifier else name
        if item in missing and called not in library.FUNCTION_NAMES and name not in library.MACROS:
            return no_function_message(called)
    if "cel" in missing:
        return no_function_message("cel.bind") if "bind" in code else None
    return None


def _overload_message(source: str, line: int, column: int, function: str, types: list[str]) -> str:
    words = [_type_word(t) for t in types]
    if function == "string" and types and _kind(types[0]) in ("list", "map"):
        return "string() of a list or map is not defined; use a list's join(',') or build the text yourself"
    if function in _OPERATORS:
        symbol = _OPERATORS[function]
        if len(words) == 1:
            return f"'{symbol}' is not defined for {_a(words[0])}"
        if function == "_[_]":
            return f"{_a(words[0])} cannot be indexed with {_a(words[1])}"
        numbers = {_kind(t) for t in types}
        if numbers <= {"int", "uint", "double"} and len(numbers) > 1:
            hint = "; CEL does not mix them: write 2.0 rather than 2, or convert with double(n) or int(x)"
        elif "string" in numbers and function == "_+_":
            hint = "; convert the other side with string(x) first"
        else:
            hint = ""
        return f"'{symbol}' is not defined for {_a(words[0])} and {_a(words[1])}{hint}"
    known = _FUNCTIONS.get(function)
    called, member = _call_at(source, line, column)
    if called is None and known is not None:
        member = known.member
    if member and words:
        message = f"no function '{function}' for {_a(words[0])}"
        if _kind(types[0]) == "timestamp" and function in _TEXT_FUNCTIONS:
            return f"{message}; did you mean date(now, tz)?"
        if len(words) > 1:
            message += f" with ({', '.join(words[1:])})"
    else:
        message = f"no function '{function}' for ({', '.join(words)})"
    if known is not None:
        message += f"; {function} takes {_signatures(known)}"
    return message


_FUNCTIONS = {f.name: f for f in library.FUNCTIONS}


def _signatures(function: library.LibraryFunction) -> str:
    return " or ".join(s.split(" -> ")[0] for s in function.signatures)


def _split_types(text: str) -> list[str]:
    """'list(int), map(string, int)' -> ['list(int)', 'map(string, int)']."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _kind(cel_type: str) -> str:
    return _type_word(cel_type).split("(")[0]


def _type_word(cel_type: str) -> str:
    """An author's word for a checker's type: google.protobuf.Timestamp -> timestamp, null_type -> null."""
    for name, word in (
        ("google.protobuf.Timestamp", "timestamp"),
        ("google.protobuf.Duration", "duration"),
        ("null_type", "null"),
    ):
        cel_type = cel_type.replace(name, word)
    return cel_type


def _a(word: str) -> str:
    kind = word.split("(")[0]
    if kind in ("null", "dyn", "bytes"):
        return kind
    simple = kind if kind in ("list", "map") else word
    return f"an {simple}" if simple[0] in "aeiou" else f"a {simple}"


# --- the compiled form ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    """A compiled expression, with where it came from for error messages."""

    source: str
    program: Any
    route: str
    where: str  # e.g. "steps[2].insert.value"
    # The context variables the expression reads: only these are handed to CEL, which converts
    # every variable it is given on each call.
    names: tuple[str, ...] = ()
    # For the run-time estimate of comprehension work (see routes/budget.py).
    comprehensions: int = 0
    plus: int = 0
    literal_items: int = 0
    refs: int = 0
    # Always evaluated in a worker process, under the deadline: calls `matches` (a regex compiled and
    # run on every evaluation), `replace` or `lists.range` (whose results can grow far beyond their inputs).
    regex: bool = False
    # The variables it was checked against (name, type), and its checked result type.
    declarations: library.Declarations = library.CONTEXT_DECLARATIONS
    type: str = "dyn"
    # (CEL name, value name) for bound names CEL cannot declare as they are (a bound `list`: `renamed`).
    aliases: tuple[tuple[str, str], ...] = ()
    # The input fields it reads as `params.<name>` (`has(params.<name>)` too); None when it reads `params` in a
    # way that names no field (`params` whole, `params['x']`): then it may read any of them.
    params_fields: frozenset[str] | None = frozenset()

    @functools.cached_property
    def worker_program(self) -> tuple[bytes, library.Declarations]:
        """What the worker process evaluates: the checked program, serialized, and its declarations."""
        return self.program.serialize(), self.declarations

    def evaluate(self, call: Call) -> Any:
        """The expression's value in this call, charged to the call's budget."""
        budget = call.budget
        isolate = budget.charge(self)
        values = call.values
        inputs = {name: values[name] for name in self.names if name in values}
        for cel_name, name in self.aliases:
            if name in inputs:
                inputs[cel_name] = inputs.pop(name)
        try:
            if isolate:
                return budget.evaluate_isolated(self, inputs)
            return library.evaluate(self.program, inputs)
        except CharmingError:  # the budget's own limits
            raise
        except Exception as exc:  # library.EvaluationError: CEL's error values
            if _ITERATIONS in str(exc):
                raise OperationFailed(
                    f"Route '{self.route}' {self.where}: its comprehensions iterated more than "
                    f"{library.ITERATION_LIMIT} times, CEL's limit for one expression. Work on fewer items "
                    "(filter records with 'where' and 'limit') and avoid nesting map/filter.",
                    details={
                        "limit": "cel_iterations",
                        "max": library.ITERATION_LIMIT,
                        "route": self.route,
                        "step": self.where,
                    },
                ) from None
            raise HandlerError(
                f"Route '{self.route}' failed at {self.where}: evaluating `{clip(self.source, 200)}` "
                f"raised {evaluation_failure(exc)}",
                details={"route": self.route, "step": self.where, "expression": clip(self.source, 500)},
            ) from None


_ITERATIONS = "Iteration budget exceeded"
_STATUS = re.compile(r"^[A-Z_]+: ")
_MISSING_KEY = re.compile(r'Key not found in map : "?(.*?)"?$')


def compile_expression(
    source: Any,
    *,
    limits: Limits,
    context: library.Declarations,
    bound: set[str] | frozenset[str] = frozenset(),
    route: str,
    where: str,
) -> tuple[Expr | None, list[ExpressionProblem]]:
    """Compile and type-check one expression of a definition: `context` are the typed variables it may read
    (params, caller, app, now for a step; record, now, app for a migration), `bound` the names earlier steps
    bound (declared dyn: their type is known when the call runs). The Expr, or None and every problem."""
    program, found, scan = check_source(source, limits)
    if program is None or scan is None or found:
        return None, found
    context_names = {name for name, _type in context}
    scope = context_names | set(bound)
    names = referenced_names(scan, scope)
    missing = sorted(names - scope)
    if missing and (unknown := _unknown_function(scan.code, missing)) is not None:
        return None, [ExpressionProblem(unknown)]
    if missing:
        return None, [
            ExpressionProblem(f"unknown name(s) {', '.join(missing)}; names available here: {', '.join(sorted(scope))}")
        ]
    used = names - context_names
    # A bound CEL type name ("as": "list") is compiled under another name, its value handed in as that.
    text, aliases = renamed(source, used & CEL_TYPE_NAMES)
    alias_of = {name: cel_name for cel_name, name in aliases}
    declarations = tuple(context) + tuple((alias_of.get(name, name), "dyn") for name in sorted(used))
    checked = check_types(text, declarations)
    if checked.problems:
        return None, [ExpressionProblem(message) for message in checked.problems]
    return (
        Expr(
            source=source,
            program=checked.program,
            route=route,
            where=where,
            # The declared variables it reads (a context name shadowed by a comprehension variable included).
            names=tuple(sorted((scan.names & context_names) | used)),
            comprehensions=scan.comprehensions,
            plus=scan.plus,
            literal_items=scan.commas,
            refs=scan.refs,
            regex=scan.regex,
            declarations=declarations,
            type=checked.type,
            aliases=aliases,
            params_fields=params_fields(scan) if "params" in scan.names else frozenset(),
        ),
        [],
    )


_PARAMS_READ = re.compile(r"(?<![.\w])params\b(?:\s*\.\s*([A-Za-z_]\w*))?")


def params_fields(scan: Scan) -> frozenset[str] | None:
    """The fields of `params` an expression reads by name, or None when it reads `params` otherwise (whole, or
    by a computed key), so that any field may be read."""
    fields: set[str] = set()
    for found in _PARAMS_READ.finditer(scan.code):
        if found.group(1) is None:
            return None
        fields.add(found.group(1))
    return frozenset(fields)


def evaluation_failure(exc: Exception) -> str:
    """Why CEL failed, in the engine's words (a missing key, division by zero, a type mismatch, ...)."""
    text = str(exc).strip()
    text = re.sub(r"\s*\[[A-Z_]+\]$", "", text)
    plain = _STATUS.sub("", text)
    missing = _MISSING_KEY.search(plain)
    if missing or plain.startswith("No such key"):
        key = missing.group(1) if missing else plain.removeprefix("No such key:").strip()
        return f"a missing key: no key {clip(repr(key), 100)} in the map (use has(x.key) to test first)"
    if plain in ("divide by zero", "modulus by zero"):
        return "division by zero"
    if plain.startswith("No matching overloads found") or "non-message type" in plain:
        return f"a type mismatch: {clip(plain, 300)}"
    if plain.startswith("Index error") or "index out of range" in plain:
        return f"an index error: {clip(plain, 200)}"
    if "overflow" in plain or "out of int64 range" in plain or "out of uint64 range" in plain:
        return f"an overflow: {clip(plain, 200)}"
    if len(plain) > 1 and plain[0] == plain[-1] == "'" and plain.count("'") == 2:
        plain = plain[1:-1]  # a Python KeyError's text, quoted
    return f"an error: {clip(plain, 300)}"


def _bad_key(key: Any) -> str:
    kind = "bool" if isinstance(key, bool) else "int" if isinstance(key, int) else type(key).__name__
    shown = str(key).lower() if isinstance(key, bool) else clip(repr(key), 40)
    raise HandlerError(
        f"a map has the {kind} key {shown}, but JSON keys are strings (and {{1: 'a', true: 'b'}} "
        "would collide); use string keys such as {'1': 'a'}"
    )


def to_json(value: Any) -> Any:
    """A CEL result as plain JSON data: timestamps become ISO 8601 strings, durations seconds."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise HandlerError(
                f"An expression produced {value}, which JSON cannot represent; check for a division of doubles by 0.0."
            )
        return value
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else _bad_key(k)): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return str(value)
