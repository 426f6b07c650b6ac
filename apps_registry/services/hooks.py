"""Webhooks in: a mutation route run by signed POSTs to an unguessable URL, `/hooks/<id>/`, whose JSON body is the
route's params and whose answer is the route's envelope.

A delivery carries `Charming-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + the raw body, keyed by the
hook's secret>`. It is refused, with nothing written, when the header is missing or malformed, when `t` is further
than CHARMING_HOOK_TOLERANCE_SECONDS from now (either way), when no v1 matches and when the hook is unknown (these
count against the sender's address, its budget of refused credentials, and are answered 429 once it is spent; a
delivery that checks out is never refused for its address), and when the body is over CHARMING_HOOK_BODY_BYTES.
None of these is recorded. A delivery whose signature checks out is recorded (`HookDelivery`, unique per hook and
signed message) in the same transaction as the route's writes: the same signed request sent again, even at the
same moment, is refused as a replay, before it spends any budget; a body that is not a JSON object, a route that
refuses, are recorded as failed deliveries with nothing written to the app. A refusal that passes (the app's rate
limit, a migration, a busy worker) is not recorded, so the sender may send the same request again.

Deliveries run as the hook's creator (who created it or last rotated its secret), with their access checked each
time; one signed with the previous secret in a rotation's overlap runs as whoever the hook ran as before. They draw
on the hook's own rate limit and the app's. A delivery locks its hook's row (FOR NO KEY UPDATE) for its transaction,
then the storage's, the order app_delete takes them in.

Secrets are never stored: each is an HMAC of the hook's id and a random nonce under the server's secret key (and,
for checking, each key of SECRET_KEY_FALLBACKS, so a key rotation done Django's way keeps hooks working). A copy of
the database alone cannot sign a delivery. Rotating draws a new nonce and keeps the old secret valid for an overlap
(`keep_old_minutes`, default CHARMING_HOOK_ROTATION_OVERLAP_MINUTES) while the sender moves to the new one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from apps_registry.access import manager_app_for, still_authors
from apps_registry.exceptions import (
    AppMigrating,
    AuthenticationFailed,
    BodyTooLarge,
    CharmingError,
    Forbidden,
    InvalidInput,
    NotFound,
    OperationFailed,
    RateLimited,
    unstorable_text_refuse,
)
from apps_registry.models import App, ChangeVia, Hook, HookDelivery, HookDeliveryOutcome, Route
from apps_registry.ratelimits import current_rate
from apps_registry.redaction import redact
from apps_registry.services.apps import audit_record
from apps_registry.services.automation import invalid, kept_for, mutation_route_checked, shares_check
from apps_registry.services.rate_limits import (
    app_budget_take,
    auth_failure_record,
    auth_failures_check,
    rate_budget_take,
    retry_after_seconds,
)
from apps_registry.values import clip, parse_uuid

SIGNATURE_HEADER = "Charming-Signature"
SECRET_PREFIX = "whsec_"
DELIVERIES_SHOWN = 5  # the last deliveries each listing shows
MOST_SIGNATURES = 4  # v1 entries one header may carry (a sender signing with the old and the new secret sends two)
MOST_OVERLAP_MINUTES = 7 * 24 * 60
_SALT = "charming.hooks.secret"
_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")  # ASCII digits only (str.isdigit takes '²')


@dataclass(frozen=True)
class HookView:
    """A hook with its last deliveries, as the tools, the REST API and the page show it (never its secret)."""

    hook: Hook
    deliveries: list[HookDelivery]

    def as_dict(self) -> dict[str, Any]:
        h = self.hook
        previous = h.previous_until if h.previous_nonce and h.previous_until and h.previous_until > _now() else None
        return {
            "id": str(h.id),
            "app_id": str(h.app_id),
            "route": h.route,
            "description": h.description,
            "url": hook_url(h),
            "secret_hint": h.secret_hint + "…",
            "previous_secret_valid_until": None if previous is None else previous.isoformat(),
            "created_by": h.creator.get_username(),
            "created_at": h.created_at.isoformat(),
            "deliveries": [_delivery_dict(d) for d in self.deliveries],
        }


@dataclass(frozen=True)
class HookWithSecret:
    """A hook just created or rotated, with its secret: shown this once, never again."""

    view: HookView
    secret: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.view.as_dict(), "secret": self.secret}


def _delivery_dict(delivery: HookDelivery) -> dict[str, Any]:
    found: dict[str, Any] = {
        "received_at": delivery.received_at.isoformat(),
        "signed_at": delivery.signed_at.isoformat(),
        "outcome": delivery.outcome,
        "status": delivery.status,
    }
    if delivery.error:
        found["error"] = delivery.error
    if delivery.change_id is not None:
        found["change_id"] = str(delivery.change_id)
    return found


def _now() -> datetime:
    return timezone.now()


def hook_url(hook: Hook) -> str:
    """Where senders POST: the server's public URL and the hook's id."""
    return settings.CHARMING_PUBLIC_URL.rstrip("/") + reverse("hook_deliver", args=[hook.id])


def _secret(hook_id: uuid.UUID, nonce: str, key: str) -> str:
    digest = salted_hmac(_SALT, f"{hook_id}:{nonce}", secret=key, algorithm="sha256").digest()
    return SECRET_PREFIX + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _new_secret(hook: Hook) -> str:
    """Draw a new nonce for `hook` (not saved) and return the secret it gives."""
    hook.secret_nonce = secrets.token_urlsafe(24)
    secret = _secret(hook.id, hook.secret_nonce, settings.SECRET_KEY)
    hook.secret_hint = secret[: len(SECRET_PREFIX) + 4]
    return secret


def hook_app_for(*, actor: Any, app_id: Any, for_update: bool = False) -> App:
    """The app, if `actor` may manage its webhooks (the owner and editors)."""
    return manager_app_for(actor=actor, app_id=app_id, what="webhooks", for_update=for_update)


def _route_checked(*, app: App, route: Any) -> Route:
    unstorable_text_refuse(route, path="$.route", what="The route name")
    return mutation_route_checked(app=app, route=route, what="webhooks")


def _description_checked(description: Any) -> str:
    if description is None:
        return ""
    if not isinstance(description, str):
        raise invalid("$.description", f"must be text, got {type(description).__name__}")
    unstorable_text_refuse(description, path="$.description", what="The description")
    text = " ".join(description.split())
    if len(text) > 200:
        raise invalid("$.description", f"is {len(text)} characters long; at most 200")
    return text


@transaction.atomic
def hook_create(*, actor: Any, app_id: Any, route: Any, description: Any = "") -> HookWithSecret:
    """Expose a mutation route of the app at a new webhook URL (owner or editor); deliveries run as `actor`. The
    result holds the secret, which is not shown again."""
    app = hook_app_for(actor=actor, app_id=app_id, for_update=True)  # the counts are checked one save at a time
    found = _route_checked(app=app, route=route)
    text = _description_checked(description)
    shares_check(
        app,
        Hook,
        what="webhooks",
        limit="hooks",
        setting="CHARMING_HOOKS",
        instead="Delete one it no longer needs (list_hooks shows them).",
    )
    hook = Hook(app=app, route=found.name, description=text, creator=actor)
    secret = _new_secret(hook)
    hook.save()
    audit_record(
        actor=actor,
        action="hook.create",
        app_id=app.id,
        details={"hook_id": str(hook.id), "route": found.name, "secret_hint": hook.secret_hint},
    )
    return HookWithSecret(view=HookView(hook=hook, deliveries=[]), secret=secret)


def _hook_for(*, actor: Any, hook_id: Any, app_id: Any = None, for_update: bool = False) -> Hook:
    """The hook (of app `app_id`, when given), if `actor` may manage its app's webhooks; NotFound alike for a missing
    hook and one of an app the actor cannot see."""
    missing = f"No webhook with id {clip(hook_id)} exists or is visible to you."
    return kept_for(
        Hook, actor=actor, kept_id=hook_id, app_id=app_id, for_update=for_update, what="webhooks", missing=missing
    )


@transaction.atomic
def hook_rotate(*, actor: Any, hook_id: Any, keep_old_minutes: Any = None, app_id: Any = None) -> HookWithSecret:
    """Give the hook a new secret (owner or editor), keeping the old one valid for `keep_old_minutes` (default
    CHARMING_HOOK_ROTATION_OVERLAP_MINUTES; 0 ends it now). Deliveries run as `actor` from then on."""
    if keep_old_minutes is None:
        keep_old_minutes = settings.CHARMING_HOOK_ROTATION_OVERLAP_MINUTES
    if isinstance(keep_old_minutes, bool) or not isinstance(keep_old_minutes, int):
        raise invalid("$.keep_old_minutes", f"must be a whole number of minutes, got {clip(keep_old_minutes, 40)}")
    if not 0 <= keep_old_minutes <= MOST_OVERLAP_MINUTES:
        raise invalid(
            "$.keep_old_minutes", f"must be from 0 to {MOST_OVERLAP_MINUTES} (a week), got {keep_old_minutes}"
        )
    hook = _hook_for(actor=actor, hook_id=hook_id, app_id=app_id, for_update=True)
    now = _now()
    hook.previous_nonce = hook.secret_nonce if keep_old_minutes else ""
    hook.previous_until = now + timedelta(minutes=keep_old_minutes) if keep_old_minutes else None
    hook.previous_creator = hook.creator if keep_old_minutes else None  # the old secret keeps running as them
    secret = _new_secret(hook)
    hook.creator, hook.rotated_at = actor, now
    hook.save()
    audit_record(
        actor=actor,
        action="hook.rotate",
        app_id=hook.app_id,
        details={"hook_id": str(hook.id), "secret_hint": hook.secret_hint, "keep_old_minutes": keep_old_minutes},
    )
    return HookWithSecret(view=HookView(hook=hook, deliveries=_last_deliveries(hook)), secret=secret)


@dataclass(frozen=True)
class DeletedHook:
    id: uuid.UUID
    app_id: uuid.UUID
    route: str


@transaction.atomic
def hook_delete(*, actor: Any, hook_id: Any, app_id: Any = None) -> DeletedHook:
    """Delete the hook and its deliveries (owner or editor): its URL answers 404 from then on."""
    hook = _hook_for(actor=actor, hook_id=hook_id, app_id=app_id, for_update=True)
    audit_record(
        actor=actor, action="hook.delete", app_id=hook.app_id, details={"hook_id": str(hook.id), "route": hook.route}
    )
    gone = DeletedHook(id=hook.id, app_id=hook.app_id, route=hook.route)
    hook.delete()
    return gone


def hooks_for(*, actor: Any, app_id: Any) -> tuple[App, list[HookView]]:
    """The app's hooks with their last deliveries (the owner and editors: a hook's URL is a way in)."""
    app = hook_app_for(actor=actor, app_id=app_id)
    hooks = list(Hook.objects.filter(app=app).select_related("creator").order_by("created_at"))
    return app, [HookView(hook=h, deliveries=_last_deliveries(h)) for h in hooks]


def _last_deliveries(hook: Hook) -> list[HookDelivery]:
    return list(HookDelivery.objects.filter(hook=hook).order_by("-received_at", "-id")[:DELIVERIES_SHOWN])


# --- deliveries ---


@dataclass(frozen=True)
class Signature:
    timestamp: int
    signatures: tuple[str, ...]


def signature_parse(header: str | None) -> Signature:
    """The timestamp and v1 signatures of a Charming-Signature header, or AuthenticationFailed saying what is wrong."""
    form = f"{SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.' + body, keyed by the hook's secret>"
    if not header or not header.strip():
        raise AuthenticationFailed(
            f"This request has no {SIGNATURE_HEADER} header. Sign each delivery: {form} (docs/automation.md)."
        )
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            if timestamp is not None:
                raise AuthenticationFailed(f"The {SIGNATURE_HEADER} header has more than one t; send one.")
            if not _UNIX_SECONDS.fullmatch(value):
                raise AuthenticationFailed(
                    f"The {SIGNATURE_HEADER} header's t must be unix seconds, got {clip(value, 20)!r}."
                )
            timestamp = int(value)
        elif name == "v1":
            value = value.lower()
            if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
                raise AuthenticationFailed(
                    f"A v1 of the {SIGNATURE_HEADER} header must be 64 hex digits (HMAC-SHA256), "
                    f"got {clip(value, 20)!r}."
                )
            signatures.append(value)
        # other schemes (v0, a future v2) are left for their own checks, as senders' headers often carry several
    if timestamp is None or not signatures:
        missing = "t" if timestamp is None else "v1"
        raise AuthenticationFailed(f"The {SIGNATURE_HEADER} header has no {missing}; it must read {form}.")
    if len(signatures) > MOST_SIGNATURES:
        raise AuthenticationFailed(
            f"The {SIGNATURE_HEADER} header carries {len(signatures)} v1 signatures; at most {MOST_SIGNATURES}."
        )
    return Signature(timestamp=timestamp, signatures=tuple(signatures))


def signature_make(*, secret: str, timestamp: int, body: bytes) -> str:
    """The header value a sender sends: what docs/automation.md shows in Python and with openssl."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def _secrets_valid(hook: Hook, now: datetime) -> list[tuple[str, bool]]:
    """The secrets a delivery to `hook` may be signed with now, each with whether it is the previous one: its own
    and, in a rotation's overlap, the one before, each under the secret key and its fallbacks."""
    nonces = [(hook.secret_nonce, False)]
    if hook.previous_nonce and hook.previous_until is not None and hook.previous_until > now:
        nonces.append((hook.previous_nonce, True))
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return [(_secret(hook.id, nonce, key), previous) for nonce, previous in nonces for key in keys]


