"""Duplicate clusters as work units, each bounded in memory, passing data only through the lake.

A document is a *node*: its signatures part's ordinal in the crawl's plan (own shards sorted, then the earlier
crawls in order) times 2**32 plus its row, so node order is the order in which `find_clusters` used to see rows.

1. buckets (one unit per signatures part): every document becomes rows (kind, key, node): one per LSH band
   (kind = the band), its text hash (kind EXACT) and its URL hash (kind URL), each for a rule that is on; a band
   row also carries the document's b-bit signature (the low 4 bits of each MinHash value, Li & König 2010), enough
   to estimate the pair's Jaccard similarity. Rows go to one of B bucket parts by their key's range.
2. edges (one unit per bucket): rows sorted by (kind, key, node); every row of a group joins the group's smallest
   node, a band row only when the signatures agree on at least `jaccard_threshold` of their values (else the
   first member of the group it does agree with, or none). The unit writes the connected components of its edges
   as labels: every node of a component but the smallest, with the smallest (its root).
3. components: label parts merged `merge_fan_in` at a time, level by level, into one: the same computation, as a
   union of stars is a graph. A unit folds its parts in one at a time, so it holds the duplicated documents about
   twice, never the whole crawl.
4. members (one unit per signatures part): the part's documents that have a label (or are a root), with their
   cluster (root) and what the keep rule needs, split into K parts by a hash of the cluster.
5. keep (one unit per K): the keep rule over its piece of every members part, whole clusters, as a hash of the
   cluster put each in one piece: per cluster, documents of earlier crawls first, then `keep`. It writes its
   removed documents and a summary (the size histogram, its largest clusters), merged in the driver.

`find_clusters` runs the same functions in one process, over frames, with one unit per step.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl
import pyarrow as pa

from llm_assets.core import filtered
from llm_assets.core.lake import Lake, ReadCount
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit

if TYPE_CHECKING:
    from llm_assets.core.dedup import DedupSettings

NODE_BITS = 32
EXACT, URL = -1, -2  # bucket row kinds besides the bands 0 .. bands-1
# b-bit MinHash: the low 4 bits of each value, two to a byte. Two unequal values agree by chance 1 in 16, which
# the estimate corrects for; its standard error at Jaccard 0.8 is 0.039 against 0.038 with whole 32-bit values.
SKETCH_BITS = 4
BUCKET_INPUT = ["url", "n_chars", "text_hash", "url_hash", "bands", "signature"]  # of a signatures part
MEMBER_COLUMNS = ["doc_id", "source_key", "url", "fetch_time", "n_chars", "text_hash", "url_hash"]
BUCKET_BATCH_ROWS = 16_384  # signatures rows split at once: ~35 MB of bucket rows
REMOVED_ROW_GROUP = 65_536  # removed rows are sorted by shard: a reader of one shard skips the other row groups
LABEL_SCHEMA = pa.schema([("node", pa.int64()), ("root", pa.int64())])
MEMBER_SCHEMA = pa.schema([("crawl", pa.string()), ("shard", pa.string()), ("doc_id", pa.string()),
                           ("source_key", pa.string()), ("url", pa.string()), ("fetch_time", pa.string()),
                           ("n_chars", pa.int64()), ("text_hash", pa.uint64()), ("url_hash", pa.uint64()),
                           ("node", pa.int64()), ("cluster", pa.int64())])
SIZES_SCHEMA = pa.schema([("cluster_size", pa.int64()), ("clusters", pa.int64())])
LARGEST_SCHEMA = pa.schema([("size", pa.int64()), ("kept_doc", pa.string()), ("example_urls", pa.string()),
                            ("cluster", pa.int64())])


def sketch_bytes(values: int) -> int:
    return -(-values * SKETCH_BITS // 8)


def bucket_schema(settings: DedupSettings) -> pa.Schema:
    # fixed-size binary, not a list of bytes: Parquet stores it without a repetition level per byte
    return pa.schema([("kind", pa.int16()), ("key", pa.uint64()), ("node", pa.int64()),
                      ("sketch", pa.binary(sketch_bytes(settings.bands * settings.rows)))])


def sketch_of(signatures: np.ndarray) -> np.ndarray:
    """(documents, values) uint32 MinHash values -> (documents, bytes) uint8: their low bits, packed; an odd last
    value is paired with 0."""
    low = (signatures & 0xF).astype(np.uint8)
    if low.shape[1] % 2:
        low = np.hstack([low, np.zeros((low.shape[0], 1), np.uint8)])
    return np.ascontiguousarray(low[:, 0::2] | (low[:, 1::2] << 4))


def node_base(ordinal: int) -> int:
    return ordinal << NODE_BITS


# --- 1. buckets ------------------------------------------------------------------------------------------------

def bucket_rows(sig: pl.DataFrame, first_node: int, settings: DedupSettings) -> pl.DataFrame:
    """The bucket rows of consecutive signatures rows (at least BUCKET_INPUT), whose first is node `first_node`."""
    n = sig.height
    node = np.arange(first_node, first_node + n, dtype=np.int64)
    empty = pl.DataFrame(schema=pl.Schema(pl.DataFrame(bucket_schema(settings).empty_table()).schema))
    frames = [empty]

    def rows(kind: int, keys: np.ndarray, where: np.ndarray, sketch: pl.Series | None = None) -> pl.DataFrame:
        frame = pl.DataFrame({"kind": np.full(int(where.sum()), kind, np.int16), "key": keys[where],
                              "node": node[where]})
        return frame.with_columns(sketch=sketch.filter(pl.Series(where)) if sketch is not None else
                                  pl.lit(None, empty.schema["sketch"]))

    if settings.exact:
        frames.append(rows(EXACT, sig["text_hash"].to_numpy(), (sig["n_chars"].fill_null(0) > 0).to_numpy()))
    if settings.by_url:  # the empty URL (a source without URLs) joins nothing
        frames.append(rows(URL, sig["url_hash"].to_numpy(), (sig["url"].fill_null("") != "").to_numpy()))
    if settings.near and n:
        bands = sig["bands"].to_numpy()
        sketch = None
        if settings.jaccard_threshold > 0:
            packed = sketch_of(sig["signature"].to_numpy())
            sketch = cast(pl.Series, pl.from_arrow(pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(packed.shape[1]), n, [None, pa.py_buffer(packed)])))
        for band in range(bands.shape[1]):
            keys = np.ascontiguousarray(bands[:, band])
            frames.append(rows(band, keys, keys != 0, sketch))  # 0: a document without words
    return pl.concat(frames)


def bucket_of(keys: pl.Series, buckets: int) -> np.ndarray:
    """The bucket of each key: its range among `buckets` equal ranges of 64-bit values."""
    high = keys.to_numpy().astype(np.uint64) >> np.uint64(NODE_BITS)
    return ((high * np.uint64(buckets)) >> np.uint64(NODE_BITS)).astype(np.int64)


def split_rows(rows: pl.DataFrame, buckets: int) -> list[pl.DataFrame]:
    if buckets == 1:
        return [rows]
    which = pl.Series("bucket", bucket_of(rows["key"], buckets))
    parts = dict(rows.with_columns(which).partition_by("bucket", as_dict=True, include_key=False))
    return [parts.get((b,), rows.clear()) for b in range(buckets)]


# --- 2. edges --------------------------------------------------------------------------------------------------

CHUNK = 1 << 16  # candidate pairs compared at once


class _Sketches:
    """The sketches of some sorted row positions, indexed by position."""

    def __init__(self, positions: np.ndarray, values: np.ndarray):
        self.positions, self.values = positions, values

    def __getitem__(self, index) -> np.ndarray:
        return self.values[np.searchsorted(self.positions, index)]


@dataclass
class Edges:
    src: np.ndarray
    dst: np.ndarray
    candidates: int = 0  # LSH pairs (a document and the smallest of its band group) compared
    rejected: int = 0  # of those, documents that agreed with no earlier member of the group


def agreement(a: np.ndarray, b: np.ndarray, values: int) -> np.ndarray:
    """The Jaccard similarity sketches of `values` MinHash values estimate, row by row: the share of equal
    values, less the chance agreement of 2**-b (Li & König 2010)."""
    x = a ^ b
    equal = ((x & 0xF) == 0).sum(axis=-1) + ((x >> 4) == 0).sum(axis=-1) - (2 * x.shape[-1] - values)
    chance = 2.0 ** -SKETCH_BITS
    return (equal / values - chance) / (1 - chance)


def sketches(column: pl.Series) -> np.ndarray:
    """A column of equal-length sketches (no nulls) as a (rows, bytes) matrix."""
    arrow = column.to_arrow()
    if not len(arrow):
        return np.empty((0, 0), np.uint8)
    arrow = arrow.cast(pa.large_binary())
    offsets = np.frombuffer(arrow.buffers()[1], np.int64)[arrow.offset:arrow.offset + len(arrow) + 1]
    data = np.frombuffer(arrow.buffers()[2], np.uint8)
    width = int(offsets[1] - offsets[0])
    return data[offsets[:-1, None] + np.arange(width)]


def group_edges(rows: pl.DataFrame, threshold: float, values: int) -> Edges:
    """Edges of one bucket's rows: each node to the smallest node of its (kind, key) group; a band group's member
    only if its sketch agrees with that node's at `threshold` (0: always), else with the first member it does."""
    kind, key, node = (rows[c].to_numpy() for c in ("kind", "key", "node"))
    order = np.lexsort((node, key, kind))  # the sketches stay where they are: only candidates' are read
    kind, key, node = kind[order], key[order], node[order]
    if len(node) < 2:
        return Edges(np.empty(0, np.int64), np.empty(0, np.int64))
    same = np.concatenate([[False], (kind[1:] == kind[:-1]) & (key[1:] == key[:-1])])
    first = np.maximum.accumulate(np.where(~same, np.arange(len(node)), 0))
    member = np.nonzero(same)[0]
    near = member[kind[member] >= 0]
    keep = np.ones(len(member), bool)
    extra_src, extra_dst, rejected = [], [], 0
    if threshold > 0 and len(near):
        read = np.unique(np.concatenate([near, first[near]]))
        sketch = _Sketches(read, sketches(rows["sketch"].gather(order[read])))
        ok = np.concatenate([agreement(sketch[near[i:i + CHUNK]], sketch[first[near[i:i + CHUNK]]], values)
                             >= threshold for i in range(0, len(near), CHUNK)])
        keep[np.searchsorted(member, near[~ok])] = False
        # A member that disagrees with its group's first tries the group's other disagreeing members before it.
        reps: dict[int, list[int]] = {}
        for i in near[~ok]:
            others = reps.setdefault(int(first[i]), [])
            hit = np.nonzero(agreement(sketch[others], sketch[i], values) >= threshold)[0] if others else \
                np.empty(0, int)
            if len(hit):
                extra_src.append(node[i])
                extra_dst.append(node[others[hit[0]]])
            else:
                others.append(int(i))
                rejected += 1
    return Edges(np.concatenate([node[member[keep]], np.array(extra_src, np.int64)]),
                 np.concatenate([node[first[member[keep]]], np.array(extra_dst, np.int64)]),
                 candidates=len(near) if threshold > 0 else 0, rejected=rejected)


