"""Production refuses to start unsafe; the embedded mode keeps generated keys; every deploy setting comes
from the environment; the full stack in docker-compose.yml creates no demo accounts and needs a key."""
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from config.settings.secrets_file import embedded_mode, generated_key, key_from_env_or_file
from core.checks import keys_check, startup_refuse_unsafe

ROOT = Path(__file__).resolve().parents[2]
GOOD = "k" * 30 + "-random-enough-" + "z" * 20
OTHER = "s" * 30 + "-another-random-" + "q" * 20


@pytest.mark.parametrize(("secret", "secrets_key", "ids"), [
    ("", OTHER, {"rubrica.E001"}),
    ("change-me", OTHER, {"rubrica.E001"}),
    ("rubrica-embedded-development-key-change-me-in-production", OTHER, {"rubrica.E001"}),
    ("short-key", OTHER, {"rubrica.E001"}),
    (GOOD, "", {"rubrica.E002"}),
    (GOOD, GOOD, {"rubrica.E003"}),
    (GOOD, OTHER, set()),
])
def test_outside_the_embedded_mode_an_unsafe_key_is_an_error(settings, secret, secrets_key, ids):
    settings.EMBEDDED = False
    settings.SECRET_KEY = secret or "placeholder-so-django-starts"
    if not secret:
        settings.SECRET_KEY = ""
    settings.RUBRICA_SECRETS_KEY = secrets_key

    found = {message.id for message in keys_check()}

    assert found == ids
    if ids:
        with pytest.raises(ImproperlyConfigured) as refused:
            startup_refuse_unsafe()
        assert "Refusing to start" in str(refused.value)
    else:
        startup_refuse_unsafe()


def test_the_embedded_mode_passes_with_its_generated_keys(settings):
    settings.EMBEDDED = True
    settings.SECRET_KEY = "anything"

    assert keys_check() == []


def test_the_embedded_mode_is_no_database_url_or_the_embedded_sqlite_file(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert embedded_mode(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert embedded_mode(tmp_path)
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rubrica")
    assert not embedded_mode(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'other.sqlite3'}")
    assert not embedded_mode(tmp_path)


def test_a_generated_key_is_random_private_and_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    first = key_from_env_or_file("SECRET_KEY", base_dir=tmp_path, embedded=True)
    again = key_from_env_or_file("SECRET_KEY", base_dir=tmp_path, embedded=True)
    elsewhere = generated_key(tmp_path / "other" / "secret_key")

    path = tmp_path / ".secrets" / "secret_key"
    assert first == again and len(first) >= 60 and first != elsewhere
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key_from_env_or_file("SECRET_KEY", base_dir=tmp_path, embedded=False) == ""
    monkeypatch.setenv("SECRET_KEY", GOOD)
    assert key_from_env_or_file("SECRET_KEY", base_dir=tmp_path, embedded=True) == GOOD
    assert "/.secrets/" in (ROOT / ".gitignore").read_text()


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for their own process; a deployment never does.
    clean = {k: v for k, v in os.environ.items()
             if k not in ("SECRET_KEY", "RUBRICA_SECRETS_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


PRODUCTION = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/rubrica_unused", "DEBUG": "0",
    "SECRET_KEY": GOOD, "RUBRICA_SECRETS_KEY": OTHER, "ALLOWED_HOSTS": "rubrica.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://rubrica.example.org", "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000", "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1", "SECURE_HSTS_PRELOAD": "1",
    "SECURE_COOKIES": "1", "SECURE_PROXY_SSL_HEADER": "1",
}


def test_check_deploy_passes_at_warning_level_with_production_settings_from_the_environment():
    done = _manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)

    assert done.returncode == 0, done.stdout + done.stderr


def test_check_fails_without_a_secret_key_outside_the_embedded_mode():
    env = {k: v for k, v in PRODUCTION.items() if k != "SECRET_KEY"}

    done = _manage("check", "--deploy", **env)

    assert done.returncode != 0
    assert "SECRET_KEY" in done.stderr + done.stdout


def test_the_full_stack_creates_no_demo_accounts_and_needs_its_keys_from_the_environment():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    app = compose["x-app"]["environment"]
    commands = " ".join(" ".join(s.get("command", [])) if isinstance(s.get("command"), list)
                        else str(s.get("command", "")) for s in compose["services"].values())

    assert "load_demo" not in commands
    for key in ("SECRET_KEY", "RUBRICA_SECRETS_KEY"):
        assert str(app[key]).startswith(f"${{{key}:?"), app[key]  # no default: compose refuses to start
    assert app["ALLOWED_HOSTS"] != "*"
    # Every service that runs the platform shares the app's environment.
    for name in ("migrate", "web", "worker", "beat"):
        assert compose["services"][name]["environment"] == app
