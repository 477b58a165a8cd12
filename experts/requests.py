"""The request type the signed-in pages see, for type checking."""
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from experts.models import User


class SignedInRequest(HttpRequest):
    """A request behind `login_required` and django-htmx's middleware: its user is signed in."""

    user: User  # type: ignore[assignment]
    htmx: HtmxDetails
