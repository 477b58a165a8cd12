"""The schema's error answers: one `Error` component, and the statuses every operation may answer.

Every error body of the API has one shape (`core.api.exception_handler`), so it is one
component, and the statuses that come from the framework rather than from the view
(400 bad input, 401 no or a bad token, 403 no permission or no CSRF token, 404 missing
or not yours, 409 a conflicting state, 413 a body over the limit, 415 a body in a
format the operation does not read, 429 throttled) are declared here for every
operation, instead of on each view. A view's own description of one of them is kept;
its body is the `Error` component in any case. Installed as a drf-spectacular
postprocessing hook (SPECTACULAR_SETTINGS).
"""
from typing import Any

from core.errors import MAX_ERRORS

ERROR_REF = {"$ref": "#/components/schemas/Error"}

ERROR_COMPONENTS: dict[str, dict[str, Any]] = {
    "ErrorEntry": {
        "type": "object",
        "description": "One thing wrong with the request: where, what, and a stable code.",
        "properties": {
            "field": {"type": "string", "description": "the field path, or (body)"},
            "message": {"type": "string"},
            "code": {"type": "string"},
            "params": {"type": "object", "additionalProperties": True},
            "line": {"type": "integer", "nullable": True, "description": "the line of an imported file"},
        },
        # Importers add what locates an entry in their file (a key, a position).
        "additionalProperties": True,
    },
    "Error": {
        "type": "object",
        "description": "Every error answer of the API.",
        "properties": {
            "detail": {"type": "string", "description": "the error for people, in the client's language"},
            "code": {"type": "string", "description": "a stable code for programs"},
            "errors": {"type": "array", "maxItems": MAX_ERRORS, "items": {"$ref": "#/components/schemas/ErrorEntry"}},
            "errors_omitted": {"type": "integer", "minimum": 1, "description": "entries beyond the first "
                                                                                f"{MAX_ERRORS}"},
        },
        "required": ["detail", "code"],
        "additionalProperties": False,
    },
}

_EVERY_OPERATION = {
    "400": "The request is invalid: see `errors`.",
    "401": "No credentials, or credentials that are not valid.",
    "403": "Not allowed: the role, the permission or a session's CSRF token is missing.",
    "404": "No such object, or not yours.",
    "409": "The request conflicts with the current state.",
    "429": "Too many requests: try again later.",
}
_WITH_BODY = {
    "413": "The request body is over the size limit.",
    "415": "The request body is in a format this operation does not read.",
}
_METHODS = ("get", "post", "put", "patch", "delete")


def error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Add the Error components and declare the framework's error statuses on every operation."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(ERROR_COMPONENTS)
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            statuses = dict(_EVERY_OPERATION)
            if method in ("post", "put", "patch"):
                statuses.update(_WITH_BODY)
            for status, description in statuses.items():
                responses.setdefault(status, {"description": description})
            for status, response in responses.items():
                if str(status)[:1] in ("4", "5"):
                    response["content"] = {"application/json": {"schema": ERROR_REF}}
    return result
