"""Deduplication across a whole crawl, in three steps that are three assets:

1. signatures (crawl × shard): per document, the hash of its normalized text, of its URL, and the LSH band
   hashes of its MinHash signature (see `minhash`). One work unit per `filtered` part; a changed shard recomputes
   only its own.
2. duplicate clusters (crawl): every shard's stored signatures (and, when asked, those of earlier crawls) become a
   graph whose edges join documents sharing a text hash, a URL (optional) or an LSH band whose candidates' Jaccard
   estimate is not confidently below `jaccard_threshold`; its connected components are the clusters. Each cluster
   keeps one document, chosen deterministically; the others are listed as removed. Work units split by band-hash
   range (see `clusters`).
3. deduplicated (crawl × shard): the `filtered` documents minus the removed ones, which go to `rejected/` with
   their reason and the document they duplicate.

Memory: a clustering unit holds one signatures part, or one bucket (`bucket_rows` rows), or the labels of one
range of documents (`merge_rows`), or the members of a keep unit (`keep_rows`); never the whole crawl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import polars as pl
import pyarrow as pa
from pydantic import Field

from llm_assets.core import filtered, signatures
from llm_assets.core.clusters import (  # noqa: F401 - Clusters: its callers import it here
    Clusters,
    IndexWriter,
    cluster_frames,
)
from llm_assets.core.config import Section
from llm_assets.core.lake import Lake, ReadCount
from llm_assets.core.minhash import MinHasher
from llm_assets.core.units import DropCounter, UnitResult, WorkUnit, timed_unit


class DedupSettings(Section):
    """FineWeb's MinHash deduplication defaults: word 5-grams, 14 bands × 8 rows (112 hashes)."""

    exact: bool = Field(default=True, description=(
        "Cluster documents with the same normalized text (lowercase words, punctuation and spacing ignored)."))
    by_url: bool = Field(default=False, description="Also keep one document per URL.")
    near: bool = Field(default=True, description="Cluster near duplicates by MinHash LSH over word n-grams.")
    ngram: int = Field(default=5, ge=1, description="Words per shingle of the MinHash signatures (FineWeb's 5).")
    bands: int = Field(default=14, ge=1, description="LSH bands (FineWeb's 14).")
    rows: int = Field(default=8, ge=1, description=(
        "Hashes per band (FineWeb's 8): 14 × 8 = 112 hashes catch half the pairs at Jaccard 0.72, 92 % at 0.8."))
    seed: int = Field(default=1, description="Seed of the MinHash functions.")
    keep: Literal["earliest", "longest", "first"] = Field(default="earliest", description=(
        "Which document of a cluster is kept: `earliest` (fetch time), `longest` (text) or `first` (doc_id order)."))
    cross_crawl: bool = Field(default=False, description="Also drop documents already in an earlier crawl.")
    crawl_order: tuple[str, ...] = Field(default=(), description=(
        "Crawls earliest first; empty: crawl names sorted (Common Crawl's sort by date)."))
    # Short pages sharing a long banner collide in a band without being alike: the signatures confirm a candidate.
    jaccard_threshold: float = Field(default=0.8, ge=0, le=1, description=(
        "An LSH candidate pair joins a cluster unless its Jaccard similarity is estimated below this (FineWeb's "
        "0.8) with `jaccard_confidence`; 0: every candidate."))
    # The estimate of 112 4-bit values has a standard error of 0.039 at 0.8: rejecting below the estimate itself
    # lost a sixth of the true pairs at J 0.80-0.85. At 0.99 the cut is 0.709, under which the LSH itself catches
    # few pairs (21 % at 0.6), and the shared banner (J ~0.5) is still rejected.
    jaccard_confidence: float = Field(default=0.99, ge=0.5, lt=1, description=(
        "How sure the signatures' estimate must be that a candidate pair is under `jaccard_threshold` to reject it "
        "(0.99: 112 values reject below an estimate of 0.709 at 0.8); 0.5: below the estimate itself."))
    # How the clustering is cut into work units; none changes the clusters. buckets 0: enough that one bucket
    # holds about `bucket_rows` rows (a document has one row per band and rule; ~75 bytes a row with its sketch).
    buckets: int = Field(default=0, ge=0, description=(
        "Clustering work units by band-hash range; 0: enough that one holds about `bucket_rows` rows. Never changes "
        "the clusters."))
    bucket_rows: int = Field(default=4_000_000, ge=1, description=(
        "Rows one bucket unit holds (a row: one band or rule of a document, ~75 bytes)."))
    # merge_rows: the components are found in rounds of units, each over one range of documents (whole
    # signatures parts) holding about this many label rows (~16 bytes each, ~150 while a unit rewrites them).
    merge_rows: int = Field(default=2_000_000, ge=1, description=(
        "Label rows one components unit holds (its range of documents' rows in the buckets' clusters)."))
    # keep_parts 0: enough keep units that one holds about `keep_rows` members (documents in a cluster of 2 or
    # more; ~650 bytes a member while the keep rule runs).
    keep_parts: int = Field(default=0, ge=0, description=(
        "Keep-rule work units, by a hash of the cluster; 0: enough that one holds about `keep_rows` members."))
    keep_rows: int = Field(default=1_000_000, ge=1, description=(
        "Members one keep unit holds (documents in a cluster of 2 or more, ~650 bytes each)."))

    def hasher(self) -> MinHasher:
        return MinHasher(bands=self.bands, rows=self.rows, ngram=self.ngram, seed=self.seed)

    def earlier_crawls(self, crawl: str, known: list[str]) -> list[str]:
        """The crawls `crawl` is deduplicated against, in order, when `cross_crawl` is on."""
        if not self.cross_crawl:
            return []
        order = list(self.crawl_order) or sorted(known)
        return order[: order.index(crawl)] if crawl in order else []


