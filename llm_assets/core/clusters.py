"""Duplicate clusters as work units, each bounded in memory, passing data only through the lake.

A document is a *node*: its signatures part's ordinal in the clustering's plan (this crawl's parts, then the
earlier crawls' in `crawl_order`) times 2**32 plus its row, so node order is the order in which `find_clusters`
sees rows.

0. the band index, written by the signatures stage beside every signatures part and kept as long as the part is:
   each document becomes rows (kind, key, row), one per LSH band (kind = the band, key = the band hash), one for
   its text hash (kind EXACT) and one for its URL hash (kind URL), sorted by key in row groups of
   INDEX_GROUP_ROWS, so that a range of keys is read without the rest. A row carries its document's b-bit
   signature (the low 4 bits of each MinHash value, Li & König 2010), enough to estimate a pair's Jaccard
   similarity. Beside it, the part's documents (`MEMBER_COLUMNS`) in row order. The clustering reads only these:
   an earlier crawl's signatures are never read again.
1. edges (one unit per bucket, a range of keys; B from this crawl's size): this crawl's index rows in the range,
   and the earlier crawls' rows in the range whose key one of them has (memory of the new crawl, not of the
   history), sorted by (kind, key, node). Every row of a group that holds a document of this crawl joins the group's
   smallest node, a band row unless the sketches say, with `jaccard_confidence`, that the pair's Jaccard is below
   `jaccard_threshold` (else the first member of the group it does agree with, or none); groups of earlier documents
   alone were clustered with their own crawl. The unit writes the connected components of its edges as labels: every
   node of a component with the smallest (its root), sorted by node.
2. components (units per range of nodes, in rounds): the label parts of every bucket are a graph (a union of
   stars is a graph) of rows (node, parent), parent <= node. Nodes are cut into ranges of whole signatures parts
   holding about `merge_rows` label rows each, and each round runs two steps of one unit per range: *star*, over
   the rows whose node is in its range, points every other parent of a node at the node's smallest parent (a row
   (a, q) becomes (q, min parents of a)) and writes its nodes' smallest parents, the range's labels; *jump*, over
   the rows whose parent is in its range, replaces each parent by the parent's smallest parent (pointer jumping).
   A row is only ever rewritten, never copied, and its parent never grows, so the rounds end; they end when a
   star step redirects nothing after a jump step changed nothing (or in the first round: every parent of a bucket's
   labels is its own root): then every node has one parent, a root, and the star step's labels are the
   components, by range. A unit holds its range's labels and rows, never the crawl's.
3. members (one unit per signatures part): the part's documents that have a label, with their cluster (root) and
   what the keep rule needs, split into K parts by a hash of the cluster; a part without labels (most of an
   earlier crawl's) reads nothing more.
4. keep (one unit per K): the keep rule over its piece of every members part, whole clusters, as a hash of the
   cluster put each in one piece: per cluster, documents of earlier crawls first, then `keep`. It writes its
   removed documents and a summary (the size histogram, its largest clusters), merged in the driver. An earlier
   crawl's cluster is seen as far as this crawl's groups reach it: a `cross_crawl` removal names the best earlier
   document so reached.

`find_clusters` runs the same functions in one process, over frames, with one unit per step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal, Protocol, cast

import numpy as np
import polars as pl
import pyarrow as pa

from llm_assets.core import filtered
from llm_assets.core.lake import Lake, PartWriter, ReadCount
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit


class ClusterSettings(Protocol):
    """What clustering reads of the dedup settings (`core.dedup.DedupSettings`, which imports this module)."""

    exact: bool
    by_url: bool
    near: bool
    bands: int
    rows: int
    keep: Literal["earliest", "longest", "first"]
    jaccard_threshold: float
    jaccard_confidence: float
    buckets: int
    bucket_rows: int
    merge_rows: int
    keep_parts: int
    keep_rows: int


NODE_BITS = 32
EXACT, URL = -1, -2  # index row kinds besides the bands 0 .. bands-1
# b-bit MinHash: the low 4 bits of each value, two to a byte. Two unequal values agree by chance 1 in 16, which
# the estimate corrects for; its standard error at Jaccard 0.8 is 0.039 against 0.038 with whole 32-bit values.
SKETCH_BITS = 4
INDEX_INPUT = ["url", "n_chars", "text_hash", "url_hash", "bands", "signature"]  # of a signatures part
MEMBER_COLUMNS = ["doc_id", "source_key", "url", "fetch_time", "n_chars", "text_hash", "url_hash"]
# Rows of the index (and of label parts) a row group holds: a range read fetches at most two it does not need.
INDEX_GROUP_ROWS = 8192
REMOVED_ROW_GROUP = 65_536  # removed rows are sorted by shard: a reader of one shard skips the other row groups
LABEL_SCHEMA = pa.schema([("node", pa.int64()), ("root", pa.int64())])
MEMBER_SCHEMA = pa.schema([("crawl", pa.string()), ("shard", pa.string()), ("doc_id", pa.string()),
                           ("source_key", pa.string()), ("url", pa.string()), ("fetch_time", pa.string()),
                           ("n_chars", pa.int64()), ("text_hash", pa.uint64()), ("url_hash", pa.uint64()),
                           ("node", pa.int64()), ("cluster", pa.int64())])
DOCS_SCHEMA = pa.schema([MEMBER_SCHEMA.field(c) for c in MEMBER_COLUMNS])
SIZES_SCHEMA = pa.schema([("cluster_size", pa.int64()), ("clusters", pa.int64())])
LARGEST_SCHEMA = pa.schema([("size", pa.int64()), ("kept_doc", pa.string()), ("example_urls", pa.string()),
                            ("cluster", pa.int64())])


def sketch_bytes(values: int) -> int:
    return -(-values * SKETCH_BITS // 8)


def index_schema(values: int) -> pa.Schema:
    # fixed-size binary, not a list of bytes: Parquet stores it without a repetition level per byte
    return pa.schema([("kind", pa.int16()), ("key", pa.uint64()), ("row", pa.uint32()),
                      ("sketch", pa.binary(sketch_bytes(values)))])


def sketch_of(signatures: np.ndarray) -> np.ndarray:
    """(documents, values) uint32 MinHash values -> (documents, bytes) uint8: their low bits, packed; an odd last
    value is paired with 0."""
    low = (signatures & 0xF).astype(np.uint8)
    if low.shape[1] % 2:
        low = np.hstack([low, np.zeros((low.shape[0], 1), np.uint8)])
    return np.ascontiguousarray(low[:, 0::2] | (low[:, 1::2] << 4))


def node_base(ordinal: int) -> int:
    return ordinal << NODE_BITS


def confirm_at(settings: ClusterSettings) -> float:
    return confirmation_cut(settings.jaccard_threshold, settings.bands * settings.rows, settings.jaccard_confidence)


def kinds_of(settings: ClusterSettings) -> list[int]:
    """The index row kinds the rules that are on join documents by."""
    return [EXACT] * settings.exact + [URL] * settings.by_url + list(range(settings.bands)) * settings.near


# --- 0. the band index -----------------------------------------------------------------------------------------

@dataclass
class IndexRows:
    """Index rows as arrays: (kind, key, node), `own` (the row is a document of the crawl being clustered) and
    `sketch[row]`, the row's sketch: `sketches[doc[row]]`, as a document's 15 rows share one (a sketch per row
    would be 14 copies: 900 MB at a million documents)."""

    kind: np.ndarray
    key: np.ndarray
    node: np.ndarray
    own: np.ndarray
    doc: np.ndarray  # int64: the row's sketch in `sketches`
    sketches: np.ndarray  # (sketches, bytes) uint8

    @staticmethod
    def concat(parts: Sequence[IndexRows], width: int) -> IndexRows:
        if not parts:
            return IndexRows(np.empty(0, np.int16), np.empty(0, np.uint64), np.empty(0, np.int64),
                             np.empty(0, bool), np.empty(0, np.int64), np.empty((0, width), np.uint8))
        offsets = np.cumsum([0] + [len(p.sketches) for p in parts[:-1]])
        kind, key, node, own = (np.concatenate([getattr(p, f) for p in parts]) for f in ("kind", "key", "node", "own"))
        return IndexRows(kind, key, node, own,
                         np.concatenate([p.doc + offset for p, offset in zip(parts, offsets, strict=True)]),
                         np.concatenate([p.sketches for p in parts]))

    def take(self, which: np.ndarray) -> IndexRows:
        """Some rows (the sketches stay as they are)."""
        return IndexRows(self.kind[which], self.key[which], self.node[which], self.own[which], self.doc[which],
                         self.sketches)

    def sketch(self, rows: np.ndarray | int) -> np.ndarray:
        return self.sketches[self.doc[rows]]

    def __len__(self) -> int:
        return len(self.node)


def index_rows(sig: pl.DataFrame, first_row: int) -> IndexRows:
    """The index rows of consecutive signatures rows (at least INDEX_INPUT), the first of which is `first_row`;
    every kind, whatever the settings (they choose kinds when reading). Nothing joins a document by a text it
    does not have, a URL it does not have (a source without URLs) or a band of no words (hash 0). Rows are marked
    own; `_own_rows` marks them as their crawl says."""
    n = sig.height
    row = np.arange(first_row, first_row + n, dtype=np.int64)
    bands = _matrix(sig["bands"]).astype(np.uint64)
    packed = sketch_of(_matrix(sig["signature"]))
    has_text = (sig["n_chars"].fill_null(0) > 0).to_numpy()
    has_url = (sig["url"].fill_null("") != "").to_numpy()
    kind = [np.full(int(has_text.sum()), EXACT, np.int16), np.full(int(has_url.sum()), URL, np.int16)]
    key = [sig["text_hash"].to_numpy()[has_text].astype(np.uint64), sig["url_hash"].to_numpy()[has_url]
           .astype(np.uint64)]
    doc = [np.nonzero(has_text)[0], np.nonzero(has_url)[0]]
    for band in range(bands.shape[1]):
        words = bands[:, band] != 0
        kind.append(np.full(int(words.sum()), band, np.int16))
        key.append(bands[words, band])
        doc.append(np.nonzero(words)[0])
    which = np.concatenate(doc)
    return IndexRows(np.concatenate(kind), np.concatenate(key), row[which], np.ones(len(which), bool), which,
                     packed)


def _matrix(column: pl.Series) -> np.ndarray:
    """A fixed-size list column as a (rows, width) matrix (empty columns too)."""
    return column.to_numpy().reshape(len(column), cast(pl.Array, column.dtype).size)


class IndexWriter:
    """Writes the band index and the documents of one signatures part, from the part's tables as they are made:
    the documents stream out, the index rows are kept (about 1 KB a document) and sorted by key at the end.
    Like a part writer, nothing is uploaded unless the block ends without an error.

        with IndexWriter(lake, index_key, docs_key, values) as index:
            index.add(table)
    """

    def __init__(self, lake: Lake, index_key: str, docs_key: str, values: int, group_rows: int = INDEX_GROUP_ROWS):
        self.lake, self.index_key, self.schema = lake, index_key, index_schema(values)
        self.group_rows = group_rows
        self.docs = PartWriter(lake, docs_key, DOCS_SCHEMA)
        self.rows: list[IndexRows] = []
        self.documents = 0
        self.bytes = 0

    def __enter__(self) -> IndexWriter:
        self.docs.__enter__()
        return self

    def add(self, table: pa.Table) -> None:
        frame = cast(pl.DataFrame, pl.from_arrow(table.select(INDEX_INPUT)))
        self.rows.append(index_rows(frame, self.documents))
        self.docs.write(table.select(MEMBER_COLUMNS))
        self.documents += table.num_rows

    def __exit__(self, exc_type, exc, tb) -> None:
        self.docs.__exit__(exc_type, exc, tb)
        if exc_type is not None:
            return
        rows = IndexRows.concat(self.rows, self.schema.field("sketch").type.byte_width)
        self.rows = []
        order = np.lexsort((rows.node, rows.kind, rows.key))
        with PartWriter(self.lake, self.index_key, self.schema) as out:
            for i in range(0, len(order), self.group_rows):  # one write, one row group
                chunk = order[i:i + self.group_rows]
                sketch = np.ascontiguousarray(rows.sketch(chunk))
                out.write(pa.Table.from_arrays([
                    pa.array(rows.kind[chunk]), pa.array(rows.key[chunk]),
                    pa.array(rows.node[chunk].astype(np.uint32)),
                    pa.FixedSizeBinaryArray.from_buffers(self.schema.field("sketch").type, len(chunk),
                                                         [None, pa.py_buffer(sketch)])], schema=self.schema))
        self.bytes = self.docs.bytes + out.bytes


def key_range(bucket: int, buckets: int) -> tuple[int, int]:
    """The keys of a bucket: [lo, hi), as `bucket_of` assigns them."""
    def edge(b: int) -> int:
        return -(-(b << NODE_BITS) // buckets) << NODE_BITS
    return edge(bucket), edge(bucket + 1)


def bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each key: its range among `buckets` equal ranges of 64-bit values."""
    high = keys.astype(np.uint64) >> np.uint64(NODE_BITS)
    return ((high * np.uint64(buckets)) >> np.uint64(NODE_BITS)).astype(np.int64)


