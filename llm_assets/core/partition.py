"""Committing a partition, and reading committed partitions lazily.

A partition's manifest lists its parts and what made them. Writing the manifest is the commit: readers only
open parts a manifest lists, so parts of an interrupted run are never seen.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import polars as pl

from llm_assets.core.lake import Lake, manifest_key
from llm_assets.core.units import UnitResult

MANIFEST_VERSION = 1


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
    """Write the manifest (the atomic commit), then delete the parts the previous manifest listed and this one
    does not."""
    key = manifest_key(asset, crawl, shard)
    previous = lake.get_json(key) or {}
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
    lake.put_json(key, manifest)
    live = _part_keys(manifest)
    lake.delete(k for k in _part_keys(previous) if k not in live)
    return manifest


def committed(lake: Lake, asset: str, crawl: str, shards: list[str]) -> dict[str, dict]:
    """shard -> committed manifest, for the shards of `crawl` that have one."""
    return {s: m for s in shards if (m := lake.get_json(manifest_key(asset, crawl, s))) is not None}


def units_version(code_version: str, manifests: list[dict]) -> str:
    """The data version of an asset that fans in these partitions: its code version and every unit it read."""
    units = sorted(u["unit"] for m in manifests for u in m["units"])
    return hashlib.sha256("|".join([code_version, *units]).encode()).hexdigest()[:20]


def _part_keys(manifest: dict) -> set[str]:
    return {k for u in manifest.get("units", []) for k in (u.get("part"), u.get("rejected_part")) if k}


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
