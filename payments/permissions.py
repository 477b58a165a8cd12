"""Who may see and move money. Projects are reached through annotation's permissions."""
from annotation import permissions as annotation_permissions
from experts.models import User


def can_settle(user: User) -> bool:
    """Closing periods, approving and paying batches, the payouts export: administrators only."""
    return user.is_authenticated and user.is_platform_admin


def can_see_costs(user: User, project) -> bool:
    """A project's cost: its PMs and administrators."""
    return annotation_permissions.can_manage(user, project)


def has_earnings(user: User) -> bool:
    return user.is_authenticated and user.is_expert
