"""The API's adapter for errors: `{"detail", "code", "errors"}` in the client's language.

Domain errors and DRF's own (a serializer's validation, authentication, permission,
throttling, parsing) answer in that one shape, the `Error` component of the schema
(`core.api_schema`): a serializer's `{"field": ["message"]}` becomes one `errors` entry
per message, with its field path and DRF's code. At most MAX_ERRORS entries are listed
(a body with 100,000 unknown keys once came back as a 9 MB error list); `errors_omitted`
says how many more there were.
"""
from collections.abc import Iterator
from typing import Any

from rest_framework.exceptions import (
    APIException,
    AuthenticationFailed,
    ErrorDetail,
    NotAuthenticated,
    Throttled,
    ValidationError,
)
from rest_framework.response import Response

from core.error_codes import ErrorCode
from core.errors import MAX_ERRORS, DomainError, error_message


def body_not_object(what: str = "settings") -> DomainError:
    """The refusal of a JSON body that is not an object where an object of `what` is expected."""
    return DomainError(f"The request body must be a JSON object of {what}.", code=ErrorCode.INPUT_NOT_OBJECT,
                       errors=[{"field": "(body)", "code": ErrorCode.INPUT_NOT_OBJECT,
                                "message": "expected an object"}])


def _body(detail: str, code: str, errors: list[dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": detail, "code": code}
    if errors:
        # Entries keep the service's English `message` beside their stable `code`:
        # programs match on the code, and the `detail` above is the sentence for people.
        body["errors"] = errors[:MAX_ERRORS]
        if len(errors) > MAX_ERRORS:
            body["errors_omitted"] = len(errors) - MAX_ERRORS
    return body


def _validation_entries(detail: Any, path: str = "") -> Iterator[dict[str, Any]]:
    """One entry per message of a DRF validation error, however its serializers nest."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = "(body)" if key == "non_field_errors" and not path else str(key)
            yield from _validation_entries(value, f"{path}.{name}" if path else name)
    elif isinstance(detail, list):
        nested = any(isinstance(item, (dict, list)) for item in detail)
        for index, item in enumerate(detail):
            yield from _validation_entries(item, f"{path}.{index}" if nested else path)
    else:
        code = detail.code if isinstance(detail, ErrorDetail) and detail.code else "invalid"
        yield {"field": path or "(body)", "message": str(detail), "code": str(code)}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    domain = getattr(exc, "domain", None)  # a parse error of core.input_guard carries its domain error
    if isinstance(domain, DomainError):
        exc = domain
    if isinstance(exc, NotAuthenticated | AuthenticationFailed):
        exc = _throttled_instead(exc, context)
    if isinstance(exc, DomainError):
        return Response(_body(error_message(exc), str(exc.code), exc.errors), status=exc.status)
    # Imported here: core.middleware imports this module before DRF's views, which read the
    # REST_FRAMEWORK settings (their throttle classes, core.throttles) when first imported.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, APIException):
        return response
    if isinstance(exc, ValidationError):
        entries = list(_validation_entries(exc.detail))
        first = entries[0] if entries else {"field": "(body)", "message": "invalid"}
        response.data = _body(f"The request is invalid: {first['field']}: {first['message']}", "invalid", entries)
    else:
        detail = exc.detail
        code = detail.code if isinstance(detail, ErrorDetail) and detail.code else exc.default_code
        response.data = _body(str(detail), str(code), [])
    return response


def _throttled_instead(exc: Exception, context: dict[str, Any]) -> Exception:
    """DRF checks throttles after permissions, so calls without valid credentials were never counted:
    an address could send any number of them. They count here (the anonymous and the address
    scopes), and one over the rate gets the 429 instead of the 401."""
    view, request = context.get("view"), context.get("request")
    if view is None or request is None or not hasattr(view, "check_throttles"):
        return exc
    try:
        view.check_throttles(request)
    except Throttled as throttled:
        return throttled
    return exc
