"""Rate-limit budgets (declared in apps_registry/ratelimits.py), kept in Charming's own database so that every
worker process, and every machine behind one URL, shares them.

Each budget is one row holding the generic cell rate algorithm's "theoretical arrival time" (`tat`): a call is
admitted when `tat <= now + (burst - 1) * interval`, and moves it to `max(tat, now) + interval`. Reading the row,
deciding and writing it back is ONE statement (`INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING`, on
SQLite >= 3.35 and PostgreSQL alike) on the request's own connection, so it is atomic across processes without a
lock of our own: PostgreSQL serialises concurrent upserts of one row on its row lock (each re-reads the committed
row), SQLite serialises writers on its database lock. A refused call writes nothing and takes nothing.

Why not pyrate-limiter (4.5.1, read for this): its PostgresBucket needs its own psycopg_pool.ConnectionPool (a
second pool per process beside Django's, and a package we do not ship), keeps one table per bucket (a table per
token and per app), and makes check-and-insert atomic with `LOCK TABLE ... NOWAIT`, refusing any call that meets
a concurrent one however empty the budget is; its SQLiteBucket opens its own sqlite3 connection and is atomic
across processes only with a file lock (the `filelock` package), and both log one row per call that a leaker
thread deletes. Django's cache is not shared across processes with the default backend and its database backend's
`incr` is a read then a write. One statement in our own schema has none of these problems.

Call the budget functions outside any long transaction (autocommit): inside one, the budget's row stays locked
until it commits, serialising every call of that token or app behind it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ipaddress
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection

from apps_registry.access import Visitor
from apps_registry.exceptions import AuthenticationFailed, RateLimited
from apps_registry.models import App, Membership, RateBudget
from apps_registry.plans import plan_stable
from apps_registry.ratelimits import LimitName, Rate, current_rate
from apps_registry.routes import celworker
from apps_registry.values import parse_uuid

T = TypeVar("T")

# Rows whose time has passed equal no row; each process deletes them at most this often.
SWEEP_EVERY_SECONDS = 60.0
_last_sweep = 0.0
_sweep_lock = threading.Lock()


@functools.cache
def _statement(*, gated: bool) -> str:
    """The budget's one statement (written once per process), by its key: with `gated`, only for a member."""
    quote = connection.ops.quote_name
    table, key, tat = quote(RateBudget._meta.db_table), quote("key"), quote("tat")
    # SQLite needs a WHERE on an INSERT ... SELECT that has an ON CONFLICT clause (a parsing ambiguity).
    gate = "WHERE 1 = 1"
    if gated:
        membership = quote(Membership._meta.db_table)
        gate = f"WHERE EXISTS (SELECT 1 FROM {membership} m WHERE m.app_id = %s AND m.user_id = %s)"
    return plan_stable(
        f"INSERT INTO {table} ({key}, {tat}) SELECT %s, %s {gate} "
        f"ON CONFLICT ({key}) DO UPDATE SET {tat} = (CASE WHEN {table}.{tat} > %s THEN {table}.{tat} ELSE %s END) + %s "
        f"WHERE {table}.{tat} <= %s RETURNING {tat}"
    )


def rate_budget_take(
    *,
    key: str,
    rate: Rate,
    now: float | None = None,
    member: tuple[uuid.UUID, Any] | None = None,
    calls: int = 1,
) -> float | None:
    """Take `calls` calls at once from budget `key`: None when admitted, else the seconds until they would be
    (nothing taken).

    With `member` (an app id and a user id), the call counts only when that user is a member of that app (the
    check is part of the same statement); a non-member's call is admitted here and left to the access rules.
    """
    return _budget_take(key=key, rate=rate, now=now, member=member, calls=calls)[1]


def _budget_take(
    *, key: str, rate: Rate, now: float | None, member: tuple[uuid.UUID, Any] | None, calls: int
) -> tuple[bool, float | None]:
    """rate_budget_take's work: whether the calls were taken from the budget (False for a non-member's, which
    count nothing), and the wait (None: admitted)."""
    if not rate.enabled:
        return False, None
    now = time.time() if now is None else now
    interval = rate.interval * calls
    admit_until = now + (rate.burst - calls) * rate.interval
    gate: list[Any] = []
    if member is not None:
        gate = [App._meta.pk.get_db_prep_value(member[0], connection), member[1]]  # type: ignore[union-attr]
    params = [key, now + interval, *gate, now, now, interval, admit_until]
    with connection.cursor() as cursor:
        cursor.execute(_statement(gated=member is not None), params)
        taken = cursor.fetchone() is not None
    if taken:
        _sweep_maybe(now)
        return True, None
    tat = _tat_of(key)
    if tat is None or tat <= admit_until:  # a non-member (gated), or the row was swept between the two statements
        return False, None
    if member is not None and not Membership.objects.filter(app_id=member[0], user_id=member[1]).exists():
        # A spent budget refuses members only: telling a non-member "rate_limited" would say the app exists (and
        # is busy) where the access rules answer not_found. Read only on this refusal path.
        return False, None
    return False, tat - admit_until


