"""Deduplication across a whole crawl, in three steps that are three assets:

1. signatures (crawl × shard): per document, the hash of its normalized text, of its URL, and the LSH band
   hashes of its MinHash signature (see `minhash`). One work unit per `filtered` part; a changed shard recomputes
   only its own.
2. duplicate clusters (crawl): every shard's stored signatures (and, when asked, those of earlier crawls) become a
   graph whose edges join documents sharing a text hash, a URL (optional) or any LSH band; its connected components
   are the clusters. Each cluster keeps one document, chosen deterministically; the others are listed as removed.
3. deduplicated (crawl × shard): the `filtered` documents minus the removed ones, which go to `rejected/` with
   their reason and the document they duplicate.

Memory: the clustering holds, per document, its ids and `bands + 2` 64-bit hashes, plus the edges of the groups
that collide (about 150 bytes a document at FineWeb's 14 bands): a million documents fit well inside 2 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import polars as pl
import pyarrow as pa
from pydantic import Field

from llm_assets.core import filtered, signatures
from llm_assets.core.config import Section
from llm_assets.core.lake import Lake, ReadCount
from llm_assets.core.partition import Manifest
from llm_assets.core.minhash import MinHasher
from llm_assets.core.units import DropCounter, UnitResult, WorkUnit, timed_unit


class DedupSettings(Section):
    """FineWeb's MinHash deduplication defaults: word 5-grams, 14 bands × 8 rows (112 hashes)."""

    exact: bool = True  # same normalized text (lowercase words, punctuation and spacing ignored)
    by_url: bool = False  # also one document per URL
    near: bool = True  # MinHash LSH
    ngram: int = Field(default=5, ge=1)
    bands: int = Field(default=14, ge=1)
    rows: int = Field(default=8, ge=1)
    seed: int = 1
    keep: Literal["earliest", "longest", "first"] = "earliest"  # fetch time, text length, or doc_id order
    cross_crawl: bool = False  # also drop documents already in an earlier crawl
    crawl_order: tuple[str, ...] = ()  # earliest first; empty: crawl names sorted (Common Crawl's sort by date)

    def hasher(self) -> MinHasher:
        return MinHasher(bands=self.bands, rows=self.rows, ngram=self.ngram, seed=self.seed)

    def earlier_crawls(self, crawl: str, known: list[str]) -> list[str]:
        """The crawls `crawl` is deduplicated against, in order, when `cross_crawl` is on."""
        if not self.cross_crawl:
            return []
        order = list(self.crawl_order) or sorted(known)
        return order[: order.index(crawl)] if crawl in order else []


STAGE_VERSION = "1"
CLUSTERS_VERSION = "2"  # 2: a removal's reason names only a rule that is on (no `url` between URL-less documents)
BATCH_ROWS = signatures.BATCH_ROWS
signature_schema = signatures.signature_schema


REMOVED_SCHEMA = pa.schema([
    ("crawl", pa.string()),
    ("shard", pa.string()),
    ("doc_id", pa.string()),
    ("source_key", pa.string()),
    ("url", pa.string()),
    ("reason", pa.string()),  # exact | url | near | cross_crawl
    ("duplicate_of", pa.string()),  # the kept document of its cluster
    ("duplicate_of_crawl", pa.string()),
    ("cluster_size", pa.int64()),
])
DEDUPLICATED_SCHEMA = filtered.SCHEMA
REJECTED_SCHEMA = pa.schema(list(filtered.SCHEMA) + [("reason", pa.string()), ("duplicate_of", pa.string())])


def signature_frame(df: pl.DataFrame, settings: DedupSettings) -> pl.DataFrame:
    """Signatures of a batch of documents (`doc_id`, `source_key`, `url`, `fetch_time`, `text`)."""
    return signatures.signature_frame(df, settings.hasher())


@dataclass(frozen=True)
class SignatureUnit(WorkUnit):  # source: a filtered part
    settings: DedupSettings
    part: str