def star_labels(src: np.ndarray, dst: np.ndarray) -> pl.DataFrame:
    """The connected components of the edges, as LABEL_SCHEMA: every node but each component's smallest, with
    that smallest node."""
    from scipy.sparse import csr_matrix  # 0.5 s to import: here, not for every process that reads the settings
    from scipy.sparse.csgraph import connected_components

    # Memory is the point (a merge near the top of the tree holds every duplicated document): 32-bit dense
    # indices, and the float64 weights scipy would otherwise copy the graph into; no inverse from np.unique (it
    # holds four 64-bit arrays of every endpoint).
    nodes = np.concatenate([src, dst])
    nodes.sort()
    nodes = nodes[np.concatenate([[True], nodes[1:] != nodes[:-1]])] if len(nodes) else nodes
    n = len(nodes)
    graph = csr_matrix((np.ones(len(src)), (dense_index(nodes, src), dense_index(nodes, dst))), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    del graph
    smallest = np.full(labels.max() + 1 if n else 0, n, np.int64)
    np.minimum.at(smallest, labels, np.arange(n))  # nodes are sorted: a component's first is its smallest
    root = nodes[smallest[labels]]
    other = root != nodes
    return pl.DataFrame({"node": nodes[other], "root": root[other]}, schema={"node": pl.Int64, "root": pl.Int64})


def dense_index(nodes: np.ndarray, values: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """The positions of `values` in the sorted `nodes`, as int32, a chunk at a time (no 64-bit array of them all);
    each chunk sorted first, as a binary search of random values misses the cache at every step (9× slower)."""
    out = np.empty(len(values), np.int32)
    for i in range(0, len(values), chunk):
        part = values[i:i + chunk]
        order = np.argsort(part)
        out[i + order] = np.searchsorted(nodes, part[order])
    return out


def merge_labels(labels: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """The components of several label parts, folded in one part at a time: a unit holds the labels merged so far
    (each node once) and the next part, not every part at once."""
    merged = None
    for part in labels:
        merged = part if merged is None else star_labels(
            np.concatenate([merged["node"].to_numpy(), part["node"].to_numpy()]),
            np.concatenate([merged["root"].to_numpy(), part["root"].to_numpy()]))
    return pl.DataFrame(schema={"node": pl.Int64, "root": pl.Int64}) if merged is None else merged


def merge_levels(items: list, fan_in: int) -> list[list[list]]:
    """The merge tree: per level, the groups of `fan_in` items (of the level below) merged together."""
    levels = []
    count = len(items)
    while count > 1:
        level = [list(range(i, min(i + fan_in, count))) for i in range(0, count, fan_in)]
        levels.append(level)
        count = len(level)
    return levels


# --- 4. members and 5. the keep rule ---------------------------------------------------------------------------

def members_of(docs: pl.DataFrame, first_node: int, labels: pl.DataFrame) -> pl.DataFrame:
    """The rows of `docs` (MEMBER_COLUMNS, consecutive nodes from `first_node`) that are in a cluster, with it."""
    last = first_node + docs.height
    mine = labels.filter(pl.col("node").is_between(first_node, last, closed="left"))
    roots = labels.filter(pl.col("root").is_between(first_node, last, closed="left")).select(
        node="root", root="root").unique()
    clusters = pl.concat([mine, roots]).rename({"root": "cluster"})
    rows = docs.with_columns(node=pl.int_range(first_node, last, dtype=pl.Int64))
    return rows.join(clusters, on="node")


def keep_of(cluster: pl.Series, keeps: int) -> pl.Series:
    """The keep unit of each cluster: a multiplicative (Fibonacci) hash of its root, as roots are the smallest
    nodes of their clusters, so crowd the first signatures parts."""
    mixed = cluster.to_numpy().astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # wraps modulo 2**64
    return pl.Series("keep", ((mixed >> np.uint64(32)) * np.uint64(keeps)) >> np.uint64(32), pl.UInt64)


def split_members(members: pl.DataFrame, keeps: int) -> list[pl.DataFrame]:
    if keeps == 1:
        return [members]
    parts = dict(members.with_columns(keep_of(members["cluster"], keeps))
                 .partition_by("keep", as_dict=True, include_key=False))
    return [parts.get((k,), members.clear()) for k in range(keeps)]


@dataclass(kw_only=True)
class ClusterSummary:
    """What the clustering found, counted: all the driver holds of it."""

    removed_by: pl.DataFrame  # shard, reason, documents: the removed documents counted
    sizes: pl.DataFrame  # cluster_size, clusters: the size histogram (clusters of 2 or more)
    largest: pl.DataFrame  # the largest clusters: size, kept doc, example URLs
    documents: int  # documents of this crawl
    index_documents: int  # documents of earlier crawls it was compared with
    candidates: int = 0  # LSH candidate pairs confirmed by their Jaccard estimate
    rejected: int = 0  # of those, rejected

    @property
    def removed_count(self) -> int:
        return int(self.removed_by["documents"].sum())


@dataclass(kw_only=True)
class Clusters(ClusterSummary):
    """The clustering of frames in this process, with the removed documents themselves."""

    removed: pl.DataFrame  # REMOVED_SCHEMA: every document of this crawl that is dropped, and why


def keep_rule(members: pl.DataFrame, settings: DedupSettings, crawl: str, removed_schema: pa.Schema,
              largest: int = 10) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(removed, sizes, largest) of clusters given as members (MEMBER_SCHEMA), whole clusters. Documents of
    `crawl` are kept or removed; documents of other crawls are the index: never removed, and a cluster that holds
    one removes every document of `crawl` in it (reason `cross_crawl`). `largest` keeps its `cluster`, the last
    tie-break when `merge_summaries` picks the largest of several units'."""
    rank = {"earliest": [pl.col("fetch_time").fill_null("~")], "longest": [-pl.col("n_chars")], "first": []}
    frame = members.with_columns(own=pl.col("crawl") == crawl, cluster_size=pl.len().over("cluster"))
    # An earlier crawl's document wins its cluster; within a crawl the `keep` rule decides.
    frame = frame.sort(["cluster", "own", *rank[settings.keep], "doc_id", "source_key", "node"])
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
    sizes = per_cluster.group_by(pl.col("size").alias("cluster_size")).len("clusters")
    top = per_cluster.sort(["size", "kept_doc", "cluster"], descending=[True, False, False]).head(largest) \
        .with_columns(pl.col("example_urls").list.join(" · "))
    return (filtered.conform(removed, removed_schema), filtered.conform(sizes, SIZES_SCHEMA),
            filtered.conform(top, LARGEST_SCHEMA))


def merge_summaries(sizes: Sequence[pl.DataFrame], largest: Sequence[pl.DataFrame], n: int = 10
                    ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The crawl's size histogram and its `n` largest clusters from those of the keep units (SIZES_SCHEMA,
    LARGEST_SCHEMA): each cluster is in one unit, so histograms add up and the largest are among the units'."""
    empty_sizes, empty_largest = (cast(pl.DataFrame, pl.from_arrow(s.empty_table()))
                                  for s in (SIZES_SCHEMA, LARGEST_SCHEMA))
    histogram = pl.concat([empty_sizes, *sizes]).group_by("cluster_size").agg(pl.col("clusters").sum()) \
        .sort("cluster_size")
    top = pl.concat([empty_largest, *largest]).sort(["size", "kept_doc", "cluster"], descending=[True, False, False])
    return histogram, top.head(n).drop("cluster")


def removed_counts(removed: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """shard, reason, documents: two columns of few distinct values, streamed from the removed documents."""
    return removed.lazy().group_by("shard", "reason").agg(documents=pl.len().cast(pl.Int64)) \
        .sort("shard", "reason").collect(engine="streaming")


# --- the units -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignaturePart:
    """A committed signatures part in the clustering's plan; its ordinal gives its documents' nodes."""

    crawl: str
    shard: str
    part: str
    rows: int


def bucket_count(settings: DedupSettings, documents: int) -> int:
    """B: the setting, else enough buckets that one holds about `bucket_rows` rows."""
    if settings.buckets:
        return settings.buckets
    per_document = (settings.bands if settings.near else 0) + settings.exact + settings.by_url
    return max(1, math.ceil(documents * per_document / settings.bucket_rows))


@dataclass(frozen=True)
class BucketUnit(WorkUnit):  # source: a signatures part
    settings: DedupSettings
    first_node: int
    parts: tuple[str, ...]  # one per bucket


@timed_unit
def write_buckets(u: BucketUnit) -> UnitResult:
    lake = Lake(u.store)
    schema = bucket_schema(u.settings)
    rows_in = rows_out = 0
    fetched = ReadCount()
    with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(lake.part_writer(p, schema)) for p in u.parts]
        for batch in lake.iter_batches(u.source, BUCKET_BATCH_ROWS, columns=BUCKET_INPUT, fetched=fetched):
            rows = bucket_rows(cast(pl.DataFrame, pl.from_arrow(batch)), u.first_node + rows_in, u.settings)
            rows_in += batch.num_rows
            rows_out += rows.height
            for writer, chunk in zip(writers, split_rows(rows, len(writers))):
                writer.write(chunk.to_arrow().cast(schema))
    return UnitResult(unit=u.unit, source=u.source, rows_in=rows_in, rows_out=rows_in, bytes_in=fetched.bytes,
                      bytes_out=sum(w.bytes for w in writers), counts={"bucket_rows": rows_out})


@dataclass(frozen=True)
class EdgeUnit(WorkUnit):  # source: the bucket, by name
    settings: DedupSettings
    inputs: tuple[str, ...]  # the bucket's part of every signatures part
    part: str


@timed_unit
def write_edges(u: EdgeUnit) -> UnitResult:
    lake = Lake(u.store)
    rows = lake.scan(list(u.inputs)).collect()
    edges = group_edges(rows, u.settings.jaccard_threshold, u.settings.bands * u.settings.rows)
    labels = star_labels(edges.src, edges.dst)
    with lake.part_writer(u.part, LABEL_SCHEMA) as out:
        out.write(labels.to_arrow().cast(LABEL_SCHEMA))
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=rows.height, rows_out=rows.height,
                      bytes_out=out.bytes, counts={"candidates": edges.candidates, "rejected": edges.rejected,
                                                   "edges": len(edges.src)})


@dataclass(frozen=True)
class MergeUnit(WorkUnit):  # source: the merge, by name
    inputs: tuple[str, ...]  # label parts
    part: str


@timed_unit
def write_merged(u: MergeUnit) -> UnitResult:
    lake = Lake(u.store)
    rows = 0

    def parts() -> Iterator[pl.DataFrame]:
        nonlocal rows
        for key in u.inputs:
            part = lake.scan([key]).collect()
            rows += part.height
            yield part

    merged = merge_labels(parts())
    with lake.part_writer(u.part, LABEL_SCHEMA) as out:
        out.write(merged.to_arrow().cast(LABEL_SCHEMA))
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=rows, rows_out=rows, bytes_out=out.bytes)


@dataclass(frozen=True)
class MemberUnit(WorkUnit):  # source: a signatures part
    crawl: str
    shard: str
    first_node: int
    labels: str
    parts: tuple[str, ...]  # one per keep unit


@timed_unit
def write_members(u: MemberUnit) -> UnitResult:
    lake = Lake(u.store)
    docs = lake.scan([u.source]).select(MEMBER_COLUMNS).collect()
    last = u.first_node + docs.height
    labels = lake.scan([u.labels]).filter(pl.col("node").is_between(u.first_node, last, closed="left")
                                          | pl.col("root").is_between(u.first_node, last, closed="left")).collect()
    members = members_of(docs, u.first_node, labels).with_columns(crawl=pl.lit(u.crawl), shard=pl.lit(u.shard))
    bytes_out = 0
    for key, piece in zip(u.parts, split_members(members.select(MEMBER_SCHEMA.names), len(u.parts))):
        with lake.part_writer(key, MEMBER_SCHEMA) as out:
            out.write(piece.to_arrow().cast(MEMBER_SCHEMA))
        bytes_out += out.bytes
    return UnitResult(unit=u.unit, source=u.source, rows_in=docs.height, rows_out=docs.height,
                      bytes_out=bytes_out, counts={"members": members.height})


def keep_count(settings: DedupSettings, labels: int) -> int:
    """K: the setting, else enough keep units that one holds about `keep_rows` members (a cluster's labels and its
    root: at most twice the labels)."""
    if settings.keep_parts:
        return settings.keep_parts
    return max(1, math.ceil(2 * labels / settings.keep_rows))


@dataclass(frozen=True)
class KeepUnit(WorkUnit):  # source: the keep unit, by name
    settings: DedupSettings
    crawl: str
    removed_schema: pa.Schema
    largest: int
    inputs: tuple[str, ...]  # its piece of every members part
    part: str  # the removed documents
    sizes_part: str
    largest_part: str


@timed_unit
def write_kept(u: KeepUnit) -> UnitResult:
    lake = Lake(u.store)
    members = lake.scan(list(u.inputs), MEMBER_SCHEMA).collect()
    removed, sizes, top = keep_rule(members, u.settings, u.crawl, u.removed_schema, u.largest)
    with lake.part_writer(u.part, u.removed_schema) as out:
        for batch in removed.to_arrow().cast(u.removed_schema).to_batches(REMOVED_ROW_GROUP):
            out.write(batch)
    for key, frame, schema in ((u.sizes_part, sizes, SIZES_SCHEMA), (u.largest_part, top, LARGEST_SCHEMA)):
        with lake.part_writer(key, schema) as summary:
            summary.write(frame.to_arrow().cast(schema))
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=removed.height, rows_out=removed.height,
                      bytes_out=out.bytes, columns=u.removed_schema.names, counts={"members": members.height})


