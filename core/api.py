"""The API's adapter for domain errors: `{"detail", "code", "errors"}` in the client's language."""
from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import DomainError, error_message, field_error_message


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        body: dict[str, Any] = {"detail": error_message(exc), "code": str(exc.code)}
        if exc.errors:
            body["errors"] = [
                {**e, "message": field_error_message(e)} if e.get("code") else e for e in exc.errors
            ]
        return Response(body, status=exc.status)
    return drf_exception_handler(exc, context)
