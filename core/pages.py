"""Rendering an htmx page: the whole page, or only the fragment an htmx request swaps."""
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers


def render_page(request: HttpRequest, template: str, fragment: str, context: dict[str, Any],
                status: int = 200) -> HttpResponse:
    """`template#fragment` for an htmx request, `template` otherwise, varying on HX-Request.

    The Vary header keeps a cache from serving a fragment to a full-page load of the same URL.
    """
    name = f"{template}#{fragment}" if getattr(request, "htmx", False) else template
    response = render(request, name, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def request_is_english(request: HttpRequest) -> bool:
    """Whether the page is being rendered in English (else Simplified Chinese)."""
    return (getattr(request, "LANGUAGE_CODE", "") or "").startswith("en")
