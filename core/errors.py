"""The one domain-error type.

Services raise a `DomainError` (or one of its three kinds) with a stable code from
`core.error_codes.ErrorCode`, an English message for logs and the CLI, and the values the
code's message needs (`params`). Pages and the API both show `error_message(exc)`: the
code's message in the active language, so a user reads the same sentence in the
browser and through the API. One adapter maps it for the pages
(`core.middleware.DomainErrorMiddleware`), one for the API (`core.api.exception_handler`).
"""
from typing import Any

from core.error_codes import GENERIC_CODES, ErrorCode

# Entries an error list shows at most, in the API and on pages (core.api, core.middleware).
MAX_ERRORS = 100


class DomainError(Exception):
    """A request the domain refuses, with a message a user can act on."""

    status = 400
    code: str = ErrorCode.INVALID

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 errors: list[dict[str, Any]] | None = None, params: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.errors: list[dict[str, Any]] = errors or []
        self.params: dict[str, Any] = params or {}


class NotFound(DomainError):
    """Missing or not yours: the same answer for both, so ids leak nothing."""

    status = 404
    code = ErrorCode.NOT_FOUND


class Forbidden(DomainError):
    status = 403
    code = ErrorCode.FORBIDDEN


class Conflict(DomainError):
    status = 409
    code = ErrorCode.CONFLICT


def _render(code: str, params: dict[str, Any], fallback: str) -> str:
    try:
        label = ErrorCode(code).label
    except ValueError:
        return fallback
    try:
        text = str(label % params)
    except (KeyError, TypeError, ValueError):
        # A message whose params are missing must still reach the user, in English.
        return fallback
    return text or fallback


def error_message(exc: DomainError) -> str:
    """The error in the active language: its code's message, or the service's text for a generic code."""
    if exc.code in GENERIC_CODES:
        return exc.message
    return _render(exc.code, exc.params, exc.message)


def field_error_message(error: dict[str, Any]) -> str:
    """One entry of `DomainError.errors` in the active language where its code is known."""
    code = str(error.get("code") or "")
    message = str(error.get("message", ""))
    if not code or code in GENERIC_CODES:
        return message
    return _render(code, dict(error.get("params") or {}), message)