def read_range(lake: Lake, key: str, column: str, lo: int, hi: int, fetched: ReadCount,
               wanted: np.ndarray | None = None) -> pa.Table:
    """The rows of a part sorted by `column` whose value is in [lo, hi): only the row groups that may hold one (by
    their statistics) are fetched, and with `wanted` (sorted values), only those that may hold one of them."""
    import pyarrow.parquet as pq

    with lake.open_arrow(key, buffer_size=1 << 16) as f:
        try:
            parquet = pq.ParquetFile(f)
            meta, at = parquet.metadata, parquet.schema_arrow.get_field_index(column)
            groups = []
            for g in range(meta.num_row_groups):
                stats = meta.row_group(g).column(at).statistics
                if stats is None or not stats.has_min_max:
                    groups.append(g)
                elif stats.min < hi and stats.max >= lo and (wanted is None or _holds_one(wanted, stats.min,
                                                                                          stats.max)):
                    groups.append(g)
            table = parquet.read_row_groups(groups) if groups else parquet.schema_arrow.empty_table()
        finally:
            fetched.bytes += f.raw.fetched  # type: ignore[attr-defined]
    values = table.column(column).to_numpy()  # sorted: the range is a slice
    start = int(np.searchsorted(values, np.array(lo, values.dtype)))
    stop = len(values) if hi > np.iinfo(values.dtype).max else int(np.searchsorted(values, np.array(hi, values.dtype)))
    return table.slice(start, stop - start)