def _tat_of(key: str) -> float | None:
    with connection.cursor() as cursor:  # by primary key, without the ORM's ORDER BY for .first()
        cursor.execute(_tat_sql(), [key])
        row = cursor.fetchone()
    return None if row is None else float(row[0])


@functools.cache
def _tat_sql() -> str:
    quote = connection.ops.quote_name
    return plan_stable(f"SELECT {quote('tat')} FROM {quote(RateBudget._meta.db_table)} WHERE {quote('key')} = %s")


def _sweep_maybe(now: float) -> None:
    """Delete the rows whose time has passed, at most every SWEEP_EVERY_SECONDS in this process: one DELETE on
    the call's own connection (no transaction of its own, where the ORM's delete() would add BEGIN and COMMIT)."""
    global _last_sweep
    with _sweep_lock:
        if now - _last_sweep < SWEEP_EVERY_SECONDS:
            return
        _last_sweep = now
    with connection.cursor() as cursor:
        cursor.execute(_sweep_sql(), [now])


@functools.cache
def _sweep_sql() -> str:
    quote = connection.ops.quote_name
    return f"DELETE FROM {quote(RateBudget._meta.db_table)} WHERE {quote('tat')} < %s"


def retry_after_seconds(wait: float) -> int:
    """Whole seconds for Retry-After: rounded up, at least 1."""
    return max(1, math.ceil(wait))


def _refusal(rate: Rate, wait: float, message: str) -> RateLimited:
    seconds = retry_after_seconds(wait)
    return RateLimited(
        f"{message} Nothing ran; try again in {seconds} second{'s' if seconds != 1 else ''}.",
        limit=rate.limit.name,
        retry_after_seconds=seconds,
        details=rate.details(seconds),
    )


def _limits_text(rate: Rate) -> str:
    return f"{rate.per_minute} per {rate.limit.period}, bursts of {rate.burst}"


# --- a token's budget: every request, over /mcp and /api alike ---


def token_budget_key(*, kind: str, token_id: int | None, client_id: str, user_id: Any) -> str:
    """The budget a credential draws on: a personal token's own; an OAuth client's for one user, whichever access
    token it holds (refreshing it every hour must not start a fresh budget)."""
    if kind == "oauth":
        client = client_id if len(client_id) <= 100 else hashlib.sha256(client_id.encode()).hexdigest()[:40]
        return f"oauth:{user_id}:{client}"
    return f"token:{token_id}"


def token_budget_take(*, key: str, now: float | None = None) -> None:
    """Count one request against token budget `key` (see token_budget_key); RateLimited when it is spent.

    A token in steady use draws on its shared budget a few calls at a time (_LocalBatches): most of its requests
    send no statement for it. With `now` given (tests of the budget itself), every call is one statement."""
    rate = current_rate("token")
    wait = _batched_take(key=key, held=key, rate=rate, now=now, cap=_batch_cap(rate, "CHARMING_RATE_TOKEN_BATCH"))
    if wait is not None:
        raise _refusal(rate, wait, f"This token made too many requests (its limit: {_limits_text(rate)}).")


def _batched_take(
    *,
    key: str,
    held: str,
    rate: Rate,
    now: float | None,
    cap: int,
    member: tuple[uuid.UUID, Any] | None = None,
) -> float | None:
    """One call from budget `key`, drawn from this process's batch `held` when it holds one, else by a refill that
    takes a batch (up to `cap` calls) in the budget's one statement: as rate_budget_take, None when admitted. With
    `now` given (tests of the budget itself), every call is one statement."""
    if not rate.enabled:
        return None
    held = f"{held}@{rate.per_minute}/{rate.burst}"  # a batch taken under other limits is not spent under these
    if now is None and _batches.take(held):
        return None
    calls = 1 if now is not None else _batches.refill_size(held, cap=cap)
    taken, wait = _budget_take(key=key, rate=rate, now=now, calls=calls, member=member)
    if wait is not None and calls > 1:  # no room for the batch
        wait -= (calls - 1) * rate.interval  # the wait for one call
        calls = 1
        if wait <= 0:  # room for one: the exact path
            taken, wait = _budget_take(key=key, rate=rate, now=now, calls=1, member=member)
    if taken and now is None:  # not a non-member's call, which took nothing: no batch is held for them
        _batches.refilled(held, calls - 1)
    return wait


