"""Pieces every API module shares: the 404 schema entry and the expert-only check."""
from drf_spectacular.utils import OpenApiResponse
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request

NOT_FOUND = OpenApiResponse(description="No such object, or not yours.")


def require_expert(request: Request) -> None:
    """Refuse a caller without the expert role (PMs and admins do not annotate)."""
    if not request.user.is_expert:
        raise PermissionDenied("Only experts annotate and calibrate.")
