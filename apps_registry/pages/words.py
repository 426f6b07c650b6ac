"""Words for people on the app page: names made readable, an author's text cleaned of agent wording, and the
schema checker's precise messages rewritten ("-5.0 is less than or equal to the minimum of 0" becomes "Must be
more than 0."). Agents keep the precise messages: only the page rewrites them (docs/pages.md, "Words")."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_REQUIRED = re.compile(r"""^["'](?P<name>[^"']+)["'] is a required property""")
_NUMBER = r"(?P<n>-?[0-9][0-9.eE+-]*)"
# The schema checker's messages (jsonschema-rs, the engine's per-call checker), each with what a person reads.
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"is less than or equal to the minimum of {_NUMBER}$"), "Must be more than {n}."),
    (re.compile(rf"is less than the minimum of {_NUMBER}$"), "Must be at least {n}."),
    (re.compile(rf"is greater than or equal to the maximum of {_NUMBER}$"), "Must be less than {n}."),
    (re.compile(rf"is greater than the maximum of {_NUMBER}$"), "Must be at most {n}."),
    (re.compile(rf"is not a multiple of {_NUMBER}$"), "Must be a multiple of {n}."),
    (re.compile(r"is longer than (?P<n>\d+) characters?$"), "Must be at most {n} characters long."),
    (re.compile(r"is shorter than 1 character$"), "Must not be empty."),
    (re.compile(r"is shorter than (?P<n>\d+) characters?$"), "Must be at least {n} characters long."),
    (re.compile(r"is not one of .*$"), "Choose one of the options."),
    (re.compile(r'is not a "date"$'), "Enter a date, like 2026-12-01."),
    (re.compile(r'is not a "date-time"$'), "Enter a date and a time."),
    (re.compile(r'is not a "email"$'), "Enter an email address."),
    (re.compile(r'is not a "(?P<n>[^"]+)"$'), "Is not a valid {n}."),
    (re.compile(r"does not match .*$"), "Is not in the expected form."),
    (re.compile(r'is not of type "(?:number|integer)"$'), "Enter a number."),
    (re.compile(r'is not of type "string"$'), "Enter text."),
    (re.compile(r'is not of type "boolean"$'), "Choose yes or no."),
    (re.compile(r"has (?:more|less|fewer) than \d+ items?$|is too (?:long|short)$"), "Has the wrong number of items."),
    (re.compile(r"is a required property$"), "This field is required."),
)
_BACKTICKS = re.compile(r"`([^`\n]{1,200})`")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLAUSE = re.compile(r"(?<=[:;])\s+")
# Sentences only an agent needs: how to page with a cursor, which tool to call.
_AGENT_ONLY = re.compile(r"\b(?:next_cursor|cursor|query_app|mutate_app|get_app|params?\.\w+)\b")


def humanize(name: str) -> str:
    """`category_total` -> `Category total` (a schema's `title` wins over this)."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").strip()
    return (words[:1].upper() + words[1:]) if words else name


def friendly_error(message: str, schema: Mapping[str, Any] | None = None) -> str:
    """A schema checker's message about one value, in a person's words; unknown ones are kept, capitalized."""
    text = message.strip()
    if _REQUIRED.match(text):
        return "This field is required."
    for pattern, words in _REWRITES:
        found = pattern.search(text)
        if found:
            n = found.groupdict().get("n")
            return words.format(n=_plain_number(n) if n is not None else "")
    return text[:1].upper() + text[1:]


def _plain_number(text: str) -> str:
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else text


def people_text(text: str, titles: Mapping[str, str] | None = None, *, agent_only: bool = True) -> str:
    """An author's text for the page: `backticks` dropped, route names given as their titles, and (unless
    `agent_only` is false) the sentences only an agent can act on (paging by cursor, tool names) left out."""
    if not text:
        return ""
    titles = titles or {}

    def code(match: re.Match[str]) -> str:
        inner = match.group(1)
        return f"“{titles[inner]}”" if inner in titles else inner

    text = _BACKTICKS.sub(code, text)
    if titles:
        names = "|".join(re.escape(name) for name in sorted(titles, key=len, reverse=True) if "_" in name)
        if names:
            text = re.sub(rf"\b({names})\b", lambda m: f"“{titles[m.group(1)]}”", text)
    if not agent_only:
        return text
    kept = []
    for sentence in _SENTENCE.split(text.strip()):
        clauses = [c for c in _CLAUSE.split(sentence) if not _AGENT_ONLY.search(c)]
        if clauses:
            joined = " ".join(clauses).strip()
            kept.append(joined[:-1].rstrip() + "." if joined[-1:] in (":", ";", ",") else joined)
    return " ".join(kept)
