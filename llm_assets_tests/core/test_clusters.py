"""Duplicate clusters as work units: on planted signatures (exact, near, URL, cross-crawl, candidates the Jaccard
estimate rejects, chains that only join transitively across buckets), any split into signatures parts and any
bucket count gives the clusters of one unit, and, with every candidate taken, the clusters of the single-process
clustering this stage had before (kept below as the reference). In the lake, the units read the band index the
signatures stage writes: an earlier crawl's signatures are never read again, and a small addition reads only the
row groups of the earlier crawls' index that hold one of its keys."""

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from llm_assets.core.clusters import (
    INDEX_INPUT,
    IndexWriter,
    SignaturePart,
    bucket_of,
    cluster_frames,
    cluster_lake,
    index_rows,
    kinds_of,
    merge_components,
    node_base,
    node_ranges,
    star_labels,
)
from llm_assets.core.dedup import CLUSTER_COLUMNS, REMOVED_SCHEMA, find_clusters
from llm_assets.core.filtered import conform
from llm_assets.core.lake import part_key
from llm_assets.core.minhash import EMPTY
from llm_assets.core.signatures import signature_schema
from llm_assets.core.units import InProcessRunner, run_units, unit_id
from llm_assets.settings import DedupSettings

HASHER = DedupSettings().hasher()
K = HASHER.k


