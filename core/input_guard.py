"""Input no view should see: control characters in text, bodies over the size limit, JSON nested too deep.

PostgreSQL cannot store a NUL in text, so a NUL typed (or pasted) into a note used to end
in a server error on every write path; other C0 control characters are never meant as
text either. Rather than each form and serializer checking, the guard refuses the whole
request with a message naming the field, before any view runs, and so nothing is written:

- `InputGuardMiddleware` checks query parameters and form fields (urlencoded and
  multipart; uploaded files are data and are checked by their importers), and refuses a
  body larger than DATA_UPLOAD_MAX_MEMORY_SIZE with a message instead of Django's bare 400,
  except an import's upload, which may reach RUBRICA_MAX_IMPORT_BYTES;
- `GuardedJSONParser` (the API's JSON parser) refuses a body nested deeper than
  MAX_JSON_DEPTH (Python's parser would overflow its stack on 2,000 levels) and control
  characters in any key or string value, naming the path to it.

The API answers `{"detail", "code", "errors"}` in the client's language like every other
error; a page gets the error page or, for htmx, its error fragment. Tab, line feed and
carriage return are text and pass.
"""
import re
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.error_codes import ErrorCode
from core.errors import DomainError, error_message

# The pages and API operations that take an import file (multipart `file`), by URL name.
IMPORT_URL_NAMES = frozenset({
    "project_import", "golden_import", "judge_labels_import",
    "api-questions-import", "api-responses-import", "api-golden-import", "api-judge-labels-import",
})
# An import form's fields other than the file (model, run names, the CSRF token) and its boundaries.
IMPORT_FORM_OVERHEAD = 64 * 1024
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MAX_JSON_DEPTH = 64
ERROR_TEMPLATE = "partials/domain_error.html"


def control_character(text: str) -> str | None:
    """The first control character of `text` as its code point ("U+0000" for a NUL), or None."""
    found = CONTROL.search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def control_error(field: str, character: str) -> DomainError:
    params = {"field": field, "character": character}
    message = f"{field} contains a control character ({character}); remove it and send again. Nothing was saved."
    return DomainError(message, code=ErrorCode.INPUT_CONTROL_CHARACTER, params=params,
                       errors=[{"field": field, "code": ErrorCode.INPUT_CONTROL_CHARACTER, "params": params,
                                "message": "control character"}])


def too_large_error() -> DomainError:
    limit = round(settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 2**20, 1)
    return DomainError(f"The request is too large: at most {limit} MB. Nothing was saved.",
                       code=ErrorCode.INPUT_TOO_LARGE, status=413, params={"limit": limit})


def upload_too_large_error(*, size: int) -> DomainError:
    """An import file over RUBRICA_MAX_IMPORT_BYTES: the message names the file's size and the limit."""
    limit = settings.RUBRICA_MAX_IMPORT_BYTES
    message = (f"The file is {_megabytes(size)}, over the import limit of {_megabytes(limit)}; "
               "split it into smaller files.")
    return DomainError(message, code=ErrorCode.TOO_LARGE, status=413,
                       errors=[{"line": None, "field": "file", "message": message}],
                       params={"size": _megabytes(size), "limit": _megabytes(limit)})


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def too_deep_error() -> DomainError:
    return DomainError(f"The JSON body is nested too deeply: at most {MAX_JSON_DEPTH} levels. Nothing was saved.",
                       code=ErrorCode.INPUT_TOO_DEEP, params={"limit": MAX_JSON_DEPTH})


def refusal(request: HttpRequest, exc: DomainError) -> HttpResponse:
    """The refusal as the API or the pages answer any domain error."""
    if request.path.startswith("/api/"):
        body: dict[str, Any] = {"detail": error_message(exc), "code": str(exc.code)}
        if exc.errors:
            body["errors"] = exc.errors
        return JsonResponse(body, status=exc.status)
    htmx = getattr(request, "htmx", False)
    name = f"{ERROR_TEMPLATE}#error" if htmx else ERROR_TEMPLATE
    return render(request, name, {"error": error_message(exc), "error_fields": []}, status=exc.status)


def _fields(request: HttpRequest) -> Iterator[tuple[str, str]]:
    for name, values in request.GET.lists():
        yield name, name
        for value in values:
            yield name, value
    if request.method in ("POST", "PUT", "PATCH") and not (request.content_type or "").startswith("application/json"):
        for name, values in request.POST.lists():
            yield name, name
            for value in values:
                yield name, value


class InputGuardMiddleware:
    """Refuses requests with control characters in parameters or form fields, or over the size limit."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = request.META.get("CONTENT_LENGTH") or ""
        if length.isdigit():
            refused = _too_large(request, int(length))
            if refused is not None:
                return refusal(request, refused)
        try:
            for field, text in _fields(request):
                character = control_character(text)
                if character is not None:
                    return refusal(request, control_error(field, character))
        except RequestDataTooBig:
            return refusal(request, too_large_error())
        return self.get_response(request)


def _too_large(request: HttpRequest, length: int) -> DomainError | None:
    """The refusal of a body too large for where it is sent, by its declared length, before it is read.

    An import's multipart upload may be as large as the import cap (Django spools its file to
    disk as it arrives and the importer reads it line by line), plus room for the form's
    other fields and boundaries; every other body, multipart or not, is held in memory and
    keeps DATA_UPLOAD_MAX_MEMORY_SIZE.
    """
    if (request.content_type or "").startswith("multipart/") and _is_import(request):
        if length > settings.RUBRICA_MAX_IMPORT_BYTES + IMPORT_FORM_OVERHEAD:
            return upload_too_large_error(size=length)
        return None
    if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return too_large_error()
    return None


def _is_import(request: HttpRequest) -> bool:
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return False
    return match.url_name in IMPORT_URL_NAMES


def _control_path(value: Any, path: str = "") -> tuple[str, str] | None:
    """(path, character) of the first control character in the parsed JSON, iteratively; None if clean."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            character = control_character(item)
            if character is not None:
                return where or "(body)", character
        elif isinstance(item, dict):
            for key, inner in item.items():
                character = control_character(str(key))
                if character is not None:
                    return f"{where}.{key}".lstrip(".") or "(body)", character
                stack.append((inner, f"{where}.{key}".lstrip(".")))
        elif isinstance(item, list):
            stack.extend((inner, f"{where}[{i}]") for i, inner in enumerate(item))
    return None


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > MAX_JSON_DEPTH:
                return level
            stack.extend((inner, level + 1) for inner in (item.values() if isinstance(item, dict) else item))
    return deepest


class GuardedJSONParser(JSONParser):
    """DRF's JSON parser, refusing what no endpoint accepts (see the module docstring)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _parse_error(too_deep_error()) from None
        except RequestDataTooBig:
            raise _parse_error(too_large_error()) from None
        if _depth(data) > MAX_JSON_DEPTH:
            raise _parse_error(too_deep_error())
        found = _control_path(data)
        if found is not None:
            raise _parse_error(control_error(*found))
        return data


class _GuardError(ParseError):
    """A ParseError carrying the domain error, so the API's handler answers with its code and message."""

    def __init__(self, domain: DomainError) -> None:
        super().__init__(detail=domain.message)
        self.domain = domain


def _parse_error(domain: DomainError) -> ParseError:
    return _GuardError(domain)


__all__ = ["GuardedJSONParser", "InputGuardMiddleware", "control_character"]
