"""A judge run's API key: typed in and encrypted at rest, or, for admins, named by an environment variable.

A run sends its key to a URL the person who starts it chooses, so a PM uses only a key
they typed in. A key from the workers' environment is the operator's: only an admin may
name one, only a variable in RUBRICA_JUDGE_KEY_ENV_ALLOWED, and only on a project that an
admin gave a grant for that variable (`JudgeKeyGrant`, in the Django admin).

The Fernet key is derived from RUBRICA_SECRETS_KEY (SHA-256 of a purpose label and the
secret, urlsafe-base64), a key of its own so that SECRET_KEY and it rotate apart: a key
stored under an older RUBRICA_SECRETS_KEY still decrypts while that key is listed in
RUBRICA_SECRETS_KEY_FALLBACKS, and keys stored before this key existed (derived from
SECRET_KEY and its fallbacks) still decrypt too; new ones are encrypted under the current
RUBRICA_SECRETS_KEY only. The plaintext
exists only in a worker's memory while it builds its client: it is never rendered,
logged, returned by the API or put into an error message.
"""
import base64
import hashlib
import os
import re
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from annotation.models import JudgeKeyGrant
from core.errors import DomainError
from core.secret_box import secret_decrypt, secret_encrypt

# Separates this store's key from every other key derived from RUBRICA_SECRETS_KEY.
_PURPOSE = b"rubrica.judging.api-key:"
_ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,99}\Z")


class JudgeKeyError(Exception):
    """The run's key cannot be had: undecryptable, or its environment variable is unset."""


def _fernet(secret: str) -> Fernet:
    """The Fernet of this store under `secret` (tests build old tokens with it)."""
    digest = hashlib.sha256(_PURPOSE + secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def api_key_encrypt(plain: str) -> str:
    """The Fernet token of `plain`, under the current RUBRICA_SECRETS_KEY (`core.secret_box`)."""
    return secret_encrypt(plain, purpose=_PURPOSE)


def api_key_decrypt(token: str) -> str:
    """The plaintext of a stored key; JudgeKeyError if no current or fallback secret opens it."""
    try:
        return secret_decrypt(token, purpose=_PURPOSE)
    except InvalidToken:
        raise JudgeKeyError("the stored API key cannot be decrypted (was RUBRICA_SECRETS_KEY changed without "
                            "keeping the old one in RUBRICA_SECRETS_KEY_FALLBACKS?); start a new run") from None


def api_key_env_check(name: str) -> str:
    """The variable name if the operator allows judge keys from it, else DomainError.

    Only names listed in RUBRICA_JUDGE_KEY_ENV_ALLOWED (an entry ending in `*` is a
    prefix) qualify: the run sends the value to the URL of the run, so naming
    DATABASE_URL or SECRET_KEY must not be possible, not even for an admin.
    """
    name = name.strip()
    if not _ENV_NAME.match(name):
        raise DomainError("The environment variable name may hold only letters, digits and underscores.",
                          code="invalid_key_env",
                          errors=[{"field": "api_key_env", "message": "invalid name", "code": "key_env_invalid"}])
    if not _env_allowed(name):
        listed = ", ".join(settings.RUBRICA_JUDGE_KEY_ENV_ALLOWED)
        raise DomainError(f"The environment variable {name} is not allowed for judge keys; use one of: {listed}.",
                          code="key_env_not_allowed",
                          errors=[{"field": "api_key_env", "message": f"not allowed; use one of: {listed}",
                                   "code": "key_env_not_allowed"}])
    return name


def api_key_env_check_for(*, name: str, project_id: int, user: Any) -> str:
    """The variable name if `user` may start a run of the project with the key it holds, else DomainError.

    Refused for anyone but an admin, for a name outside RUBRICA_JUDGE_KEY_ENV_ALLOWED, and
    for a project without a grant for the name.
    """
    if user is None or not getattr(user, "is_platform_admin", False):
        raise DomainError("Keys from the server's environment are for admins; type the API key in instead.",
                          code="key_env_admin_only",
                          errors=[{"field": "api_key_env", "code": "key_env_admin_only",
                                   "message": "keys from the server's environment are for admins; type the API "
                                              "key in instead"}])
    name = api_key_env_check(name)
    if not _env_granted(name, project_id):
        raise DomainError(f"This project has no grant for the environment variable {name}; an admin adds one "
                          "under Judge key grants in the admin site.", code="key_env_not_granted",
                          errors=[{"field": "api_key_env", "code": "key_env_not_granted",
                                   "message": f"this project has no grant for {name}", "params": {"name": name}}])
    return name


def _env_granted(name: str, project_id: int) -> bool:
    return JudgeKeyGrant.objects.filter(project_id=project_id, env_name=name).exists()


def _env_allowed(name: str) -> bool:
    return any(name.startswith(entry[:-1]) if entry.endswith("*") else name == entry
               for entry in settings.RUBRICA_JUDGE_KEY_ENV_ALLOWED)


def api_key_resolve(*, encrypted: str, env_name: str, project_id: int) -> str:
    """The plaintext key of a run, read where the worker runs (env) or decrypted."""
    if env_name:
        # Checked again here: the allow-list may have shrunk, or the grant gone, since the run was started.
        if not _env_allowed(env_name):
            raise JudgeKeyError(f"the environment variable {env_name} is no longer allowed for judge keys")
        if not _env_granted(env_name, project_id):
            raise JudgeKeyError(f"the project no longer has a grant for the environment variable {env_name}")
        value = os.environ.get(env_name, "")
        if not value.strip():
            raise JudgeKeyError(f"the environment variable {env_name} is not set on the worker")
        return value
    if encrypted:
        return api_key_decrypt(encrypted)
    raise JudgeKeyError("the run has no API key")
