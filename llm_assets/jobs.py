import dagster as dg

# One run takes a (crawl, shard) partition through every stage. In-process: each step already fans its work
# units out to a process pool, and a process per step would cost seconds of start-up for nothing.
lake_job = dg.define_asset_job(
    "lake_job",
    selection=dg.AssetSelection.groups("lake"),
    executor_def=dg.in_process_executor,
    description="Raw files → documents → filtered → tokenized for one crawl × shard partition.",
)
