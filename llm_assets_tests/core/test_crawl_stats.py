"""The crawl statistics: exact counts per part, summed, equal the statistics of the whole crawl read at once."""

import io
import random

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llm_assets.core.crawl_stats import (
    LENGTH_BUCKETS,
    NO_LABEL,
    NOT_IDENTIFIED,
    PartialStats,
    count,
    crawl_stats,
    finish,
    summarize,
)
from llm_assets.core.partition import Manifest
from llm_assets.core.units import PoolRunner, UnitResult

BLOCKS = ["url", "language", "gopher_repetition", "gopher_quality", "c4"]
KEPT = pa.schema([("language", pa.string()), ("n_words", pa.int32())])
REJECTED = pa.schema([("language", pa.string()), ("filter", pa.string()), ("reason", pa.string())])


@pytest.mark.core
def test_a_crawl_with_nothing_dropped_and_nothing_kept_has_an_empty_funnel():
    stats = crawl_stats(None, [], ["language", "gopher_quality"])  # no parts: the lake is not read
    assert stats.funnel["step"].to_list() == ["in", "out"] and stats.funnel["documents"].to_list() == [0, 0]
    assert stats.languages.is_empty() and sum(stats.lengths["documents"]) == 0


@pytest.mark.core
def test_a_document_dropped_before_language_id_is_named_not_a_question_mark():
    """The URL filter (or a takedown) runs before the language block: what it drops has no language. The chart and
    table name it for what it is."""
    kept = pa.table({"language": ["en", "en"], "n_words": pa.array([120, 80], pa.int32())})
    rejected = pa.table({"language": [None, None, "de"], "filter": ["url", "takedown", "language"],
                         "reason": ["url_blocklist", "takedown", "language"]})
    stats = summarize(kept, rejected, 5, ["url", "language"])
    languages = {r["language"]: (r["kept"], r["dropped"]) for r in stats.languages.iter_rows(named=True)}
    assert languages == {"en": (2, 0), NOT_IDENTIFIED: (0, 2), "de": (0, 1)}


def planted_partitions(n: int, seed: int = 0) -> list[tuple[pa.Table, pa.Table]]:
    """n partitions of kept (language, n_words) and rejected (language, filter, reason) documents: languages with
    no label and none, word counts on every bucket edge and beyond, empty partitions."""
    rng = random.Random(seed)
    languages = ["en", "de", "fr", "ja", "", None]
    edges = [b + d for b in LENGTH_BUCKETS for d in (-1, 0, 1) if b + d >= 0] + [123_456, None]
    reasons = {"url": ["url_blocklist"], "language": ["language"], "gopher_repetition": ["dup_line_frac",
               "top_2_gram"], "gopher_quality": ["min_doc_words", "stop_words"], "c4": ["curly_bracket"],
               "takedown": ["takedown"]}
    out = []
    for p in range(n):
        k, r = (0, 0) if p == 1 else (rng.randrange(0, 300), rng.randrange(0, 200))
        kept = pa.table({"language": [rng.choice(languages) for _ in range(k)],
                         "n_words": [rng.choice(edges) for _ in range(k)]}, schema=KEPT)
        blocks = [rng.choice(list(reasons)) for _ in range(r)]
        rejected = pa.table({"language": [None if b in ("url", "takedown") else rng.choice(languages) for b in blocks],
                             "filter": blocks, "reason": [rng.choice(reasons[b]) for b in blocks]}, schema=REJECTED)
        out.append((kept, rejected))
    return out


def whole(partitions) -> tuple[pa.Table, pa.Table]:
    return (pa.concat_tables([k for k, _ in partitions]), pa.concat_tables([r for _, r in partitions]))


