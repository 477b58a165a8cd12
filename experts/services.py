"""Writes on accounts and expert profiles.

Refusals are `core.errors.DomainError`, as everywhere: the pages and the API map them
with the same adapters, and commands print their message.
"""
import secrets

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from rest_framework.authtoken.models import Token

from core.error_codes import ErrorCode
from core.errors import Conflict, DomainError
from experts.models import ExpertProfile, Role, User
from rubrics.models import Dimension

# Long enough that a generated password is never the weak point; the account is then
# reached through its API token until someone sets a password of their choosing.
GENERATED_PASSWORD_BYTES = 24


USERNAME_MAX = 150


def _username_allowed(username: str) -> bool:
    """Django's own rule for usernames (the model field's validator), applied before anything is written."""
    try:
        User.username_validator(username)
    except ValidationError:
        return False
    return True


@transaction.atomic
def user_create(*, username: str, role: str, password: str | None = None,
                email: str = "") -> tuple[User, str]:
    """Create an account with `role`, its API token and, for experts, an expert profile.

    Admins become Django staff and superusers so the Django admin opens for them. A
    given password must pass the configured password validators; without one, a random
    password is set. Returns the user and the key of their API token.

    Raises `DomainError` for an empty or taken username, an unknown role or a
    password the validators refuse; nothing is written then.
    """
    username = (username or "").strip()
    if not username:
        raise DomainError("A username is required.", code=ErrorCode.REQUIRED,
                          errors=[{"field": "username", "message": "required", "code": ErrorCode.REQUIRED}])
    if len(username) > USERNAME_MAX or not _username_allowed(username):
        raise DomainError("A username has at most 150 letters, digits and the characters @ . + - _ (no spaces).",
                          code=ErrorCode.INVALID_USERNAME,
                          errors=[{"field": "username", "message": "invalid", "code": ErrorCode.INVALID_USERNAME}])
    if role not in Role.values:
        params = {"role": repr(role), "roles": ", ".join(Role.values)}
        raise DomainError(f"Unknown role {params['role']}; expected one of: {params['roles']}.",
                          code=ErrorCode.INVALID_ROLE, params=params)
    if User.objects.filter(username=username).exists():
        raise _username_taken(username)

    is_admin = role == Role.ADMIN
    user = User(username=username, email=(email or "").strip(), role=role,
                is_staff=is_admin, is_superuser=is_admin)
    if password is None:
        password = secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
    else:
        try:
            validate_password(password, user)
        except ValidationError as exc:
            reasons = " ".join(exc.messages)
            raise DomainError(f"The password is not accepted: {reasons}", code=ErrorCode.INVALID_PASSWORD,
                              params={"reasons": reasons},
                              errors=[{"field": "password", "message": m} for m in exc.messages]) from exc
    user.set_password(password)
    try:
        # A savepoint, so a concurrent creation of the same name leaves the caller's
        # transaction usable and reports the same error as the check above.
        with transaction.atomic():
            user.save()
    except IntegrityError as exc:
        raise _username_taken(username) from exc

    if role == Role.EXPERT:
        ExpertProfile.objects.create(user=user)
    token = Token.objects.create(user=user)
    return user, token.key


def _username_taken(username: str) -> Conflict:
    return Conflict(f"The username {username!r} is already taken.", code=ErrorCode.DUPLICATE_USERNAME,
                    params={"username": repr(username)})


# --- The expert's own profile ---------------------------------------------------------------

# Languages an expert can judge in, by their own names (not translated: a reader finds theirs).
PROFILE_LANGUAGES = (("zh", "中文"), ("yue", "粤语"), ("en", "English"), ("ja", "日本語"), ("ko", "한국어"),
                     ("fr", "Français"), ("de", "Deutsch"), ("es", "Español"))
WEEKLY_CAPACITY_LOW, WEEKLY_CAPACITY_HIGH = 1, 1000


def _profile_error(field: str, code: str, message: str, params: dict | None = None) -> DomainError:
    params = params or {}
    return DomainError(message, code=code, params=params,
                       errors=[{"field": field, "message": message, "code": code, "params": params}])


@transaction.atomic
def expert_profile_update(*, profile: ExpertProfile, credentials: str, specialty_ids: list[str],
                          languages: list[str], weekly_capacity: str | int) -> ExpertProfile:
    """Save what an expert says about themselves; a bad field changes nothing.

    Credentials are free text (at most 200 characters), specialties are dimensions of the
    rubric taxonomy, languages come from `PROFILE_LANGUAGES`, weekly capacity is a number of
    tasks from WEEKLY_CAPACITY_LOW to WEEKLY_CAPACITY_HIGH.
    """
    credentials = " ".join((credentials or "").split())
    max_length = ExpertProfile._meta.get_field("credentials").max_length or 200
    if len(credentials) > max_length:
        raise _profile_error("credentials", ErrorCode.TOO_LONG, f"At most {max_length} characters.")
    known = {code for code, _name in PROFILE_LANGUAGES}
    chosen = [code for code, _name in PROFILE_LANGUAGES if code in set(languages)]
    unknown = [code for code in languages if code not in known]
    if unknown:
        raise _profile_error("languages", ErrorCode.UNKNOWN_LANGUAGE, f"Unknown language {unknown[0]!r}.",
                             {"value": unknown[0][:20]})
    try:
        capacity = int(str(weekly_capacity).strip())
    except (TypeError, ValueError):
        capacity = WEEKLY_CAPACITY_LOW - 1
    if not WEEKLY_CAPACITY_LOW <= capacity <= WEEKLY_CAPACITY_HIGH:
        raise _profile_error("weekly_capacity", ErrorCode.WEEKLY_CAPACITY,
                             f"Weekly capacity must be {WEEKLY_CAPACITY_LOW}..{WEEKLY_CAPACITY_HIGH}.",
                             {"low": WEEKLY_CAPACITY_LOW, "high": WEEKLY_CAPACITY_HIGH})
    try:
        ids = {int(i) for i in specialty_ids}
    except (TypeError, ValueError):
        ids = {-1}
    dimensions = list(Dimension.objects.filter(pk__in=ids, is_gate=False))
    if len(dimensions) != len(ids):
        raise _profile_error("specialties", ErrorCode.UNKNOWN_SPECIALTY, "Unknown specialty.")
    profile.credentials = credentials
    profile.languages = ",".join(chosen)
    profile.weekly_capacity = capacity
    profile.save(update_fields=["credentials", "languages", "weekly_capacity"])
    profile.specialties.set(dimensions)
    return profile