def _batch_cap(rate: Rate, setting: str) -> int:
    """The most calls one refill takes: the setting (CHARMING_RATE_TOKEN_BATCH, CHARMING_RATE_APP_BATCH), and never
    more than a quarter of the burst."""
    return max(1, min(int(getattr(settings, setting)), rate.burst // 4))


class _LocalBatches:
    """Calls this process took from shared budgets ahead of use, spent here without a statement each.

    A refill takes a batch in the budget's one statement (admitted only if the whole batch fits the budget) and
    the batch is usable for BATCH_SECONDS. A key's batch starts at 1 call, doubles (up to the cap) while each one is
    used up within its time, and halves when one is not; so a token (or an app's member) calling now and then costs
    one statement per call, exactly as before, and a busy one about one per `cap` calls. The limit stays exact over
    time (every admitted call was taken from the shared budget, before it ran); at any instant each process holds
    at most cap - 1 calls of a key taken early, so across P processes a burst may be refused up to P * (cap - 1)
    calls early, or admitted up to that many calls past the budget within BATCH_SECONDS of the calls being taken
    (an app's budget is held per member: P * M * (cap - 1) for M members calling at once)."""

    BATCH_SECONDS = 1.0
    MOST_KEYS = 10_000  # beyond this many keys held, expired ones are dropped

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, list[float]] = {}  # key -> [calls left, usable until (monotonic), last size]

    def take(self, key: str) -> bool:
        with self._lock:
            held = self._held.get(key)
            if held is None or held[0] < 1 or time.monotonic() >= held[1]:
                return False
            held[0] -= 1
            return True

    def refill_size(self, key: str, *, cap: int) -> int:
        with self._lock:
            held = self._held.get(key)
        if held is None or cap <= 1:
            return 1
        used_up_in_time = held[0] < 1 and time.monotonic() < held[1] + self.BATCH_SECONDS
        size = int(held[2]) * 2 if used_up_in_time else int(held[2]) // 2
        return max(1, min(cap, size))

    def refilled(self, key: str, spare: int) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._held) >= self.MOST_KEYS:
                self._held = {k: v for k, v in self._held.items() if v[1] > now}
            held = self._held.get(key)
            left = held[0] if held is not None and held[1] > now else 0
            self._held[key] = [left + spare, now + self.BATCH_SECONDS, spare + 1]

    def forget(self) -> None:
        with self._lock:
            self._held.clear()


_batches = _LocalBatches()  # tokens' and apps' budgets, by key


def rate_limits_local_forget() -> None:
    """Drop what this process holds of the shared budgets (tokens' and apps' batches, addresses found clean): its
    next calls read the database. For tests, whose database is emptied between them."""
    _batches.forget()
    with _clean_lock:
        _clean_addresses.clear()


# --- an app's budget: route runs, across all its callers ---


def app_budget_take(*, actor: Any, app_id: uuid.UUID | str, now: float | None = None) -> None:
    """Count one route run against app `app_id`'s budget; RateLimited when it is spent. Only its members' calls
    count, so nobody outside an app can spend its budget; an id that is not an app's counts nothing."""
    app_uuid = parse_uuid(app_id)
    if app_uuid is None:
        return
    rate = current_rate("app")
    # A batch is held per caller: a call by someone outside the app counts nothing, so it must not spend calls a
    # member's refill took either.
    wait = _batched_take(
        key=f"app:{app_uuid}",
        held=f"app:{app_uuid}:{actor.pk}",
        rate=rate,
        now=now,
        cap=_batch_cap(rate, "CHARMING_RATE_APP_BATCH"),
        member=(app_uuid, actor.pk),
    )
    if wait is not None:
        raise _refusal(
            rate, wait, f"This app had too many calls (its limit, across all its callers: {_limits_text(rate)})."
        )


# --- failed authentications, per client address ---


def client_address_key(address: str | None) -> str:
    """The budget of failed authentications for a client address; an IPv6 address counts by its /64, which one
    host usually holds whole."""
    try:
        parsed = ipaddress.ip_address(address or "")
    except ValueError:
        return "auth:unknown"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return f"auth:{parsed.ipv4_mapped}"
        return f"auth:{ipaddress.IPv6Network((parsed, 64), strict=False)}"
    return f"auth:{parsed}"


def _auth_failures_refusal(rate: Rate, wait: float) -> RateLimited:
    return _refusal(
        rate,
        wait,
        f"Too many refused tokens from your address (its limit: {_limits_text(rate)}); this request's token was "
        "not checked. Fix the token your client sends.",
    )


