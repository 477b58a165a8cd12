"""The id of the request being served: from `X-Request-ID` when it looks like one, else a new one.

Kept in a context variable so that code far from the view (an audit entry written by a
service, a log line) can name the request without passing it down every call, and
echoed in the response's `X-Request-ID` so that a user's report can be matched to the
log. A client's id is taken only if it is short and plain: it ends up in logs and rows.
"""
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-ID"
_ACCEPTABLE = re.compile(r"\A[A-Za-z0-9._:-]{1,64}\Z")
_current: ContextVar[str] = ContextVar("rubrica_request_id", default="")


def request_id_current() -> str:
    """The id of the request this code runs for, or "" outside a request (a worker, a command)."""
    return _current.get()


def request_id_bind(request_id: str) -> Token[str]:
    """Name the request a Celery task was sent from while it runs (config.celery); undo with `request_id_reset`."""
    return _current.set(request_id if _ACCEPTABLE.match(request_id) else "")


def request_id_reset(token: Token[str]) -> None:
    _current.reset(token)


@contextmanager
def request_id_bound(request_id: str) -> Iterator[None]:
    """Run the block as part of request `request_id`: a worker finishing what a request queued
    (a large batch operation) writes its audit entries and log lines under the request's id."""
    token = _current.set(request_id if _ACCEPTABLE.match(request_id or "") else "")
    try:
        yield
    finally:
        _current.reset(token)


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get(HEADER, "")
        request_id = given if _ACCEPTABLE.match(given) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = _current.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            _current.reset(token)
        response[HEADER] = request_id
        return response


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record logged while a request is served."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = _current.get()
        if request_id and not hasattr(record, "request_id"):
            record.request_id = request_id
        return True
