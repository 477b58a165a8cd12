"""The API's adapter for domain errors: `{"detail", "code", "errors"}` in the client's language.

At most MAX_ERRORS entries are listed (a body with 100,000 unknown keys once came back as
a 9 MB error list); `errors_omitted` says how many more there were.
"""
from typing import Any

from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import exception_handler as drf_exception_handler

from core.error_codes import ErrorCode
from core.errors import MAX_ERRORS, DomainError, error_message


def body_not_object(what: str = "settings") -> DomainError:
    """The refusal of a JSON body that is not an object where an object of `what` is expected."""
    return DomainError(f"The request body must be a JSON object of {what}.", code=ErrorCode.INPUT_NOT_OBJECT,
                       errors=[{"field": "(body)", "code": ErrorCode.INPUT_NOT_OBJECT,
                                "message": "expected an object"}])


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    domain = getattr(exc, "domain", None)  # a parse error of core.input_guard carries its domain error
    if isinstance(domain, DomainError):
        exc = domain
    if isinstance(exc, DomainError):
        body: dict[str, Any] = {"detail": error_message(exc), "code": str(exc.code)}
        if exc.errors:
            # Entries keep the service's English `message` beside their stable `code`:
            # programs match on the code, and the `detail` above is the sentence for people.
            body["errors"] = exc.errors[:MAX_ERRORS]
            if len(exc.errors) > MAX_ERRORS:
                body["errors_omitted"] = len(exc.errors) - MAX_ERRORS
        return Response(body, status=exc.status)
    return drf_exception_handler(exc, context)


class AddressRateThrottle(SimpleRateThrottle):
    """Requests per client address, signed in or not (scope `address`), beside the per-user limit.

    Many tokens used from one address (a leaked batch, a runaway script on one host) are
    limited together. The address is DRF's: REMOTE_ADDR, or X-Forwarded-For behind the
    NUM_PROXIES trusted proxies the deployment declares.
    """

    scope = "address"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
