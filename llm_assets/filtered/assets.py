import dagster as dg

from llm_assets.core.filtered import SCHEMA, STAGE_VERSION, FilterUnit, filter_documents
from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput
from llm_assets.core.units import unit_id
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

SETTINGS = load_settings().filtered
CODE_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint())


@stage_asset(CODE_VERSION)
def filtered(context: dg.AssetExecutionContext, store: ObjectStore, documents: LakeInput):
    """Documents that pass language ID (fastText lid.176: keep-list and minimum score from settings, FineWeb's
    English ≥ 0.65 by default) and Gopher's word-count rule. Adds `language`, `language_score`, `n_words`.

    Every dropped document is kept under `rejected/filtered/` with its reason code
    (language, too_few_words, too_many_words). One work unit per upstream documents part.
    """
    crawl, shard = partition_of(context)
    units = []
    for source in documents.parts:
        unit = unit_id("filtered", CODE_VERSION, source)
        units.append(FilterUnit(store=store.config(), settings=SETTINGS, source=source, unit=unit,
                                part=part_key("filtered", crawl, shard, unit),
                                rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected")))
    yield from run_stage(context, filter_documents, units, CODE_VERSION, SCHEMA.names)
