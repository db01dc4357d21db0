"""The raw inventory in the stage registry: stale when the shard's files differ from those it listed."""

from __future__ import annotations

from llm_assets.core.inventory import fingerprint, partition_files
from llm_assets.core.raw_files import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import CODE, MISSING, RAW, Observed, StageSpec


def _files(planner, crawl: str, shard: str) -> tuple[int, str]:
    """(files, fingerprint) of the partition's raw files, listed once per planning pass."""
    def listing() -> tuple[int, str]:
        files = partition_files(planner.lake, crawl, shard, len(planner.shards))
        return len(files), fingerprint(files)

    return planner.memo(("raw", crawl, shard), listing)


def _recorded(built) -> str:
    return next((u.unit for u in built.units), "")  # the inventory unit's id is the fingerprint it listed


def _stale(planner, crawl: str | None, shard: str | None) -> str | None:
    """Compared by file fingerprints (key, ETag, size): an identical re-upload changes nothing."""
    assert crawl is not None and shard is not None  # raw_files is partitioned by crawl × shard
    files, now = _files(planner, crawl, shard)
    built = planner.manifest("raw_files", crawl, shard)
    if built is None:
        return MISSING if files else None
    if now not in [u.unit for u in built.units]:
        return RAW
    return CODE if planner.code_changed("raw_files", built) else None


RAW_DROP = Observed(
    "raw_drop",
    "The raw files dropped under `raw/<crawl>/` whose key hashes to this shard, observed as one version per crawl × "
    "shard: their fingerprint over (key, ETag, size). Reported by `raw_drop_sensor` when it requests a run and by "
    "the stale planner when the files differ from those `raw_files` listed, so the UI marks `raw_files` stale "
    "exactly when `llm-assets stale` plans it for new or changed raw data.",
    current=lambda planner, crawl, shard: _files(planner, crawl, shard)[1], recorded=_recorded)


# The shard count is in the version: another count hashes every key to another shard. Its observed source is too:
# a partition built before it had one records none, and Dagster marks it stale for that (a rebuild reuses the unit).
SPEC = StageSpec("raw_files", "shard", version=lambda s: code_version(STAGE_VERSION, str(s.shards), RAW_DROP.name),
                 plan=_stale,
                 observed=RAW_DROP)