# Addresses found with room for failed authentications, and until when (monotonic) this process trusts that
# without reading again: an address's requests then send no statement for it. A failure recorded here forgets
# the address at once; one recorded by another process is seen here within CLEAN_ADDRESS_SECONDS.
CLEAN_ADDRESS_SECONDS = 1.0
_clean_addresses: dict[str, float] = {}
_clean_lock = threading.Lock()


def auth_failures_check(*, address: str | None, now: float | None = None) -> None:
    """RateLimited when `address` has spent its budget of failed authentications (read only: nothing is taken)."""
    rate = current_rate("auth_failures")
    if not rate.enabled:
        return
    key = client_address_key(address)
    if now is None and _clean_addresses.get(key, 0.0) > time.monotonic():
        return
    at = time.time() if now is None else now
    tat = _tat_of(key)
    admit_until = at + (rate.burst - 1) * rate.interval
    if tat is not None and tat > admit_until:
        raise _auth_failures_refusal(rate, tat - admit_until)
    if now is None:
        with _clean_lock:
            if len(_clean_addresses) >= _LocalBatches.MOST_KEYS:
                _clean_addresses.clear()
            _clean_addresses[key] = time.monotonic() + CLEAN_ADDRESS_SECONDS


def auth_failure_record(*, address: str | None, now: float | None = None) -> None:
    """Count one failed authentication from `address`."""
    key = client_address_key(address)
    with _clean_lock:
        _clean_addresses.pop(key, None)
    rate_budget_take(key=key, rate=current_rate("auth_failures"), now=now)


def authentication_throttled(*, address: str | None, authenticate: Callable[[], T]) -> T:
    """Run `authenticate` (a token lookup) unless `address` has had too many refused tokens (RateLimited, before
    the lookup); a refusal (AuthenticationFailed) counts against the address, a success counts nothing."""
    auth_failures_check(address=address)
    try:
        return authenticate()
    except AuthenticationFailed:
        auth_failure_record(address=address)
        raise


# --- sign-ups per client address, confirmation mails per account ---


def _wait_text(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} seconds"
    return f"{math.ceil(seconds / 60)} minutes"


def _person_budget_take(*, name: LimitName, key: str, what: str, instead: str, now: float | None) -> None:
    """Count one use of `key`'s budget of limit `name`; when it is spent, RateLimited worded for a person: "<what>
    (its limit: ...). <instead>try again in <wait>." (`what` may name the budget's `{burst}`)."""
    rate = current_rate(name)
    wait = rate_budget_take(key=key, rate=rate, now=now)
    if wait is None:
        return
    seconds = retry_after_seconds(wait)
    raise RateLimited(
        f"{what.format(burst=rate.burst)} (its limit: {_limits_text(rate)}). {instead}try again in "
        f"{_wait_text(seconds)}.",
        limit=rate.limit.name,
        retry_after_seconds=seconds,
        details=rate.details(seconds),
    )


def signup_budget_take(*, address: str | None, now: float | None = None) -> None:
    """Count one account created from `address` (its /64 for IPv6); RateLimited when the address has spent its
    budget of sign-ups, before anything is created."""
    _person_budget_take(
        name="signups",
        key="signup:" + client_address_key(address).removeprefix("auth:"),
        what="Too many accounts were created from your network address",
        instead="No account was created; ",
        now=now,
    )


def confirmation_mail_budget_take(*, user_id: Any, now: float | None = None) -> None:
    """Count one confirmation link sent again to account `user_id`'s address; RateLimited when spent (so nobody can
    fill an inbox with them)."""
    _person_budget_take(
        name="confirmation_mails",
        key=f"mail:{user_id}",
        what="A confirmation link was sent to this address {burst} times in a short while",
        instead="Nothing was sent; look for the last one (and in your spam folder), or ",
        now=now,
    )


# --- concurrency: at most N of one kind of work at once per account, across every process ---


@functools.cache
def _lease_sql() -> str:
    quote = connection.ops.quote_name
    table, key, tat = quote(RateBudget._meta.db_table), quote("key"), quote("tat")
    return plan_stable(
        f"INSERT INTO {table} ({key}, {tat}) VALUES (%s, %s) ON CONFLICT ({key}) DO UPDATE SET {tat} = excluded.{tat} "
        f"WHERE {table}.{tat} <= %s RETURNING {tat}"
    )


@functools.cache
def _release_sql() -> str:
    quote = connection.ops.quote_name
    return plan_stable(
        f"DELETE FROM {quote(RateBudget._meta.db_table)} WHERE {quote('key')} = %s AND {quote('tat')} = %s"
    )


