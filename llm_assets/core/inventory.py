"""Raw drops: which shard a raw file belongs to, partition fingerprints, and an incremental listing of `raw/`.

A partition's fingerprint is a sum (mod 2^128) of one hash per file over (key, ETag, size): it is independent
of listing order, so a listing can be split across sensor ticks and still add up to the same value, and an
identical re-upload leaves it unchanged.

A key that cannot be ingested (`parse_raw_key` says why) is not a file of any partition, and is never skipped
silently: the partition it hashes to keeps it with the reason, and `rejected_raw_keys` finds every one, including
those under an invalid crawl folder that no partition can claim.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from llm_assets.core.keys import PartitionRef
from llm_assets.core.lake import InvalidKey, Lake, ObjectInfo, parse_raw_key

EMPTY_FINGERPRINT = "0" * 32
_MOD = 1 << 128

SCHEMA = pa.schema([("key", pa.string()), ("file", pa.string()), ("size", pa.int64()), ("etag", pa.string())])
# What the raw inventory keeps under rejected/raw_files/: keys of its shard that cannot be ingested, with the reason.
REJECTED_SCHEMA = pa.schema(
    [("key", pa.string()), ("size", pa.int64()), ("etag", pa.string()), ("reason", pa.string())])
INVALID_RAW_KEY = "invalid_raw_key"  # the raw inventory's drop reason


def shard_of(key: str, shards: int) -> str:
    """A raw file's shard: a stable hash of its key into `shards` buckets."""
    return f"{int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], 'big') % shards:04d}"


def _file_hash(obj: ObjectInfo) -> int:
    return int.from_bytes(hashlib.sha256(f"{obj.key}\0{obj.etag}\0{obj.size}".encode()).digest()[:16], "big")


def fingerprint(files: Iterable[ObjectInfo]) -> str:
    return f"{sum(_file_hash(f) for f in files) % _MOD:032x}"


@dataclass(frozen=True)
class RejectedKey:
    """A raw object that will not be ingested, and why."""

    obj: ObjectInfo
    reason: str

    def to_dict(self) -> dict:
        return {"key": self.obj.key, "size": self.obj.size, "reason": self.reason}


def is_folder_marker(obj: ObjectInfo) -> bool:
    """An empty object whose key ends in '/', as S3 consoles create for a folder: not a file, so neither ingested
    nor reported."""
    return obj.key.endswith("/") and obj.size == 0


def rejection(obj: ObjectInfo) -> RejectedKey | None:
    """Why a listed raw object cannot be ingested; None when it can."""
    try:
        parse_raw_key(obj.key)
    except InvalidKey as e:
        return RejectedKey(obj, str(e))
    return None


def partition_listing(lake: Lake, crawl: str, shard: str, shards: int) -> tuple[list[ObjectInfo], list[RejectedKey]]:
    """The raw files of one (crawl, shard) partition, and the keys under the crawl that hash to the shard but
    cannot be ingested; both in key order."""
    files, rejected = [], []
    for obj in lake.list(f"raw/{crawl}/"):
        if is_folder_marker(obj) or shard_of(obj.key, shards) != shard:
            continue
        if (r := rejection(obj)) is None:
            files.append(obj)
        else:
            rejected.append(r)
    # S3 servers differ in listing order (SeaweedFS lists a folder before sibling keys that sort earlier).
    return sorted(files, key=lambda o: o.key), sorted(rejected, key=lambda r: r.obj.key)


def shards_with_files(lake: Lake, crawl: str, shards: int) -> set[str]:
    """The shards of `crawl` that some ingestible raw file hashes to: those a crawl-level stage needs built."""
    return {shard_of(obj.key, shards) for obj in lake.list(f"raw/{crawl}/")
            if not is_folder_marker(obj) and rejection(obj) is None}


def partition_files(lake: Lake, crawl: str, shard: str, shards: int) -> list[ObjectInfo]:
    """The raw files of one (crawl, shard) partition, in key order."""
    return partition_listing(lake, crawl, shard, shards)[0]


def rejected_raw_keys(lake: Lake, limit: int = 100) -> tuple[int, list[RejectedKey]]:
    """Every raw key that will not be ingested, from one listing of `raw/`: how many, and the first `limit`.
    It includes the keys no partition can report: those under an invalid crawl folder or directly under raw/."""
    count = 0
    shown: list[RejectedKey] = []
    for obj in lake.list("raw/"):
        if not is_folder_marker(obj) and (r := rejection(obj)) is not None:
            count += 1
            if len(shown) < limit:
                shown.append(r)
    return count, shown


@dataclass
class RawScan:
    """An incremental pass over `raw/`: resumes after `after`, accumulating fingerprints per partition."""

    after: str = ""
    sums: dict[str, int] = field(default_factory=dict)  # "crawl|shard" -> running sum
    invalid: list[str] = field(default_factory=list)  # why listed keys cannot be ingested; not in the cursor

    def step(self, lake: Lake, shards: int, budget: int) -> bool:
        """List up to `budget` keys. True when the pass has reached the end of `raw/`. Keys that cannot be
        ingested count against the budget too (it bounds the listing), and are noted in `invalid` with the reason."""
        seen = 0
        for obj in lake.list("raw/", start_after=self.after):
            self.after = obj.key
            seen += 1
            if not is_folder_marker(obj):
                self._add(obj, shards)
            if seen >= budget:
                return False
        return True

    def _add(self, obj: ObjectInfo, shards: int) -> None:
        if (r := rejection(obj)) is not None:
            self.invalid.append(r.reason)
            return
        p = PartitionRef(obj.key.split("/")[1], shard_of(obj.key, shards)).key
        self.sums[p] = (self.sums.get(p, 0) + _file_hash(obj)) % _MOD

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
