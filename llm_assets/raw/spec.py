"""The raw inventory in the stage registry: stale when the shard's files differ from those it listed."""

from __future__ import annotations

from llm_assets.core.inventory import fingerprint, partition_files
from llm_assets.core.raw_files import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import CODE, MISSING, RAW, StageSpec


def _stale(planner, crawl: str, shard: str) -> str | None:
    """Compared by file fingerprints (key, ETag, size): an identical re-upload changes nothing."""
    files = partition_files(planner.lake, crawl, shard, len(planner.shards))
    built = planner.manifest("raw_files", crawl, shard)
    if built is None:
        return MISSING if files else None
    if fingerprint(files) not in [u.unit for u in built.units]:  # the inventory unit's id
        return RAW
    return CODE if planner.code_changed("raw_files", built) else None


# The shard count is in the version: another count hashes every key to another shard.
SPEC = StageSpec("raw_files", "shard", version=lambda s: code_version(STAGE_VERSION, str(s.shards)), plan=_stale)