@contextlib.contextmanager
def concurrency_lease(*, key: str, slots: int, seconds: float) -> Iterator[None]:
    """Hold one of `slots` places of `key` while the block runs, shared by every process: a row of the budgets'
    table per place (`lease:<key>:<n>`) whose `tat` is when the holder's lease runs out (`seconds` from now, so a
    holder that died frees its place then; the sweep deletes it). Taking a place is one upsert that succeeds only
    on a free or expired row; giving it back deletes the row if it is still ours. LeaseRefused (with the seconds
    until the first place frees at the latest) when all are held. `slots` of 0 or less: no bound."""
    if slots <= 0:
        yield
        return
    now = time.time()
    until = now + seconds
    held: str | None = None
    with connection.cursor() as cursor:
        for slot in range(slots):
            place = f"lease:{key}:{slot}"
            cursor.execute(_lease_sql(), [place, until, now])
            if cursor.fetchone() is not None:
                held = place
                break
    if held is None:
        ends = [tat for slot in range(slots) if (tat := _tat_of(f"lease:{key}:{slot}")) is not None]
        raise LeaseRefused(max(0.0, min(ends, default=now) - now))
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_release_sql(), [held, until])


class LeaseRefused(Exception):
    """Every place of a concurrency lease is held; `wait` is the seconds until the first one runs out at the
    latest (its holder usually gives it back sooner)."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"every place is held for up to {wait:.1f} s")
        self.wait = wait


# Seconds a refused caller is told to wait at most: a holder gives its place back when its work ends, usually well
# before its lease would run out.
LEASE_RETRY_SECONDS = 5


@contextlib.contextmanager
def author_tests_lease(*, user_id: Any, seconds: float) -> Iterator[None]:
    """One of the account's CHARMING_TEST_RUNS_PER_USER places for running a definition's author tests (a save,
    check_app), across every process, while the block runs; RateLimited at once when they are all held, so one
    account's many saves wait on the account, not in line before everyone else's."""
    slots = int(getattr(settings, "CHARMING_TEST_RUNS_PER_USER", 1))
    try:
        with concurrency_lease(key=f"tests:{user_id}", slots=slots, seconds=seconds):
            yield
    except LeaseRefused as refused:
        wait = retry_after_seconds(min(refused.wait, LEASE_RETRY_SECONDS))
        runs = "a save or check" if slots == 1 else f"{slots} saves or checks"
        raise RateLimited(
            f"Your account is already running the tests of {runs} (the most one account runs at once, so that "
            f"every account gets its turn). Nothing ran; try again in {wait} second{'s' if wait != 1 else ''}, once "
            "it has finished.",
            limit="test_runs",
            retry_after_seconds=wait,
            details={
                "limit": "test_runs",
                "max": slots,
                "setting": "CHARMING_TEST_RUNS_PER_USER",
                "retry_after_seconds": wait,
            },
        ) from None


def cel_share(*, actor: Any) -> contextlib.AbstractContextManager[None]:
    """The block's CEL evaluations in worker processes are `actor`'s: at most CHARMING_CEL_WORKERS_PER_USER of this
    process's evaluating children at once (routes/celworker.py `share`); one more is refused at once (the engine
    answers rate_limited) rather than queued before other accounts' calls. Per process, because the children are:
    each process's are shared the same way."""
    account = actor.owner_id if isinstance(actor, Visitor) else actor.pk  # visitors' work: the app owner's share
    return celworker.share(str(account), int(getattr(settings, "CHARMING_CEL_WORKERS_PER_USER", 1)))


# --- anonymous visitors of public apps (services/public_apps.py) ---


def visitor_budget_take(*, address_key: str, app_id: uuid.UUID, write: bool, now: float | None = None) -> None:
    """Count one request of a public app's visitor: against their address's budget (every public app together) and
    the app's (all its visitors together); an action also against their address's budget of actions. RateLimited,
    worded for a person, when one is spent; then nothing ran."""
    address = address_key.removeprefix("auth:")
    budgets: list[tuple[LimitName, str, str]] = [
        ("visitor", f"visitor:{address}", "You opened public pages too often from your network address"),
        ("public_app", f"public:{app_id}", "This public app has too many visitors at the moment"),
    ]
    if write:  # last: a request refused by the others spends none of the address's actions
        budgets.append(("visitor_writes", f"visitor-writes:{address}", "You sent many forms to public apps"))
    for name, key, what in budgets:
        _person_budget_take(name=name, key=key, what=what, instead="Nothing was done; ", now=now)