def _verified(hook: Hook, signature: Signature, body: bytes, now: datetime) -> Any:
    """Who the delivery runs as (the hook's creator; signed with the previous secret in a rotation's overlap, whoever
    the hook ran as before it), or AuthenticationFailed unless the signature is recent and one of its v1 values is one
    of the hook's secrets'."""
    tolerance = settings.CHARMING_HOOK_TOLERANCE_SECONDS
    age = int(now.timestamp()) - signature.timestamp
    if abs(age) > tolerance:
        when = f"{age} seconds old" if age > 0 else f"{-age} seconds in the future"
        raise AuthenticationFailed(
            f"The signature's timestamp t={signature.timestamp} is {when}; a delivery must be signed within "
            f"{tolerance} seconds of arriving (CHARMING_HOOK_TOLERANCE_SECONDS). Sign it again as it is sent, and "
            "check the sender's clock."
        )
    message = f"{signature.timestamp}.".encode() + body
    for secret, previous in _secrets_valid(hook, now):
        expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(expected, given) for given in signature.signatures):
            # Who ran it then runs what is signed with its secret: a rotation to shut someone out does not make
            # their old secret act as the person rotating, for the overlap.
            return (hook.previous_creator or hook.creator) if previous else hook.creator
    raise AuthenticationFailed(
        "The signature does not match this body for this webhook's secret. Sign the exact bytes sent: "
        "HMAC-SHA256, keyed by the secret (the whole whsec_… text), of the timestamp, a period, then the body."
    )


