import dagster as dg

from llm_assets.tokenized.spec import TOKENIZER_SPEC

# One run takes a (crawl, shard) partition through every stage. In-process: each step already fans its work
# units out to a process pool, and a process per step would cost seconds of start-up for nothing.
lake_job = dg.define_asset_job(
    "lake_job",
    selection=dg.AssetSelection.groups("lake"),
    executor_def=dg.in_process_executor,
    description="Raw files → documents (and image-text pairs) → filtered → signatures for one crawl × shard.",
)

crawl_job = dg.define_asset_job(
    "crawl_job",
    selection=dg.AssetSelection.groups("dedup", "reports"),
    executor_def=dg.in_process_executor,
    description="The crawl-level assets of one crawl, once its shards went through lake_job: duplicate clusters "
                "over every shard, the crawl stats, and what building the crawl cost so far (from the cost ledger).",
)
curated_job = dg.define_asset_job(
    "curated_job",
    selection=dg.AssetSelection.groups("curated"),
    executor_def=dg.in_process_executor,
    description="Deduplicated → tokenized for one crawl × shard, once the crawl's duplicate clusters are built.",
)

release_job = dg.define_asset_job(
    "release_job",
    selection=dg.AssetSelection.groups("releases") | dg.AssetSelection.assets(TOKENIZER_SPEC.name),
    executor_def=dg.in_process_executor,
    description="Publish the tokenizer, then write the configured training release from every committed tokenized "
                "partition of its crawls.",
)

curation_job = dg.define_asset_job(
    "curation_job",
    selection=dg.AssetSelection.groups("curation"),
    executor_def=dg.in_process_executor,
    description="The takedown requests and the eval index in force, as the filtered stage and the planner read them.",
)

enrich_job = dg.define_asset_job(
    "enrich_job",
    selection=dg.AssetSelection.groups("enrichment"),
    executor_def=dg.in_process_executor,
    description="Named entities, keywords and summaries of one crawl × shard's deduplicated documents.",
)

JOBS = [curation_job, lake_job, crawl_job, curated_job, release_job, enrich_job]
