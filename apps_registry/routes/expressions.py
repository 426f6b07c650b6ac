"""CEL expressions: authoring-time checks (syntax, length, nesting, names) and run-time evaluation
that turns every failure into a `handler_error` naming the route, the step and the expression."""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import cel

from apps_registry.exceptions import CharmingError, HandlerError
from apps_registry.routes.limits import Limits
from apps_registry.values import clip, type_name

if TYPE_CHECKING:
    from apps_registry.routes.steps import Call

# The range of CEL's int (a signed 64-bit integer): params, records and increments stay inside it.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Variables every expression may use, besides the names bound by earlier steps.
CONTEXT_NAMES = ("params", "caller", "app", "now")
# Identifiers the CEL parser reports as variables although they are type names or packages.
_BUILTIN_IDENTS = frozenset(
    {"string", "int", "uint", "double", "bool", "bytes", "list", "map", "null_type", "type", "dyn", "google"}
)
COMPREHENSION_MACROS = ("map", "filter", "all", "exists", "exists_one")
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

    @property
    def regex(self) -> bool:
        """Whether the expression calls `matches` (a regex compiled and run on every evaluation,
        whose cost grows with the pattern's compiled size times the text's length)."""
        return _MATCHES_CALL.search(self.code) is not None


_MATCHES_CALL = re.compile(r"\bmatches\s*\(")


def _scan(source: str) -> Scan:
    """Scan `source`. A comprehension is a macro call `.map(`, `.filter(`, `.all(`, `.exists(`,
    `.exists_one(` (whitespace and comments may sit between its parts); its nesting is how many such
    calls are open at once."""
    depth = max_depth = 0
    comprehension_depth = max_comprehension = 0
    plus = commas = refs = 0
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
        if ch.isalpha() or ch == "_":
            j = i + 1
            while j < n and (source[j].isalnum() or source[j] == "_"):
                j += 1
            if tokens[1] != ".":
                refs += 1
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
    """Compile `source` if it passes the authoring limits. Returns (program or None, problems, scan)."""
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
        program = cel.compile(source)
    except ValueError as exc:
        return None, [ExpressionProblem(syntax_error_message(str(exc)))], scan
    return program, [], scan


def syntax_error_message(raw: str) -> str:
    """'syntax error at column 14: ...' from the CEL parser's message (first problem only)."""
    match = _SYNTAX_POSITION.search(raw)
    if not match:
        return f"syntax error: {raw}"
    line, column, rest = int(match.group(1)), int(match.group(2)), match.group(3)
    rest = rest.split("\n", 1)[0].strip()
    rest = re.sub(r"^Syntax error:\s*", "", rest)
    where = f"column {column}" if line == 1 else f"line {line}, column {column}"
    return f"syntax error at {where}: {rest}"


def referenced_names(program: Any, source: str) -> set[str]:
    """Top-level names an expression reads (comprehension variables and type names excluded)."""
    local = set(_MACRO_VARIABLE.findall(_scan(source).code))
    return {name for name in program.variables() if name not in local and name not in _BUILTIN_IDENTS}


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
    regex: bool = False  # calls `matches`: always evaluated in a worker process, under the deadline

    def evaluate(self, call: Call) -> Any:
        """The expression's value in this call, charged to the call's budget."""
        budget = call.budget
        isolate = budget.charge(self)
        values = call.values
        inputs = {name: values[name] for name in self.names if name in values}
        try:
            if isolate:
                return budget.evaluate_isolated(self, inputs)
            return self.program.execute(inputs)
        except CharmingError:  # the budget's own limits
            raise
        except Exception as exc:  # CEL raises KeyError/TypeError/ZeroDivisionError/RuntimeError/...
            raise HandlerError(
                f"Route '{self.route}' failed at {self.where}: evaluating `{clip(self.source, 200)}` "
                f"raised {_reason(exc)}",
                details={"route": self.route, "step": self.where, "expression": clip(self.source, 500)},
            ) from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"a missing key: no key {clip(str(exc), 100)} in the map (use has(x.key) to test first)"
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    if isinstance(exc, TypeError):
        return f"a type mismatch: {clip(str(exc), 300)}"
    if isinstance(exc, IndexError):
        return f"an index error: {clip(str(exc), 200)}"
    if isinstance(exc, OverflowError):
        return f"an overflow: {clip(str(exc), 200)}"
    return f"an error: {clip(str(exc), 300)}"


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
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)
