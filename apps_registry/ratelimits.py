"""The rate limits, each declared once here: what it limits, its two settings (a sustained rate per minute and a
burst) with their defaults and one line saying what they bound. charming/settings.py reads each setting from the
environment variable of the same name; `.env.example` and the Rate limits table of docs/operations.md are checked
against these declarations by the tests. The budgets themselves are kept in the database by
apps_registry/services/rate_limits.py.

A limit allows `burst` calls at once after a quiet spell, then one every 60/`per_minute` seconds (a limit counted
per hour, as sign-ups are: 3600/its rate); a rate of 0 turns that limit off. The settings keep the name
`per_minute_setting` for either period."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.conf import settings

LimitName = Literal[
    "token", "app", "auth_failures", "signups", "confirmation_mails", "hook", "visitor", "visitor_writes", "public_app"
]
Period = Literal["minute", "hour"]
PERIOD_SECONDS: dict[str, float] = {"minute": 60.0, "hour": 3600.0}


@dataclass(frozen=True)
class RateLimit:
    name: LimitName
    per_minute_setting: str
    per_minute_default: int
    burst_setting: str
    burst_default: int
    doc: str  # what it limits, in one line
    period: Period = "minute"  # what the rate counts per


RATE_LIMITS: tuple[RateLimit, ...] = (
    RateLimit(
        "token",
        "CHARMING_RATE_TOKEN_PER_MINUTE",
        300,
        "CHARMING_RATE_TOKEN_BURST",
        60,
        "requests one token may make, /mcp and /api together (an OAuth client counts once per user it acts for)",
    ),
    RateLimit(
        "app",
        "CHARMING_RATE_APP_PER_MINUTE",
        1200,
        "CHARMING_RATE_APP_BURST",
        200,
        "route runs of one app (query_app, mutate_app, REST runs, its pages' forms), across all its callers",
    ),
    RateLimit(
        "auth_failures",
        "CHARMING_RATE_AUTH_FAILURES_PER_MINUTE",
        60,
        "CHARMING_RATE_AUTH_FAILURES_BURST",
        60,
        "refused bearer tokens and webhook signatures from one client address (an IPv6 address counts by its /64)",
    ),
    RateLimit(
        "signups",
        "CHARMING_RATE_SIGNUPS_PER_HOUR",
        20,
        "CHARMING_RATE_SIGNUPS_BURST",
        10,
        "accounts created on the sign-up page from one client address (an IPv6 address counts by its /64)",
        period="hour",
    ),
    RateLimit(
        "confirmation_mails",
        "CHARMING_RATE_CONFIRMATION_MAILS_PER_HOUR",
        6,
        "CHARMING_RATE_CONFIRMATION_MAILS_BURST",
        3,
        "e-mail confirmation links one account may have sent again (the sign-up's own mail is not counted)",
        period="hour",
    ),
    RateLimit(
        "hook",
        "CHARMING_RATE_HOOK_PER_MINUTE",
        120,
        "CHARMING_RATE_HOOK_BURST",
        30,
        "signed deliveries to one webhook (a request refused before its signature checks out counts against its "
        "address's refused tokens instead)",
    ),
    RateLimit(
        "visitor",
        "CHARMING_RATE_VISITOR_PER_MINUTE",
        60,
        "CHARMING_RATE_VISITOR_BURST",
        30,
        "public pages' views and form posts from one client address, every public app together (an IPv6 address "
        "counts by its /64)",
    ),
    RateLimit(
        "visitor_writes",
        "CHARMING_RATE_VISITOR_WRITES_PER_HOUR",
        30,
        "CHARMING_RATE_VISITOR_WRITES_BURST",
        10,
        "actions anonymous visitors of public apps run from one client address (an IPv6 address counts by its /64)",
        period="hour",
    ),
    RateLimit(
        "public_app",
        "CHARMING_RATE_PUBLIC_APP_PER_MINUTE",
        600,
        "CHARMING_RATE_PUBLIC_APP_BURST",
        120,
        "public page views and form posts of one public app, all its anonymous visitors together (its members' "
        "own calls count against its app budget instead)",
    ),
)
RATE_LIMIT_SETTINGS: tuple[tuple[str, int], ...] = tuple(
    pair
    for limit in RATE_LIMITS
    for pair in ((limit.per_minute_setting, limit.per_minute_default), (limit.burst_setting, limit.burst_default))
)
_DECLARED = {limit.name: limit for limit in RATE_LIMITS}


@dataclass(frozen=True)
class Rate:
    """A limit in force: `burst` calls at once, then one every `interval` seconds."""

    limit: RateLimit
    per_minute: int
    burst: int

    @property
    def enabled(self) -> bool:
        return self.per_minute > 0

    @property
    def interval(self) -> float:
        return PERIOD_SECONDS[self.limit.period] / self.per_minute

    def details(self, retry_after_seconds: int) -> dict[str, object]:
        """The `details` of a rate_limited error: which limit, its values and settings, and when to retry."""
        return {
            "limit": self.limit.name,
            f"per_{self.limit.period}": self.per_minute,
            "burst": self.burst,
            "setting": self.limit.per_minute_setting,
            "retry_after_seconds": retry_after_seconds,
        }


def current_rate(name: LimitName) -> Rate:
    """The limit `name` in force now (read from settings on each call, so tests and deployments can change it)."""
    limit = _DECLARED[name]
    per_minute = getattr(settings, limit.per_minute_setting, limit.per_minute_default)
    burst = getattr(settings, limit.burst_setting, limit.burst_default)
    return Rate(limit=limit, per_minute=max(0, int(per_minute)), burst=max(1, int(burst)))
