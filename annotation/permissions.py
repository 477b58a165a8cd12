"""Who may do what, on which project: guardian object permissions plus the account role."""
from guardian.core import ObjectPermissionChecker
from guardian.shortcuts import assign_perm, remove_perm

from experts.models import User

MANAGE = "annotation.manage_project"
ANNOTATE = "annotation.annotate_project"


def can_manage(user: User, project) -> bool:
    return user.is_authenticated and (user.is_platform_admin or (user.is_pm and user.has_perm(MANAGE, project)))


def can_annotate(user: User, project) -> bool:
    return user.is_authenticated and user.is_expert and user.has_perm(ANNOTATE, project)


def grant_manage(user: User, project) -> None:
    assign_perm("manage_project", user, project)


def grant_annotate(user: User, project) -> None:
    assign_perm("annotate_project", user, project)


def revoke_manage(user: User, project) -> None:
    remove_perm("manage_project", user, project)


def revoke_annotate(user: User, project) -> None:
    remove_perm("annotate_project", user, project)


def is_member(user: User, project) -> bool:
    """Holds the project's membership permission of their role (admins are never members)."""
    if user.is_platform_admin:
        return False
    perm = MANAGE if user.is_pm else ANNOTATE
    # A fresh checker, not the user's permission cache: membership may have changed in this request.
    return ObjectPermissionChecker(user).has_perm(perm.split(".", 1)[1], project)