def _holds_one(wanted: np.ndarray, lo: int, hi: int) -> bool:
    """Whether sorted `wanted` has a value in [lo, hi]."""
    i = int(np.searchsorted(wanted, np.array(lo, wanted.dtype)))
    return i < len(wanted) and int(wanted[i]) <= hi


def read_index(lake: Lake, key: str, bucket: int, buckets: int, first_node: int, own: bool, kinds: list[int],
               fetched: ReadCount, wanted: np.ndarray | None = None) -> IndexRows:
    """One index part's rows of one bucket, of the kinds asked for, with their nodes; with `wanted` (sorted
    keys), only the rows of those keys."""
    table = read_range(lake, key, "key", *key_range(bucket, buckets), fetched, wanted)
    kind, keys = table.column("kind").to_numpy(), table.column("key").to_numpy()
    asked = np.zeros(1 << 16, bool)  # by the kind's 16 bits
    asked[np.array(kinds, np.int16).view(np.uint16)] = True
    keep = asked[kind.view(np.uint16)]
    if wanted is not None and len(keys):
        at = np.minimum(np.searchsorted(wanted, keys), len(wanted) - 1)
        keep &= wanted[at] == keys
    kept = int(keep.sum())
    return IndexRows(kind[keep], keys[keep], table.column("row").to_numpy().astype(np.int64)[keep] + first_node,
                     np.full(kept, own), np.arange(kept), fixed_binary_matrix(table.column("sketch"))[keep])


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique's hash table is several times slower on 64-bit hashes)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


def fixed_binary_matrix(column: pa.ChunkedArray) -> np.ndarray:
    """A fixed-size binary column as a (rows, bytes) matrix, without a copy where it is one chunk."""
    width = column.type.byte_width
    array = column.combine_chunks()
    if not len(array):
        return np.empty((0, width), np.uint8)
    data = np.frombuffer(array.buffers()[1], np.uint8)
    return data[array.offset * width:(array.offset + len(array)) * width].reshape(len(array), width)


