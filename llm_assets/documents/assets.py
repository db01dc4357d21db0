import dagster as dg

from llm_assets.core.documents import SCHEMA, STAGE_VERSION, ExtractUnit, extract_documents
from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput
from llm_assets.core.units import unit_id
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

SETTINGS = load_settings().documents
CODE_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint())


@stage_asset(CODE_VERSION)
def documents(context: dg.AssetExecutionContext, store: ObjectStore, raw_files: LakeInput):
    """Documents extracted from the shard's WARC/ARC files: main text (trafilatura, FineWeb settings), title,
    date, URL and provenance (source key, record offset, WARC-Record-ID, fetch time, content type, charset).

    Only 2xx HTML responses become documents; every other record is counted by reason
    (not_response, revisit, non_2xx, non_html, oversized, no_text, truncated_file). One work unit per raw file.
    """
    crawl, shard = partition_of(context)
    inventory = raw_files.scan().collect()
    units = []
    for key, size, etag in inventory.select("key", "size", "etag").iter_rows():
        unit = unit_id("documents", CODE_VERSION, key, etag)
        units.append(ExtractUnit(store=store.config(), settings=SETTINGS, crawl=crawl, source=key, size=size,
                                 unit=unit, part=part_key("documents", crawl, shard, unit)))
    yield from run_stage(context, extract_documents, units, CODE_VERSION, SCHEMA.names)
