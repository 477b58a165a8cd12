"""Where the keys come from: the environment, or (embedded `make run` only) a generated, git-ignored file.

Nothing runs on a key committed to the repository. The embedded mode (no DATABASE_URL,
or the embedded SQLite file) generates random keys once into `.secrets/` beside the
project and keeps them, so sessions and stored judge keys survive a restart. Every
other configuration must set SECRET_KEY (and RUBRICA_SECRETS_KEY, the key that encrypts
stored judge API keys) in the environment; `core.checks` refuses to start without them,
with a short key, or with a known default.
"""
import os
import secrets
from pathlib import Path


def embedded_mode(base_dir: Path) -> bool:
    """Whether this is `make run`'s embedded configuration: no DATABASE_URL, or the embedded SQLite file."""
    url = os.environ.get("DATABASE_URL", "")
    return url in ("", f"sqlite:///{base_dir / 'db.sqlite3'}")


def generated_key(path: Path) -> str:
    """The key kept in `path`, generated (random, 64 url-safe characters, mode 0600) the first time."""
    if path.is_file():
        key = path.read_text(encoding="ascii").strip()
        if key:
            return key
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as sink:
        sink.write(key + "\n")
    return key


def key_from_env_or_file(name: str, *, base_dir: Path, embedded: bool) -> str:
    """`name` from the environment; in embedded mode the generated file's key; otherwise "" (refused at start)."""
    value = os.environ.get(name, "").strip()
    if value or not embedded:
        return value
    return generated_key(base_dir / ".secrets" / name.lower())
