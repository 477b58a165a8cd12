"""Secrets the platform stores and must read back (judge API keys, webhook signing secrets).

One Fernet key per purpose, derived from RUBRICA_SECRETS_KEY (SHA-256 of a purpose label
and the secret, urlsafe-base64): the stores never share a key, and SECRET_KEY rotates
apart. New tokens are made under the current RUBRICA_SECRETS_KEY; tokens made under a
key listed in RUBRICA_SECRETS_KEY_FALLBACKS, or under SECRET_KEY (and its fallbacks) as
before RUBRICA_SECRETS_KEY existed, still open.
"""
import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

__all__ = ["InvalidToken", "secret_decrypt", "secret_encrypt"]


def _fernet(purpose: bytes, secret: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(purpose + secret.encode()).digest()))


def _current() -> str:
    return settings.RUBRICA_SECRETS_KEY or settings.SECRET_KEY


def secret_encrypt(plain: str, *, purpose: bytes) -> str:
    """The Fernet token of `plain` for `purpose`, under the current RUBRICA_SECRETS_KEY."""
    return _fernet(purpose, _current()).encrypt(plain.encode()).decode()


def secret_decrypt(token: str, *, purpose: bytes) -> str:
    """The plaintext of a token of `purpose`; raises InvalidToken when no current or older key opens it."""
    keys = [_current(), *settings.RUBRICA_SECRETS_KEY_FALLBACKS,
            settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet(purpose, k) for k in dict.fromkeys(k for k in keys if k)]).decrypt(
        token.encode()).decode()
