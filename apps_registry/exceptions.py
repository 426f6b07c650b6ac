"""The domain's one error hierarchy. Services raise only these; the MCP and REST layers
each have one translator from them to their own wire format."""

from __future__ import annotations

from typing import Any, ClassVar


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

    def as_envelope_error(self) -> dict[str, Any]:
        """The `error` object of the tool envelope: kind, message and, when present, errors and details."""
        error: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.errors is not None:
            error["errors"] = self.errors
        if self.details is not None:
            error["details"] = self.details
        return error


class InvalidInput(CharmingError):
    kind = "invalid_input"
    http_status = 400


class InvalidOutput(CharmingError):
    kind = "invalid_output"
    http_status = 500


class HandlerError(CharmingError):
    kind = "handler_error"
    http_status = 422


class OperationFailed(CharmingError):
    kind = "operation_failed"
    http_status = 409


class NotFound(CharmingError):
    kind = "not_found"
    http_status = 404


class Forbidden(CharmingError):
    kind = "forbidden"
    http_status = 403


class UnknownOp(CharmingError):
    kind = "unknown_op"
    http_status = 404


class RateLimited(CharmingError):
    kind = "rate_limited"
    http_status = 429


class InvalidDefinition(CharmingError):
    """An app definition that does not validate; `errors` lists every problem with its path."""

    kind = "invalid_definition"
    http_status = 400


class ConfirmationRequired(CharmingError):
    """A destructive call that was not confirmed and cannot prompt the user."""

    kind = "confirmation_required"
    http_status = 428


class AuthenticationFailed(CharmingError):
    kind = "unauthenticated"
    http_status = 401


class InternalError(CharmingError):
    """Anything unexpected, reported without internals (the full error goes to the log)."""

    kind = "internal_error"
    http_status = 500


APP_NOT_FOUND_MESSAGE = "No app with id {app_id} exists or is visible to you. Use list_apps to see your apps."


def app_not_found(app_id: object) -> NotFound:
    """The one error for an app that does not exist *and* for one the caller may not see."""
    return NotFound(APP_NOT_FOUND_MESSAGE.format(app_id=app_id))