def _groups_edges(keys: np.ndarray, valid: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row of a group of equal keys to the group's first, in groups that hold an `own` row."""
    with_own = set(keys[valid & own].tolist())
    rows = np.nonzero(valid & np.isin(keys, list(with_own)))[0]
    if len(rows) < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    k = keys[rows]
    order = np.argsort(k, kind="stable")
    k, rows = k[order], rows[order]
    same = np.concatenate([[False], k[1:] == k[:-1]])
    first = np.maximum.accumulate(np.where(~same, np.arange(len(k)), 0))
    return rows[first[same]], rows[same]


def reference_removed(docs: pl.DataFrame, settings: DedupSettings, crawl: str) -> pl.DataFrame:
    """The removed documents as the single-process clustering computed them before the stage became work units
    (one scipy connected-components over every signature; no Jaccard confirmation), earlier crawls' documents
    joined only by a group that holds a document of `crawl` (the others were clustered with their own crawl)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = docs.height
    own = (docs["crawl"] == crawl).to_numpy()
    srcs, dsts = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    if settings.exact:
        a, b = _groups_edges(docs["text_hash"].to_numpy(), (docs["n_chars"].fill_null(0) > 0).to_numpy(), own)
        srcs.append(a)
        dsts.append(b)
    if settings.by_url:
        a, b = _groups_edges(docs["url_hash"].to_numpy(), (docs["url"].fill_null("") != "").to_numpy(), own)
        srcs.append(a)
        dsts.append(b)
    if settings.near and n:
        bands = docs["bands"].to_numpy()
        for band in range(bands.shape[1]):
            keys = np.ascontiguousarray(bands[:, band])
            a, b = _groups_edges(keys, keys != 0, own)
            srcs.append(a)
            dsts.append(b)
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    _, labels = connected_components(coo_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(n, n)),
                                     directed=False)
    rank = {"earliest": [pl.col("fetch_time").fill_null("~")], "longest": [-pl.col("n_chars")], "first": []}
    frame = docs.select("crawl", "shard", "doc_id", "source_key", "url", "fetch_time", "n_chars", "text_hash",
                        "url_hash").with_columns(cluster=pl.Series(labels, dtype=pl.Int64), own=pl.Series(own),
                                                 node=pl.int_range(n, dtype=pl.Int64))
    frame = frame.with_columns(cluster_size=pl.len().over("cluster")).filter(pl.col("cluster_size") > 1)
    frame = frame.sort(["cluster", "own", *rank[settings.keep], "doc_id", "source_key"])
    head = frame.group_by("cluster", maintain_order=True).first().select(
        "cluster", kept_node="node", kept_crawl="crawl", kept_doc="doc_id", kept_text="text_hash",
        kept_url="url_hash")
    frame = frame.join(head, on="cluster")
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
    return conform(removed, REMOVED_SCHEMA)


def planted(crawl: str, n: int, seed: int, copies_of: pl.DataFrame | None = None) -> tuple[pl.DataFrame, list]:
    """`n` random documents of `crawl` with planted duplicates among them (and of `copies_of`, an earlier crawl):
    exact copies, near copies (10 of 112 values changed), candidates that share one band and nothing else, URL
    copies, URL-less and text-less documents, and chains a–b–c–d–e whose links are each of another kind (text
    hash, URL, band), so that their keys fall in different buckets. -> (frame, the chains' doc ids)."""
    rng = np.random.default_rng(seed)
    sig = rng.integers(0, 2**32 - 1, (n, K), dtype=np.uint64).astype(np.uint32)
    text_hash = rng.integers(1, 2**63, n, dtype=np.uint64)
    url = [f"https://{crawl}.example/{i}" for i in range(n)]
    n_chars = rng.integers(50, 5000, n).astype(np.int64)
    fetch = [f"2024-01-{rng.integers(1, 4):02d}" if rng.random() > 0.1 else None for _ in range(n)]

    def pick(count: int, lo: int = 0) -> list[tuple[int, int]]:
        """(copy, original) pairs of rows: copies from the back, originals from the front."""
        return [(int(c), int(o)) for c, o in zip(rng.choice(np.arange(n // 2, n), count, replace=False),
                                                 rng.integers(lo, n // 2, count), strict=True)]

    copies = pick(n // 3)
    step = len(copies) // 6
    for c, o in copies[:step]:  # exact (text hash, same words: every band too)
        sig[c], text_hash[c], n_chars[c] = sig[o], text_hash[o], n_chars[o]
    for c, o in copies[step:2 * step]:  # near: most bands shared, estimate ~0.9
        sig[c] = sig[o]
        sig[c, rng.choice(K, 10, replace=False)] = rng.integers(0, 2**32 - 1, 10, dtype=np.uint64).astype(np.uint32)
    for c, o in copies[2 * step:3 * step]:  # one band alike, nothing else: an LSH candidate, estimate ~0.07
        band = int(rng.integers(0, HASHER.bands))
        sig[c, band * HASHER.rows:(band + 1) * HASHER.rows] = sig[o, band * HASHER.rows:(band + 1) * HASHER.rows]
    for c, o in copies[3 * step:4 * step]:  # the same URL
        url[c] = url[o]
    for c, _ in copies[4 * step:5 * step]:  # no URL
        url[c] = "" if c % 2 else None
    for c, _ in copies[5 * step:]:  # no text: no length, the empty signature
        sig[c], n_chars[c] = EMPTY, 0
    chains = []
    for start in range(0, 40, 5):
        a, b, c, d, e = (n // 2 - 45 + start + i for i in range(5))
        text_hash[b], n_chars[b] = text_hash[a], n_chars[a]  # a–b: exact, yet all their bands differ
        url[c] = url[b]  # b–c: URL
        sig[d] = sig[c]  # c–d: every band (near, or exact's text hash differs)
        sig[d, :K // 2] = sig[c, :K // 2] ^ (np.arange(K // 2) % 3 == 0).astype(np.uint32)  # 2/3 alike
        sig[e] = sig[d]  # d–e: near
        chains.append([f"{crawl}-{i:05d}" for i in (a, b, c, d, e)])
    frame = pl.DataFrame({
        "doc_id": [f"{crawl}-{i:05d}" for i in range(n)],
        "source_key": [f"raw/{crawl}/f{i % 3}.warc.gz" for i in range(n)],
        "url": url, "fetch_time": fetch, "n_chars": n_chars,
        "text_hash": text_hash,
        "url_hash": pl.Series(url, dtype=pl.String).fill_null("").hash(seed=HASHER.seed),
        "bands": pl.Series(HASHER.band_hashes(sig)).cast(pl.Array(pl.UInt64, HASHER.bands)),
        "signature": pl.Series(sig).cast(pl.Array(pl.UInt32, K)),
    }).select(CLUSTER_COLUMNS).with_columns(
        n_chars=pl.when(pl.col("n_chars") > 0).then("n_chars"), crawl=pl.lit(crawl),
        shard=pl.Series([f"{i % 4:04d}" for i in range(n)]))
    if copies_of is not None:  # the first rows copy an earlier crawl's documents, every other one exactly
        m = min(60, copies_of.height)
        earlier = copies_of.head(m).select("n_chars", "text_hash", "bands", "signature")
        frame = pl.concat([frame.head(m).drop("n_chars", "text_hash", "bands", "signature").hstack(earlier)
                           .select(frame.columns), frame.slice(m)])
    return frame, chains


def split_parts(docs: pl.DataFrame, parts: int) -> list[pl.DataFrame]:
    """Consecutive slices of `docs`, as the signatures parts of the plan (own crawl, then the earlier ones)."""
    edges = np.linspace(0, docs.height, parts + 1).astype(int)
    return [docs.slice(a, b - a) for a, b in zip(edges[:-1], edges[1:], strict=True)]


@pytest.fixture(scope="module")
def crawls() -> tuple[pl.DataFrame, pl.DataFrame, list]:
    earlier, _ = planted("CC-2023", 800, seed=1)
    later, chains = planted("CC-2024", 1600, seed=2, copies_of=earlier)
    return later, earlier, chains


SETTINGS = [
    DedupSettings(),
    DedupSettings(by_url=True, keep="longest"),
    DedupSettings(keep="first", exact=False),
    DedupSettings(near=False, by_url=True),
    DedupSettings(cross_crawl=True),
    DedupSettings(cross_crawl=True, by_url=True, keep="first"),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: s.model_dump_json(exclude_defaults=True))
def test_units_give_the_single_process_clusters(crawls, settings):
    later, earlier, _ = crawls
    docs = pl.concat([later, earlier]) if settings.cross_crawl else later
    for threshold in (0.0, 0.8):
        s = settings.model_copy(update={"jaccard_threshold": threshold, "merge_rows": 40})
        whole = find_clusters(docs, s, "CC-2024")
        if threshold == 0:  # every candidate: what the stage computed before it was cut into units
            assert whole.removed.equals(reference_removed(docs, s, "CC-2024"))
            assert whole.candidates == whole.rejected == 0
        elif s.near:
            assert whole.rejected > 0 and whole.candidates > whole.rejected
        assert whole.removed.height > 100
        # the keep units' split is the members', whatever the buckets: K varies at one bucket count. The part counts
        # take turns over the unit shapes (shifted at the second threshold), not every pair at each threshold.
        units = [(b, 1) for b in (1, 2, 3, 8, 16)] + [(3, k) for k in (2, 5, 8)]
        for i, (buckets, keeps) in enumerate(units):
            parts = (1, 3, 7)[(i + (threshold > 0)) % 3]
            got = cluster_frames(split_parts(docs, parts), s, "CC-2024", REMOVED_SCHEMA, buckets=buckets,
                                 keeps=keeps)
            assert got.removed.equals(whole.removed), (threshold, parts, buckets, keeps)
            assert got.sizes.equals(whole.sizes) and got.largest.equals(whole.largest)
            assert got.removed_by.equals(whole.removed_by) and got.removed_count == whole.removed.height
            assert (got.documents, got.index_documents, got.candidates, got.rejected) == \
                (whole.documents, whole.index_documents, whole.candidates, whole.rejected)


def test_chains_join_only_across_buckets_and_end_in_one_cluster(crawls):
    later, _, chains = crawls
    settings = DedupSettings(by_url=True)
    rows = index_rows(later.select(INDEX_INPUT), 0)
    rows = rows.take(np.isin(rows.kind, kinds_of(settings)))
    ids = later["doc_id"].to_list()

    def keys_of(node: int) -> set[tuple[int, int]]:
        at = rows.node == node
        return set(zip(rows.kind[at].tolist(), rows.key[at].tolist(), strict=True))

    for chain in chains:
        nodes = [ids.index(d) for d in chain]
        links = [keys_of(a) & keys_of(b) for a, b in zip(nodes, nodes[1:], strict=False)]
        assert all(links)
        # at 8 buckets, no one bucket holds every link: the chain joins only when the components merge
        buckets = [set(bucket_of(np.array([k for _, k in link], np.uint64), 8).tolist()) for link in links]
        assert not set.intersection(*buckets)
    removed = cluster_frames(split_parts(later, 5), settings, "CC-2024", REMOVED_SCHEMA, buckets=8).removed
    by_doc = dict(zip(removed["doc_id"], removed["duplicate_of"], strict=True))
    for chain in chains:
        kept = {by_doc.get(d, d) for d in chain}
        assert len(kept) == 1 and kept <= set(chain)


def test_keep_units_get_even_shares_of_the_clusters_whatever_their_roots():
    """Roots are the smallest nodes of their clusters, so crowd the first signatures parts' first rows: the hash
    spreads them evenly over the keep units anyway."""
    from llm_assets.core.clusters import keep_of, node_base

    roots = pl.Series([node_base(part) + row for part in range(3) for row in range(0, 20_000, 2)], dtype=pl.Int64)
    for keeps in (2, 7, 64):
        shares = np.bincount(keep_of(roots, keeps).to_numpy(), minlength=keeps)
        assert len(shares) == keeps and shares.min() > 0.8 * roots.len() / keeps, shares


def _bucket_labels(edges: list[tuple[int, int]], buckets: int, seed: int) -> list[pl.DataFrame]:
    """Edges dealt at random to buckets, each bucket's as the edges units label it (stars of their components)."""
    rng = np.random.default_rng(seed)
    which = rng.integers(0, buckets, len(edges))
    pairs = np.array(edges, np.int64).reshape(-1, 2)
    return [star_labels(pairs[which == b, 0], pairs[which == b, 1]) for b in range(buckets)]


def _old_merge(labels: list[pl.DataFrame]) -> pl.DataFrame:
    """What the top of the merge tree computed in one process: the components of every bucket's labels at once."""
    return star_labels(np.concatenate([p["node"].to_numpy() for p in labels]),
                       np.concatenate([p["root"].to_numpy() for p in labels]))


def _by_ranges(labels: list[pl.DataFrame], starts: list[int]) -> tuple[pl.DataFrame, int]:
    ranged, rounds = merge_components(labels, starts)
    for part, lo, hi in zip(ranged, starts, [*starts[1:], 1 << 63], strict=True):
        nodes = part["node"].to_numpy()
        assert ((nodes >= lo) & (nodes < hi)).all() and (np.diff(nodes) > 0).all()  # its range, sorted
    return pl.concat(ranged), rounds


@pytest.mark.core
def test_components_by_range_equal_the_merge_of_every_label_at_once():
    """Random graphs over 12 signatures parts (clusters of every size, many spanning several parts), their edges
    dealt to buckets: the rounds of star and jump units over node ranges give the labels the single merge of all
    the buckets' labels gave, for every cut into ranges."""
    rng = np.random.default_rng(7)
    nodes = np.array([node_base(p) + r for p in range(12) for r in range(1000)], np.int64)
    edges, at, shuffled = [], 0, rng.permutation(nodes)
    for size in rng.zipf(2.0, 1500).clip(2, 300):  # disjoint clusters, a heavy tail of sizes
        members, at = shuffled[at:at + int(size)], at + int(size)
        for a in range(1, len(members)):  # a random tree over the members
            edges.append((int(members[a]), int(members[rng.integers(0, a)])))
    for buckets in (1, 3, 16):
        labels = _bucket_labels(edges, buckets, seed=buckets)
        want = _old_merge(labels)
        assert want["root"].n_unique() > 600 and want.height < len(nodes)
        for starts in ([0], [0, node_base(5)], [node_base(p) for p in range(12)], [0, node_base(1), node_base(11)]):
            got, rounds = _by_ranges(labels, starts)
            assert got.equals(want), (buckets, starts)
            assert rounds == 1 or buckets > 1


@pytest.mark.core
def test_a_chain_across_every_range_takes_several_rounds_and_ends_in_one_cluster():
    """A chain of 64 documents, one a part and each link in a bucket of its own, so that no bucket joins more than
    two: every round's jump halves the chain (about log2 64 rounds), and it ends as one cluster rooted at its
    smallest document, as the single merge of every label found; in one range as in 64."""
    chain = [node_base(p) + 3 for p in range(64)]
    order = np.random.default_rng(1).permutation(63)
    labels = [star_labels(np.array([chain[i + 1]]), np.array([chain[i]])) for i in order]
    want = _old_merge(labels)
    assert want.height == 64 and set(want["root"]) == {chain[0]}
    for starts in ([0], [node_base(p) for p in range(0, 64, 8)], chain):
        got, rounds = _by_ranges(labels, [0, *chain[1:]] if starts is chain else starts)
        assert got.equals(want) and 5 <= rounds <= 10, rounds


@pytest.mark.core
def test_ranges_hold_whole_parts_of_about_merge_rows_label_rows():
    assert node_ranges([], 10) == [0]
    assert node_ranges([4, 4, 4, 4, 4], 10) == [0, node_base(2), node_base(4)]
    # a part above the limit is a range of its own; parts without labels join the range before them
    assert node_ranges([0, 25, 0, 3, 9, 0], 10) == [0, node_base(2), node_base(4)]
    assert node_ranges([1.5] * 4, 1_000) == [0]


@pytest.mark.parametrize("values", [112, 15])
def test_sketches_estimate_the_share_of_equal_minhash_values(values):
    """4-bit sketches, two values a byte (an odd last one padded): the estimate, corrected for chance agreement,
    is the share of equal 32-bit values within sampling error, and exactly 1 for equal signatures."""
    from llm_assets.core.clusters import agreement, sketch_of

    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**32, (4000, values), dtype=np.uint64).astype(np.uint32)
    share = rng.random(4000)
    b = np.where(rng.random((4000, values)) < share[:, None], a, rng.integers(0, 2**32, (4000, values),
                                                                           dtype=np.uint64).astype(np.uint32))
    truth = (a == b).mean(axis=1)
    got = agreement(sketch_of(a), sketch_of(b), values)
    assert sketch_of(a).shape == (4000, (values + 1) // 2)
    assert (agreement(sketch_of(a), sketch_of(a), values) == 1).all()
    z = (got - truth) / np.sqrt(np.maximum(truth * (1 - truth), 0.05) / values)
    assert abs(z.mean()) < 0.1 and z.std() < 1.3


# --- in the lake: the band index ------------------------------------------------------------------------------

def write_signatures(lake, frames: list[pl.DataFrame], tag: str, **options) -> list[SignaturePart]:
    """Frames (CLUSTER_COLUMNS, `crawl`, `shard`: one crawl and shard each) written as the signatures stage does:
    each a signatures part with its band index and documents."""
    settings = DedupSettings()
    schema = signature_schema(settings.bands, settings.rows)
    parts = []
    for i, frame in enumerate(frames):
        crawl, shard = frame["crawl"][0], frame["shard"][0]
        key, index, docs = (part_key("signatures", crawl, shard, unit_id(tag, str(i), role))
                            for role in ("part", "index", "docs"))
        table = frame.select(schema.names).to_arrow().cast(schema)
        with lake.part_writer(key, schema) as w, IndexWriter(lake, index, docs, HASHER.k, **options) as ix:
            for batch in table.to_batches(max_chunksize=300):
                w.write(batch)
                ix.add(pa.Table.from_batches([batch]))
        parts.append(SignaturePart(crawl, shard, key, frame.height, index, docs))
    return parts


def in_lake(store_config, lake, parts, settings, crawl, tag):
    """The clusters by units in this process, and the removed documents their keep units wrote."""
    got, done = cluster_lake(store_config, parts, settings, crawl,
                             lambda fn, units: run_units(fn, units, InProcessRunner()),
                             lambda step, identity: part_key("duplicate_clusters", crawl, "all",
                                                             unit_id(tag, step, identity)), REMOVED_SCHEMA)
    removed = lake.scan([r.part for r in done.steps["keep"]]).collect().sort("shard", "doc_id", "source_key")
    return got, done, removed


def by_crawl_and_shard(docs: pl.DataFrame, parts: int) -> list[pl.DataFrame]:
    return [f.with_columns(shard=pl.lit(f"{i:04d}")) for i, f in enumerate(split_parts(docs, parts))]


def test_the_units_in_the_lake_read_the_band_index_and_never_an_earlier_crawls_signatures(crawls, store_config,
                                                                                           lake, crawl):
    """Signatures parts of two crawls written with their band index; the earlier crawl's signatures parts are then
    deleted: clustering the later crawl against it in the lake (by units, 5 buckets) still removes what the
    single-process clustering of both crawls' signatures does."""
    later, earlier, _ = crawls
    settings = DedupSettings(cross_crawl=True, by_url=True, buckets=5, merge_rows=150)
    frames = by_crawl_and_shard(later, 3) + by_crawl_and_shard(earlier, 2)
    own = write_signatures(lake, frames[:3], crawl + "-new")
    history = write_signatures(lake, frames[3:], crawl + "-old")
    lake.delete([p.part for p in history])
    got, done, removed = in_lake(store_config, lake, own + history, settings, "CC-2024", crawl)
    whole = find_clusters(pl.concat(frames), settings, "CC-2024")
    assert removed.height > 200 and removed.equals(whole.removed)
    assert set(removed["reason"]) == {"exact", "near", "url", "cross_crawl"}
    assert got.sizes.equals(whole.sizes) and got.largest.equals(whole.largest)
    assert (got.candidates, got.rejected) == (whole.candidates, whole.rejected)
    ranges = len(done.starts)  # a star and a jump unit per range a round, but no jump in the last
    assert ranges > 1 and done.rounds > 1
    assert [len(done.steps[s]) for s in ("edges", "components", "members", "keep")] == \
        [5, ranges * (2 * done.rounds - 1), 5, 1]
    assert 0 < done.count("history_rows_matched") < earlier.height * 16


def test_a_small_addition_reads_only_the_index_row_groups_its_keys_hit(store_config, lake, crawl):
    """Three new documents (two copies of earlier ones) against an earlier crawl of 12,000 (its index in row groups
    of 512 rows, as a dump's is in groups of 8,192): the earlier crawl's index is read only where the new keys
    fall, a small share of it, and the copies are found."""
    earlier, _ = planted("CC-2023", 12_000, seed=3)
    new = earlier.slice(100, 2).vstack(planted("CC-2024", 50, seed=4)[0].head(1).with_columns(
        pl.col("shard").cast(earlier["shard"].dtype))).with_columns(crawl=pl.lit("CC-2024"), shard=pl.lit("0000"),
                                                                    doc_id=pl.Series(["n0", "n1", "n2"]))
    history = write_signatures(lake, by_crawl_and_shard(earlier, 1), crawl + "-big", group_rows=512)
    own = write_signatures(lake, [new], crawl + "-small")
    index_bytes = sum(o.size for p in history for o in lake.list(p.index))
    _, done, removed = in_lake(store_config, lake, own + history, DedupSettings(cross_crawl=True), "CC-2024", crawl)
    assert sorted(removed["doc_id"]) == ["n0", "n1"] and set(removed["reason"]) == {"cross_crawl"}
    assert 0 < done.count("history_bytes_read") < index_bytes / 3
