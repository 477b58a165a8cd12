"""Production refuses to start unsafe: no missing, short or known-default keys outside the embedded mode.

Registered as a Django system check (`manage.py check`, `migrate`, `runserver` run it), and
called by the WSGI entry point and the Celery worker and beat before they serve anything
(`startup_refuse_unsafe`), since gunicorn and Celery do not run system checks themselves.
The embedded `make run` generates its keys (config/settings/secrets_file.py) and passes.
"""
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

MIN_KEY_LENGTH = 50
# Defaults that were committed or documented somewhere: never acceptable as a key.
KNOWN_DEFAULTS = frozenset({
    "change-me", "changeme", "secret", "rubrica", "django-insecure",
    "rubrica-embedded-development-key-change-me-in-production",
})


def _setting(name: str) -> str:
    try:
        return str(getattr(settings, name, "") or "")
    except ImproperlyConfigured:  # Django refuses to hand out an empty SECRET_KEY
        return ""


def _problems() -> list[tuple[str, str]]:
    """(check id, message) for each unsafe key; nothing in the embedded mode (its keys are generated)."""
    if getattr(settings, "EMBEDDED", False):
        return []
    found = []
    for name, check_id in (("SECRET_KEY", "rubrica.E001"), ("RUBRICA_SECRETS_KEY", "rubrica.E002")):
        value = _setting(name)
        if not value:
            found.append((check_id, f"{name} is not set. Set it in the environment to a random value of at least "
                                    f"{MIN_KEY_LENGTH} characters (for example: python -c \"import secrets; "
                                    f"print(secrets.token_urlsafe(48))\")."))
        elif value.lower() in KNOWN_DEFAULTS or value.lower().startswith("django-insecure"):
            found.append((check_id, f"{name} is a known default value; set a random one."))
        elif len(value) < MIN_KEY_LENGTH:
            found.append((check_id, f"{name} is {len(value)} characters long; use at least {MIN_KEY_LENGTH}."))
    if _setting("SECRET_KEY") and _setting("SECRET_KEY") == _setting("RUBRICA_SECRETS_KEY"):
        found.append(("rubrica.E003", "RUBRICA_SECRETS_KEY must differ from SECRET_KEY, so each can be rotated "
                                      "alone."))
    return found


@checks.register(checks.Tags.security, deploy=False)
def keys_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [checks.Error(message, id=check_id) for check_id, message in _problems()]


def startup_refuse_unsafe() -> None:
    """Raise ImproperlyConfigured, naming every problem, when the keys are unsafe (see the module docstring)."""
    problems = _problems()
    if problems:
        raise ImproperlyConfigured("Refusing to start: " + " ".join(message for _, message in problems))