STAGE_VERSION = "1"
# 3: shingles of the language's words (core/segment) where it is written without spaces
# 4: every language datatrove splits with IndicNLP's rules is segmented (Western Punjabi, Maithili, ... too)
SIGNATURES_VERSION = "4"
# 2: a removal's reason names only a rule that is on (no `url` between URL-less documents)
# 3: LSH candidates are confirmed by their Jaccard estimate (`jaccard_threshold`)
# 4: rejected only when the estimate is confidently below it (`jaccard_confidence`)
CLUSTERS_VERSION = "4"
LAYOUT_SETTINGS = {"buckets", "bucket_rows", "merge_rows", "keep_parts",
                   "keep_rows"}  # how the work is cut, not what it computes
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
    index: str  # the part's band index (see `clusters`)
    docs: str  # its documents, for the clustering's keep rule


@timed_unit
def compute_signatures(u: SignatureUnit) -> UnitResult:
    lake = Lake(u.store)
    schema = signature_schema(u.settings.bands, u.settings.rows)
    hasher = u.settings.hasher()
    rows_in = 0
    fetched = ReadCount()
    with lake.part_writer(u.part, schema) as out, IndexWriter(lake, u.index, u.docs, hasher.k) as index:
        for batch in lake.iter_batches(u.source, BATCH_ROWS, columns=signatures.SIGNATURE_INPUT, fetched=fetched):
            rows_in += batch.num_rows
            table = signatures.signature_table(batch, hasher)
            out.write(table)
            index.add(table)
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=rows_in, rows_out=out.rows,
                      bytes_in=fetched.bytes, bytes_out=out.bytes + index.bytes, columns=schema.names,
                      side_parts={"index": u.index, "docs": u.docs})


# --- clustering (see `clusters`) -------------------------------------------------------------------------------

CLUSTER_COLUMNS = ["doc_id", "source_key", "url", "fetch_time", "n_chars", "text_hash", "url_hash", "bands",
                   "signature"]


def find_clusters(docs: pl.DataFrame, settings: DedupSettings, crawl: str, largest: int = 10) -> Clusters:
    """Cluster `docs` (CLUSTER_COLUMNS plus `crawl` and `shard`) in this process: the stage's units, one of each.

    Documents of `crawl` are kept or removed; documents of other crawls are the index: never removed, and a cluster
    that holds one removes every document of `crawl` in it (reason `cross_crawl`)."""
    return cluster_frames([docs], settings, crawl, REMOVED_SCHEMA, largest=largest)


# --- deduplicated documents ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DedupUnit(WorkUnit):  # source: a filtered part
    removed: str  # the crawl's removed-documents parts, joined by "\n"
    shard: str
    part: str
    rejected_part: str


def split_removed(batch: pa.RecordBatch, removed: pl.DataFrame) -> tuple[pa.Table, pl.DataFrame]:
    """A batch of a `filtered` part -> (its documents not in `removed` as DEDUPLICATED_SCHEMA, the others with
    their reason and kept document, in REJECTED_SCHEMA's columns)."""
    df = cast(pl.DataFrame, pl.from_arrow(batch)).join(removed, on=["doc_id", "source_key"], how="left")
    kept = df.filter(pl.col("reason").is_null()).select(DEDUPLICATED_SCHEMA.names).to_arrow()
    return kept.cast(DEDUPLICATED_SCHEMA), df.filter(pl.col("reason").is_not_null()).select(REJECTED_SCHEMA.names)


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
            rows_in += batch.num_rows
            kept, dup = split_removed(batch, removed)
            out.write(kept)
            rejected.write(dup.to_arrow().cast(REJECTED_SCHEMA))
            for reason, n in dup.group_by("reason").len().iter_rows():
                drops.drop(reason, n)
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rejected_part=u.rejected_part, rows_in=rows_in,
                      rows_out=out.rows, dropped=dict(drops), bytes_in=fetched.bytes, bytes_out=out.bytes,
                      columns=DEDUPLICATED_SCHEMA.names)
