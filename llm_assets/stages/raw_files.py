"""The raw inventory: the files dropped under `raw/<crawl>/` whose key hashes to each shard, and the sensor that
watches the drop zone. Stale when the shard's files differ from those it listed."""

import polars as pl

from llm_assets.core.inventory import INVALID_RAW_KEY, SCHEMA, fingerprint, partition_files
from llm_assets.core.partition import PartitionOutput
from llm_assets.core.raw_files import STAGE_VERSION, InventoryUnit, observe_raw_files
from llm_assets.core.stage_names import RAW_FILES
from llm_assets.core.versions import code_version
from llm_assets.registry import CODE, MISSING, RAW, Observed, StageSpec
from llm_assets.report import Report
from llm_assets.stage import Partition, ShardStage


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
    assert crawl is not None and shard is not None  # a shard-level stage is planned per crawl × shard
    files, now = _files(planner, crawl, shard)
    built = planner.manifest(RAW_FILES, crawl, shard)
    if built is None:
        return MISSING if files else None
    if now not in [u.unit for u in built.units]:
        return RAW
    return CODE if planner.code_changed(RAW_FILES, built) else None


RAW_DROP = Observed(
    "raw_drop",
    "The raw files dropped under `raw/<crawl>/` whose key hashes to this shard, observed as one version per crawl × "
    "shard: their fingerprint over (key, ETag, size). Reported by `raw_drop_sensor` when it requests a run and by "
    "the stale planner when the files differ from those `raw_files` listed, so the UI marks `raw_files` stale "
    "exactly when `llm-assets stale` plans it for new or changed raw data.",
    current=lambda planner, crawl, shard: _files(planner, crawl, shard)[1], recorded=_recorded)


# The shard count is in the version: another count hashes every key to another shard. Its observed source is too:
# a partition built before it had one records none, and Dagster marks it stale for that (a rebuild reuses the unit).
SPEC = StageSpec(RAW_FILES, "shard", version=lambda s: code_version(STAGE_VERSION, str(s.shards), RAW_DROP.name),
                 plan=_stale,
                 observed=RAW_DROP, job="lake_job")
REJECTED_SHOWN = 100  # rows of the rejected-keys table; `raw_keys_rejected` counts them all


class RawFiles(ShardStage):
    """Raw crawl files dropped under `raw/<crawl>/` whose key hashes to this shard: key, size, ETag.

    The drop zone itself is never modified; this is the observed inventory the downstream stages read. Its data
    version is the partition's fingerprint over (key, ETag, size), so an identical re-upload changes nothing.
    Keys of the shard that cannot be ingested (a control character, '\\' or a bidi control in the name, a '.' or
    '..' segment) are not skipped silently: `raw_keys_rejected` counts them, `rejected_raw_keys` lists them with
    the reason (dropped as `invalid_raw_key`, kept under `rejected/raw_files/`).
    """

    spec = SPEC
    work = staticmethod(observe_raw_files)

    def units(self, p: Partition) -> list[InventoryUnit]:
        return [InventoryUnit(store=p.lake.config, source=f"raw/{p.crawl}/", crawl=p.crawl, shard=p.shard,
                              shards=p.settings.shards)]

    def columns(self, p: Partition) -> list[str]:
        return SCHEMA.names

    def report(self, p: Partition, out: PartitionOutput) -> Report:
        """The keys of the shard that will not be ingested, with the reason."""
        parts = [u.rejected_part for u in out.units if u.rejected_part]
        shown = p.lake.scan(parts).head(REJECTED_SHOWN).select("key", "size", "reason").collect() if parts else \
            pl.DataFrame(schema={"key": pl.String, "size": pl.Int64, "reason": pl.String})
        return {"raw_keys_rejected": out.dropped().get(INVALID_RAW_KEY, 0), "rejected_raw_keys": shown}


STAGES = [RawFiles()]
