"""Deduplication: vectorized MinHash against datasketch, exact and near duplicates across shards and crawls, a
deterministic keep rule, and the three assets on a real object store (incremental when one shard changes)."""

import random
import time

import dagster as dg
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from datasketch import MinHash

from llm_assets.core.dedup import CLUSTER_COLUMNS, find_clusters, signature_frame
from llm_assets.core.minhash import EMPTY, MinHasher, jaccard_estimate, shingle_set
from llm_assets.core.partition import read_manifest
from llm_assets.core.signatures import signature_schema, signature_table
from llm_assets.settings import DedupSettings
from llm_assets_support.quality_labels import wikitext_paragraphs
from llm_assets_support.shared_data import shared

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
SETTINGS = DedupSettings()


def edited(text: str, share: float, seed: int) -> str:
    """`text` with about `share` of its words replaced by new ones."""
    rng = random.Random(seed)
    return " ".join(f"new{rng.randrange(10**9)}" if rng.random() < share else w for w in text.split())


def one_word_changed(text: str, seed: int) -> str:
    """A near-duplicate: one word replaced (a 120-word paragraph keeps a 5-gram Jaccard of about 0.92)."""
    words = text.split()
    words[random.Random(seed).randrange(len(words))] = "changed"
    return " ".join(words)


def docs_frame(texts: list[str], crawl: str = "C", shards: list[str] | None = None, **columns) -> pl.DataFrame:
    """The clustering input for `texts`: doc_id d0, d1, ...; fetch times in order unless given."""
    n = len(texts)
    df = pl.DataFrame({
        "doc_id": columns.get("doc_id", [f"{crawl}-d{i}" for i in range(n)]),
        "source_key": [f"raw/{crawl}/file.warc.gz"] * n,
        "url": columns.get("url", [f"https://example.com/{crawl}/{i}" for i in range(n)]),
        "fetch_time": columns.get("fetch_time", [f"2024-01-01T00:00:{i:02d}Z" for i in range(n)]),
        "text": texts,
    }, schema={c: pl.String for c in ("doc_id", "source_key", "url", "fetch_time", "text")})
    sig = signature_frame(df, SETTINGS).select(CLUSTER_COLUMNS)
    return sig.with_columns(crawl=pl.lit(crawl), shard=pl.Series(shards or ["0000"] * n))


def removed_of(docs: pl.DataFrame, crawl: str = "C", **settings) -> dict[str, tuple[str, str]]:
    removed = find_clusters(docs, DedupSettings(**settings), crawl).removed
    return {r["doc_id"]: (r["reason"], r["duplicate_of"]) for r in removed.iter_rows(named=True)}


@pytest.fixture(scope="module")
def paragraphs() -> list[str]:
    return wikitext_paragraphs(120)[:60]


# --- signatures ------------------------------------------------------------------------------------------------

def test_a_signature_depends_on_its_text_only(paragraphs):
    hasher = MinHasher()
    batch = hasher.signatures(paragraphs[:5] + ["", "two words"])
    alone = np.vstack([hasher.signatures([t]) for t in paragraphs[:5] + ["", "two words"]])
    assert batch.shape == (7, 112) and batch.dtype == np.uint32
    assert (batch == alone).all()  # no document's shingles leak into its neighbour's
    assert (batch[5] == EMPTY).all() and (hasher.band_hashes(batch)[5] == 0).all()
    assert not (batch[6] == EMPTY).any()  # fewer words than the n-gram: one shingle, densified everywhere
    # punctuation, case and spacing do not change the shingles
    assert (hasher.signatures(["Hello, World!  How are you today?"]) ==
            hasher.signatures(["hello world how are you today"])).all()


