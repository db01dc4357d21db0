"""Committing a partition, and reading committed partitions lazily.

A partition's manifest lists its parts and what made them. Writing the manifest is the commit: readers only
open parts a manifest lists, so parts of an interrupted run are never seen.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass, field

import polars as pl

from llm_assets.core.lake import CommitConflict, Lake, ObjectInfo, manifest_key, partition_prefix, tombstone_key
from llm_assets.core.units import UnitResult

MANIFEST_VERSION = 1
COMMIT_ATTEMPTS = 20
_PARTITION_KEY = re.compile(r"^(?:lake|rejected)/(?P<asset>[^/]+)/crawl=(?P<crawl>[^/]+)/shard=(?P<shard>[^/]+)/")
_PART_FILE = re.compile(r"/part-[0-9a-f]+\.parquet$")


@dataclass
class PartitionOutput:
    """What a stage produced for one partition: its work units' results."""

    units: list[UnitResult]
    code_version: str = ""
    data_version: str = ""
    inputs: dict[str, str] = field(default_factory=dict)  # what it was built from beyond its parts' sources

    @property
    def rows_in(self) -> int:
        return sum(u.rows_in for u in self.units)

    @property
    def rows_out(self) -> int:
        return sum(u.rows_out for u in self.units)

    def dropped(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for u in self.units:
            for reason, n in u.dropped.items():
                total[reason] = total.get(reason, 0) + n
        return dict(sorted(total.items(), key=lambda kv: -kv[1]))

    def counts(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for u in self.units:
            for key, n in u.counts.items():
                total[key] = total.get(key, 0) + n
        return total

    def errors(self) -> list[str]:
        return [e for u in self.units for e in u.errors[:1]]


def commit(lake: Lake, asset: str, crawl: str, shard: str, out: PartitionOutput) -> dict:
    """Commit a partition: one conditional PUT of its manifest, which lists its parts.

    Every part the manifest lists must be in the store (checked by one listing), so a commit can never point at a
    missing part; the PUT succeeds only if the manifest is still the version this commit read (If-Match), so two
    runs committing one partition at once both see what they replace. Parts the new manifest drops are not
    deleted here: a reader holding the previous manifest may still be reading them. The commit records them in a
    tombstone, and `vacuum` deletes them once the lake's retention has passed."""
    key = manifest_key(asset, crawl, shard)
    manifest = {
        "version": MANIFEST_VERSION,
        "asset": asset,
        "crawl": crawl,
        "shard": shard,
        "code_version": out.code_version,
        "data_version": out.data_version,
        "inputs": out.inputs,
        "committed_at": time.time(),
        "rows": out.rows_out,
        "units": [u.to_dict() for u in out.units],
    }
    live = _part_keys(manifest)
    if missing := sorted(live - _stored_parts(lake, asset, crawl, shard)):
        raise MissingParts(f"{asset} crawl={crawl} shard={shard}: {len(missing)} part(s) to commit are not in the "
                           f"store (first: {missing[0]}); nothing was committed, run the partition again")
    for _ in range(COMMIT_ATTEMPTS):
        previous, etag = lake.get_json_versioned(key)
        if superseded := sorted(_part_keys(previous or {}) - live):
            now = time.time()
            lake.put_json(tombstone_key(asset, crawl, shard, now, secrets.token_hex(4)),
                          {"parts": superseded, "superseded_at": now, "by": out.data_version})
        try:
            lake.put_json(key, manifest, if_match=etag, if_absent=etag is None)
            break
        except CommitConflict:
            continue  # another run committed in between: supersede what it wrote instead
    else:
        raise CommitConflict(f"{asset} crawl={crawl} shard={shard}: the manifest kept changing during the commit")
    vacuum(lake, lake.config.retention_s, [(asset, crawl, shard)])
    return manifest


def reusable_units(lake: Lake, asset: str, crawl: str, shard: str, wanted: set[str]) -> dict[str, UnitResult]:
    """Units of the committed manifest that a run would redo identically: a unit id hashes the stage, its code
    version and its input, so the same id means the same output, already written. Units whose parts are not in
    the store (any more) are redone, so a rerun always repairs."""
    if not wanted:
        return {}
    manifest = lake.get_json(manifest_key(asset, crawl, shard)) or {}
    stored = _stored_parts(lake, asset, crawl, shard)
    return {d["unit"]: UnitResult.from_dict(d) for d in manifest.get("units", [])
            if d["unit"] in wanted and not d.get("errors") and _part_keys({"units": [d]}) <= stored}


def data_version(units: list[UnitResult]) -> str:
    """What a partition holds: every unit's identity and outcome (rows written, part), so two partitions share a
    version only if they hold the same thing."""
    outcomes = sorted(f"{u.unit}:{u.rows_out}:{u.part or ''}:{u.rejected_part or ''}" for u in units)
    return hashlib.sha256("|".join(outcomes).encode()).hexdigest()[:20]


def vacuum(lake: Lake, retention_s: float, partitions: list[tuple[str, str, str]] | None = None,
           now: float | None = None) -> list[str]:
    """Delete what no committed manifest needs any more, once `retention_s` has passed: parts superseded by a
    commit (their tombstone older than the retention) and parts no commit ever listed (a killed run's), older
    than the retention. Live parts and parts of recent tombstones stay, so a reader holding an older manifest
    finishes its read. `partitions`: (asset, crawl, shard) to vacuum; None: the whole lake. Returns deleted keys."""
    now = time.time() if now is None else now
    cutoff = now - retention_s
    groups: dict[tuple[str, str, str], dict[str, ObjectInfo]] = {}
    prefixes = ["lake/", "rejected/"] if partitions is None else [
        partition_prefix(zone, *p) for p in partitions for zone in ("lake", "rejected")]
    for prefix in prefixes:
        for obj in lake.list(prefix):
            if (match := _PARTITION_KEY.match(obj.key)) is not None:
                groups.setdefault(match.group("asset", "crawl", "shard"), {})[obj.key] = obj
    deleted: list[str] = []
    for (asset, crawl, shard), objects in sorted(groups.items()):
        live = _part_keys(lake.get_json(manifest_key(asset, crawl, shard)) or {})
        protected, expired = set(live), []
        for key in sorted(k for k in objects if "/_superseded/" in k):
            tombstone = lake.get_json(key) or {}
            if tombstone.get("superseded_at", now) > cutoff:
                protected |= set(tombstone.get("parts", []))
            else:
                expired.append(key)
        doomed = [k for k, o in objects.items()
                  if _PART_FILE.search(k) and k not in protected and o.modified <= cutoff]
        lake.delete(doomed + expired)
        deleted += doomed + expired
    return deleted


def committed(lake: Lake, asset: str, crawl: str, shards: list[str]) -> dict[str, dict]:
    """shard -> committed manifest, for the shards of `crawl` that have one."""
    return {s: m for s in shards if (m := lake.get_json(manifest_key(asset, crawl, s))) is not None}


def units_version(code_version: str, manifests: list[dict]) -> str:
    """The data version of an asset that fans in these partitions: its code version and every unit it read."""
    units = sorted(u["unit"] for m in manifests for u in m["units"])
    return hashlib.sha256("|".join([code_version, *units]).encode()).hexdigest()[:20]


def _part_keys(manifest: dict) -> set[str]:
    return {k for u in manifest.get("units", []) for k in (u.get("part"), u.get("rejected_part")) if k}


def _stored_parts(lake: Lake, asset: str, crawl: str, shard: str) -> set[str]:
    return {k for zone in ("lake", "rejected") for k in lake.keys(partition_prefix(zone, asset, crawl, shard))}


class MissingParts(RuntimeError):
    """A manifest would list a part that is not in the store."""


class MissingPartition(LookupError):
    pass


@dataclass
class FrameOutput:
    """A frame committed as one part, with the versions the stale planner compares."""

    frame: pl.DataFrame
    code_version: str
    data_version: str
    inputs: dict[str, str] = field(default_factory=dict)


@dataclass
class LakeInput:
    """Committed partitions of an asset, opened lazily: manifests are read, data is not."""

    lake: Lake
    asset: str
    manifests: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, lake: Lake, asset: str, partitions: list[tuple[str, str]]) -> LakeInput:
        manifests = []
        for crawl, shard in partitions:
            m = lake.get_json(manifest_key(asset, crawl, shard))
            if m is None:
                raise MissingPartition(f"{asset} has no committed partition crawl={crawl} shard={shard}")
            manifests.append(m)
        return cls(lake, asset, manifests)

    @property
    def parts(self) -> list[str]:
        return [u["part"] for m in self.manifests for u in m["units"] if u.get("part")]

    @property
    def data_version(self) -> str:
        """The version of what was read: the manifests' data versions (one partition: its own)."""
        versions = [m.get("data_version") or "" for m in self.manifests]
        return versions[0] if len(versions) == 1 else hashlib.sha256("|".join(versions).encode()).hexdigest()[:20]

    @property
    def rows(self) -> int:
        return sum(m["rows"] for m in self.manifests)

    def scan(self) -> pl.LazyFrame:
        """A LazyFrame over every part: collect it streaming, or slice it, to keep memory bounded."""
        return self.lake.scan(self.parts)
