"""The pages' adapter for domain errors, the counterpart of `core.api.exception_handler`.

A view lets a `DomainError` it has nothing page-specific to say about propagate: a
`NotFound` becomes the site's 404 page (the same for "missing" and "not yours"), any
other error the error fragment for an htmx request or the error page otherwise, with
the error's status and its message in the user's language. A view that re-renders its
own form with the user's input kept (a refused submission) catches the error itself.
"""
from collections.abc import Callable

from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.core.handlers.exception import response_for_exception
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.functional import SimpleLazyObject, empty

from core.errors import MAX_ERRORS, DomainError, NotFound, error_message, field_error_message

ERROR_TEMPLATE = "partials/domain_error.html"


class DomainErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, NotFound):
            return response_for_exception(request, Http404(exception.message))
        if not isinstance(exception, DomainError) or request.path.startswith("/api/"):
            return None
        context = {
            "error": error_message(exception),
            # A page lists the first fields at fault; the message above gives the count.
            "error_fields": [{**e, "message": field_error_message(e)} for e in exception.errors[:MAX_ERRORS]],
        }
        htmx = getattr(request, "htmx", False)
        name = f"{ERROR_TEMPLATE}#error" if htmx else ERROR_TEMPLATE
        return render(request, name, context, status=exception.status)


class ApiLanguageMiddleware:
    """The API answers in the language the client asks for, and in English when it asks for none.

    Pages default to Simplified Chinese (LANGUAGE_CODE); a program calling the API without
    `Accept-Language` (or the language cookie of a browser session) gets English, the
    language of its codes and field names.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        asked = "HTTP_ACCEPT_LANGUAGE" in request.META or settings.LANGUAGE_COOKIE_NAME in request.COOKIES
        if request.path.startswith("/api/") and not asked:
            translation.activate("en")
            request.LANGUAGE_CODE = "en"
        return self.get_response(request)


class LazyMessageMiddleware(MessageMiddleware):
    """Django's `MessageMiddleware`, whose message storage is made when a view or template first uses it.

    Django's makes the storage (a cookie storage with its signer and a session storage) for every
    request, and the API's never use it: 1.5% of the web's CPU on the expert's loop (py-spy, 4
    clients). A storage nobody used has nothing to save, so the response is left as it is; one that
    was used saves its messages as before.
    """

    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:  # type: ignore[attr-defined]
            return response
        return super().process_response(request, response)
