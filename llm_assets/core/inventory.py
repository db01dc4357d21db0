"""Raw drops: which shard a raw file belongs to, partition fingerprints, and an incremental listing of `raw/`.

A partition's fingerprint is a sum (mod 2^128) of one hash per file over (key, ETag, size): it is independent
of listing order, so a listing can be split across sensor ticks and still add up to the same value, and an
identical re-upload leaves it unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from llm_assets.core.lake import InvalidKey, Lake, ObjectInfo, parse_raw_key

EMPTY_FINGERPRINT = "0" * 32
_MOD = 1 << 128

SCHEMA = pa.schema([("key", pa.string()), ("file", pa.string()), ("size", pa.int64()), ("etag", pa.string())])


def shard_of(key: str, shards: int) -> str:
    """A raw file's shard: a stable hash of its key into `shards` buckets."""
    return f"{int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], 'big') % shards:04d}"


def _file_hash(obj: ObjectInfo) -> int:
    return int.from_bytes(hashlib.sha256(f"{obj.key}\0{obj.etag}\0{obj.size}".encode()).digest()[:16], "big")


def fingerprint(files: Iterable[ObjectInfo]) -> str:
    return f"{sum(_file_hash(f) for f in files) % _MOD:032x}"


def partition_files(lake: Lake, crawl: str, shard: str, shards: int) -> list[ObjectInfo]:
    """The raw files of one (crawl, shard) partition, in key order. Invalid keys are skipped."""
    files = []
    for obj in lake.list(f"raw/{crawl}/"):
        try:
            parse_raw_key(obj.key)
        except InvalidKey:
            continue
        if shard_of(obj.key, shards) == shard:
            files.append(obj)
    # S3 servers differ in listing order (SeaweedFS lists a folder before sibling keys that sort earlier).
    return sorted(files, key=lambda o: o.key)


@dataclass
class RawScan:
    """An incremental pass over `raw/`: resumes after `after`, accumulating fingerprints per partition."""

    after: str = ""
    sums: dict[str, int] = field(default_factory=dict)  # "crawl|shard" -> running sum
    invalid: list[str] = field(default_factory=list)

    def step(self, lake: Lake, shards: int, budget: int) -> bool:
        """List up to `budget` keys. True when the pass has reached the end of `raw/`."""
        seen = 0
        for obj in lake.list("raw/", start_after=self.after):
            self.after = obj.key
            try:
                crawl, _ = parse_raw_key(obj.key)
            except InvalidKey as e:
                self.invalid.append(str(e))
                continue
            p = f"{crawl}|{shard_of(obj.key, shards)}"
            self.sums[p] = (self.sums.get(p, 0) + _file_hash(obj)) % _MOD
            seen += 1
            if seen >= budget:
                return False
        return True

    def fingerprints(self) -> dict[str, str]:
        return {p: f"{s:032x}" for p, s in self.sums.items()}

    def to_json(self) -> dict:
        return {"after": self.after, "sums": {p: f"{s:x}" for p, s in self.sums.items()}}

    @classmethod
    def from_json(cls, d: dict) -> RawScan:
        return cls(after=d.get("after", ""), sums={p: int(s, 16) for p, s in d.get("sums", {}).items()})


def changed_partitions(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """Partitions whose files appeared, changed or disappeared -> their new fingerprint."""
    return {
        p: after.get(p, EMPTY_FINGERPRINT)
        for p in sorted(set(before) | set(after))
        if after.get(p, EMPTY_FINGERPRINT) != before.get(p, EMPTY_FINGERPRINT)
    }
