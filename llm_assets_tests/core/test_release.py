"""A release written as shards by work units reads back identical to the release of the same input written as one
file: the same sequences in the same (globally shuffled) order, the same provenance and counts. Synthetic tokenized
parts on the test store; the shards are written in a process pool."""

from __future__ import annotations

import io
import time

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llm_assets.core.indexed import IndexedDataset
from llm_assets.core.lake import Lake
from llm_assets.core.partition import vacuum
from llm_assets.core.release import (
    ReleaseSettings,
    build_release,
    provenance_keys,
    release_prefix,
    release_shards,
    write_shard,
)
from llm_assets.core.units import InProcessRunner, PoolRunner, UnitFailed
from llm_assets.loader import ReleaseLoader

EOS, VOCAB, CONTEXT = 50256, 50257, 64


def tokenized_parts(lake, crawl: str) -> list[dict]:
    """Two crawls × two shards of tokenized parts (an empty part among them): documents of 1 to 300 tokens, so some
    are longer than the context, each ending with EOS. -> the partitions as the release asset lists them."""
    rng = np.random.default_rng(11)
    partitions = []
    for c in (f"{crawl}-a", f"{crawl}-b"):
        for shard in ("0000", "0001"):
            parts = []
            for p, n_docs in enumerate((0, 23) if shard == "0000" else (17, 9)):
                docs = [np.append(rng.integers(0, EOS, rng.integers(0, 300)), EOS).astype(np.int64)
                        for _ in range(n_docs)]
                table = pa.table({"doc_id": [f"{c}/{shard}/{p}/{i}" for i in range(n_docs)],
                                  "url": [f"https://example.com/{c}/{shard}/{p}/{i}" for i in range(n_docs)],
                                  "n_tokens": pa.array([len(d) for d in docs], pa.int32()),
                                  "tokens": pa.array([d.tolist() for d in docs], pa.list_(pa.int32()))})
                buf = io.BytesIO()
                pq.write_table(table, buf, row_group_size=5)  # several row groups: parts are streamed
                key = f"lake/tokenized/crawl={c}/shard={shard}/part-{p}.parquet"
                lake.put_bytes(key, buf.getvalue())
                parts.append(key)
            partitions.append({"crawl": c, "shard": shard, "data_version": f"dv-{c}-{shard}", "code_version": "cv",
                               "rows": 0, "parts": parts})
    return partitions


def build(lake, partitions, tmp_path, runner, **config):
    settings = ReleaseSettings(**{"name": "shards", "include_text": False, "context": CONTEXT, "seed": 3, **config})
    workdir = tmp_path / f"work-{settings.sequences_per_shard}-{settings.packing}"
    workdir.mkdir()
    (workdir / "tokenizer.json").write_text("{}")
    return build_release(lake, settings, partitions, workdir / "tokenizer.json", "tok", EOS, VOCAB, {}, {}, workdir,
                         runner=runner)


def sequences(lake, release, folder) -> np.ndarray:
    """Every sequence of the release, its shards downloaded and read one after the other as Megatron datasets."""
    rows = []
    for shard in release_shards(release.manifest):
        for ext in ("bin", "idx"):
            (folder / f"{shard.data}.{ext}").write_bytes(lake.get_bytes(f"{release.prefix}{shard.data}.{ext}"))
        data = IndexedDataset(folder / shard.data)
        assert len(data) == shard.sequences and list(data.index.document_indices) == list(range(len(data) + 1))
        rows += [data[i] for i in range(len(data))]
    return np.stack(rows)


@pytest.mark.parametrize("config", [{"packing": "bfd"}, {"packing": "concat"},
                                    {"packing": "bfd", "length_buckets": (20, 100)}])
