"""The crawl stats: per crawl, the filter funnel, the language mix and the lengths over every shard."""

import time

import polars as pl

from llm_assets import charts
from llm_assets.core.crawl_stats import CrawlStats
from llm_assets.core.crawl_stats import crawl_stats as compute_crawl_stats
from llm_assets.core.partition import FrameOutput, Manifest, total_work, units_version
from llm_assets.core.stage_names import CRAWL_STATS, FILTERED
from llm_assets.registry import StageSpec
from llm_assets.report import Markdown, Report
from llm_assets.stage import Built, CrawlStage, Partition

CODE_VERSION = "3"  # 3: a funnel and kept words per language; 2: a document without a language is named


def stats_version(manifests: list[Manifest]) -> str:
    """The stats' data version: every filtered unit they summarise."""
    return units_version(CODE_VERSION, manifests)


SPEC = StageSpec(CRAWL_STATS, "crawl", (FILTERED,), version=lambda s: CODE_VERSION, group="reports",
                 job="crawl_job",
                 expected_version=lambda planner, crawl: stats_version(
                     list(planner.committed(FILTERED, crawl).values())))
FUNNEL_LANGUAGES = 8  # a funnel chart for each of the languages with the most documents (all of them in the table)


class CrawlStatsStage(CrawlStage):
    """Per crawl, over every shard of `filtered` (one with raw files that was never committed fails it: no
    stats of part of a crawl): the filter funnel (documents in, dropped by each block and reason in chain order,
    out), the language mix of kept and dropped documents (documents and words per language), each language's own
    funnel (what every block dropped of it, with that language's thresholds), and the length distribution of kept
    documents in words. Each filtered part is counted by a work unit and the exact counts are summed, so memory
    does not grow with the crawl. Tables and bar charts in the metadata; the numbers are stored as one long table.
    """

    spec = SPEC
    kinds = frozenset({"duckdb", "parquet"})

    def build(self, p: Partition) -> Built:
        from llm_assets.platform.runners import (
            runner_for,  # when it runs, as a shard stage's: a cluster client is heavy
        )

        filtered = p.inputs[FILTERED]
        p.require_every_shard(SPEC, filtered)
        manifests = filtered.manifests
        # one work unit per filtered part, on the configured runner; their exact counts are summed
        start, runner = time.perf_counter(), runner_for(p.settings.runner)
        stats = compute_crawl_stats(filtered.lake.config, manifests, chain(p), runner)
        work = total_work(stats.units, f"{len(stats.units)} filtered parts", time.perf_counter() - start)
        report = {**funnel_report(p.crawl, stats), **language_report(p, stats),
                  "length_chart": Markdown(charts.hbars(
                      f"{p.crawl}: length of the kept documents", stats.lengths["bucket"].to_list(),
                      stats.lengths["documents"].to_list(), "documents (by length in words)")),
                  "lengths": stats.lengths,
                  "shards": len(manifests),
                  "shards_without_data": sorted(set(p.settings.shard_keys()) - {m.shard for m in manifests})}
        return Built(FrameOutput(stats.frame(), SPEC.version(p.settings), stats_version(manifests), work=work,
                                 runner=str(runner)), report)


def chain(p: Partition) -> list[str]:
    return p.settings.filtered.funnel()


def funnel_report(crawl: str, stats: CrawlStats) -> Report:
    """Documents in, dropped by block and reason (chain order), kept: chart and table."""
    rows_in, rows_out = int(stats.funnel["documents"][0]), int(stats.funnel["documents"][-1])
    return {
        "dagster/row_count": rows_out,
        "documents_in": rows_in,
        "documents_kept": rows_out,
        "keep_rate": round(rows_out / rows_in, 4) if rows_in else 0.0,
        "funnel_chart": Markdown(charts.funnel(
            f"{crawl}: documents in, dropped by block and reason (chain order), kept", rows_in,
            [(f"{b}/{r}", n) for s, b, r, n in stats.funnel.select("step", "block", "reason", "documents")
             .iter_rows() if s not in ("in", "out")], rows_out)),
        "funnel": stats.funnel,
    }


def language_report(p: Partition, stats: CrawlStats) -> Report:
    """The languages of every filtered document, the mix of the kept ones, and each language's funnel."""
    languages, crawl = stats.languages, p.crawl
    kept = languages.filter(pl.col("kept") > 0).sort("kept", "language", descending=[True, False])
    mix = kept.head(20).with_columns(documents_share=pl.col("kept") / max(1, int(kept["kept"].sum())))
    return {
        "languages": languages,
        "language_chart": Markdown(charts.hbars(
            f"{crawl}: language of every filtered document, kept or dropped", languages["language"].head(20).to_list(),
            (languages["kept"] + languages["dropped"]).head(20).to_list(), "documents")),
        "language_mix_chart": Markdown(charts.grouped_hbars(
            f"{crawl}: language mix of the kept documents (share of documents and of words)",
            mix["language"].to_list(), {"documents": mix["documents_share"].to_list(),
                                        "words": mix["kept_words_share"].to_list()}, "share")),
        "language_funnel": stats.language_funnel,
        # every language's funnel at a glance (one bar each, as `filtered` shows a partition's), then each in full
        "language_funnel_chart": Markdown("\n\n".join([language_bars(p, stats), *(
            charts.funnel(f"{crawl}, {lang}: documents in, dropped by block and reason, kept", f["documents"][0],
                          [(f"{b}/{r}", n) for s, b, r, n in f.select("step", "block", "reason", "documents")
                           .iter_rows() if s == "dropped"], f["documents"][-1])
            for lang in languages["language"].head(FUNNEL_LANGUAGES).to_list()
            if (f := stats.language_funnel.filter(pl.col("language") == lang)).height)])),
    }


def language_bars(p: Partition, stats: CrawlStats) -> str:
    """A bar per language (the most documents first): kept, then what each block dropped, in chain order."""
    blocks_in_order = chain(p)
    shown = stats.languages.head(FUNNEL_LANGUAGES)
    drops = (stats.language_funnel.filter(pl.col("step") == "dropped")
             .group_by("language", "block").agg(pl.col("documents").sum()))
    by = {(lang, b): n for lang, b, n in drops.iter_rows()}
    blocks = sorted(set(drops["block"]), key=lambda b: (blocks_in_order.index(b) if b in blocks_in_order
                                                        else len(blocks_in_order), b))
    langs = shown["language"].to_list()
    return charts.stacked(f"{p.crawl}: documents per language, kept and dropped by each block", langs,
                          {"kept": shown["kept"].to_list(),
                           **{b: [by.get((lang, b), 0) for lang in langs] for b in blocks}}, "documents")


STAGES = [CrawlStatsStage()]
