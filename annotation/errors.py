"""The one domain-error type: views show it as a form error, the API as {"detail": ...}."""
from typing import Any


class DomainError(Exception):
    """A request the domain refuses, with a message a user can act on."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.errors = errors or []


class NotFound(DomainError):
    """Missing or not yours: the same answer for both, so ids leak nothing."""

    status = 404
    code = "not_found"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"


class Conflict(DomainError):
    status = 409
    code = "conflict"