@timed_unit
def compute_signatures(u: SignatureUnit) -> UnitResult:
    lake = Lake(u.store)
    schema = signature_schema(u.settings.bands, u.settings.rows)
    hasher = u.settings.hasher()
    rows_in = 0
    fetched = ReadCount()
    with lake.part_writer(u.part, schema) as out:
        for batch in lake.iter_batches(u.source, BATCH_ROWS, columns=signatures.SIGNATURE_INPUT, fetched=fetched):
            rows_in += batch.num_rows
            out.write(signatures.signature_table(batch, hasher))
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=rows_in, rows_out=out.rows,
                      bytes_in=fetched.bytes, bytes_out=out.bytes, columns=schema.names)


# --- clustering ------------------------------------------------------------------------------------------------

CLUSTER_COLUMNS = ["doc_id", "source_key", "url", "fetch_time", "n_chars", "text_hash", "url_hash", "bands"]


@dataclass
class Clusters:
    removed: pl.DataFrame  # REMOVED_SCHEMA: every document of this crawl that is dropped, and why
    sizes: pl.DataFrame  # cluster_size, clusters: the size histogram (clusters of 2 or more)
    largest: pl.DataFrame  # the largest clusters: kept doc, size, example URLs
    documents: int  # documents of this crawl
    index_documents: int  # documents of earlier crawls it was compared with


