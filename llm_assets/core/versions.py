"""Code versions: a stage's version plus a hash of the settings it depends on."""

from __future__ import annotations

import hashlib


def code_version(stage_version: str, *config: str) -> str:
    """Stage version plus a hash of its effective settings: a threshold change shows as a new code version."""
    return f"{stage_version}-{hashlib.sha256('|'.join(config).encode()).hexdigest()[:10]}"
