"""Template context shared by every page."""
from django.http import HttpRequest


def role(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"role": None}
    return {"role": "admin" if user.is_platform_admin else user.role}
