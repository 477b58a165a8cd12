"""Asking before a destructive or money-moving action: a second, explicit step on the server.

A form for such an action posts without `confirmed`; the view then answers with a page
(or, for htmx, the `#main` content) that says what will happen, in numbers where there are
any, and carries the same fields plus `confirmed=yes` to the same URL. Only that second post
acts. Done on the server rather than with `hx-confirm`'s browser dialog so that the page can
say what the action touches (leases returned, money deducted) and so that nothing happens on
a single click, with or without JavaScript, from the browser or a script replaying a form.

    if not confirmation_given(request):
        return confirmation_page(request, Confirmation(
            title=_("Remove %(name)s from the project?") % {"name": ...},
            consequences=[...], action_url=request.path, cancel_url=...,
            fields={"reason": request.POST.get("reason", "")}, confirm_label=_("Remove")))
    ... act ...
"""
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

CONFIRM_FIELD = "confirmed"
CONFIRM_VALUE = "yes"
TEMPLATE = "partials/confirm.html"


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation step shows and re-posts."""

    title: str
    consequences: Sequence[str]
    action_url: str
    cancel_url: str
    confirm_label: str
    fields: Mapping[str, str] = field(default_factory=dict)
    # Extra inputs the second step asks for (for example a transfer reference):
    # (name, label, current value, required).
    inputs: Sequence[tuple[str, str, str, bool]] = ()
    danger: bool = True


def confirmation_given(request: HttpRequest) -> bool:
    """True when this POST is the second, confirming step."""
    return request.method == "POST" and request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE


def confirmation_page(request: HttpRequest, confirmation: Confirmation, *, status: int = 200) -> HttpResponse:
    """The confirmation step: the whole page, or for htmx the `#main` content it replaces."""
    context = {"confirmation": confirmation, "confirm_field": CONFIRM_FIELD, "confirm_value": CONFIRM_VALUE}
    if getattr(request, "htmx", False):
        response = render(request, f"{TEMPLATE}#confirm", context, status=status)
        # Whatever the button's own hx-target was, the question takes the main area:
        # a small target (a table row) is no place for it.
        response["HX-Retarget"] = "#main"
        response["HX-Reswap"] = "innerHTML show:top"
        return response
    return render(request, TEMPLATE, context, status=status)
