"""Committing a partition, and reading committed partitions lazily.

A partition's manifest lists its parts and what made them. Writing the manifest is the commit: readers only
open parts a manifest lists, so parts of an interrupted run are never seen.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from llm_assets.core.keys import CRAWL_LEVEL_SHARD
from llm_assets.core.lake import (
    SCRATCH_PREFIX,
    CommitConflict,
    Lake,
    ObjectInfo,
    manifest_key,
    partition_prefix,
    tombstone_key,
)
from llm_assets.core.ledger import append_ledger, ledger_rows
from llm_assets.core.release import vacuum_releases
from llm_assets.core.units import UnitResult
from llm_assets.core.versions import digest

MANIFEST_VERSION = 1
COMMIT_ATTEMPTS = 20
_PARTITION_KEY = re.compile(r"^(?:lake|rejected)/(?P<asset>[^/]+)/crawl=(?P<crawl>[^/]+)/shard=(?P<shard>[^/]+)/")
_PART_FILE = re.compile(r"/(?:part|scores)-[0-9a-f]+\.parquet$")  # a part, or a unit's scores beside it


class UnitTotals:
    """Totals over a partition's work units (`self.units`)."""

    units: Sequence[UnitResult]

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


@dataclass
class PartitionOutput(UnitTotals):
    """What a stage produced for one partition: its work units' results."""

    units: list[UnitResult]
    code_version: str = ""
    data_version: str = ""
    inputs: dict[str, str] = field(default_factory=dict)  # what it was built from beyond its parts' sources
    held_back: str = ""  # why a quality gate holds the partition back from downstream ("" = promoted)
    runner: str = ""  # where its units ran (`str(runner)`), for the cost ledger
    reused: frozenset[str] = frozenset()  # ids of the units taken from the previous commit: not charged again
    # units that ran for the partition besides those it lists (a fan-in's earlier steps): charged too
    spent: list[UnitResult] = field(default_factory=list)


@dataclass(frozen=True)
class Manifest(UnitTotals):
    """A committed partition, as its manifest in the lake records it: the parts its work units wrote, its rows, and
    the versions the stale planner compares (its code, what it holds, what it was built from)."""

    asset: str
    crawl: str
    shard: str
    code_version: str = ""
    data_version: str = ""
    rows: int = 0
    units: tuple[UnitResult, ...] = ()
    inputs: dict[str, str] = field(default_factory=dict)
    committed_at: float = 0.0
    held_back: str = ""  # why a quality gate holds it back: downstream stages neither plan nor read it

    @classmethod
    def from_json(cls, data: dict) -> Manifest:
        return cls(asset=data["asset"], crawl=data["crawl"], shard=data["shard"],
                   code_version=data.get("code_version") or "", data_version=data.get("data_version") or "",
                   rows=data.get("rows", 0), units=tuple(UnitResult.from_dict(u) for u in data.get("units", [])),
                   inputs=data.get("inputs") or {}, committed_at=data.get("committed_at", 0.0),
                   held_back=data.get("held_back") or "")

    def to_json(self) -> dict:
        return {"version": MANIFEST_VERSION, "asset": self.asset, "crawl": self.crawl, "shard": self.shard,
                "code_version": self.code_version, "data_version": self.data_version, "inputs": self.inputs,
                "committed_at": self.committed_at, "rows": self.rows, "units": [u.to_dict() for u in self.units],
                **({"held_back": self.held_back} if self.held_back else {})}

    @property
    def parts(self) -> list[str]:
        """The parts of the documents kept."""
        return [u.part for u in self.units if u.part]

    @property
    def rejected_parts(self) -> list[str]:
        return [u.rejected_part for u in self.units if u.rejected_part]

    def part_keys(self) -> set[str]:
        """Every key the partition needs in the store."""
        return {*self.parts, *self.rejected_parts, *(k for u in self.units for k in u.side_parts.values())}


def read_manifest(lake: Lake, asset: str, crawl: str, shard: str) -> Manifest | None:
    """The committed manifest of a partition, or None when it was never committed."""
    data = lake.get_json(manifest_key(asset, crawl, shard))
    return None if data is None else Manifest.from_json(data)


