"""The llm-assets code location: `build_defs(settings)` composes it; `defs` is the deployment's (the settings file
LLM_ASSETS_SETTINGS names, else the embedded default), loaded when Dagster asks for it."""

import dagster as dg

from llm_assets.cost import assets as cost
from llm_assets.crawl_stats import assets as crawl_stats
from llm_assets.curation import assets as curation
from llm_assets.dedup import assets as dedup
from llm_assets.documents import assets as documents
from llm_assets.enriched import assets as enriched
from llm_assets.filtered import assets as filtered
from llm_assets.freshness import build_stale_sensor
from llm_assets.image_text_pairs import assets as image_text_pairs
from llm_assets.jobs import JOBS
from llm_assets.preview import build_preview_job
from llm_assets.quality_classifier import assets as quality_classifier
from llm_assets.raw import assets as raw
from llm_assets.raw.sensor import build_raw_drop_sensor
from llm_assets.releases import assets as releases
from llm_assets.settings import Settings, load_settings
from llm_assets.tokenized import assets as tokenized
from llm_assets.vacuum import vacuum_job, vacuum_schedule
from resources import LakeIOManager, object_store_from_env

STAGES = [curation, raw, documents, image_text_pairs, filtered, dedup, crawl_stats, quality_classifier, tokenized, enriched, releases, cost]


def build_assets(settings: Settings) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    return [asset for stage in STAGES for asset in stage.build(settings)]


def build_defs(settings: Settings) -> dg.Definitions:
    store = object_store_from_env(settings.store)
    return dg.Definitions(
        assets=build_assets(settings),
        jobs=[*JOBS, vacuum_job, build_preview_job(settings)],
        schedules=[vacuum_schedule],
        sensors=[build_raw_drop_sensor(settings), build_stale_sensor(settings)],
        resources={"store": store, "lake_io_manager": LakeIOManager(store=store)},
        # Jobs that name no executor (vacuum_job) run in the run's process too, like every asset job: Dagster's
        # default, a process per step, would start another interpreter and import the code location again
        # (seconds) before a step that takes one.
        executor=dg.in_process_executor,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs(load_settings())
