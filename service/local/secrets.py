"""The embedded default's own secrets, generated once into the workdir and kept there (mode 0600).

`ragmon up` never runs without them and never derives them from other settings (docs/security.md,
"Review sessions and scopes"): the review-session secret, the pseudonym key, and the passwords of its private
PostgreSQL's superuser and application role. Deleting the file makes new ones at the next start
(every review session then ends; the database passwords are set anew from the file).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, fields
from pathlib import Path

SECRETS_FILE = "secrets.json"


@dataclass(frozen=True)
class LocalSecrets:
    review_secret: str
    postgres_superuser_password: str
    postgres_app_password: str
    pseudonym_key: str  # RAGMON_PSEUDONYM_KEY: session and user id pseudonyms stay the same across restarts


def _generate() -> LocalSecrets:
    return LocalSecrets(
        secrets.token_urlsafe(48),
        secrets.token_urlsafe(32),
        secrets.token_urlsafe(32),
        secrets.token_urlsafe(32),
    )


def load_or_create_secrets(workdir: Path) -> LocalSecrets:
    """The workdir's secrets, made (owner-only) when missing; a missing field is generated and added."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir.resolve() / SECRETS_FILE
    fresh = asdict(_generate())
    stored: dict[str, str] = {}
    if path.is_file():
        loaded = json.loads(path.read_text())
        if isinstance(loaded, dict):
            stored = {k: v for k, v in loaded.items() if isinstance(v, str) and v}
    merged = {f.name: stored.get(f.name) or fresh[f.name] for f in fields(LocalSecrets)}
    if merged != stored or (path.stat().st_mode & 0o077):
        # Created with mode 0600 from the start (never world-readable for an instant), then moved in place.
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(merged, out, indent=2)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return LocalSecrets(**merged)
