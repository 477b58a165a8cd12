"""One mapping from domain errors to API responses."""
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from annotation.errors import DomainError


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        body = {"detail": exc.message, "code": exc.code}
        if exc.errors:
            body["errors"] = exc.errors
        return Response(body, status=exc.status)
    return drf_exception_handler(exc, context)