def expected_tables(kept: pa.Table, rejected: pa.Table, rows_in: int):
    """The statistics computed directly over the whole crawl with Polars, independently of the module."""
    kept_df, rejected_df = pl.from_arrow(kept), pl.from_arrow(rejected)

    def label(df):
        return df.with_columns(language=pl.when(pl.col("language").is_null()).then(pl.lit(NOT_IDENTIFIED))
                               .when(pl.col("language") == "").then(pl.lit(NO_LABEL)).otherwise("language"))

    k = dict(label(kept_df).group_by("language").len().iter_rows())
    d = dict(label(rejected_df).group_by("language").len().iter_rows())
    lengths = [kept_df.filter((pl.col("n_words") >= lo) & (pl.col("n_words") < (hi or 2**31))).height
               for lo, hi in zip(LENGTH_BUCKETS, list(LENGTH_BUCKETS[1:]) + [None], strict=True)]
    drops = dict(((b, r), n) for b, r, n in rejected_df.group_by("filter", "reason").len().iter_rows())
    return k, d, lengths, drops, rows_in, kept.num_rows


@pytest.mark.core
def test_the_counts_of_several_partitions_summed_are_the_statistics_of_the_whole_crawl():
    """Each partition is counted alone and the counts added (memory: one part); the funnel, the language mix with
    its shares and the length histogram equal those of every document read at once."""
    partitions = planted_partitions(7)
    rows_in = [k.num_rows + r.num_rows + 3 for k, r in partitions]  # 3 quarantined records a partition
    summed = sum((count(k, r, n) for (k, r), n in zip(partitions, rows_in, strict=True)), PartialStats())
    kept, rejected = whole(partitions)
    assert summed == count(kept, rejected, sum(rows_in))
    merged, at_once = finish(summed, BLOCKS), summarize(kept, rejected, sum(rows_in), BLOCKS)
    for name in ("funnel", "languages", "lengths"):
        assert getattr(merged, name).equals(getattr(at_once, name)), name
    assert merged.frame().equals(at_once.frame())
    # against the crawl counted directly, not by the module
    k, d, lengths, drops, total_in, total_kept = expected_tables(kept, rejected, sum(rows_in))
    rows = merged.languages.rows_by_key("language", named=True, unique=True)
    assert {lang: r["kept"] for lang, r in rows.items() if r["kept"]} == k
    assert {lang: r["dropped"] for lang, r in rows.items() if r["dropped"]} == d
    assert sum(merged.languages["share"]) == pytest.approx(1.0)
    assert merged.lengths["documents"].to_list() == lengths
    funnel = merged.funnel
    assert {(b, r): n for s, b, r, n in funnel.select("step", "block", "reason", "documents").iter_rows()
            if s == "dropped"} == drops
    assert funnel["documents"][0] == total_in and funnel["documents"][-1] == total_kept
    assert funnel["remaining"].to_list()[:-1] == [total_in - sum(funnel["documents"][1:i + 1])
                                                  for i in range(funnel.height - 1)]
    order = [BLOCKS.index(b) if b in BLOCKS else len(BLOCKS) for b in funnel["block"][1:-1]]
    assert order == sorted(order)  # chain order, blocks outside the chain (takedown) last


@pytest.mark.core
def test_the_statistics_do_not_depend_on_how_the_crawl_is_split_into_parts():
    partitions = planted_partitions(5, seed=3)
    once = finish(sum((count(k, r) for k, r in partitions), PartialStats()), BLOCKS)
    kept, rejected = whole(partitions)
    halves = [(kept.slice(0, 100), rejected.slice(0, 50)), (kept.slice(100), rejected.slice(50))]
    again = finish(sum((count(k, r) for k, r in reversed(halves)), PartialStats()), BLOCKS)
    assert once.frame().equals(again.frame())


def _put(lake, key: str, table: pa.Table) -> str:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    lake.put_bytes(key, buf.getvalue())
    return key