def test_jaccard_estimates_agree_with_datasketch_within_sampling_error(paragraphs):
    """For pairs at known similarities, both estimators are unbiased around the exact Jaccard of the same shingle
    sets, with the binomial standard error sqrt(J(1 - J) / 112); ours is never worse than datasketch's."""
    hasher = MinHasher()
    pairs = [(p, edited(p, share, i)) for i, p in enumerate(paragraphs)
             for share in (0.0, 0.01, 0.03, 0.06, 0.1, 0.2)]
    a = hasher.signatures([x for x, _ in pairs])
    b = hasher.signatures([y for _, y in pairs])
    ours, theirs = [], []
    for i, (x, y) in enumerate(pairs):
        sx, sy = shingle_set(x), shingle_set(y)
        exact = len(sx & sy) / len(sx | sy)
        mx, my = MinHash(num_perm=112, seed=1), MinHash(num_perm=112, seed=1)
        mx.update_batch([s.encode() for s in sx]), my.update_batch([s.encode() for s in sy])
        se = max(np.sqrt(exact * (1 - exact) / 112), 1 / 112)
        ours.append((jaccard_estimate(a[i], b[i]) - exact) / se)
        theirs.append((mx.jaccard(my) - exact) / se)
    ours, theirs = np.array(ours), np.array(theirs)
    assert abs(ours.mean()) < 0.2 and abs(theirs.mean()) < 0.2  # unbiased: the mean z of 360 pairs is ~N(0, 0.05)
    assert ours.std() < 1.15 and np.abs(ours).max() < 4.5  # within sampling error
    assert ours.std() <= theirs.std() + 0.15


def test_densification_borrows_from_the_first_bin_that_was_not_empty():
    """An empty bin takes the value of the first bin of its borrow sequence that had one before densification
    (bins filled on the way never lend), else the document's smallest value; a document without shingles stays
    EMPTY. Checked against a loop that does just that, bin by bin, from almost empty to almost full signatures."""
    hasher = MinHasher()
    rng = np.random.default_rng(7)
    sentinel = np.uint64(1 << 32)
    raw = rng.integers(0, 2**32, (300, hasher.k), dtype=np.uint64)
    raw[rng.random((300, hasher.k)) > rng.random((300, 1)) ** 4] = sentinel
    raw[0] = sentinel
    raw[1, 1:] = sentinel  # one value: most bins find no lender in the rounds
    got = hasher._densify(raw.copy())
    rounds = hasher._borrow_rounds
    for d, row in enumerate(raw):
        full = row != sentinel
        for j in range(hasher.k):
            lenders = [rounds[t][j] for t in range(len(rounds)) if full[rounds[t][j]]]
            want = row[j] if full[j] else EMPTY if not full.any() else row[lenders[0]] if lenders else row[full].min()
            assert got[d, j] == want, (d, j)


def test_the_signature_table_is_the_parts_rows():
    """The stage's per-batch rows: ids passed through, the part's Arrow types, a document without text has no
    length and the empty signature, and the same values as the frame version."""
    batch = pa.record_batch({
        "doc_id": ["a", "b", "c"], "source_key": ["raw/C/f.warc.gz"] * 3, "url": ["https://x.example/a", None, ""],
        "fetch_time": ["2024-01-01T00:00:00Z", None, None], "text": ["Hello, world: one two three four.", None, "é"],
    }, schema=pa.schema([(c, pa.string()) for c in ("doc_id", "source_key", "url", "fetch_time", "text")]))
    table = signature_table(batch, SETTINGS.hasher())
    assert table.schema == signature_schema(SETTINGS.bands, SETTINGS.rows)
    assert table.column("doc_id").to_pylist() == ["a", "b", "c"]
    assert table.column("url").to_pylist() == ["https://x.example/a", None, ""]
    assert table.column("n_chars").to_pylist() == [33, None, 1]
    assert set(table.column("signature")[1].as_py()) == {int(EMPTY)} and set(table.column("bands")[1].as_py()) == {0}
    assert table.equals(signature_frame(pl.from_arrow(batch), SETTINGS).to_arrow().cast(table.schema))


def test_the_hashers_defaults_are_the_settings():
    """benchmarks/minhash_stage.py builds `MinHasher()` without the settings: the two must agree."""
    a, b = MinHasher(), DedupSettings().hasher()
    assert (a.bands, a.rows, a.ngram, a.seed) == (b.bands, b.rows, b.ngram, b.seed)


def test_the_cluster_size_chart_has_a_bar_per_small_size_then_per_power_of_ten():
    from llm_assets.stages.dedup import size_classes

    labels, counts = size_classes([(2, 100), (3, 5), (9, 1), (10, 2), (57, 3), (99, 1), (1234, 1)])
    assert labels == ["2 documents", "3 documents", "9 documents", "10–99 documents", "1,000–9,999 documents"]
    assert counts == [100, 5, 1, 6, 1]


# --- clusters --------------------------------------------------------------------------------------------------

