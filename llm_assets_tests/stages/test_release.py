"""A release end to end on a real store: real pages through every stage, packed, shuffled and written as a
Megatron indexed dataset with provenance, immutable per version, readable by the loader and `show release`."""

import json
import uuid

import dagster as dg
import numpy as np
import polars as pl
import pytest
import yaml

from llm_assets import cli
from llm_assets.core.indexed import IndexedDataset
from llm_assets.core.lake import manifest_key
from llm_assets.core.release import latest_release
from llm_assets.loader import ReleaseLoader
from llm_assets.settings import ReleaseSettings, load_settings
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import png_size
from llm_assets_tests.core.test_dedup import build_curated, lake_defs
from llm_assets_tests.tools.test_takedown import (  # noqa: F401 (module-scoped fixtures)
    instance,
    object_store,
    store_env,
)

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")


# One curated crawl for the whole module: the tests below only read it and write releases of their own names,
# except the tokenizer test, last, which retokenizes shard 0000 with a trained tokenizer.
@pytest.fixture(scope="module")
def crawl() -> str:
    return f"TEST-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def curated(store_env, object_store, instance, crawl):
    return build_curated(lake_defs(object_store), object_store.lake(), instance, crawl)


def release_with(monkeypatch, object_store, instance, **config):
    from llm_assets_tests.conftest import built
    from resources import LakeIOManager

    *upstream, release = built("raw_files", "documents", "filtered", "signatures", "duplicate_clusters",
                               "deduplicated", "tokenized", "release",
                               settings=load_settings().model_copy(update={"release": ReleaseSettings(**config)}))
    result = dg.materialize([*upstream, release], selection=[release], instance=instance,
                            resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)})
    assert result.success
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def tokenized_stream(lake, crawl) -> list[np.ndarray]:
    docs = []
    for shard in ("0000", "0001"):
        m = lake.get_json(manifest_key("tokenized", crawl, shard))
        for u in m["units"]:
            docs += [np.asarray(t, dtype=np.uint16) for t in lake.scan([u["part"]]).collect()["tokens"].to_list()]
    return docs