# --- 1. edges --------------------------------------------------------------------------------------------------

CHUNK = 1 << 16  # candidate pairs compared at once


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


def confirmation_cut(threshold: float, values: int, confidence: float) -> float:
    """The sketch estimate below which a candidate pair is rejected: the pair's Jaccard is below `threshold` with
    `confidence` (one-sided, the estimate taken as normal with the standard error of `values` b-bit values at
    `threshold`: 0.039 for 112 values at 0.8, so 0.709 at 0.99). Rejecting at the threshold itself (confidence
    0.5) rejects half the pairs exactly at it and a third of those at 0.82: a confirmation noisier than the LSH
    it filters (recall 0.83 at J 0.80-0.85). 0 stays 0: every candidate."""
    if threshold <= 0:
        return 0.0
    chance = 2.0 ** -SKETCH_BITS
    agree = chance + (1 - chance) * threshold  # the share of equal values expected at the threshold
    error = math.sqrt(agree * (1 - agree) / values) / (1 - chance)
    return max(threshold - NormalDist().inv_cdf(confidence) * error, 1e-9)


def group_order(rows: IndexRows) -> np.ndarray:
    """The rows in (kind, key, node) order, for rows in which those of one (kind, key) come in node order (parts in
    plan order, each sorted by key or in row order): per kind, a stable sort by key, which merges the parts'
    sorted runs (3× faster than a lexsort of the three)."""
    kinds = (np.flatnonzero(np.bincount(rows.kind.astype(np.int64) - URL)) + URL).tolist() if len(rows) else []
    by_kind = [np.flatnonzero(rows.kind == k) for k in kinds]
    return np.concatenate([i[np.argsort(rows.key[i], kind="stable")] for i in by_kind] or [np.empty(0, np.int64)])


def group_edges(rows: IndexRows, threshold: float, values: int) -> Edges:
    """Edges of one bucket's rows: in every (kind, key) group that holds a document of this crawl, each node to
    the group's smallest node; a band group's member only if its sketch agrees with that node's at `threshold`
    (0: always), else with the first member it does."""
    order = group_order(rows)  # the sketches stay where they are: only candidates' are read
    kind, key = rows.kind[order], rows.key[order]
    start = np.concatenate([[True], (kind[1:] != kind[:-1]) | (key[1:] != key[:-1])])
    group = np.cumsum(start) - 1
    touched = np.zeros(len(start) and int(group[-1]) + 1, bool)
    touched[group[rows.own[order]]] = True
    order = order[touched[group]]
    kind, key, node = rows.kind[order], rows.key[order], rows.node[order]
    if len(node) < 2:
        return Edges(np.empty(0, np.int64), np.empty(0, np.int64))
    same = np.concatenate([[False], (kind[1:] == kind[:-1]) & (key[1:] == key[:-1])])
    first = np.maximum.accumulate(np.where(~same, np.arange(len(node)), 0))
    member = np.nonzero(same)[0]
    near = member[kind[member] >= 0]
    keep = np.ones(len(member), bool)
    extra_src, extra_dst, rejected = [], [], 0
    if threshold > 0 and len(near):
        def sketch(i) -> np.ndarray:
            return rows.sketch(order[i])

        ok = np.concatenate([agreement(sketch(near[i:i + CHUNK]), sketch(first[near[i:i + CHUNK]]), values)
                             >= threshold for i in range(0, len(near), CHUNK)])
        keep[np.searchsorted(member, near[~ok])] = False
        # A member that disagrees with its group's first tries the group's other disagreeing members before it.
        reps: dict[int, list[int]] = {}
        for i in near[~ok]:
            others = reps.setdefault(int(first[i]), [])
            hit = np.nonzero(agreement(sketch(np.array(others, np.int64)), sketch(i), values) >= threshold)[0] \
                if others else np.empty(0, int)
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
    """The connected components of the edges, as LABEL_SCHEMA: every node with its component's smallest node (its
    root, itself included), sorted by node."""
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
    return pl.DataFrame({"node": nodes, "root": nodes[smallest[labels]]}, schema={"node": pl.Int64, "root": pl.Int64})