def test_exact_and_near_duplicates_across_shards_are_removed(paragraphs):
    p = paragraphs
    texts = [p[0], p[0].upper(), edited(p[1], 0.0, 0) + " !!", one_word_changed(p[2], 1), p[2], p[3], p[4]]
    docs = docs_frame(texts, shards=["0000", "0001", "0002", "0003", "0000", "0001", "0002"])
    removed = removed_of(docs)
    # earliest fetch wins: d0 keeps over d1 (same words), d3 (edited) is kept over d4 (the original) as earlier
    assert removed == {"C-d1": ("exact", "C-d0"), "C-d4": ("near", "C-d3")}
    clusters = find_clusters(docs, SETTINGS, "C")
    assert clusters.documents == 7 and dict(clusters.sizes.iter_rows()) == {2: 2}
    assert set(clusters.removed["shard"]) == {"0001", "0000"}


def test_unrelated_and_loosely_related_documents_are_kept(paragraphs):
    texts = paragraphs[:20] + [edited(paragraphs[0], 0.5, 7)]  # half the words changed: Jaccard ~0.03
    assert removed_of(docs_frame(texts)) == {}


@pytest.mark.parametrize("keep, kept", [("earliest", "C-d1"), ("longest", "C-d2"), ("first", "C-d0")])
def test_the_kept_document_follows_the_keep_rule(paragraphs, keep, kept):
    p = paragraphs[5]
    docs = docs_frame([p, p + "", p + " " + p.split()[0]], fetch_time=["2024-03", "2024-01", "2024-02"])
    removed = removed_of(docs, keep=keep)
    assert set(removed) == {"C-d0", "C-d1", "C-d2"} - {kept}
    assert {dup for _, dup in removed.values()} == {kept}


def test_clusters_are_deterministic_whatever_the_row_order(paragraphs):
    texts = [p for p in paragraphs[:30]] + [one_word_changed(p, i) for i, p in enumerate(paragraphs[:30:3])]
    docs = docs_frame(texts, shards=[f"{i % 4:04d}" for i in range(len(texts))])
    first = find_clusters(docs, SETTINGS, "C").removed
    shuffled = find_clusters(docs.sample(fraction=1.0, shuffle=True, seed=3), SETTINGS, "C").removed
    assert first.height == 10 and first.equals(shuffled)


def test_by_url_keeps_one_document_per_url(paragraphs):
    docs = docs_frame(paragraphs[:3], url=["https://a.org/x", "https://a.org/x", "https://b.org/"])
    assert removed_of(docs) == {}
    assert removed_of(docs, by_url=True) == {"C-d1": ("url", "C-d0")}


@pytest.mark.parametrize("url", ["", None])
def test_documents_without_a_url_are_never_url_duplicates(paragraphs, url):
    """A source without URLs (JSON Lines without a url field) gives every document the empty URL, whose hashes are
    equal: its near-duplicates are `near` (and its copies `exact`), never `url`, whether `by_url` is on or off."""
    p = paragraphs
    texts = [p[20], one_word_changed(p[20], 4), p[21], one_word_changed(p[21], 5), p[22], p[22], p[23]]
    docs = docs_frame(texts, url=[url] * len(texts))
    expected = {"C-d1": ("near", "C-d0"), "C-d3": ("near", "C-d2"), "C-d5": ("exact", "C-d4")}
    assert removed_of(docs) == expected
    assert removed_of(docs, by_url=True) == expected  # and the empty URL joins nothing: C-d6 stays


def test_a_reason_names_only_a_rule_that_is_on(paragraphs):
    """With `by_url` off, two near-duplicates at one URL are `near`; with `exact` off, two copies are found by
    MinHash and are `near`."""
    p = paragraphs[24]
    docs = docs_frame([p, one_word_changed(p, 6)], url=["https://a.org/x"] * 2)
    assert removed_of(docs) == {"C-d1": ("near", "C-d0")}
    assert removed_of(docs, by_url=True) == {"C-d1": ("url", "C-d0")}
    assert removed_of(docs_frame([p, p]), exact=False) == {"C-d1": ("near", "C-d0")}


def test_exact_or_near_alone_can_be_turned_off(paragraphs):
    p = paragraphs[8]
    docs = docs_frame([p, p, one_word_changed(p, 3)])
    assert set(removed_of(docs)) == {"C-d1", "C-d2"}
    assert removed_of(docs, near=False) == {"C-d1": ("exact", "C-d0")}
    assert set(removed_of(docs, exact=False)) == {"C-d1", "C-d2"}  # identical texts share every band too


