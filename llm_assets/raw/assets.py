import dagster as dg

from llm_assets.core.inventory import SCHEMA
from llm_assets.core.raw_files import STAGE_VERSION, InventoryUnit, observe_raw_files
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

CODE_VERSION = code_version(STAGE_VERSION, str(load_settings().shards))


@stage_asset(CODE_VERSION)
def raw_files(context: dg.AssetExecutionContext, store: ObjectStore):
    """Raw crawl files dropped under `raw/<crawl>/` whose key hashes to this shard: key, size, ETag.

    The drop zone itself is never modified; this is the observed inventory the downstream stages read. Its data
    version is the partition's fingerprint over (key, ETag, size), so an identical re-upload changes nothing.
    """
    crawl, shard = partition_of(context)
    unit = InventoryUnit(store=store.config(), crawl=crawl, shard=shard, shards=load_settings().shards)
    yield from run_stage(context, observe_raw_files, [unit], CODE_VERSION, SCHEMA.names)