def planted_manifests(lake, crawl: str) -> tuple[list[Manifest], tuple[pa.Table, pa.Table]]:
    """Planted partitions written to the lake as committed filtered manifests would list them. -> the manifests and
    the whole crawl's kept and rejected tables."""
    partitions = planted_partitions(4, seed=5)
    manifests = []
    for s, (k, r) in enumerate(partitions):
        prefix = f"lake/filtered/crawl={crawl}/shard={s:04d}/"
        unit = UnitResult(unit=f"u{s}", source=f"raw/{crawl}/{s}", part=_put(lake, prefix + "part-0.parquet", k),
                          rejected_part=_put(lake, f"rejected/filtered/crawl={crawl}/shard={s:04d}/part-0.parquet", r),
                          rows_in=k.num_rows + r.num_rows, rows_out=k.num_rows)
        manifests.append(Manifest(asset="filtered", crawl=crawl, shard=f"{s:04d}", units=(unit,)))
    return manifests, whole(partitions)


def test_crawl_stats_counts_each_part_in_a_work_unit_on_the_runner(lake, crawl):
    """Over the lake: every filtered part counted by its own work unit in a process pool, one part per unit, the
    sum equal to the whole crawl's statistics."""
    manifests, (kept, rejected) = planted_manifests(lake, crawl)
    stats = crawl_stats(lake.config, manifests, BLOCKS, PoolRunner(2))
    assert stats.frame().equals(summarize(kept, rejected, kept.num_rows + rejected.num_rows, BLOCKS).frame())


@pytest.mark.core
def test_every_figure_is_broken_down_by_language_on_a_two_language_input():
    """German and English documents, each dropped by other blocks: each language gets its own funnel (in, what each
    block dropped of it in chain order, out), its kept words and its share of documents and words; the per-language
    figures add up to the crawl's."""
    kept = pa.table({"language": ["en", "en", "en", "de", "de"],
                     "n_words": pa.array([100, 300, 50, 80, 20], pa.int32())})
    rejected = pa.table({"language": [None, "en", "de", "de", "de", "en"],
                         "filter": ["url", "gopher_quality", "gopher_repetition", "gopher_quality", "gopher_quality",
                                    "c4"],
                         "reason": ["url_blocklist", "stop_words", "dup_line_frac", "min_doc_words", "min_doc_words",
                                    "curly_bracket"]})
    stats = summarize(kept, rejected, 11, BLOCKS)
    funnel = {lang: [(r["step"], r["block"], r["reason"], r["documents"], r["remaining"])
                     for r in stats.language_funnel.filter(pl.col("language") == lang).iter_rows(named=True)]
              for lang in ("en", "de")}
    assert funnel["de"] == [("in", "", "", 5, 5), ("dropped", "gopher_repetition", "dup_line_frac", 1, 4),
                            ("dropped", "gopher_quality", "min_doc_words", 2, 2), ("out", "", "", 2, 2)]
    assert funnel["en"] == [("in", "", "", 5, 5), ("dropped", "gopher_quality", "stop_words", 1, 4),
                            ("dropped", "c4", "curly_bracket", 1, 3), ("out", "", "", 3, 3)]
    languages = {r["language"]: r for r in stats.languages.iter_rows(named=True)}
    assert (languages["en"]["kept_words"], languages["de"]["kept_words"]) == (450, 100)
    assert languages["en"]["kept_words_share"] == pytest.approx(450 / 550)
    per_language = stats.language_funnel.filter(pl.col("step") == "dropped").group_by("block", "reason").agg(
        pl.col("documents").sum())
    crawl = stats.funnel.filter(pl.col("step") == "dropped").select("block", "reason", "documents")
    assert per_language.sort("block", "reason").rows() == crawl.sort("block", "reason").rows()
    frame = stats.frame()  # stored with the rest, so the lake holds it
    assert frame.filter((pl.col("section") == "language_funnel") & (pl.col("key") == "de/gopher_quality/min_doc_words")
                        )["value"].to_list() == [2]
    from llm_assets import charts
    from llm_assets_tests.conftest import png_size

    assert png_size(charts.grouped_hbars("mix", ["en", "de"], {"documents": [0.6, 0.4], "words": [0.8, 0.2]},
                                         "share"))[0] == 720