RunUnits = Callable[[Callable, Sequence[WorkUnit]], list[UnitResult]]


@dataclass
class ClusterRun:
    """What the clustering units did, by step. The keep units' results name the removed-documents parts."""

    buckets: int
    steps: dict[str, list[UnitResult]]

    def count(self, key: str) -> int:
        return sum(r.counts.get(key, 0) for results in self.steps.values() for r in results)

    def peak_rss_bytes(self) -> int:
        return max((r.peak_rss_bytes for results in self.steps.values() for r in results), default=0)


def cluster_lake(store, parts: Sequence[SignaturePart], settings: DedupSettings, crawl: str, run: RunUnits,
                 key: Callable[[str, str], str], removed_schema: pa.Schema, largest: int = 10
                 ) -> tuple[ClusterSummary, ClusterRun]:
    """Cluster the documents of `parts` (this crawl's, then the earlier crawls') with units run by `run`; their
    parts are written at `key(step, identity)`, the removed documents by the `keep` step's units."""
    lake = Lake(store)
    buckets = bucket_count(settings, sum(p.rows for p in parts))
    steps: dict[str, list[UnitResult]] = {}
    bucket_parts = [[key("buckets", f"{p.part}\0{b}/{buckets}") for b in range(buckets)] for p in parts]
    steps["buckets"] = run(write_buckets, [
        BucketUnit(store=store, source=p.part, settings=settings, first_node=node_base(i), parts=tuple(keys))
        for i, (p, keys) in enumerate(zip(parts, bucket_parts))])
    edge_units = [EdgeUnit(store=store, source=f"bucket {b} of {buckets}", settings=settings,
                           inputs=tuple(keys[b] for keys in bucket_parts),
                           part=key("edges", "\0".join(keys[b] for keys in bucket_parts)))
                  for b in range(buckets)] if parts else []
    steps["edges"] = run(write_edges, edge_units)
    labels = [u.part for u in edge_units]
    steps["components"] = []
    for depth, level in enumerate(merge_levels(labels, settings.merge_fan_in)):
        units = [MergeUnit(store=store, source=f"merge {depth}.{i}", inputs=tuple(labels[j] for j in group),
                           part=key("components", "\0".join(labels[j] for j in group)))
                 for i, group in enumerate(level)]
        steps["components"] += run(write_merged, units)
        labels = [u.part for u in units]
    keeps = keep_count(settings, lake.scan(labels).select(pl.len()).collect().item() if labels else 0)
    member_units = [MemberUnit(store=store, source=p.part, crawl=p.crawl, shard=p.shard, first_node=node_base(i),
                               labels=labels[0], parts=tuple(key("members", f"{p.part}\0{labels[0]}\0{k}/{keeps}")
                                                             for k in range(keeps)))
                    for i, p in enumerate(parts)] if labels else []
    steps["members"] = run(write_members, member_units)
    keep_units = []
    for k in range(keeps):
        inputs = tuple(u.parts[k] for u in member_units)
        identity = "\0".join([*inputs, f"{k}/{keeps}"])
        keep_units.append(KeepUnit(store=store, source=f"keep {k} of {keeps}", settings=settings, crawl=crawl,
                                   removed_schema=removed_schema, largest=largest, inputs=inputs,
                                   part=key("keep", identity), sizes_part=key("keep sizes", identity),
                                   largest_part=key("keep largest", identity)))
    steps["keep"] = run(write_kept, keep_units)
    sizes, top = merge_summaries([lake.scan([u.sizes_part]).collect() for u in keep_units],
                                 [lake.scan([u.largest_part]).collect() for u in keep_units], largest)
    done = ClusterRun(buckets, steps)
    own = sum(p.rows for p in parts if p.crawl == crawl)
    return ClusterSummary(removed_by=removed_counts(lake.scan([u.part for u in keep_units])), sizes=sizes,
                          largest=top, documents=own, index_documents=sum(p.rows for p in parts) - own,
                          candidates=done.count("candidates"), rejected=done.count("rejected")), done