@pytest.mark.parametrize("packing", ["bfd", "concat"])
def test_a_release_holds_every_token_once_in_shuffled_sequences_with_provenance(
        curated, monkeypatch, object_store, instance, crawl, tmp_path, packing):
    lake = curated
    meta = release_with(monkeypatch, object_store, instance, name="t", crawls=(crawl,), context=256,
                        packing=packing, seed=7)
    prefix = latest_release(lake, "t")
    assert meta["version"] in prefix and not meta["reused"]
    manifest = lake.get_json(prefix + "manifest.json")
    assert manifest["crawls"] == [crawl] and {p["shard"] for p in manifest["partitions"]} == {"0000", "0001"}
    assert all(p["data_version"] and p["code_version"] for p in manifest["partitions"])
    assert manifest["tokenizer"]["eos_id"] == 50256 and manifest["config"]["seed"] == 7
    for name in ("data.bin", "data.idx", "provenance.parquet", "tokenizer.json", "README.md",
                 f"text/{crawl}.parquet"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(lake.get_bytes(prefix + name))
    data = IndexedDataset(tmp_path / "data")
    assert len(data) == meta["sequences"] > 1
    assert all(len(data[i]) == 256 for i in range(len(data)))
    docs = tokenized_stream(lake, crawl)
    stream = np.concatenate(docs)
    released = np.concatenate([data[i] for i in range(len(data))])
    c = manifest["counts"]
    assert c["tokens_in"] == len(stream) and c["documents"] == len(docs)
    assert c["tokens_out"] + c["truncated_tokens"] == c["tokens_in"]
    assert c["sequences"] * 256 == c["tokens_out"] + c["padding_tokens"]
    prov = pl.read_parquet(tmp_path / "provenance.parquet")
    assert prov["length"].sum() == c["tokens_out"] and set(prov["crawl"]) == {crawl}
    # every piece is where provenance says: sequence `position` at `offset` holds that document's tokens
    by_id = {}
    for shard in ("0000", "0001"):
        for u in lake.get_json(manifest_key("tokenized", crawl, shard))["units"]:
            for row in lake.scan([u["part"]]).collect().select("doc_id", "tokens").iter_rows():
                by_id[row[0]] = np.asarray(row[1], dtype=np.uint16)
    for p in prov.iter_rows(named=True):
        piece = data[p["position"]][p["offset"]:p["offset"] + p["length"]]
        assert (piece == by_id[p["doc_id"]][p["start_in_doc"]:p["start_in_doc"] + p["length"]]).all()
    if packing == "bfd":  # whole documents: no token lost, padding with EOS
        assert c["truncated_tokens"] == 0
        real = np.bincount(released, minlength=50257)
        real[50256] -= c["padding_tokens"]
        assert (real == np.bincount(stream, minlength=50257)).all()
    else:  # the stream's prefix, cut in sequences, in another order
        assert c["padding_tokens"] == 0 and c["truncated_tokens"] < 256
        rows = {data[i].tobytes() for i in range(len(data))}
        assert rows == {stream[i * 256:(i + 1) * 256].tobytes() for i in range(c["sequences"])}
        assert any(data[i].tobytes() != stream[i * 256:(i + 1) * 256].tobytes() for i in range(len(data)))
    text = pl.read_parquet(tmp_path / "text" / f"{crawl}.parquet")  # what Hugging Face datasets reads
    assert text.height == len(docs) and {"doc_id", "url", "text"} <= set(text.columns)
    for chart in ("tokens_by_crawl_chart", "tokens_by_language_chart", "language_mix_chart", "positions_chart"):
        assert png_size(meta[chart])[0] == 720
    card = (tmp_path / "README.md").read_text()
    assert "## Size" in card and "dedup rate" in card and crawl in card
    mix = manifest["mixture"]["languages"]  # every language as it comes: the mix, and each language's funnel
    assert sum(r["tokens"] for r in mix.values()) == c["tokens_in"] and "## Language mix" in card
    assert all(f"| {lang} | {r['documents']:,} | {r['tokens']:,} |" in card for lang, r in mix.items())
    assert "## Funnel per language" in card and {r.data["language"] for r in meta["language_mix"].records} == set(mix)
    through = {r.data["language"]: r.data for r in meta["language_funnel"].records}
    for lang, r in mix.items():  # documents per language through the stages, the release's last
        f = through[lang]
        assert f["filtered"] >= f["deduplicated"] >= f["tokenized"] == f["released"] == r["documents"] > 0
        assert f["released_tokens"] == r["tokens"]
    _, front, body = card.split("---\n", 2)  # Hugging Face's YAML header
    header = yaml.safe_load(front)
    assert header["language"] and header["size_categories"] == ["n<1K"] and header["license"] == "other"
    assert {"config_name": crawl, "data_files": [{"split": "train", "path": f"text/{crawl}.parquet"}]} in header[
        "configs"]
    funnel_row = next(line for line in body.splitlines() if line.startswith(f"| {crawl} |"))
    raw_records = int(funnel_row.split("|")[2].replace(",", ""))
    assert raw_records > len(docs)  # the funnel starts at the raw records, skips included
    assert "`revisit`" in body or "`non_html`" in body or "`not_response`" in body  # what the readers skipped
    assert "| `gopher_quality` | " in body and "min_doc_words=50" in body  # every threshold in force
    assert f"{c['sequences']:,} sequences of 256 token ids" in manifest["format"]["data"]


def test_length_buckets_pack_documents_only_with_their_bucket(curated, monkeypatch, object_store, instance, crawl,
                                                               tmp_path):
    lake = curated
    meta = release_with(monkeypatch, object_store, instance, name="buckets", crawls=(crawl,), context=512,
                        length_buckets=(300, 1000))
    prefix = latest_release(lake, "buckets")
    counts = lake.get_json(prefix + "manifest.json")["counts"]
    assert sum(counts["documents_by_length_bucket"].values()) == counts["documents"] and counts["truncated_tokens"] == 0
    prov = pl.read_parquet(lake.get_bytes(prefix + "provenance.parquet"))
    lengths = {}
    for shard in ("0000", "0001"):
        for u in lake.get_json(manifest_key("tokenized", crawl, shard))["units"]:
            lengths |= dict(lake.scan([u["part"]]).collect().select("doc_id", "n_tokens").iter_rows())
    bucket = {d: int(np.searchsorted([300, 1000], n)) for d, n in lengths.items()}
    per_sequence = prov.with_columns(b=pl.col("doc_id").replace_strict(bucket)).group_by("position").agg(
        pl.col("b").n_unique())
    assert per_sequence["b"].max() == 1 and meta["sequences"] == per_sequence.height


def test_a_release_version_is_immutable_and_another_config_is_another_version(
        curated, monkeypatch, object_store, instance, crawl):
    lake = curated
    first = release_with(monkeypatch, object_store, instance, name="imm", crawls=(crawl,), context=128, seed=1)
    prefix = latest_release(lake, "imm")
    created = lake.get_json(prefix + "manifest.json")["created_at"]
    again = release_with(monkeypatch, object_store, instance, name="imm", crawls=(crawl,), context=128, seed=1)
    assert again["version"] == first["version"] and again["reused"]
    assert lake.get_json(prefix + "manifest.json")["created_at"] == created
    other = release_with(monkeypatch, object_store, instance, name="imm", crawls=(crawl,), context=128, seed=2)
    assert other["version"] != first["version"] and not other["reused"]
    assert lake.exists(prefix + "data.bin")  # the earlier version is still there


def test_show_release_prints_decoded_sequences_with_their_documents(
        curated, monkeypatch, object_store, instance, crawl, capsys):
    release_with(monkeypatch, object_store, instance, name="demo", crawls=(crawl,), context=512, seed=3)
    capsys.readouterr()
    assert cli.main(["show", "release", "--limit", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["position"] for r in rows] == [0, 1]
    for row in rows:
        assert row["n_tokens"] == 512 and len(row["text"]) > 100
        assert row["documents"] and all(d["crawl"] == crawl and d["url"].startswith("http") and d["language"]
                                        for d in row["documents"])
        assert sum(d["length"] for d in row["documents"]) <= 512
    assert cli.main(["show", "release", "--limit", "1"]) == 0  # for people: each document with its language
    first = rows[0]["documents"][0]
    assert f"{first['url']} ({first['language']})" in capsys.readouterr().out


def test_the_loader_streams_the_release_from_the_store(curated, monkeypatch, object_store, instance, crawl,
                                                       store_config):
    release_with(monkeypatch, object_store, instance, name="load", crawls=(crawl,), context=64, seed=5)
    prefix = latest_release(curated, "load")
    uri = f"s3://{store_config.bucket}/{prefix}"
    full = [b[0] for b in ReleaseLoader(uri, storage_options=store_config.boto_options())]
    assert len(full) == curated.get_json(prefix + "manifest.json")["counts"]["sequences"]
    ranks = [[b[0] for b in ReleaseLoader(uri, rank=r, world_size=2, storage_options=store_config.boto_options())]
             for r in (0, 1)]
    assert [x.tobytes() for x in ranks[0]] == [x.tobytes() for x in full[0::2]]
    resumed = [b[0] for b in ReleaseLoader(uri, start=5, storage_options=store_config.boto_options())]
    assert [x.tobytes() for x in resumed] == [x.tobytes() for x in full[5:]]



def _stage_rows(lake, crawl: str, asset: str, shards: list[str]) -> pl.DataFrame:
    from llm_assets.core.partition import Manifest

    return lake.scan([p for s in shards for p in Manifest.from_json(lake.get_json(manifest_key(asset, crawl, s))).parts]
                     ).collect()


def test_export_streams_a_stage_to_json_lines_and_parquet_locally_and_to_s3(curated, crawl, store_config, tmp_path,
                                                                             capsys):
    """`llm-assets export` writes exactly the stage's committed rows and columns: one tokenized partition as JSON
    Lines, every shard of deduplicated as Parquet (the shards never built are named), filtered as gzip JSON Lines to
    an S3 key; a partition never committed is a clear error and leaves no file, a key in a lake zone is refused."""
    import gzip

    lake = curated
    tokens = _stage_rows(lake, crawl, "tokenized", ["0000"])
    out = tmp_path / "tokenized.jsonl"
    assert cli.main(["export", "tokenized", "--crawl", crawl, "--shard", "0000", "--out", str(out)]) == 0
    assert f"exported {tokens.height:,} rows of tokenized crawl={crawl} (shard 0000" in capsys.readouterr().out
    assert [json.loads(line) for line in out.read_text().splitlines()] == tokens.to_dicts()

    docs = _stage_rows(lake, crawl, "deduplicated", ["0000", "0001"])
    out = tmp_path / "deduplicated.parquet"
    assert cli.main(["export", "deduplicated", "--crawl", crawl, "--out", str(out)]) == 0
    assert "shard(s) 0002, 0003 not committed" in capsys.readouterr().err
    back = pl.read_parquet(out)
    assert back.columns == docs.columns and "text" in back.columns and back.equals(docs)

    key = f"exports/{crawl}/filtered.jsonl.gz"
    assert cli.main(["export", "filtered", "--crawl", crawl, "--out", f"s3://{store_config.bucket}/{key}"]) == 0
    lines = [json.loads(line) for line in gzip.decompress(lake.get_bytes(key)).splitlines()]
    filtered = _stage_rows(lake, crawl, "filtered", ["0000", "0001"])
    assert [r["doc_id"] for r in lines] == filtered["doc_id"].to_list() and set(lines[0]) == set(filtered.columns)

    capsys.readouterr()
    missing = tmp_path / "missing.jsonl"
    assert cli.main(["export", "tokenized", "--crawl", "NO-SUCH-CRAWL", "--shard", "0000", "--out", str(missing)]) == 1
    assert "unknown crawl 'NO-SUCH-CRAWL'" in capsys.readouterr().err
    assert not missing.exists() and not list(tmp_path.glob(".missing*"))
    assert cli.main(["export", "tokenized", "--crawl", crawl,
                     "--out", f"s3://{store_config.bucket}/raw/{crawl}/tokens.jsonl"]) == 1
    assert "one of the lake's zones" in capsys.readouterr().err and not lake.exists(f"raw/{crawl}/tokens.jsonl")


def test_the_tokenizer_asset_trains_on_a_deterministic_sample_and_the_stage_uses_it(
        curated, monkeypatch, object_store, instance, crawl, tmp_path):
    from llm_assets.core.tokenize import TOKENIZER_LATEST, sample_texts
    from llm_assets.platform.partitions import crawl_shard_key
    from llm_assets.settings import TokenizedSettings
    from llm_assets_tests.conftest import built

    lake = curated
    parts = [u["part"] for s in ("0000", "0001") for u
             in lake.get_json(manifest_key("deduplicated", crawl, s))["units"]]
    sample = sample_texts(lake, parts, 10)
    assert len(sample) == 10 and sample == sample_texts(lake, list(reversed(parts)), 10)  # order-free
    assert sample[:5] == sample_texts(lake, parts, 5)  # a larger sample extends a smaller one

    settings = TokenizedSettings(source="train", train={"vocab_size": 400, "sample_documents": 20,
                                                        "crawls": (crawl,)})
    trained = load_settings().model_copy(update={"tokenized": settings})
    tokenizer, tokenized = built("tokenizer", "tokenized", settings=trained)
    monkeypatch.setenv("LLM_ASSETS_MODEL_CACHE", str(tmp_path / "cache"))
    result = dg.materialize([tokenizer], instance=instance, resources={"store": object_store})
    (event,) = result.get_asset_materialization_events()
    meta = {k: v.value for k, v in event.materialization.metadata.items()}
    assert meta["source"] == "train" and meta["vocab_size"] == 400 and meta["sample_documents"] == 20
    assert lake.get_json(TOKENIZER_LATEST)["sha256"] == meta["sha256"]
    again = dg.materialize([tokenizer], instance=instance, resources={"store": object_store})
    (event,) = again.get_asset_materialization_events()
    assert event.materialization.metadata["sha256"].value == meta["sha256"]  # same sample, same tokenizer

    from resources import LakeIOManager

    key = crawl_shard_key(crawl, "0000")
    upstream = built("raw_files", "documents", "filtered", "signatures", "duplicate_clusters", "deduplicated",
                     settings=trained)
    out = dg.materialize([*upstream, tokenized],
                         selection=[tokenized], partition_key=key, instance=instance,
                         resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)})
    tok = [e for e in out.get_asset_materialization_events()][0].materialization.metadata
    assert tok["tokenizer_sha"].value == meta["sha256"][:20]
    rows = lake.scan([u["part"] for u in lake.get_json(manifest_key("tokenized", crawl, "0000"))["units"]]).collect()
    assert rows.height and max(max(t) for t in rows["tokens"].to_list()) < 400


