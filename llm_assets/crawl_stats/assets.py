import warnings

import dagster as dg

from llm_assets.core.crawl_stats import bar_chart, crawl_stats as compute_crawl_stats, funnel_chart
from llm_assets.core.partition import FrameOutput, committed, units_version
from llm_assets.filtered.assets import filtered
from llm_assets.partitions import crawl_partitions
from llm_assets.registry import StageSpec
from llm_assets.settings import load_settings
from resources import ObjectStore

SETTINGS = load_settings()
CODE_VERSION = "1"
warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*MultiToSingleDimensionPartitionMapping.*")


def _table(df) -> dg.TableMetadataValue:
    kinds = {"String": "string", "Int64": "int", "UInt32": "int", "Int32": "int", "Float64": "float"}
    return dg.MetadataValue.table(
        records=[dg.TableRecord(row) for row in df.iter_rows(named=True)],
        schema=dg.TableSchema(columns=[dg.TableColumn(n, kinds.get(str(t), "string")) for n, t in df.schema.items()]),
    )


@dg.asset(
    partitions_def=crawl_partitions,
    deps=[dg.AssetDep(filtered, partition_mapping=dg.MultiToSingleDimensionPartitionMapping(
        partition_dimension_name="crawl"))],
    io_manager_key="lake_io_manager",
    group_name="reports",
    kinds={"duckdb", "parquet"},
    code_version=CODE_VERSION,
)
def crawl_stats(context: dg.AssetExecutionContext, store: ObjectStore):
    """Per crawl, over every committed shard of `filtered`: the filter funnel (documents in, dropped by each block
    and reason in chain order, out), the language mix of kept and dropped documents, and the length distribution
    of kept documents in words. Tables and bar charts in the metadata; the numbers are stored as one long table.
    """
    crawl = context.partition_key
    lake = store.lake()
    by_shard = committed(lake, "filtered", crawl, SETTINGS.shard_keys())
    manifests = list(by_shard.values())
    missing = [s for s in SETTINGS.shard_keys() if s not in by_shard]
    stats = compute_crawl_stats(lake, manifests, list(dict.fromkeys(b.name for b in SETTINGS.filtered.blocks())))
    rows_in = int(stats.funnel["documents"][0])
    rows_out = int(stats.funnel["documents"][-1])
    metadata = {
        "dagster/row_count": rows_out,
        "documents_in": rows_in,
        "documents_kept": rows_out,
        "keep_rate": round(rows_out / rows_in, 4) if rows_in else 0.0,
        "funnel_chart": dg.MetadataValue.md(funnel_chart(stats.funnel)),
        "funnel": _table(stats.funnel),
        "languages": _table(stats.languages),
        "language_chart": dg.MetadataValue.md(bar_chart(stats.languages["language"].to_list(),
                                                        (stats.languages["kept"] + stats.languages["dropped"]).to_list())),
        "length_chart": dg.MetadataValue.md(bar_chart(stats.lengths["bucket"].to_list(),
                                                      stats.lengths["documents"].to_list())),
        "lengths": _table(stats.lengths),
        "shards": len(manifests),
        "shards_without_data": dg.MetadataValue.json(missing),
    }
    version = stats_version(manifests)
    return dg.Output(FrameOutput(stats.frame(), CODE_VERSION, version), metadata=metadata,
                     data_version=dg.DataVersion(version))


def stats_version(manifests: list[dict]) -> str:
    """The stats' data version: every filtered unit they summarise."""
    return units_version(CODE_VERSION, manifests)


SPEC = StageSpec("crawl_stats", "crawl", ("filtered",),
                 expected_version=lambda planner, crawl: stats_version(list(planner.committed("filtered", crawl).values())))