def _params_of(body: bytes) -> dict[str, Any] | None:
    """The route's params: the body as a JSON object (an empty body: none)."""
    if not body.strip():
        return None
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise InvalidInput(
            "The body is not UTF-8 text; send the route's params as a JSON object.",
            errors=[{"path": "$", "message": "not UTF-8"}],
        ) from None
    except (ValueError, RecursionError) as bad:
        where = f" ({bad.msg} at character {bad.pos})" if isinstance(bad, json.JSONDecodeError) else ""
        raise InvalidInput(
            f"The body is not JSON{where}; send the route's params as a JSON object.",
            errors=[{"path": "$", "message": "not JSON"}],
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput(
            f"The body must be a JSON object (the route's params), got {_json_type(value)}.",
            errors=[{"path": "$", "message": "must be an object"}],
        )
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


@dataclass(frozen=True)
class Delivered:
    value: Any
    change_id: int | None


def body_too_large() -> BodyTooLarge:
    """The refusal of a body over CHARMING_HOOK_BODY_BYTES (the view answers it before reading the body whole)."""
    limit = settings.CHARMING_HOOK_BODY_BYTES
    return BodyTooLarge(
        f"The body is larger than {limit} bytes (CHARMING_HOOK_BODY_BYTES); send less per delivery.",
        errors=[{"path": "$", "message": f"over {limit} bytes"}],
    )


def hook_deliver(
    *, hook_id: Any, signature_header: str | None, body: bytes, address: str | None, now: datetime | None = None
) -> Delivered:
    """Run one delivery to hook `hook_id` (the view's body): the route's value, or the CharmingError the sender is
    answered with. Nothing is written unless the signature checks out; then the delivery is recorded, whatever the
    route does (but a refusal that passes, such as a busy worker, so the same signed request can be sent again), in
    the transaction of its writes."""
    now = now or _now()
    pk = parse_uuid(hook_id)
    hook = None if pk is None else Hook.objects.filter(pk=pk).first()
    try:
        if hook is None:
            raise NotFound("No webhook at this address: it was deleted, or the URL is mistyped.")
        signature = signature_parse(signature_header)
        runs_as = _verified(hook, signature, body, now)
    except (NotFound, AuthenticationFailed):
        # Counted against the sender's address, and answered 429 once it sent too many; a delivery that checks out
        # is never refused for its address, so a stranger sharing it (a NAT, a hosted sender) cannot lock it out.
        auth_failures_check(address=address)
        auth_failure_record(address=address)
        raise
    if len(body) > settings.CHARMING_HOOK_BODY_BYTES:  # the view refuses a declared length; this, a chunked body
        raise body_too_large()
    message = hashlib.sha256(f"{signature.timestamp}.".encode() + body).hexdigest()
    if HookDelivery.objects.filter(hook_id=hook.pk, message=message).exists():  # before any budget is spent
        raise _replay_refusal(hook, message)
    _hook_budget_take(hook)
    # The app's budget outside the delivery's transaction (as route_run's own): inside it, the budget's row would
    # stay locked while the route runs, and every call of the app would wait behind it.
    app_budget_take(actor=runs_as, app_id=hook.app_id)
    failure: CharmingError | None = None
    with transaction.atomic():
        # The hook's row first (as a schedule's run takes its schedule's), then the storage's in the route: the order
        # app_delete takes them in. Read again under the lock, so a rotation or deletion meanwhile is seen.
        locked = Hook.objects.select_for_update(no_key=True, of=("self",)).select_related("creator", "previous_creator")
        hook = locked.filter(pk=hook.pk).first()
        if hook is None:
            raise NotFound("No webhook at this address: it was deleted, or the URL is mistyped.")
        runs_as = _verified(hook, signature, body, now)
        delivery = HookDelivery(
            hook=hook,
            message=message,
            signed_at=datetime.fromtimestamp(signature.timestamp, tz=UTC),
            received_at=now,
            outcome=HookDeliveryOutcome.FAILED,
            status=500,
        )
        try:
            with transaction.atomic():
                delivery.save()
        except IntegrityError:  # the same signed request, run meanwhile
            raise _replay_refusal(hook, message) from None
        try:
            result = _run(hook, runs_as, body)
        except (AppMigrating, RateLimited):
            raise  # passing: the whole transaction goes, the delivery's record with it, so it can be sent again
        except CharmingError as refused:
            failure = refused
            delivery.status, delivery.error = refused.http_status, redact(refused.message)
        else:
            delivery.outcome, delivery.status, delivery.change_id = HookDeliveryOutcome.OK, 200, result.change_id
        HookDelivery.objects.filter(pk=delivery.pk).update(
            outcome=delivery.outcome, status=delivery.status, error=delivery.error, change_id=delivery.change_id
        )
    if failure is not None:
        raise failure
    return Delivered(value=result.value, change_id=result.change_id)


def _run(hook: Hook, runs_as: Any, body: bytes) -> Any:
    """The route, as `runs_as`, in a savepoint of the delivery's transaction (a failure writes nothing)."""
    from apps_registry.services.routes import route_run  # routes imports a good deal; keep this module light

    params = _params_of(body)
    if not still_authors(user=runs_as, app_id=hook.app_id):
        raise Forbidden(
            f"This webhook runs as {runs_as.get_username()}, who can no longer change its app; nothing was run. "
            "An owner or editor of the app can rotate its secret (it then runs as them) or delete it."
        )
    with transaction.atomic():
        return route_run(
            actor=runs_as,
            app_id=hook.app_id,
            op=hook.route,
            params=params,
            kind="mutation",
            via=ChangeVia.HOOK,
            budget_taken=True,
        )


def _replay_refusal(hook: Hook, message: str) -> OperationFailed:
    first = HookDelivery.objects.filter(hook=hook, message=message).first()
    when = "" if first is None else f" at {first.received_at:%Y-%m-%d %H:%M:%S} UTC ({first.outcome})"
    return OperationFailed(
        f"This signed delivery was already received{when}; it was not run again. A new delivery needs a new "
        "signature (sign it with the time it is sent).",
        details={"replay": True},
    )


def _hook_budget_take(hook: Hook) -> None:
    rate = current_rate("hook")
    wait = rate_budget_take(key=f"hook:{hook.id}", rate=rate)
    if wait is not None:
        seconds = retry_after_seconds(wait)
        raise RateLimited(
            f"This webhook had too many deliveries (its limit: {rate.per_minute} per minute, bursts of {rate.burst}). "
            f"Nothing ran; send it again, signed anew, in {seconds} second{'s' if seconds != 1 else ''}.",
            limit="hook",
            retry_after_seconds=seconds,
            details=rate.details(seconds),
        )


def hook_deliveries_purge(*, before: datetime) -> int:
    """Delete the deliveries received before `before` (purge_storage's retention); their signatures are long past
    the tolerance, so no replay check needs them."""
    # A signature dated ahead of the clock stays usable until received + 2 x the tolerance: keep at least that.
    newest = _now() - timedelta(seconds=2 * settings.CHARMING_HOOK_TOLERANCE_SECONDS)
    before = min(before, newest)
    deleted, _ = HookDelivery.objects.filter(received_at__lt=before).delete()
    return deleted
