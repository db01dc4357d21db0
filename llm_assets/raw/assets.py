import dagster as dg

from llm_assets.core.inventory import INVALID_RAW_KEY, SCHEMA, fingerprint, partition_files
from llm_assets.core.lake import Lake
from llm_assets.core.partition import PartitionOutput
from llm_assets.core.raw_files import STAGE_VERSION, InventoryUnit, observe_raw_files
from llm_assets.registry import CODE, MISSING, RAW, StageSpec
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

CODE_VERSION = code_version(STAGE_VERSION, str(load_settings().shards))
REJECTED_SHOWN = 100  # rows of the rejected-keys table; `raw_keys_rejected` counts them all


@stage_asset(CODE_VERSION)
def raw_files(context: dg.AssetExecutionContext, store: ObjectStore):
    """Raw crawl files dropped under `raw/<crawl>/` whose key hashes to this shard: key, size, ETag.

    The drop zone itself is never modified; this is the observed inventory the downstream stages read. Its data
    version is the partition's fingerprint over (key, ETag, size), so an identical re-upload changes nothing.
    Keys of the shard that cannot be ingested (a control character, '\\' or a bidi control in the name, a '.' or
    '..' segment) are not skipped silently: `raw_keys_rejected` counts them, `rejected_raw_keys` lists them with
    the reason (dropped as `invalid_raw_key`, kept under `rejected/raw_files/`).
    """
    crawl, shard = partition_of(context)
    unit = InventoryUnit(store=store.config(), crawl=crawl, shard=shard, shards=load_settings().shards)
    yield from run_stage(context, observe_raw_files, [unit], CODE_VERSION, SCHEMA.names,
                         report=lambda out: rejected_keys_metadata(store.lake(), out))


def rejected_keys_metadata(lake: Lake, out: PartitionOutput) -> dict:
    parts = [u.rejected_part for u in out.units if u.rejected_part]
    shown = lake.scan(parts).head(REJECTED_SHOWN).collect().to_dicts() if parts else []
    return {
        "raw_keys_rejected": out.dropped().get(INVALID_RAW_KEY, 0),
        "rejected_raw_keys": dg.MetadataValue.table(
            records=[dg.TableRecord({"key": r["key"], "size": r["size"], "reason": r["reason"]}) for r in shown],
            schema=dg.TableSchema(columns=[dg.TableColumn("key", "string"), dg.TableColumn("size", "int"),
                                           dg.TableColumn("reason", "string")]),
        ),
    }


def _stale(planner, crawl: str, shard: str) -> str | None:
    """The inventory is stale when the shard's files differ from those it listed (key, ETag, size): an identical
    re-upload changes nothing."""
    files = partition_files(planner.lake, crawl, shard, len(planner.shards))
    built = planner.manifest("raw_files", crawl, shard)
    if built is None:
        return MISSING if files else None
    if fingerprint(files) not in [u.get("unit") for u in built.get("units", [])]:  # the inventory unit's id
        return RAW
    return CODE if planner.code_changed("raw_files", built) else None


SPEC = StageSpec("raw_files", "shard", plan=_stale)