def test_min_tokens_sets_short_documents_aside_under_rejected(curated, object_store, instance, crawl, capsys):
    """With tokenized.min_tokens, a partition keeps the documents with at least that many tokens (EOS not counted):
    the others are counted as too_few_tokens (rows in = out + dropped, the row_accounting check passes) and written
    under rejected/tokenized/, where `show rejected` finds them."""
    from llm_assets.platform.partitions import crawl_shard_key
    from llm_assets.settings import TokenizedSettings
    from llm_assets_tests.conftest import built
    from resources import LakeIOManager

    lake = curated
    before = _stage_rows(lake, crawl, "tokenized", ["0001"])
    lengths = sorted((before["n_tokens"] - 1).to_list())
    threshold = lengths[len(lengths) // 2]
    short = before.filter(pl.col("n_tokens") - 1 < threshold)
    assert 0 < short.height < before.height
    settings = load_settings().model_copy(update={"tokenized": TokenizedSettings(min_tokens=threshold)})
    upstream = built("raw_files", "documents", "filtered", "signatures", "duplicate_clusters", "deduplicated",
                     settings=settings)
    _, tokenized = built("tokenizer", "tokenized", settings=settings)
    out = dg.materialize([*upstream, tokenized], selection=[tokenized], partition_key=crawl_shard_key(crawl, "0001"),
                         instance=instance,
                         resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)})
    assert out.success
    meta = {k: v.value for k, v in out.get_asset_materialization_events()[0].materialization.metadata.items()}
    assert meta["rows_in"] == before.height and meta["rows_out"] == before.height - short.height
    assert meta["dropped_by_reason"] == {"too_few_tokens": short.height}
    assert all(c.passed for c in out.get_asset_check_evaluations())
    after = _stage_rows(lake, crawl, "tokenized", ["0001"])
    assert sorted(after["doc_id"]) == sorted(before.filter(pl.col("n_tokens") - 1 >= threshold)["doc_id"])
    capsys.readouterr()
    assert cli.main(["show", "rejected", "--stage", "tokenized", "--crawl", crawl, "--shard", "0001", "--json",
                     "--limit", "100000"]) == 0
    rejected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["doc_id"] for r in rejected) == sorted(short["doc_id"])
    assert all(r["reason"] == "too_few_tokens" and r["document_tokens"] < threshold for r in rejected)


