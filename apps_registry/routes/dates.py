"""Calendar buckets of ISO dates and timestamps, in an IANA time zone: the one definition that the
SQLite store (as a database function), the in-memory test store and the docs share. PostgreSQL computes
the same buckets in SQL (routes/storage.py), tested to agree."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

BUCKETS = ("day", "week", "month", "year")
# What a bucketed field may hold: a calendar date, or a timestamp (with an offset or Z; without one, UTC).
# PostgreSQL's SQL uses the same two patterns.
DATE_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
TIMESTAMP_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}"
_DATE = re.compile(DATE_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)


class NotADate(ValueError):
    """A value that looks like an ISO date or timestamp but is not one (2026-02-30)."""


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo | None:
    """The IANA time zone of that name, or None when there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def bucket_of(value: object, bucket: str, tz: str) -> str | None:
    """The label of the `bucket` (day: 2026-12-01, week: the ISO week's Monday 2026-11-30, month: 2026-12,
    year: 2026) holding `value` in time zone `tz`. A calendar date is its own day in every zone; a timestamp
    is first converted to `tz`. Anything else (a number, a missing field, free text) has no bucket (None);
    text shaped like a date that is not one raises NotADate."""
    if not isinstance(value, str):
        return None
    if _DATE.match(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise NotADate(value) from None
    elif _TIMESTAMP.match(value):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise NotADate(value) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        found = zone(tz)
        if found is None:
            raise NotADate(tz)
        day = moment.astimezone(found).date()
    else:
        return None
    if bucket == "day":
        return day.isoformat()
    if bucket == "week":
        return (day - timedelta(days=day.weekday())).isoformat()
    if bucket == "month":
        return f"{day.year:04d}-{day.month:02d}"
    return f"{day.year:04d}"


# What the SQLite function returns for a value that is not a date, so the store can refuse the call with a
# clear error (an exception raised inside an SQLite function reaches Python as an OperationalError, which
# the service layer reads as a database outage).
NOT_A_DATE = "\x00not-a-date"


def sqlite_bucket(value: object, bucket: str, tz: str) -> str | None:
    try:
        return bucket_of(value, bucket, tz)
    except NotADate:
        return NOT_A_DATE