def _groups_edges(keys: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges joining every row to the first row with the same key (rows where `valid`)."""
    rows = np.nonzero(valid)[0]
    if len(rows) < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    k = keys[rows]
    order = np.argsort(k, kind="stable")
    k, rows = k[order], rows[order]
    same = np.concatenate([[False], k[1:] == k[:-1]])
    first = np.maximum.accumulate(np.where(~same, np.arange(len(k)), 0))
    return rows[first[same]], rows[same]


def find_clusters(docs: pl.DataFrame, settings: DedupSettings, crawl: str, largest: int = 10) -> Clusters:
    """Cluster `docs` (CLUSTER_COLUMNS plus `crawl` and `shard`; rows of earlier crawls first is not required).

    Documents of `crawl` are kept or removed; documents of other crawls are the index: never removed, and a cluster
    that holds one removes every document of `crawl` in it (reason `cross_crawl`)."""
    from scipy.sparse import coo_matrix  # 0.5 s to import: here, not for every process that reads the settings
    from scipy.sparse.csgraph import connected_components

    n = docs.height
    srcs, dsts = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    if settings.exact:
        a, b = _groups_edges(docs["text_hash"].to_numpy(), (docs["n_chars"].fill_null(0) > 0).to_numpy())
        srcs.append(a)
        dsts.append(b)
    if settings.by_url:
        a, b = _groups_edges(docs["url_hash"].to_numpy(), (docs["url"].fill_null("") != "").to_numpy())
        srcs.append(a)
        dsts.append(b)
    if settings.near and n:
        bands = docs["bands"].to_numpy()
        for band in range(bands.shape[1]):
            keys = np.ascontiguousarray(bands[:, band])
            a, b = _groups_edges(keys, keys != 0)  # 0: a document without words
            srcs.append(a)
            dsts.append(b)
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    graph = coo_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)

    own = (docs["crawl"] == crawl).to_numpy()
    rank = {"earliest": [pl.col("fetch_time").fill_null("~")], "longest": [-pl.col("n_chars")], "first": []}
    frame = docs.select("crawl", "shard", "doc_id", "source_key", "url", "fetch_time", "n_chars", "text_hash",
                        "url_hash").with_columns(cluster=pl.Series(labels, dtype=pl.Int64), own=pl.Series(own),
                                                 node=pl.int_range(n, dtype=pl.Int64))
    frame = frame.with_columns(cluster_size=pl.len().over("cluster")).filter(pl.col("cluster_size") > 1)
    # An earlier crawl's document wins its cluster; within a crawl the `keep` rule decides.
    frame = frame.sort(["cluster", "own", *rank[settings.keep], "doc_id", "source_key"])
    head = frame.group_by("cluster", maintain_order=True).first().select(
        "cluster", kept_node="node", kept_crawl="crawl", kept_doc="doc_id", kept_text="text_hash",
        kept_url="url_hash")
    frame = frame.join(head, on="cluster")
    # A reason names a rule that is on and that joins the two: the empty URL (a source without URLs) and the empty
    # text hash alike, yet neither joins documents.
    same_text = (pl.col("text_hash") == pl.col("kept_text")) & (pl.col("n_chars").fill_null(0) > 0)
    same_url = (pl.col("url_hash") == pl.col("kept_url")) & (pl.col("url").fill_null("") != "")
    removed = frame.filter(pl.col("own") & (pl.col("node") != pl.col("kept_node"))).select(
        "crawl", "shard", "doc_id", "source_key", "url",
        reason=pl.when(pl.col("kept_crawl") != crawl).then(pl.lit("cross_crawl"))
        .when(same_text & settings.exact).then(pl.lit("exact"))
        .when(same_url & settings.by_url).then(pl.lit("url"))
        .otherwise(pl.lit("near")),
        duplicate_of="kept_doc", duplicate_of_crawl="kept_crawl", cluster_size="cluster_size",
    ).sort("shard", "doc_id", "source_key")
    mine = frame.filter(pl.col("own").any().over("cluster"))
    per_cluster = mine.group_by("cluster").agg(
        pl.len().alias("size"), pl.col("kept_doc").first(), pl.col("url").head(3).alias("example_urls"))
    sizes = per_cluster.group_by(pl.col("size").alias("cluster_size")).len("clusters").sort("cluster_size")
    top = per_cluster.sort(["size", "kept_doc"], descending=[True, False]).head(largest) \
        .with_columns(pl.col("example_urls").list.join(" · ")).drop("cluster")
    return Clusters(removed=filtered.conform(removed, REMOVED_SCHEMA),
                    sizes=sizes, largest=top, documents=int(own.sum()), index_documents=int(n - own.sum()))


def read_signatures(lake: Lake, crawl: str, manifests: dict[str, Manifest], settings: DedupSettings) -> pl.DataFrame:
    """The clustering columns of every committed signatures shard of a crawl (shard -> manifest)."""
    frames = []
    for shard, manifest in sorted(manifests.items()):
        if parts := manifest.parts:
            frames.append(lake.scan(parts).select(CLUSTER_COLUMNS).collect()
                          .with_columns(crawl=pl.lit(crawl), shard=pl.lit(shard)))
    if not frames:
        empty = pl.DataFrame(signature_schema(settings.bands, settings.rows).empty_table()).select(CLUSTER_COLUMNS)
        return empty.with_columns(crawl=pl.lit(crawl), shard=pl.lit(""))
    return pl.concat(frames)


# --- deduplicated documents ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DedupUnit(WorkUnit):  # source: a filtered part
    removed: str  # the crawl's removed-documents parts, joined by "\n"
    shard: str
    part: str
    rejected_part: str


@timed_unit
def remove_duplicates(u: DedupUnit) -> UnitResult:
    lake = Lake(u.store)
    removed_parts = [p for p in u.removed.split("\n") if p]
    removed = (lake.scan(removed_parts).filter(pl.col("shard") == u.shard)
               .select("doc_id", "source_key", "reason", "duplicate_of").collect()) if removed_parts else \
        pl.DataFrame(schema={"doc_id": pl.String, "source_key": pl.String, "reason": pl.String,
                             "duplicate_of": pl.String})
    drops = DropCounter()
    rows_in = 0
    fetched = ReadCount()
    with lake.part_writer(u.part, DEDUPLICATED_SCHEMA) as out, \
            lake.part_writer(u.rejected_part, REJECTED_SCHEMA) as rejected:
        for batch in lake.iter_batches(u.source, BATCH_ROWS, fetched=fetched):
            df = cast(pl.DataFrame, pl.from_arrow(batch)).join(removed, on=["doc_id", "source_key"], how="left")
            rows_in += df.height
            dup = df.filter(pl.col("reason").is_not_null())
            out.write(df.filter(pl.col("reason").is_null()).select(DEDUPLICATED_SCHEMA.names).to_arrow()
                      .cast(DEDUPLICATED_SCHEMA))
            rejected.write(dup.select(REJECTED_SCHEMA.names).to_arrow().cast(REJECTED_SCHEMA))
            for reason, n in dup.group_by("reason").len().iter_rows():
                drops.drop(reason, n)
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rejected_part=u.rejected_part, rows_in=rows_in,
                      rows_out=out.rows, dropped=dict(drops), bytes_in=fetched.bytes, bytes_out=out.bytes,
                      columns=DEDUPLICATED_SCHEMA.names)