def commit(lake: Lake, asset: str, crawl: str, shard: str, out: PartitionOutput) -> Manifest:
    """Commit a partition: one conditional PUT of its manifest, which lists its parts, then one object of the cost
    ledger for the units that ran (`core.ledger`).

    Every part the manifest lists must be in the store (checked by one listing), so a commit can never point at a
    missing part; the PUT succeeds only if the manifest is still the version this commit read (If-Match), so two
    runs committing one partition at once both see what they replace. Parts the new manifest drops are not
    deleted here: a reader holding the previous manifest may still be reading them. The commit records them in a
    tombstone, and `vacuum` deletes them once the lake's retention has passed."""
    key = manifest_key(asset, crawl, shard)
    manifest = Manifest(asset=asset, crawl=crawl, shard=shard, code_version=out.code_version,
                        data_version=out.data_version, rows=out.rows_out, units=tuple(out.units), inputs=out.inputs,
                        committed_at=time.time(), held_back=out.held_back)
    live = manifest.part_keys()
    if missing := sorted(live - _stored_parts(lake, asset, crawl, shard)):
        raise MissingParts(f"{asset} crawl={crawl} shard={shard}: {len(missing)} part(s) to commit are not in the "
                           f"store (first: {missing[0]}); nothing was committed, run the partition again")
    for _ in range(COMMIT_ATTEMPTS):
        previous, etag = lake.get_json_versioned(key)
        before = Manifest.from_json(previous).part_keys() if previous else set()
        if superseded := sorted(before - live):
            now = time.time()
            lake.put_json(tombstone_key(asset, crawl, shard, now, secrets.token_hex(4)),
                          {"parts": superseded, "superseded_at": now, "by": out.data_version})
        try:
            lake.put_json(key, manifest.to_json(), if_match=etag, if_absent=etag is None)
            break
        except CommitConflict:
            continue  # another run committed in between: supersede what it wrote instead
    else:
        raise CommitConflict(f"{asset} crawl={crawl} shard={shard}: the manifest kept changing during the commit")
    # After the commit: what is charged is what was committed (a failed commit's units run again, and are charged then)
    append_ledger(lake, ledger_rows(asset, crawl, shard, [*out.units, *out.spent], out.runner,
                                    manifest.committed_at, out.reused))
    vacuum(lake, lake.config.retention_s, [(asset, crawl, shard)])
    return manifest


def reusable_units(lake: Lake, asset: str, crawl: str, shard: str, wanted: set[str]) -> dict[str, UnitResult]:
    """Units of the committed manifest that a run would redo identically: a unit id hashes the stage, its code
    version and its input, so the same id means the same output, already written. Units whose parts are not in
    the store (any more) are redone, so a rerun always repairs."""
    if not wanted:
        return {}
    manifest = read_manifest(lake, asset, crawl, shard)
    stored = _stored_parts(lake, asset, crawl, shard)
    return {u.unit: u for u in (manifest.units if manifest else ())
            if u.unit in wanted and not u.errors and {k for k in (u.part, u.rejected_part) if k} <= stored}


def data_version(units: list[UnitResult]) -> str:
    """What a partition holds: every unit's identity and outcome (rows written, part), so two partitions share a
    version only if they hold the same thing."""
    outcomes = sorted(f"{u.unit}:{u.rows_out}:{u.part or ''}:{u.rejected_part or ''}" for u in units)
    return digest(*outcomes)


def vacuum(lake: Lake, retention_s: float, partitions: list[tuple[str, str, str]] | None = None,
           now: float | None = None) -> list[str]:
    """Delete what no committed manifest needs any more, once `retention_s` has passed: parts superseded by a
    commit (their tombstone older than the retention) and parts no commit ever listed (a killed run's), older
    than the retention. Live parts and parts of recent tombstones stay, so a reader holding an older manifest
    finishes its read. `partitions`: (asset, crawl, shard) to vacuum; None: the whole lake, releases included
    (`vacuum_releases`: what failed builds left) and previews' scratch prefixes that a killed process left
(`vacuum_scratch`). Returns deleted keys."""
    now = time.time() if now is None else now
    cutoff = now - retention_s
    groups: dict[tuple[str, str, str], dict[str, ObjectInfo]] = {}
    prefixes = ["lake/", "rejected/"] if partitions is None else [
        partition_prefix(zone, *p) for p in partitions for zone in ("lake", "rejected")]
    for prefix in prefixes:
        for obj in lake.list(prefix):
            if (match := _PARTITION_KEY.match(obj.key)) is not None:
                groups.setdefault((match["asset"], match["crawl"], match["shard"]), {})[obj.key] = obj
    deleted: list[str] = []
    for (asset, crawl, shard), objects in sorted(groups.items()):
        manifest = read_manifest(lake, asset, crawl, shard)
        live = manifest.part_keys() if manifest else set()
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
    if partitions is None:
        deleted += vacuum_releases(lake, retention_s, now=now)
        deleted += vacuum_scratch(lake, retention_s, now=now)
    return deleted


def vacuum_scratch(lake: Lake, retention_s: float, now: float | None = None) -> list[str]:
    """What a preview whose process was killed left under `scratch/preview/`: each preview's objects once its newest
    is older than the retention (a preview in progress keeps writing)."""
    cutoff = (time.time() if now is None else now) - retention_s
    by_preview: dict[str, list] = {}
    for obj in lake.list(SCRATCH_PREFIX):
        by_preview.setdefault(obj.key.removeprefix(SCRATCH_PREFIX).split("/", 1)[0], []).append(obj)
    doomed = [o.key for objects in by_preview.values() if max(o.modified for o in objects) <= cutoff
              for o in objects]
    lake.delete(doomed)
    return doomed


def committed(lake: Lake, asset: str, crawl: str, shards: list[str]) -> dict[str, Manifest]:
    """shard -> committed manifest, for the shards of `crawl` that have one."""
    return {s: m for s in shards if (m := read_manifest(lake, asset, crawl, s)) is not None}


