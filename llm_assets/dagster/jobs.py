"""The asset jobs, made from the stage list: each job runs the assets whose spec names it (`StageSpec.job`)."""

from collections.abc import Collection, Sequence

import dagster as dg

from llm_assets.registry import StageSpec
from llm_assets.stages import SPECS

# What each job is for, as the launchpad shows it; its assets are the stages that name it.
DESCRIPTIONS = {
    "curation_job": "The takedown requests and the eval index in force, as the filtered stage and the planner read "
                    "them.",
    "lake_job": "Raw files → documents (and image-text pairs) → filtered → signatures for one crawl × shard.",
    "crawl_job": "The crawl-level assets of one crawl, once its shards went through lake_job: duplicate clusters "
                 "over every shard and the crawl stats.",
    "curated_job": "Deduplicated → tokenized for one crawl × shard, once the crawl's duplicate clusters are built.",
    "release_job": "Publish the tokenizer, then write the configured training release from every committed tokenized "
                   "partition of its crawls.",
    "enrich_job": "Named entities, keywords and summaries of one crawl × shard's deduplicated documents.",
    "cost_job": "What building one crawl cost so far, from the cost ledger: run after every job that charges it.",
}


def build_jobs(specs: Sequence[StageSpec]) -> list:
    """One job per name the specs give, in the order they first name it, selecting exactly their assets. In-process:
    each step already fans its work units out to a process pool, and a process per step would cost seconds of
    start-up for nothing."""
    members: dict[str, list[str]] = {}
    for spec in specs:
        if spec.job:
            members.setdefault(spec.job, []).append(spec.name)
    return [dg.define_asset_job(job, selection=dg.AssetSelection.assets(*names), executor_def=dg.in_process_executor,
                                description=DESCRIPTIONS.get(job, f"Builds {', '.join(names)}."))
            for job, names in members.items()]


def jobs_of(names: Collection[str]) -> list:
    """The jobs of the named stages only, each selecting those of them that name it: for a code location of some of
    the stages (tests, benchmarks), where a job selecting an absent asset would not load."""
    return build_jobs([s for s in SPECS if s.name in names])