def test_cross_crawl_an_earlier_crawl_always_wins(paragraphs):
    p = paragraphs
    earlier = docs_frame([p[10], p[11]], crawl="CC-2023")
    later = docs_frame([p[10], one_word_changed(p[11], 2), p[12], p[12]], crawl="CC-2024",
                       fetch_time=["2020"] * 4)  # fetched "before" the earlier crawl: the crawl order still decides
    removed = removed_of(pl.concat([later, earlier]), crawl="CC-2024")
    assert removed == {"CC-2024-d0": ("cross_crawl", "CC-2023-d0"), "CC-2024-d1": ("cross_crawl", "CC-2023-d1"),
                       "CC-2024-d3": ("exact", "CC-2024-d2")}
    # the index is never removed from: clustering the earlier crawl alone removes nothing
    assert removed_of(earlier, crawl="CC-2023") == {}


def test_pages_sharing_only_a_banner_are_not_near_duplicates(paragraphs):
    """Two unrelated 55-word pages under the same 139-word banner share an LSH band at a Jaccard of about 0.54: the
    candidate is rejected by its Jaccard estimate (and counted); a real near-duplicate of one page still goes."""
    banner = paragraphs[0]
    first, second = (" ".join(p.split()[:55]) for p in wikitext_paragraphs(60)[100:102])
    texts = [f"{banner} {first}", f"{banner} {second}", one_word_changed(f"{banner} {first}", 3)]
    docs = docs_frame(texts)
    bands = docs["bands"].to_numpy()
    assert (bands[0] == bands[1]).any()  # an LSH candidate pair
    clusters = find_clusters(docs, SETTINGS, "C")
    assert removed_of(docs) == {"C-d2": ("near", "C-d0")}
    assert clusters.rejected == 1 and clusters.candidates > clusters.rejected
    assert removed_of(docs, jaccard_threshold=0) == {"C-d1": ("near", "C-d0"), "C-d2": ("near", "C-d0")}


def variant_in_band(text: str, low: float, high: float, seed: int) -> str | None:
    """`text` with words replaced one at a time (seeded) until its 5-gram Jaccard with `text` is below `high`: the
    variant if that is at least `low`, else None (one edit jumped over the band)."""
    rng, words, original = random.Random(seed), text.split(), shingle_set(text)
    while True:
        words[rng.randrange(len(words))] = f"new{rng.randrange(10**9)}"
        variant = " ".join(words)
        jaccard = len(original & (shingles := shingle_set(variant))) / len(original | shingles)
        if jaccard < high:
            return variant if jaccard >= low else None


@pytest.fixture(scope="module")
def pairs_near_the_threshold() -> pl.DataFrame:
    """200 paragraphs of 100 words and more, each with a variant of true Jaccard 0.80-0.85 (just above FineWeb's
    0.8)."""
    pairs = [(base, variant) for i, base in enumerate(wikitext_paragraphs(100))
             if (variant := variant_in_band(base, 0.80, 0.85, i)) is not None][:200]
    assert len(pairs) == 200
    return docs_frame([t for pair in pairs for t in pair])


def test_pairs_just_above_the_threshold_are_found_as_often_as_the_lsh_finds_them(pairs_near_the_threshold):
    """The LSH alone catches 92-99 % of pairs at J 0.80-0.85 (the S-curve); rejecting a candidate only when its
    estimate is confidently below 0.8 loses few of those, where rejecting below the estimate itself (confidence
    0.5: the old rule) lost about a sixth."""
    def found(**settings) -> int:
        return len(removed_of(pairs_near_the_threshold, **settings))

    candidates = found(jaccard_threshold=0)
    assert candidates >= 180
    assert found() >= candidates - 4
    assert found(jaccard_confidence=0.5) <= candidates - 15


def test_a_crawl_without_signatures_has_no_clusters():
    empty = docs_frame([])
    clusters = find_clusters(empty, SETTINGS, "C")
    assert clusters.removed.height == 0 and clusters.documents == 0 and clusters.sizes.height == 0
    assert removed_of(docs_frame(["one lonely document with a few words"])) == {}