def units_version(code_version: str, manifests: list[Manifest]) -> str:
    """The data version of an asset that fans in these partitions: its code version and every unit it read."""
    units = sorted(u.unit for m in manifests for u in m.units)
    return digest(code_version, *units)


def _stored_parts(lake: Lake, asset: str, crawl: str, shard: str) -> set[str]:
    return {k for zone in ("lake", "rejected") for k in lake.keys(partition_prefix(zone, asset, crawl, shard))}


class MissingParts(RuntimeError):
    """A manifest would list a part that is not in the store."""


class HeldBack(LookupError):
    """The partition is committed but its quality gate holds it back from downstream stages."""


class MissingPartition(LookupError):
    pass


@dataclass
class FrameOutput:
    """A frame committed as one part, with the versions the stale planner compares. `work`: what computing it
    cost (seconds, CPU, bytes and rows read, requests; `total_work`), recorded with the part's unit and charged to
    the cost ledger as one row; `runner` where that work ran."""

    frame: pl.DataFrame
    code_version: str
    data_version: str
    inputs: dict[str, str] = field(default_factory=dict)
    work: UnitResult | None = None
    runner: str = ""


@dataclass
class RangeOutput:
    """What a run of many partitions of an asset commits: each (crawl, shard)'s output, or None for a partition it
    keeps as it is (its input is held back by a quality gate)."""

    partitions: dict[tuple[str, str], PartitionOutput | None]


def total_work(units: Sequence[UnitResult], source: str, seconds: float = 0.0) -> UnitResult:
    """One result summing what `units` cost (their CPU, bytes, rows read and requests, their highest peak memory),
    over `seconds` of wall time (default: theirs, summed)."""
    return UnitResult(unit="", source=source, rows_in=sum(u.rows_in for u in units),
                      bytes_in=sum(u.bytes_in for u in units), seconds=seconds or sum(u.seconds for u in units),
                      cpu_seconds=sum(u.cpu_seconds for u in units), requests=sum(u.requests for u in units),
                      peak_rss_bytes=max((u.peak_rss_bytes for u in units), default=0))


@dataclass
class LakeInput:
    """Committed partitions of an asset, opened lazily: manifests are read, data is not."""

    lake: Lake
    asset: str
    manifests: list[Manifest] = field(default_factory=list)
    # (crawl, shard) -> why it cannot be read: for a multi-partition run, the error of each partition that is not,
    # raised when that partition is taken (`of_partition`), so the others are still built
    unreadable: dict[tuple[str, str], LookupError] = field(default_factory=dict)

    @classmethod
    def load(cls, lake: Lake, asset: str, partitions: list[tuple[str, str]], allow_missing: bool = False,
             per_partition: bool = False) -> LakeInput:
        """The committed manifests of these (crawl, shard) partitions; one never committed, or held back by its
        quality gate, is an error, or skipped with `allow_missing`, or kept as that partition's error with
        `per_partition` (a run of many partitions: `of_partition` raises it)."""
        manifests: list[Manifest] = []
        unreadable: dict[tuple[str, str], LookupError] = {}
        for crawl, shard in partitions:
            m = read_manifest(lake, asset, crawl, shard)
            if (m is None or m.held_back) and allow_missing:
                continue
            if m is not None and not m.held_back:
                manifests.append(m)
                continue
            error: LookupError = MissingPartition(
                f"{asset} has no committed partition crawl={crawl} shard={shard}") if m is None else HeldBack(
                f"{asset} crawl={crawl} shard={shard} is held back by its quality gate: {m.held_back}. Downstream "
                f"keeps what it was built from; rebuild {asset} for this partition once its input is fixed, or widen "
                "the bounds under `gates:` in the settings")
            if not per_partition:
                raise error
            unreadable[(crawl, shard)] = error
        return cls(lake, asset, manifests, unreadable)

    def of_partition(self, crawl: str, shard: str) -> LakeInput:
        """What one partition of a multi-partition run reads of this input: the manifests of its shard (every shard
        of its crawl for a crawl-level partition), or of its crawl for a crawl-level input; the error of a partition
        that cannot be read."""
        if (crawl, shard) in self.unreadable:
            raise self.unreadable[(crawl, shard)]
        return LakeInput(self.lake, self.asset, [m for m in self.manifests if m.crawl == crawl and (
            shard == CRAWL_LEVEL_SHARD or m.shard in (shard, CRAWL_LEVEL_SHARD))])

    @property
    def parts(self) -> list[str]:
        return [part for m in self.manifests for part in m.parts]

    @property
    def data_version(self) -> str:
        """The version of what was read: the manifests' data versions (one partition: its own)."""
        versions = [m.data_version for m in self.manifests]
        return versions[0] if len(versions) == 1 else digest(*versions)

    @property
    def rows(self) -> int:
        return sum(m.rows for m in self.manifests)

    def scan(self) -> pl.LazyFrame:
        """A LazyFrame over every part: collect it streaming, or slice it, to keep memory bounded."""
        return self.lake.scan(self.parts)
