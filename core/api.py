"""The API's adapter for domain errors: `{"detail", "code", "errors"}` in the client's language."""
from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import DomainError, error_message


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    domain = getattr(exc, "domain", None)  # a parse error of core.input_guard carries its domain error
    if isinstance(domain, DomainError):
        exc = domain
    if isinstance(exc, DomainError):
        body: dict[str, Any] = {"detail": error_message(exc), "code": str(exc.code)}
        if exc.errors:
            # Entries keep the service's English `message` beside their stable `code`:
            # programs match on the code, and the `detail` above is the sentence for people.
            body["errors"] = exc.errors
        return Response(body, status=exc.status)
    return drf_exception_handler(exc, context)
