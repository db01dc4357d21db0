"""Models an asset trains or publishes (the quality classifier, the tokenizer) live in the bucket under their
content hash, `<prefix><sha256><suffix>`, never overwritten; `<prefix>latest.json` names the one in use. Runs fetch
a model once into a local content-addressed cache that the processes of a run share."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def latest_key(prefix: str) -> str:
    return prefix + "latest.json"


def publish(lake, prefix: str, data: bytes, suffix: str, record: dict | None = None) -> tuple[str, str]:
    """Store `data` under its hash, then point latest.json at it: readers see the old model or the new one.
    -> (key, sha256)"""
    sha = hashlib.sha256(data).hexdigest()
    key = f"{prefix}{sha}{suffix}"
    lake.put_bytes(key, data)
    lake.put_json(latest_key(prefix), {"key": key, "sha256": sha, **(record or {})})
    return key, sha


def fetch_latest(lake, prefix: str, suffix: str) -> tuple[Path, str] | None:
    """-> (local path, sha256) of the model published last under `prefix`, or None."""
    pointer = lake.get_json(latest_key(prefix))
    if pointer is None:
        return None
    return cached_path(pointer["sha256"], lambda: lake.get_bytes(pointer["key"]), suffix), pointer["sha256"]


def cached_path(sha256: str, fetch, suffix: str) -> Path:
    """A content-addressed local copy (`fetch()` returns its bytes), written atomically."""
    root = Path(os.environ.get("LLM_ASSETS_MODEL_CACHE", Path(tempfile.gettempdir()) / "llm-assets-models"))
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{sha256}{suffix}"
    if not path.exists():
        data = fetch()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError(f"model {sha256[:12]}: the stored bytes do not match their hash")
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: a concurrent reader sees the whole file or none
    return path
