import dagster as dg

from llm_assets.core.inventory import INVALID_RAW_KEY, SCHEMA
from llm_assets.core.lake import Lake
from llm_assets.core.partition import PartitionOutput
from llm_assets.core.raw_files import InventoryUnit, observe_raw_files
from llm_assets.raw.spec import SPEC
from llm_assets.settings import Settings
from llm_assets.stage import observed_source, partition_of, run_stage, stage_asset
from resources import ObjectStore

REJECTED_SHOWN = 100  # rows of the rejected-keys table; `raw_keys_rejected` counts them all


def build(settings: Settings) -> list[dg.AssetsDefinition]:
    code = SPEC.version(settings)

    @stage_asset(SPEC, settings)
    def raw_files(context: dg.AssetExecutionContext, store: ObjectStore):
        """Raw crawl files dropped under `raw/<crawl>/` whose key hashes to this shard: key, size, ETag.

        The drop zone itself is never modified; this is the observed inventory the downstream stages read. Its data
        version is the partition's fingerprint over (key, ETag, size), so an identical re-upload changes nothing.
        Keys of the shard that cannot be ingested (a control character, '\\' or a bidi control in the name, a '.' or
        '..' segment) are not skipped silently: `raw_keys_rejected` counts them, `rejected_raw_keys` lists them with
        the reason (dropped as `invalid_raw_key`, kept under `rejected/raw_files/`).
        """
        crawl, shard = partition_of(context)
        unit = InventoryUnit(store=store.config(), source=f"raw/{crawl}/", crawl=crawl, shard=shard, shards=settings.shards)
        yield from run_stage(context, observe_raw_files, [unit], code, SCHEMA.names, settings.runner,
                             report=lambda out: rejected_keys_metadata(store.lake(), out))

    return [observed_source(SPEC, settings), raw_files]


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
