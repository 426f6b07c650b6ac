"""The domain's one error hierarchy. Services raise only these; the MCP and REST layers
each have one translator from them to their own wire format."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import InterfaceError, OperationalError

from apps_registry.values import clip, text_problems


class CharmingError(Exception):
    """Base of every error a caller may see. `kind` is the contract's error kind."""

    kind: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500

    def __init__(
        self,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.errors = errors

    def as_envelope_error(self, message: str | None = None) -> dict[str, Any]:
        """The `error` object of the envelope: kind, message and, when present, errors and details.

        A transport passes `message` when it words the error for its own callers (see the two translators).
        """
        error: dict[str, Any] = {"kind": self.kind, "message": self.message if message is None else message}
        if self.errors is not None:
            error["errors"] = self.errors
        if self.details is not None:
            error["details"] = self.details
        return error


class InvalidInput(CharmingError):
    kind = "invalid_input"
    http_status = 400


class BodyTooLarge(InvalidInput):
    """A request body over its bound (a webhook delivery's), refused before it is read whole."""

    http_status = 413


class InvalidOutput(CharmingError):
    """The route broke its own output contract (its writes were rolled back)."""

    kind = "invalid_output"
    # 422, not 500: the platform did its job and the request was well formed; the app's author wrote a route whose
    # result does not match its `output` schema. A 5xx would read as a Charming fault (paging operators, inviting
    # retries) for what is a deterministic author bug that a retry cannot fix. The message says who must fix it.
    http_status = 422


class HandlerError(CharmingError):
    kind = "handler_error"
    http_status = 422


class OperationFailed(CharmingError):
    kind = "operation_failed"
    http_status = 409


class AppMigrating(OperationFailed):
    """A mutation refused while the app's records are being migrated (services/record_migrations.py)."""

    def __init__(self, message: str, *, app_id: Any, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.app_id = app_id


class NotFound(CharmingError):
    kind = "not_found"
    http_status = 404


class AppNotFound(NotFound):
    """An app that does not exist *or* that the caller may not see: the two are reported alike."""

    def __init__(self, app_id: object) -> None:
        super().__init__(f"No app with id {clip(app_id)} exists or is visible to you.")
        self.app_id = app_id


class Forbidden(CharmingError):
    kind = "forbidden"
    http_status = 403


class AccessDenied(Forbidden):
    """The caller sees the app, but their role does not allow `need` (worded by apps_registry.access)."""

    def __init__(self, message: str, *, app_id: object, app_name: str, role: str, need: str) -> None:
        super().__init__(message)
        self.app_id = app_id
        self.app_name = app_name
        self.role = role
        self.need = need


class InsufficientScope(Forbidden):
    """The caller's role would allow it, but the token does not carry `scope` (worded by apps_registry.access)."""

    kind = "insufficient_scope"

    def __init__(self, message: str, *, scope: str, need: str) -> None:
        super().__init__(message, details={"scope": scope})
        self.scope = scope
        self.need = need


class UnknownOp(CharmingError):
    kind = "unknown_op"
    http_status = 404


class RouteKindMismatch(UnknownOp):
    """A route run as the other kind: a query run as a mutation, or the reverse."""

    def __init__(self, *, op: str, route_kind: str, called_kind: str) -> None:
        super().__init__(f"'{op}' is a {route_kind} route; run it as a {route_kind}, not as a {called_kind}.")
        self.op = op
        self.route_kind = route_kind
        self.called_kind = called_kind


class RouteNotFound(UnknownOp):
    """The app has no route by that name; `routes` lists the (name, kind) it has."""

    def __init__(self, *, app_id: object, app_name: str, op: str, routes: list[tuple[str, str]]) -> None:
        listing = ", ".join(f"{name} ({kind})" for name, kind in routes) or "none"
        super().__init__(f"App '{app_name}' has no route '{op}'. Its routes: {listing}.")
        self.app_id = app_id
        self.app_name = app_name
        self.op = op
        self.routes = routes


class RouteRemoved(UnknownOp):
    """The route was removed by a save between this call's lookup and its run."""

    def __init__(self, *, op: str) -> None:
        super().__init__(f"Route '{op}' was just removed from this app.")
        self.op = op


class RateLimited(CharmingError):
    """A rate limit (apps_registry/ratelimits.py) refused the call before it ran; `details` name the limit and carry
    `retry_after_seconds` (the transports also send it as the Retry-After header)."""

    kind = "rate_limited"
    http_status = 429

    def __init__(self, message: str, *, limit: str, retry_after_seconds: int, details: dict[str, Any]) -> None:
        super().__init__(message, details=details)
        self.limit = limit
        self.retry_after_seconds = retry_after_seconds


class InvalidDefinition(CharmingError):
    """An app definition that does not validate; `errors` lists every problem with its path."""

    kind = "invalid_definition"
    http_status = 400


class VersionConflict(CharmingError):
    """An update that named a version other than the app's current one: someone saved in between."""

    kind = "conflict"
    http_status = 409

    def __init__(self, *, app_name: str, expected_version: int, current_version: int) -> None:
        # The facts every transport states: the version the caller read and the app's version now.
        self.facts = (
            f"expected_version {expected_version} is stale: app '{app_name}' is at version {current_version} "
            "(saved since you read it); nothing was saved."
        )
        super().__init__(
            f"{self.facts} Read the app's definition again and apply your change to version {current_version}, "
            f"then save it with expected_version {current_version}.",
            details={"expected_version": expected_version, "current_version": current_version},
        )
        self.current_version = current_version


class ChangeConflict(CharmingError):
    """A revert refused because later changes touched the same records; `conflicts` names each (and the change)."""

    kind = "conflict"
    http_status = 409

    def __init__(self, *, change_id: int, conflicts: list[dict[str, Any]], reverted_by: int | None = None) -> None:
        details: dict[str, Any] = {"change_id": str(change_id), "conflicts": conflicts[:50]}
        if reverted_by is not None:
            # The only later change is the change's own revert: forcing would undo that revert, not redo this one.
            self.facts = (
                f"Change {change_id} was already reverted, by change {reverted_by}: its records are as they were "
                "before it. Nothing was changed."
            )
            message = f"{self.facts} To redo change {change_id}, revert change {reverted_by}."
            details["reverted_by"] = str(reverted_by)
        else:
            shown = ", ".join(f"{c['collection']}/{c['id']} (by change {c['change_id']})" for c in conflicts[:10])
            more = f" and {len(conflicts) - 10} more" if len(conflicts) > 10 else ""
            # The facts every transport states; each adds how to go on in its own words.
            self.facts = (
                f"Change {change_id} was not reverted: later changes touched the same records: {shown}{more}. "
                "Nothing was changed."
            )
            message = (
                f"{self.facts} Look at those records' history first; to put them back as they were before change "
                f"{change_id} anyway (undoing the later changes to them too), revert it with force."
            )
        super().__init__(message, details=details)
        self.change_id = change_id
        self.conflicts = conflicts
        self.reverted_by = reverted_by


class TestsFailed(CharmingError):
    """A definition whose own tests fail; `details.tests` lists each result (expected vs got)."""

    __test__ = False  # not a pytest test class
    kind = "tests_failed"
    http_status = 422


class ConfirmationRequired(CharmingError):
    """A destructive call that was not confirmed and cannot prompt the user."""

    kind = "confirmation_required"
    http_status = 428


class AuthenticationFailed(CharmingError):
    kind = "unauthenticated"
    http_status = 401


class DatabaseUnavailable(CharmingError):
    """The database could not be reached or dropped the connection (an outage, a restart, a full pool)."""

    kind = "unavailable"
    http_status = 503
    retry_after_seconds: ClassVar[int] = 5

    def __init__(self, message: str = "The database is unavailable; try again shortly.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


def _driver_errors() -> tuple[type[BaseException], ...]:
    """The database driver's own connection errors, which reach us unwrapped from outside Django's cursor wrapper
    (psycopg's pool raises PoolTimeout, an OperationalError of psycopg's, when no connection comes in time)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installs
        return ()
    return (psycopg.OperationalError, psycopg.InterfaceError)


def database_unavailable(error: BaseException) -> DatabaseUnavailable | None:
    """The error a transport answers (503, Retry-After) when `error` means the database is out of reach."""
    if isinstance(error, (OperationalError, InterfaceError, *_driver_errors())):
        return DatabaseUnavailable()
    return None


def connection_lost(error: BaseException) -> DatabaseUnavailable | None:
    """The retryable error of a call whose database connection was lost (or never came) before it finished; a
    mutation whose COMMIT was sent is told CommitUnconfirmed instead (services/routes.py), never this."""
    if database_unavailable(error) is None:
        return None
    seconds = DatabaseUnavailable.retry_after_seconds
    return DatabaseUnavailable(
        f"The connection to the database was lost before this call finished; try again in {seconds} seconds "
        "(a mutate_app call with an idempotency key can be retried with the same key).",
        details={"retry_after_seconds": seconds},
    )


class InternalError(CharmingError):
    """Anything unexpected, reported without internals (the full error goes to the log)."""

    kind = "internal_error"
    http_status = 500


class CommitUnconfirmed(InternalError):
    """A mutation's COMMIT was sent but its answer never came (the connection dropped): it may have been saved."""

    http_status = 503

    def __init__(self) -> None:
        super().__init__(
            "The connection to the database was lost while this change was being committed, so whether it was "
            "saved is unknown. Read the app's data to see before calling again; a call with an idempotency key can "
            "be retried safely with the same key."
        )


def app_not_found(app_id: object) -> AppNotFound:
    """The one error for an app that does not exist *and* for one the caller may not see."""
    return AppNotFound(app_id)


def unstorable_text_refuse(value: object, *, path: str, what: str) -> None:
    """InvalidInput when `value` (a string or JSON value) holds text no database can store (a NUL character or a
    lone surrogate), naming each place by its JSON path; the offending text is not quoted back."""
    problems = text_problems(value, path)
    if problems:
        where = "; ".join(f"{p['path']} {p['message']}" for p in problems[:3])
        raise InvalidInput(
            f"{what} must be valid Unicode text without NUL characters: {where}. "
            "Remove those characters and send it again.",
            errors=problems,
        )
