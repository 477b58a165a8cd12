"""Writes on accounts and expert profiles.

`experts` sits below `annotation`, so its services raise Django's `ValidationError`
rather than `annotation.errors.DomainError`; callers in higher layers translate it.
"""
import secrets

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from rest_framework.authtoken.models import Token

from experts.models import ExpertProfile, Role, User

# Long enough that a generated password is never the weak point; the account is then
# reached through its API token until someone sets a password of their choosing.
GENERATED_PASSWORD_BYTES = 24


@transaction.atomic
def user_create(*, username: str, role: str, password: str | None = None,
                email: str = "") -> tuple[User, str]:
    """Create an account with `role`, its API token and, for experts, an expert profile.

    Admins become Django staff and superusers so the Django admin opens for them. A
    given password must pass the configured password validators; without one, a random
    password is set. Returns the user and the key of their API token.

    Raises `ValidationError` for an empty or taken username, an unknown role or a
    password the validators refuse; nothing is written then.
    """
    username = (username or "").strip()
    if not username:
        raise ValidationError("A username is required.", code="required")
    if role not in Role.values:
        raise ValidationError(
            "Unknown role %(role)r; expected one of: %(roles)s.",
            code="invalid_role", params={"role": role, "roles": ", ".join(Role.values)},
        )
    if User.objects.filter(username=username).exists():
        raise ValidationError("The username %(username)r is already taken.",
                              code="duplicate_username", params={"username": username})

    is_admin = role == Role.ADMIN
    user = User(username=username, email=(email or "").strip(), role=role,
                is_staff=is_admin, is_superuser=is_admin)
    if password is None:
        password = secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
    else:
        validate_password(password, user)
    user.set_password(password)
    try:
        # A savepoint, so a concurrent creation of the same name leaves the caller's
        # transaction usable and reports the same error as the check above.
        with transaction.atomic():
            user.save()
    except IntegrityError as exc:
        raise ValidationError("The username %(username)r is already taken.",
                              code="duplicate_username", params={"username": username}) from exc

    if role == Role.EXPERT:
        ExpertProfile.objects.create(user=user)
    token = Token.objects.create(user=user)
    return user, token.key
