"""The project's one version hash: every code version, data version, unit id, settings fingerprint, tokenizer and
release version is a SHA-256 shortened to the same VERSION_CHARS hex digits (80 bits: no collision among the
billions of units a lake can hold). Identities of content (doc ids, raw file fingerprints) are longer."""

from __future__ import annotations

import hashlib

VERSION_CHARS = 20


def short(sha256_hex: str) -> str:
    """A full SHA-256 hex digest as a version."""
    return sha256_hex[:VERSION_CHARS]


def digest(*parts: str, sep: str = "|") -> str:
    """The version of some parts, in order."""
    return short(hashlib.sha256(sep.join(parts).encode()).hexdigest())


def code_version(stage_version: str, *config: str) -> str:
    """Stage version plus a hash of its effective settings: a threshold change shows as a new code version."""
    return f"{stage_version}-{digest(*config)}"