def test_a_release_written_as_shards_reads_back_identical_to_the_single_file_release(
        curated, monkeypatch, object_store, instance, crawl, store_config, capsys):
    """The release stage with `sequences_per_shard` small: every shard is written by a work unit, the manifest lists
    them, and the loader, `show release` and `trace` read it as the same sequences, in the same order, with the
    same provenance as the release of one file."""
    from llm_assets.core.release import provenance_keys, release_shards
    from llm_assets.tools.trace import trace

    lake = curated
    one = release_with(monkeypatch, object_store, instance, name="one", crawls=(crawl,), context=128, seed=4)
    many = release_with(monkeypatch, object_store, instance, name="many", crawls=(crawl,), context=128, seed=4,
                        sequences_per_shard=8)
    manifests = {n: lake.get_json(latest_release(lake, n) + "manifest.json") for n in ("one", "many")}
    shards = release_shards(manifests["many"])
    assert one["shards"] == 1 and many["shards"] == len(shards) == -(-one["sequences"] // 8) > 2
    assert manifests["many"]["counts"] == manifests["one"]["counts"]
    card = lake.get_bytes(latest_release(lake, "many") + "README.md").decode()
    assert "## Shards" in card and all(f"| `{s.data}` | {s.first:,}–" in card for s in shards)
    assert "## Shards" not in lake.get_bytes(latest_release(lake, "one") + "README.md").decode()
    uri = {n: f"s3://{store_config.bucket}/{latest_release(lake, n)}" for n in ("one", "many")}
    read = {n: np.concatenate(list(ReleaseLoader(u, batch_size=4, storage_options=store_config.boto_options())))
            for n, u in uri.items()}
    assert read["one"].shape == (one["sequences"], 128) and np.array_equal(read["one"], read["many"])
    prov = {n: lake.scan(provenance_keys(latest_release(lake, n), m)).collect() for n, m in manifests.items()}
    assert prov["one"].equals(prov["many"])

    shown = {}
    for name in ("one", "many"):
        capsys.readouterr()
        assert cli.main(["show", "release", "--name", name, "--limit", "5", "--json"]) == 0
        shown[name] = [{k: v for k, v in json.loads(line).items() if k not in ("release", "version")}
                       for line in capsys.readouterr().out.splitlines()]
    assert shown["one"] == shown["many"] and [r["position"] for r in shown["many"]] == [0, 1, 2, 3, 4]

    last = prov["many"].filter(pl.col("position") >= shards[-1].first)["doc_id"][0]  # in the last shard only
    settings = load_settings().model_copy(update={"release": ReleaseSettings(name="many")})
    assert trace(lake, settings, [crawl], last).releases == [many["version"]]


def test_a_release_over_a_crawl_with_a_shard_never_built_fails_and_writes_nothing(curated, object_store, instance,
                                                                                  crawl):
    """A file dropped into a shard of the crawl that was never built (shard 0002 has raw files, no tokenized
    partition): the release fails naming that shard, and no new version is written or pointed to."""
    from llm_assets_tests.conftest import built
    from llm_assets_tests.core.test_dedup import name_in_shard
    from resources import LakeIOManager

    lake = object_store.lake()
    name = "never-built"
    before = latest_release(lake, name)
    key = f"raw/{crawl}/{name_in_shard(crawl, '0002', 'late')}"
    lake.put_file(key, shared("warc", "dolma__sample-0000.warc.gz"))
    try:
        *upstream, release = built("raw_files", "documents", "filtered", "signatures", "duplicate_clusters",
                                   "deduplicated", "tokenized", "release",
                                   settings=load_settings().model_copy(update={"release": ReleaseSettings(name=name)}))
        result = dg.materialize([*upstream, release], selection=[release], instance=instance, raise_on_error=False,
                                resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)})
        assert not result.success
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        assert (f"release {crawl}: tokenized has no committed partition for shard 0002 of crawl {crawl}, which has "
                "raw files") in str(failure.step_failure_data.error)
        assert latest_release(lake, name) == before is None
    finally:
        lake.delete([key])