def cluster_frames(parts: Sequence[pl.DataFrame], settings: DedupSettings, crawl: str, removed_schema: pa.Schema,
                   buckets: int = 1, keeps: int = 1, largest: int = 10) -> Clusters:
    """The same steps in this process, over frames (`CLUSTER_COLUMNS` plus `crawl` and `shard`) standing for the
    signatures parts in plan order: what the units compute, without the lake."""
    rows = [split_rows(bucket_rows(p, node_base(i), settings), buckets) for i, p in enumerate(parts)]
    edges = [group_edges(pl.concat([r[b] for r in rows]), settings.jaccard_threshold,
                         settings.bands * settings.rows)
             for b in range(buckets)] if parts else []
    labels = [star_labels(e.src, e.dst) for e in edges]
    for level in merge_levels(labels, settings.merge_fan_in):
        labels = [merge_labels([labels[j] for j in group]) for group in level]
    merged = labels[0] if labels else pl.DataFrame(schema={"node": pl.Int64, "root": pl.Int64})
    empty = cast(pl.DataFrame, pl.from_arrow(MEMBER_SCHEMA.empty_table()))
    pieces = [split_members(members_of(p.select("crawl", "shard", *MEMBER_COLUMNS), node_base(i), merged)
                            .select(MEMBER_SCHEMA.names).cast(empty.schema), keeps) for i, p in enumerate(parts)]
    kept = [keep_rule(pl.concat([empty] + [piece[k] for piece in pieces]), settings, crawl, removed_schema, largest)
            for k in range(keeps)]
    removed = pl.concat([r for r, _, _ in kept]).sort("shard", "doc_id", "source_key")
    sizes, top = merge_summaries([s for _, s, _ in kept], [t for _, _, t in kept], largest)
    own = sum(int((p["crawl"] == crawl).sum()) for p in parts)
    total = sum(p.height for p in parts)
    return Clusters(removed=removed, removed_by=removed_counts(removed), sizes=sizes, largest=top, documents=own,
                    index_documents=total - own, candidates=sum(e.candidates for e in edges),
                    rejected=sum(e.rejected for e in edges))