def test_a_sharded_release_reads_back_identical_to_the_single_file_release(lake, crawl, store_config, tmp_path,
                                                                           config):
    partitions = tokenized_parts(lake, crawl)
    single = build(lake, partitions, tmp_path, InProcessRunner(), **config)
    sharded = build(lake, partitions, tmp_path, PoolRunner(2), sequences_per_shard=13, **config)
    n = single.manifest["counts"]["sequences"]
    assert n > 30 and single.version != sharded.version
    layout = release_shards(sharded.manifest)
    assert [s.sequences for s in layout] == [13] * (n // 13) + ([n % 13] if n % 13 else [])
    assert [s.first for s in layout] == list(range(0, n, 13))
    assert [s.data for s in release_shards(single.manifest)] == ["data"]  # one shard: the single-file names
    assert not lake.exists(single.prefix + "data-00000-of-00001.bin")
    assert sharded.manifest["counts"] == single.manifest["counts"]

    # the same sequences in the same order, read as Megatron datasets one after the other ...
    one, many = sequences(lake, single, tmp_path), sequences(lake, sharded, tmp_path)
    assert one.shape == (n, CONTEXT) and np.array_equal(one, many)
    # ... and by the loader, from the store, any rank
    opts = store_config.boto_options()
    for rank, world in ((0, 1), (1, 3)):
        a = [b for b in ReleaseLoader(f"s3://{lake.bucket}/{single.prefix}", rank, world, batch_size=5,
                                      storage_options=opts)]
        b = [b for b in ReleaseLoader(f"s3://{lake.bucket}/{sharded.prefix}", rank, world, batch_size=5,
                                      storage_options=opts, block_bytes=3 * CONTEXT * 2)]
        assert np.array_equal(np.concatenate(a), np.concatenate(b))

    # the same provenance, and it says where every token came from
    prov = lake.scan(provenance_keys(single.prefix, single.manifest)).collect()
    assert prov.equals(lake.scan(provenance_keys(sharded.prefix, sharded.manifest)).collect())
    tokens = {d: np.asarray(t) for p in partitions for part in p["parts"]
              for d, t in lake.scan([part]).select("doc_id", "tokens").collect().iter_rows()}
    for r in prov.iter_rows(named=True):
        piece = many[r["position"], r["offset"]:r["offset"] + r["length"]]
        assert np.array_equal(piece, tokens[r["doc_id"]][r["start_in_doc"]:r["start_in_doc"] + r["length"]])
    assert prov.group_by("position").agg(pl.col("length").sum())["length"].max() <= CONTEXT

    # each file is listed with its size; what the shard units worked from is gone once committed
    assert all(lake.exists(sharded.prefix + name) for name in sharded.manifest["files"])
    assert {f"{s.data}.{ext}" for s in layout for ext in ("bin", "idx")} <= set(sharded.manifest["files"])
    assert not lake.keys(sharded.prefix + "_build/")


class LostAfterOneShard(InProcessRunner):
    """A runner whose worker is lost once the first shard is written: the build fails part-way."""

    def run(self, fn, units, on_done=None):
        if fn is not write_shard:
            return super().run(fn, units, on_done)
        super().run(fn, units[:1], on_done)
        raise UnitFailed(units[1].source, "the worker was lost", infrastructure=True)


def test_the_vacuum_deletes_what_a_failed_build_left_after_the_retention_never_a_committed_release(
        store_config, crawl, tmp_path):
    import dataclasses
    import uuid

    # a bucket of its own: the whole lake's vacuum, run two hours ahead, must not delete other tests' parts
    lake = Lake(dataclasses.replace(store_config, bucket=f"vacuum-{uuid.uuid4().hex[:12]}"))
    lake.s3.create_bucket(Bucket=lake.config.bucket)
    partitions = tokenized_parts(lake, crawl)
    name = crawl.lower()
    (tmp_path / "failed").mkdir()
    with pytest.raises(UnitFailed, match="the worker was lost"):
        build(lake, partitions, tmp_path / "failed", LostAfterOneShard(), name=name, sequences_per_shard=13, seed=5)
    [failed] = lake.folders(f"releases/{name}/")
    left = lake.keys(release_prefix(name, failed))
    assert any("/_build/" in k for k in left) and any("/data-00000-of-" in k for k in left)  # the first shard
    assert not any(k.endswith("manifest.json") for k in left)

    release = build(lake, partitions, tmp_path, InProcessRunner(), name=name, sequences_per_shard=13)
    leftover = f"{release.prefix}_build/scatter-0.bin"  # as if deleting _build/ after the commit had failed
    lake.put_bytes(leftover, b"\0" * 8)
    committed = lake.keys(release.prefix) - {leftover}
    assert {release.prefix + f for f in release.manifest["files"]} | {release.prefix + "manifest.json"} == committed

    # within the retention a build may still be running: nothing goes
    vacuum(lake, 3600)
    assert lake.keys(release_prefix(name, failed)) == left and lake.exists(leftover)
    # past it, the whole lake's vacuum (what `llm-assets vacuum` and vacuum_job run) deletes the failed build and
    # the committed release's leftover, and nothing the manifest lists
    deleted = vacuum(lake, 3600, now=time.time() + 7200)
    assert left | {leftover} <= set(deleted)
    assert not lake.keys(release_prefix(name, failed)) and lake.keys(release.prefix) == committed
    assert len(sequences(lake, release, tmp_path)) == release.manifest["counts"]["sequences"]
