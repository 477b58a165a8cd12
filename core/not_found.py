"""The site's 404: Django's page, except under /api/, which answers the API's JSON error.

A URL under /api/ that matches no route (an id that is not a number, a path that does not
exist) is a client's mistake like any other: it gets the `Error` body of the schema, not
an HTML page a program cannot read.
"""
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from core.error_codes import ErrorCode


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": str(ErrorCode.NOT_FOUND.label), "code": str(ErrorCode.NOT_FOUND)}, status=404)
    return defaults.page_not_found(request, exception)