def test_earlier_crawls_follow_the_configured_order():
    known = ["CC-MAIN-2024-22", "CC-MAIN-2020-34", "CC-MAIN-2023-06"]
    assert DedupSettings().earlier_crawls("CC-MAIN-2024-22", known) == []
    on = DedupSettings(cross_crawl=True)
    assert on.earlier_crawls("CC-MAIN-2024-22", known) == ["CC-MAIN-2020-34", "CC-MAIN-2023-06"]
    assert on.earlier_crawls("CC-MAIN-2020-34", known) == []
    ordered = DedupSettings(cross_crawl=True, crawl_order=("CC-MAIN-2024-22", "CC-MAIN-2020-34"))
    assert ordered.earlier_crawls("CC-MAIN-2020-34", known) == ["CC-MAIN-2024-22"]
    assert ordered.earlier_crawls("CC-MAIN-2023-06", known) == []  # not in the order: compared with nothing


# --- the assets on a real store --------------------------------------------------------------------------------

def lake_defs(object_store, settings=None):
    from llm_assets.dagster.jobs import jobs_of
    from llm_assets_tests.conftest import built
    from resources import LakeIOManager

    stages = ("raw_files", "documents", "image_text_pairs", "filtered", "signatures", "duplicate_clusters",
              "deduplicated", "tokenized", "crawl_stats")
    return dg.Definitions(
        assets=built(*stages, settings=settings),
        jobs=jobs_of(stages),
        resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)},
    )


@pytest.fixture
def dedup_defs(object_store):
    return lake_defs(object_store)


def build_curated(defs, lake, instance, crawl: str):
    """Two real WARC files in two shards of one crawl, taken through lake_job, crawl_job and curated_job."""
    from llm_assets.platform.partitions import crawl_shard_key

    for shard, name in (("0000", "dolma__sample-0000.warc.gz"), ("0001", "dolma__sample-0001.warc.gz")):
        lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, shard, 'r')}", shared("warc", name))
    instance.add_dynamic_partitions("crawl", [crawl])
    keys = [crawl_shard_key(crawl, s) for s in ("0000", "0001")]
    for key in keys:
        run(defs, "lake_job", key, instance)
    run(defs, "crawl_job", crawl, instance)
    for key in keys:
        run(defs, "curated_job", key, instance)
    return lake


@pytest.fixture
def curated(store_env, dedup_defs, object_store, instance, crawl):
    """A curated crawl of its own for the test (one that changes it)."""
    return build_curated(dedup_defs, object_store.lake(), instance, crawl)


def name_in_shard(crawl: str, shard: str, stem: str, suffix: str = ".warc.gz") -> str:
    from llm_assets.core.inventory import shard_of
    from llm_assets.settings import load_settings

    shards = load_settings().shards
    return next(n for i in range(10_000) if shard_of(f"raw/{crawl}/{(n := f'{stem}-{i}{suffix}')}",
                                                    shards) == shard)


def run(defs, job: str, key, instance):
    result = defs.resolve_job_def(job).execute_in_process(partition_key=key, instance=instance)
    assert result.success
    return {e.materialization.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}


def test_the_same_pages_in_two_shards_are_kept_once_and_one_changed_shard_recomputes_only_its_own(
        store_env, dedup_defs, object_store, instance, crawl):
    from llm_assets.core.lake import manifest_key
    from llm_assets.platform.partitions import crawl_shard_key

    lake = object_store.lake()
    warc = shared("warc", "dolma__sample-0000.warc.gz")
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'a')}", warc)
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0001', 'b')}", warc)  # the same crawl, other names
    instance.add_dynamic_partitions("crawl", [crawl])
    a, b = crawl_shard_key(crawl, "0000"), crawl_shard_key(crawl, "0001")
    kept = run(dedup_defs, "lake_job", a, instance)["filtered"]["rows_out"]
    run(dedup_defs, "lake_job", b, instance)
    assert kept > 0

    clusters = run(dedup_defs, "crawl_job", crawl, instance)["duplicate_clusters"]
    assert clusters["documents"] == 2 * kept and clusters["shards"] == 2
    # every page of the second copy duplicates one of the first: the earliest fetch ties, doc_id decides
    assert clusters["duplicates_removed"] >= kept and clusters["removed_by_reason"].get("exact", 0) >= kept
    curated = [run(dedup_defs, "curated_job", key, instance) for key in (a, b)]
    out = sum(c["deduplicated"]["rows_out"] for c in curated)
    assert out == 2 * kept - clusters["duplicates_removed"]
    assert sum(c["tokenized"]["rows_out"] for c in curated) == out
    rejected = pl.concat([lake.scan([u["rejected_part"] for u in lake.get_json(
        manifest_key("deduplicated", crawl, s))["units"]]).collect() for s in ("0000", "0001")])
    assert rejected.height == clusters["duplicates_removed"] and rejected["duplicate_of"].is_not_null().all()

    # A new file in shard 0001: only that shard's signatures are recomputed, the clusters rebuild from both.
    before = lake.get_json(manifest_key("signatures", crawl, "0000"))
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0001', 'c')}", shared("warc", "dolma__sample-0001.warc.gz"))
    run(dedup_defs, "lake_job", b, instance)
    assert lake.get_json(manifest_key("signatures", crawl, "0000")) == before
    again = run(dedup_defs, "crawl_job", crawl, instance)["duplicate_clusters"]
    assert again["documents"] > clusters["documents"] and again["duplicates_removed"] >= clusters["duplicates_removed"]