def dense_index(nodes: np.ndarray, values: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """The positions of `values` in the sorted `nodes`, as int32, a chunk at a time (no 64-bit array of them all);
    each chunk sorted first, as a binary search of random values misses the cache at every step (9× slower)."""
    out = np.empty(len(values), np.int32)
    for i in range(0, len(values), chunk):
        part = values[i:i + chunk]
        order = np.argsort(part)
        out[i + order] = np.searchsorted(nodes, part[order])
    return out


# --- 2. components, by node range -----------------------------------------------------------------------------

LAST_NODE = 1 << 63  # beyond every node: the end of the last range
EMPTY_LABELS = {"node": pl.Int64, "root": pl.Int64}


def node_ranges(rows_by_part: Sequence[float], merge_rows: int) -> list[int]:
    """The first node of each range, ascending from 0: consecutive signatures parts (in plan order) whose label
    rows (`rows_by_part`, estimated) add up to at most `merge_rows`; a part with more is a range of its own. Whole
    parts, so that a members unit reads the labels of one range."""
    starts, held = [0], 0.0
    for ordinal, rows in enumerate(rows_by_part):
        if held and held + rows > merge_rows:
            starts.append(node_base(ordinal))
            held = 0.0
        held += rows
    return starts


def plan_ranges(rows: Sequence[int], own: Sequence[bool], own_labels: int, history_labels: int, merge_rows: int
                ) -> list[int]:
    """`node_ranges` of the plan's parts (`rows` documents each, `own`: of this crawl), a part's label rows
    estimated from its documents: this crawl's labels spread evenly over its documents, the earlier crawls' over
    theirs (far fewer a document: only where this crawl's keys hit them). The edges units count both."""
    own_docs = sum(r for r, o in zip(rows, own, strict=True) if o)
    history_docs = sum(rows) - own_docs
    rate = {True: own_labels / max(own_docs, 1), False: history_labels / max(history_docs, 1)}
    return node_ranges([r * rate[o] for r, o in zip(rows, own, strict=True)], merge_rows)


def range_of(nodes: np.ndarray, starts: Sequence[int]) -> np.ndarray:
    return np.searchsorted(np.asarray(starts, np.int64), nodes, side="right") - 1


def split_by_range(rows: pl.DataFrame, column: str, starts: Sequence[int]) -> list[pl.DataFrame]:
    """Rows (node, root) by the range of `column`, one frame per range (empty where none)."""
    if len(starts) == 1:
        return [rows]
    at = pl.Series("range", range_of(rows[column].to_numpy(), starts), pl.Int64)
    parts = dict(rows.with_columns(at).partition_by("range", as_dict=True, include_key=False))
    return [parts.get((r,), rows.clear()) for r in range(len(starts))]


@dataclass
class Star:
    """A star step over the rows of one range (their node in it)."""

    labels: pl.DataFrame  # (node, root): each node with its smallest parent, sorted by node
    rows: pl.DataFrame  # the rows, each rewritten: (a, q) -> (a, m) if q is a's smallest parent m, else (q, m)
    redirected: int  # rows that were not already (a, m)


def star_step(rows: pl.DataFrame) -> Star:
    """Every parent of a node joined to the node's smallest: the edges {a, q} become {a, m} and {q, m}, the same
    components, and no row has a larger parent than before. Equal rows count once."""
    rows = rows.unique()
    smallest = rows.group_by("node").agg(pl.col("root").min()).sort("node")
    joined = rows.join(smallest.rename({"root": "least"}), on="node")
    moved = pl.col("root") != pl.col("least")
    redirected = int(joined.select(moved.sum()).item())
    out = joined.select(node=pl.when(moved).then(pl.col("root")).otherwise(pl.col("node")), root=pl.col("least"))
    return Star(smallest, out.unique(), redirected)


def jump_step(rows: pl.DataFrame, labels: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Rows whose parent is in one range, each parent replaced by its own smallest parent (`labels`: the range's
    star labels; a parent without one is a root) -> (rows, how many changed)."""
    joined = rows.join(labels.rename({"node": "root", "root": "up"}), on="root", how="left")
    up = pl.coalesce("up", "root")
    changed = int(joined.select((up != pl.col("root")).sum()).item())
    return joined.select("node", root=up), changed


def merge_components(labels: Sequence[pl.DataFrame], starts: Sequence[int]) -> tuple[list[pl.DataFrame], int]:
    """The rounds of star and jump steps in this process: the label parts of the buckets -> (the components'
    labels (LABEL_SCHEMA, every node with its component's smallest node), one frame per range, sorted by node;
    the rounds). What the components units compute, without the lake."""
    ranges = len(starts)
    empty = pl.DataFrame(schema=EMPTY_LABELS)
    pieces = [split_by_range(part, "node", starts) for part in labels]
    rows = [pl.concat([empty, *(piece[r] for piece in pieces)]) for r in range(ranges)]
    jumped = None
    for round_ in itertools.count(1):
        stars = [star_step(r) for r in rows]
        if not sum(s.redirected for s in stars) and not jumped:
            return [s.labels for s in stars], round_
        by_parent = [split_by_range(s.rows, "root", starts) for s in stars]
        jumps = [jump_step(pl.concat([empty, *(piece[r] for piece in by_parent)]), stars[r].labels)
                 for r in range(ranges)]
        jumped = sum(changed for _, changed in jumps)
        by_node = [split_by_range(j, "node", starts) for j, _ in jumps]
        rows = [pl.concat([empty, *(piece[r] for piece in by_node)]) for r in range(ranges)]
    raise AssertionError("unreachable")


# --- 3. members and 4. the keep rule ---------------------------------------------------------------------------

def members_of(docs: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """The rows of `docs` (MEMBER_COLUMNS and `node`) that are in a cluster, with it (the root of their label)."""
    return docs.join(labels.rename({"root": "cluster"}), on="node")


def numbered(docs: pl.DataFrame, first_node: int) -> pl.DataFrame:
    return docs.with_columns(node=pl.int_range(first_node, first_node + docs.height, dtype=pl.Int64))


def read_documents(lake: Lake, key: str, first_node: int, nodes: np.ndarray, fetched: ReadCount) -> pl.DataFrame:
    """The documents of a part (rows in node order from `first_node`) in the row groups that hold one of `nodes`
    (sorted), with their node: a part with a few duplicates reads a few row groups."""
    import pyarrow.parquet as pq

    with lake.open_arrow(key, buffer_size=1 << 16) as f:
        try:
            parquet = pq.ParquetFile(f)
            sizes = np.array([parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)])
            starts = np.concatenate([[0], np.cumsum(sizes)])
            groups = np.unique(np.searchsorted(starts, nodes - first_node, side="right") - 1).tolist()
            table = parquet.read_row_groups(groups)
        finally:
            fetched.bytes += f.raw.fetched  # type: ignore[attr-defined]
    node = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in groups] or [np.empty(0, np.int64)])
    return cast(pl.DataFrame, pl.from_arrow(table)).with_columns(node=pl.Series(node + first_node, dtype=pl.Int64))


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


def keep_rule(members: pl.DataFrame, settings: ClusterSettings, crawl: str, removed_schema: pa.Schema,
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
    """A committed signatures part in the clustering's plan, with its band index and documents; its ordinal in
    the plan gives its documents' nodes."""

    crawl: str
    shard: str
    part: str
    rows: int
    index: str
    docs: str


@dataclass(frozen=True)
class IndexPart:
    """What an edges unit reads of one signatures part."""

    index: str
    first_node: int
    own: bool


def bucket_count(settings: ClusterSettings, documents: int) -> int:
    """B: the setting, else enough buckets that one holds about `bucket_rows` rows of this crawl."""
    if settings.buckets:
        return settings.buckets
    per_document = (settings.bands if settings.near else 0) + settings.exact + settings.by_url
    return max(1, math.ceil(documents * per_document / settings.bucket_rows))


@dataclass(frozen=True)
class EdgeUnit(WorkUnit):  # source: the bucket, by name
    settings: ClusterSettings
    bucket: int
    buckets: int
    inputs: tuple[IndexPart, ...]  # every part of the plan: this crawl's first
    part: str


@timed_unit
def write_edges(u: EdgeUnit) -> UnitResult:
    lake = Lake(u.store)
    kinds, values = kinds_of(u.settings), u.settings.bands * u.settings.rows
    own_read, history_read = ReadCount(), ReadCount()
    own = [read_index(lake, p.index, u.bucket, u.buckets, p.first_node, True, kinds, own_read)
           for p in u.inputs if p.own]
    history_parts = [p for p in u.inputs if not p.own]
    keys = distinct(np.concatenate([r.key for r in own])) if own and history_parts else np.empty(0, np.uint64)
    # Of the earlier crawls, only the row groups that hold a key of this crawl's are read, and only the rows of
    # those keys kept: memory of the new crawl, reads of the history's index where the new crawl hits it.
    history = [read_index(lake, p.index, u.bucket, u.buckets, p.first_node, False, kinds, history_read, keys)
               for p in history_parts if len(keys)]
    width = sketch_bytes(values)
    rows = IndexRows.concat(own + history, width)
    edges = group_edges(rows, confirm_at(u.settings), values)
    labels = star_labels(edges.src, edges.dst)
    written = write_labels(lake, u.part, labels)
    own_rows = sum(len(r) for r in own)
    own_labels = int(np.isin(labels["node"].to_numpy() >> NODE_BITS,
                             [p.first_node >> NODE_BITS for p in u.inputs if p.own]).sum())
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=own_rows, rows_out=own_rows,
                      bytes_in=own_read.bytes + history_read.bytes, bytes_out=written,
                      counts={"candidates": edges.candidates, "rejected": edges.rejected, "edges": len(edges.src),
                              "history_rows_matched": len(rows) - own_rows, "history_bytes_read": history_read.bytes,
                              "labels_own": own_labels, "labels_history": labels.height - own_labels})


def write_labels(lake: Lake, key: str, labels: pl.DataFrame) -> int:
    """Labels sorted by node, in row groups a member unit can read by its nodes' range. -> bytes written"""
    with lake.part_writer(key, LABEL_SCHEMA) as out:
        table = labels.to_arrow().cast(LABEL_SCHEMA)
        for i in range(0, table.num_rows, INDEX_GROUP_ROWS):
            out.write(table.slice(i, INDEX_GROUP_ROWS))
    return out.bytes


@dataclass(frozen=True)
class StarUnit(WorkUnit):  # source: the round and range, by name
    lo: int  # its range of nodes: [lo, hi)
    hi: int
    inputs: tuple[str, ...]  # the first round: every bucket's labels, sorted by node; then its range's rows alone
    part: str  # its range's star labels: the components' labels after the last round
    parts: tuple[str, ...]  # its rows rewritten, by the range of their parent
    starts: tuple[int, ...]
    first: bool  # the first round: its inputs hold every range, each read from where its range starts


@timed_unit
def write_star(u: StarUnit) -> UnitResult:
    lake = Lake(u.store)
    fetched = ReadCount()
    read = [cast(pl.DataFrame, pl.from_arrow(read_range(lake, key, "node", u.lo, u.hi, fetched))) if u.first
            else lake.scan([key]).collect() for key in u.inputs]
    rows = pl.concat([pl.DataFrame(schema=EMPTY_LABELS), *read])
    star = star_step(rows)
    written = write_labels(lake, u.part, star.labels)
    for key, piece in zip(u.parts, split_by_range(star.rows, "root", u.starts), strict=True):
        with lake.part_writer(key, LABEL_SCHEMA) as out:
            out.write(piece.to_arrow().cast(LABEL_SCHEMA))
        written += out.bytes
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=rows.height, rows_out=star.rows.height,
                      bytes_in=fetched.bytes, bytes_out=written,
                      counts={"redirected": star.redirected, "labels": star.labels.height})


@dataclass(frozen=True)
class JumpUnit(WorkUnit):  # source: the round and range, by name
    labels: str  # its range's star labels
    inputs: tuple[str, ...]  # the rows whose parent is in its range, a piece from each star unit
    parts: tuple[str, ...]  # the rows rewritten, by the range of their node, each sorted by node
    starts: tuple[int, ...]


@timed_unit
def write_jump(u: JumpUnit) -> UnitResult:
    from contextlib import ExitStack

    lake = Lake(u.store)
    labels = lake.scan([u.labels]).collect()
    rows = changed = 0
    # A piece at a time, each written out as it is rewritten: the rows pointing into one range (a large cluster's,
    # to its root) are never held at once, only the range's labels are.
    with ExitStack() as stack:
        outs = [stack.enter_context(lake.part_writer(key, LABEL_SCHEMA)) for key in u.parts]
        for key in u.inputs:
            piece, moved = jump_step(lake.scan([key]).collect(), labels)
            rows, changed = rows + piece.height, changed + moved
            for out, part in zip(outs, split_by_range(piece, "node", u.starts), strict=True):
                out.write(part.to_arrow().cast(LABEL_SCHEMA))
    return UnitResult(unit=u.unit, source=u.source, rows_in=rows, rows_out=rows,
                      bytes_out=sum(out.bytes for out in outs), counts={"jumped": changed})


@dataclass(frozen=True)
class MemberUnit(WorkUnit):  # source: a signatures part
    crawl: str
    shard: str
    docs: str
    first_node: int
    rows: int
    labels: str
    parts: tuple[str, ...]  # one per keep unit


@timed_unit
def write_members(u: MemberUnit) -> UnitResult:
    lake = Lake(u.store)
    fetched = ReadCount()
    labels = cast(pl.DataFrame, pl.from_arrow(read_range(lake, u.labels, "node", u.first_node,
                                                         u.first_node + u.rows, fetched)))
    if not labels.height:  # none of its documents is in a cluster: its documents are not read
        members = cast(pl.DataFrame, pl.from_arrow(MEMBER_SCHEMA.empty_table()))
    else:
        docs = read_documents(lake, u.docs, u.first_node, labels["node"].to_numpy(), fetched)
        members = members_of(docs, labels).with_columns(crawl=pl.lit(u.crawl), shard=pl.lit(u.shard))
    bytes_out = 0
    for key, piece in zip(u.parts, split_members(members.select(MEMBER_SCHEMA.names), len(u.parts)), strict=True):
        with lake.part_writer(key, MEMBER_SCHEMA) as out:
            out.write(piece.to_arrow().cast(MEMBER_SCHEMA))
        bytes_out += out.bytes
    return UnitResult(unit=u.unit, source=u.source, rows_in=u.rows, rows_out=u.rows, bytes_in=fetched.bytes,
                      bytes_out=bytes_out, counts={"members": members.height})
def keep_count(settings: ClusterSettings, labels: int) -> int:
    """K: the setting, else enough keep units that one holds about `keep_rows` members (one a label: every
    member has one, its root included)."""
    if settings.keep_parts:
        return settings.keep_parts
    return max(1, math.ceil(labels / settings.keep_rows))


@dataclass(frozen=True)
class KeepUnit(WorkUnit):  # source: the keep unit, by name
    settings: ClusterSettings
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
    steps: dict[str, list[UnitResult]] = field(default_factory=dict)
    starts: tuple[int, ...] = (0,)  # the components' ranges of nodes, by their first
    rounds: int = 0  # of the components units

    def count(self, key: str) -> int:
        return sum(r.counts.get(key, 0) for results in self.steps.values() for r in results)

    def peak_rss_bytes(self) -> int:
        return max((r.peak_rss_bytes for results in self.steps.values() for r in results), default=0)


def components(store, edge_units: Sequence[EdgeUnit], done: ClusterRun, parts: Sequence[SignaturePart], crawl: str,
               merge_rows: int, run: RunUnits, key: Callable[[str, str], str]) -> list[str]:
    """The components units, round by round, over the edges units' labels (their results in `done`): the keys of
    the components' labels, one part per range of nodes (`done.starts`); none without edges units."""
    done.steps["components"] = []
    if not edge_units:
        return []
    own_labels, history_labels = done.count("labels_own"), done.count("labels_history")
    starts = plan_ranges([p.rows for p in parts], [p.crawl == crawl for p in parts], own_labels, history_labels,
                         merge_rows)
    done.starts = tuple(starts)
    ends = [*starts[1:], LAST_NODE]
    ranges = len(starts)
    inputs = [tuple(u.part for u in edge_units)] * ranges
    jumped = None
    # A range's bounds are in its parts' keys: the same inputs cut by another `merge_rows` write other parts.
    named = [f"star {starts[r]}-{ends[r]} of {ranges}" for r in range(ranges)]
    for round_ in itertools.count():
        stars = [StarUnit(store=store, source=f"components {round_}, star {r} of {ranges}", lo=starts[r], hi=ends[r],
                          inputs=inputs[r], part=key("components", f"{named[r]}\0" + "\0".join(inputs[r])),
                          parts=tuple(key("components", f"{named[r]} to {s}\0" + "\0".join(inputs[r]))
                                      for s in range(ranges)), starts=done.starts, first=round_ == 0)
                 for r in range(ranges)]
        results = run(write_star, stars)
        done.steps["components"] += results
        done.rounds = round_ + 1
        if not sum(r.counts.get("redirected", 0) for r in results) and not jumped:
            return [u.part for u in stars]
        jumps = [JumpUnit(store=store, source=f"components {round_}, jump {s} of {ranges}", labels=stars[s].part,
                          inputs=tuple(u.parts[s] for u in stars),
                          parts=tuple(key("components", f"jump {s} of {ranges} to {r}\0" + stars[s].part)
                                      for r in range(ranges)), starts=done.starts)
                 for s in range(ranges)]
        results = run(write_jump, jumps)
        done.steps["components"] += results
        jumped = sum(r.counts.get("jumped", 0) for r in results)
        inputs = [tuple(u.parts[r] for u in jumps) for r in range(ranges)]
    raise AssertionError("unreachable")


def cluster_lake(store, parts: Sequence[SignaturePart], settings: ClusterSettings, crawl: str, run: RunUnits,
                 key: Callable[[str, str], str], removed_schema: pa.Schema, largest: int = 10
                 ) -> tuple[ClusterSummary, ClusterRun]:
    """Cluster the documents of `parts` (this crawl's, then the earlier crawls') from their band index, with
    units run by `run`; their parts are written at `key(step, identity)`, the removed documents by the `keep`
    step's units."""
    lake = Lake(store)
    own = sum(p.rows for p in parts if p.crawl == crawl)
    done = ClusterRun(bucket_count(settings, own))
    buckets = done.buckets
    index_parts = tuple(IndexPart(p.index, node_base(i), p.crawl == crawl) for i, p in enumerate(parts))
    plan = "\0".join(p.index for p in parts)
    edge_units = [EdgeUnit(store=store, source=f"bucket {b} of {buckets}", settings=settings, bucket=b,
                           buckets=buckets, inputs=index_parts, part=key("edges", f"{b}/{buckets}\0{plan}"))
                  for b in range(buckets)] if own else []
    done.steps["edges"] = run(write_edges, edge_units)
    labels = components(store, edge_units, done, parts, crawl, settings.merge_rows, run, key)
    keeps = keep_count(settings, lake.scan(labels).select(pl.len()).collect().item() if labels else 0)
    member_units = []
    for i, p in enumerate(parts) if labels else ():
        ranged = labels[int(range_of(np.array([node_base(i)]), done.starts)[0])]
        member_units.append(MemberUnit(store=store, source=p.part, crawl=p.crawl, shard=p.shard, docs=p.docs,
                                       first_node=node_base(i), rows=p.rows, labels=ranged,
                                       parts=tuple(key("members", f"{p.docs}\0{ranged}\0{k}/{keeps}")
                                                   for k in range(keeps))))
    done.steps["members"] = run(write_members, member_units)
    keep_units = []
    for k in range(keeps):
        inputs = tuple(u.parts[k] for u in member_units)
        identity = "\0".join([*inputs, f"{k}/{keeps}"])
        keep_units.append(KeepUnit(store=store, source=f"keep {k} of {keeps}", settings=settings, crawl=crawl,
                                   removed_schema=removed_schema, largest=largest, inputs=inputs,
                                   part=key("keep", identity), sizes_part=key("keep sizes", identity),
                                   largest_part=key("keep largest", identity)))
    done.steps["keep"] = run(write_kept, keep_units)
    sizes, top = merge_summaries([lake.scan([u.sizes_part]).collect() for u in keep_units],
                                 [lake.scan([u.largest_part]).collect() for u in keep_units], largest)
    return ClusterSummary(removed_by=removed_counts(lake.scan([u.part for u in keep_units])), sizes=sizes,
                          largest=top, documents=own, index_documents=sum(p.rows for p in parts) - own,
                          candidates=done.count("candidates"), rejected=done.count("rejected")), done


def cluster_frames(parts: Sequence[pl.DataFrame], settings: ClusterSettings, crawl: str, removed_schema: pa.Schema,
                   buckets: int = 1, keeps: int = 1, largest: int = 10) -> Clusters:
    """The same steps in this process, over frames (`CLUSTER_COLUMNS` plus `crawl` and `shard`) standing for the
    signatures parts in plan order: what the units compute, without the lake."""
    values = settings.bands * settings.rows
    kinds = kinds_of(settings)
    rows = IndexRows.concat([_own_rows(index_rows(p.select(INDEX_INPUT), 0), p, node_base(i), crawl)
                             for i, p in enumerate(parts)], sketch_bytes(values))
    rows = rows.take(np.isin(rows.kind, kinds))
    which = bucket_of(rows.key, buckets)
    edges = [group_edges(rows.take(which == b), confirm_at(settings), values)
             for b in range(buckets)] if rows.own.any() else []
    labels = [star_labels(e.src, e.dst) for e in edges]
    own_nodes = np.array([node_base(i) for i, p in enumerate(parts) if (p["crawl"] == crawl).any()], np.int64)
    own_labels = sum(int(np.isin(part["node"].to_numpy() >> NODE_BITS, own_nodes >> NODE_BITS).sum())
                     for part in labels)
    starts = plan_ranges([p.height for p in parts], [bool((p["crawl"] == crawl).any()) for p in parts], own_labels,
                         sum(part.height for part in labels) - own_labels, settings.merge_rows)
    merged = pl.concat([pl.DataFrame(schema=EMPTY_LABELS), *merge_components(labels, starts)[0]]) if labels \
        else pl.DataFrame(schema=EMPTY_LABELS)
    empty = cast(pl.DataFrame, pl.from_arrow(MEMBER_SCHEMA.empty_table()))
    pieces = [split_members(members_of(numbered(p.select("crawl", "shard", *MEMBER_COLUMNS), node_base(i)), merged)
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


def _own_rows(rows: IndexRows, frame: pl.DataFrame, first_node: int, crawl: str) -> IndexRows:
    """A frame's index rows with their nodes, those of `crawl` marked own (a frame may hold both)."""
    own = (frame["crawl"] == crawl).to_numpy()
    return IndexRows(rows.kind, rows.key, rows.node + first_node, own[rows.node], rows.doc, rows.sketches)
