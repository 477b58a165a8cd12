"""Who may see and move money. Projects are reached through annotation's permissions."""
from experts.models import User


def can_settle(user: User) -> bool:
    """Closing periods, approving and paying batches, the payouts export: administrators only."""
    return user.is_authenticated and user.is_platform_admin


def has_earnings(user: User) -> bool:
    return user.is_authenticated and user.is_expert