def test_cross_crawl_dedup_on_the_store_records_the_crawls_compared(store_env, dedup_defs, object_store, instance,
                                                                    monkeypatch):
    from llm_assets.platform.partitions import crawl_shard_key

    lake = object_store.lake()
    warc = shared("warc", "dolma__sample-0000.warc.gz")
    early, late = "XC-2023-01", "XC-2024-01"
    for crawl in (early, late):
        lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0002', 'x')}", warc)
    instance.add_dynamic_partitions("crawl", [early, late])
    for crawl in (early, late):
        run(dedup_defs, "lake_job", crawl_shard_key(crawl, "0002"), instance)
    from llm_assets.settings import load_settings

    cross = lake_defs(object_store, load_settings().model_copy(update={"dedup": DedupSettings(cross_crawl=True)}))
    first = run(cross, "crawl_job", early, instance)["duplicate_clusters"]
    second = run(cross, "crawl_job", late, instance)["duplicate_clusters"]
    assert first["against_crawls"] == [] and first["duplicates_removed"] == 0
    assert second["against_crawls"] == [early] and second["index_documents"] == first["documents"]
    assert second["removed_by_reason"] == {"cross_crawl": second["documents"]}  # every page was there before


def test_a_source_without_urls_has_its_near_duplicates_removed_as_near(store_env, dedup_defs, object_store, instance,
                                                                       crawl):
    """Real web text as JSON Lines without a url field (CCNet documents, `metadata` dropped), each with a copy that
    has one word changed: the clusters remove the copies as `near` (or `exact`), never `url` (`by_url` is off)."""
    import gzip
    import json

    from llm_assets.core.inventory import shard_of
    from llm_assets.platform.partitions import crawl_shard_key
    from llm_assets.settings import load_settings

    lines = []
    with gzip.open(shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz"), "rt") as f:
        for i, line in enumerate(f):
            text = json.loads(line)["text"]
            word = text.split()[len(text.split()) // 2]
            lines += [{"id": f"a{i}", "text": text}, {"id": f"b{i}", "text": text.replace(f" {word} ", " changed ", 1)}]
    lake = object_store.lake()
    name = next(n for i in range(10_000) if shard_of(f"raw/{crawl}/{(n := f'nourl-{i}.jsonl')}",
                                                    load_settings().shards) == "0000")
    lake.put_bytes(f"raw/{crawl}/{name}", "".join(json.dumps(x) + "\n" for x in lines).encode())
    instance.add_dynamic_partitions("crawl", [crawl])
    kept = run(dedup_defs, "lake_job", crawl_shard_key(crawl, "0000"), instance)["filtered"]["rows_out"]
    clusters = run(dedup_defs, "crawl_job", crawl, instance)["duplicate_clusters"]
    reasons = clusters["removed_by_reason"]
    assert kept >= 4 and clusters["duplicates_removed"] >= kept // 2 - 1
    assert set(reasons) <= {"near", "exact"} and reasons.get("near", 0) >= 4  # exact: a copy the edit missed
    assert clusters["lsh_candidates"] >= reasons["near"] and clusters["buckets"] == 1

    # Cut into 5 buckets, components in ranges of about 50 label rows, 3 keep units: the stage removes the same
    # documents for the same reasons, and commits the keep units' parts.
    removed = committed_removals(lake, crawl)
    assert clusters["units"]["keep"] == 1 and read_manifest(lake, "duplicate_clusters", crawl, "all").rows == \
        removed.height
    cut = load_settings().dedup.model_copy(update={"buckets": 5, "merge_rows": 50, "keep_parts": 3})
    again = run(lake_defs(object_store, load_settings().model_copy(update={"dedup": cut})), "crawl_job", crawl,
                instance)["duplicate_clusters"]
    assert again["buckets"] == 5 and again["units"]["edges"] == 5 and again["components_ranges"] >= 1
    assert again["units"]["components"] == again["components_ranges"] * (2 * again["components_rounds"] - 1)
    assert again["units"]["keep"] == 3 and len(read_manifest(lake, "duplicate_clusters", crawl, "all").parts) == 3
    assert committed_removals(lake, crawl).equals(removed) and removed.height == clusters["duplicates_removed"]

    # What the units worked from (bucket, edge, component and member parts of both runs, the keep units' summaries)
    # is in no manifest, nor are the first run's removed parts any more: they stay beside the commit for the
    # retention, then the vacuum deletes them, and only them
    from llm_assets.core.lake import partition_prefix
    from llm_assets.core.partition import vacuum

    partition = ("duplicate_clusters", crawl, "all")
    live = read_manifest(lake, *partition).part_keys()
    stored = {k for k in lake.keys(partition_prefix("lake", *partition)) if k.endswith(".parquet")}
    assert live < stored and len(stored - live) >= sum(again["units"].values())
    assert vacuum(lake, 3600, [partition]) == []
    assert set(vacuum(lake, 3600, [partition], now=time.time() + 7200)) >= stored - live
    assert {k for k in lake.keys(partition_prefix("lake", *partition)) if k.endswith(".parquet")} == live
    assert committed_removals(lake, crawl).equals(removed)


def committed_removals(lake, crawl: str) -> pl.DataFrame:
    return lake.scan(read_manifest(lake, "duplicate_clusters", crawl, "all").parts).collect() \
        .sort("shard", "doc_id", "source_key")


def test_a_crawl_level_stage_over_a_shard_never_built_fails_and_commits_nothing(store_env, dedup_defs, object_store,
                                                                                 instance, crawl):
    """Raw files in shards 0000 and 0001, only 0000 built (0001's run failed or never ran): crawl_job fails naming
    the missing shard of the input each crawl-level stage reads, and commits neither. Shards 0002 and 0003 have no
    raw file: nothing to build, not missing. Once 0001 is built, crawl_job succeeds over both."""
    import gzip

    from llm_assets.core.lake import manifest_key
    from llm_assets.platform.partitions import crawl_shard_key

    lake = object_store.lake()
    with gzip.open(shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz"), "rt") as f:
        docs = f.readlines()
    for shard, half in (("0000", docs[::2]), ("0001", docs[1::2])):
        stem = next(n for i in range(10_000) if _shard(crawl, (n := f"ccnet-{i}.jsonl")) == shard)
        lake.put_bytes(f"raw/{crawl}/{stem}", "".join(half).encode())
    instance.add_dynamic_partitions("crawl", [crawl])
    run(dedup_defs, "lake_job", crawl_shard_key(crawl, "0000"), instance)

    result = dedup_defs.resolve_job_def("crawl_job").execute_in_process(partition_key=crawl, instance=instance,
                                                                      raise_on_error=False)
    assert not result.success
    errors = {e.step_key: str(e.step_failure_data.error) for e in result.all_events if e.is_step_failure}
    for asset, read in (("duplicate_clusters", "signatures"), ("crawl_stats", "filtered")):
        assert (f"{asset} {crawl}: {read} has no committed partition for shard 0001 of crawl {crawl}, which has raw "
                "files") in errors[asset], errors
        assert not lake.exists(manifest_key(asset, crawl, "all"))

    run(dedup_defs, "lake_job", crawl_shard_key(crawl, "0001"), instance)
    built = run(dedup_defs, "crawl_job", crawl, instance)
    assert built["duplicate_clusters"]["shards"] == 2 and built["crawl_stats"]["shards"] == 2


def _shard(crawl: str, name: str) -> str:
    from llm_assets.core.inventory import shard_of
    from llm_assets.settings import load_settings

    return shard_of(f"raw/{crawl}/{name}", load_settings().shards)
