"""Secrets taken out of what callers and logs are shown: the one place that decides what a secret looks like.

Both error translators (mcp_tools.results, apps_registry.api.errors) pass every error through `redact_error`
(message, details and errors[] alike) and their log lines through `RedactingFilter`, which settings.LOGGING puts on
the console handler and `uvicorn_logs_redact` (called by charming.asgi) on uvicorn's access and error handlers. What
is redacted, and how it reads, is listed in docs/mcp.md ("Secrets in errors").
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from typing import Any

REDACTED = "[REDACTED]"

# A URL's password: scheme://user:PASSWORD@host (postgres://, redis://, https://, ...).
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@'\"]*:)(?P<secret>[^\s@/'\"]+)(?=@)")
# Charming's personal tokens: chm_<8 hex prefix>_<secret>. The prefix is public (shown in the admin) and stays.
_CHARMING_TOKEN = re.compile(r"\b(?P<head>chm_[0-9a-f]{8}_)(?P<secret>[A-Za-z0-9_-]{8,})")
# A webhook's signing secret: whsec_<secret> (services/hooks.py); the prefix stays.
_HOOK_SECRET = re.compile(r"\b(?P<head>whsec_)(?P<secret>[A-Za-z0-9_-]{8,})")
# Any bearer credential: "Bearer <token>" (an Authorization header quoted in a message); a "<placeholder>" stays.
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<secret>(?!<)[^\s'\",;]+)", re.IGNORECASE)
# key=value and "key": "value" (JSON, or a Python repr) for names that hold secrets (password, passwd, pwd, secret,
# api_key, apikey, token, access_token, client_secret, ...). Not "key: value" in prose ("Revoked token: ...").
_SECRET_NAMES = r"(?:[a-z0-9_-]*(?:password|passwd|pwd|secret|api[_-]?key|token))"
_ASSIGNED = re.compile(
    rf"(?P<head>\b{_SECRET_NAMES}\s*=\s*['\"]?)(?P<secret>[^\s'\"&,;}}]+)",
    re.IGNORECASE,
)
_QUOTED_KEY = re.compile(
    rf"(?P<head>['\"]{_SECRET_NAMES}['\"]\s*:\s*['\"])(?P<secret>[^'\"]+)",
    re.IGNORECASE,
)
# Long runs of token characters; redacted when they look random (see _looks_random).
_LONG_RUN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_SEPARATED = re.compile(r"([/_-])")  # split keeping the separators
_MIN_ENTROPY_BITS = 3.5  # per character; a random base64 token of 32+ characters has about 4.5


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(run: str) -> bool:
    """A key or token rather than a word or a name: 32+ hex digits, or upper and lower case letters and digits
    mixed with high entropy (snake_case names, even with digits, are neither)."""
    if len(run) < 32:
        return False
    if _HEX.fullmatch(run):
        return any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
    mixed = any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)
    return mixed and _entropy(run) >= _MIN_ENTROPY_BITS


def _redact_piece(piece: str) -> str:
    """A piece of a run between UUIDs: redacted whole when it looks random; otherwise each part between `/`, `-`
    and `_` that does on its own (a URL path holding a token, or Django's password-reset token `<ts>-<32 hex>`)."""
    if _looks_random(piece):
        return REDACTED
    return "".join(REDACTED if _looks_random(part) else part for part in _SEPARATED.split(piece))


def _redact_run(match: re.Match[str]) -> str:
    """A long run of token characters, with the random parts redacted and any UUIDs in it (ids) kept."""
    run = match.group(0)
    ids = _UUID.findall(run)
    pieces = _UUID.split(run)
    shown = ""
    for index, piece in enumerate(pieces):
        shown += _redact_piece(piece)
        if index < len(ids):
            shown += ids[index]
    return shown


def _keep_head(match: re.Match[str]) -> str:
    return match.group("head") + REDACTED


def redact(text: str) -> str:
    """`text` with every secret it holds replaced by [REDACTED] (the name or prefix around it stays)."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(_keep_head, text)
    text = _CHARMING_TOKEN.sub(_keep_head, text)
    text = _HOOK_SECRET.sub(_keep_head, text)
    text = _BEARER.sub(lambda m: m.group("head") + REDACTED if m.group("secret") != REDACTED else m.group(0), text)
    text = _QUOTED_KEY.sub(_keep_head, text)
    text = _ASSIGNED.sub(lambda m: m.group(0) if m.group("secret") == REDACTED else _keep_head(m), text)
    return _LONG_RUN.sub(_redact_run, text)


def redact_value(value: Any) -> Any:
    """A JSON value with `redact` applied to every string in it, object keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(item) for item in value]
    return value


def redact_error(error: dict[str, Any]) -> dict[str, Any]:
    """An envelope's `error` (kind, message, errors?, details?) with secrets redacted everywhere in it."""
    shaped: dict[str, Any] = redact_value(error)
    return shaped


class RedactingFilter(logging.Filter):
    """Redacts a log record's message and its traceback text before any handler formats them.

    A record whose message holds a secret keeps its argument tuple when redacting each argument suffices (uvicorn's
    access formatter reads the client, method, path and status from the arguments, not from the message); else the
    message is replaced by its redacted text and the arguments dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report, not ours
            return True
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = _redacted_parts(record, redacted)
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def _redacted_parts(record: logging.LogRecord, redacted: str) -> tuple[Any, Any]:
    """(msg, args) for a record whose message holds a secret."""
    if isinstance(record.msg, str) and isinstance(record.args, tuple) and record.args:
        args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in record.args)
        msg = redact(record.msg)
        try:
            again = msg % args
        except (TypeError, ValueError):
            again = None
        if again is not None and redact(again) == again:
            return msg, args
    return redacted, None


# uvicorn's loggers: it configures them itself, before it loads the application, with handlers of its own that
# settings.LOGGING does not reach (`uvicorn.access` does not propagate to the root logger).
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


def uvicorn_logs_redact() -> None:
    """Put the redactor on every handler uvicorn's loggers print through (and on the loggers, for handlers added
    later), so an access line never shows a secret from a request's path or query. Safe to call again."""
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        for holder in (logger, *logger.handlers):
            if not any(isinstance(existing, RedactingFilter) for existing in holder.filters):
                holder.addFilter(RedactingFilter())
