"""The release loader: which rank and worker reads which sequence, resuming, batches, and the S3 reader against a
real SeaweedFS server. Each sequence's values encode its global index: row i is i * CONTEXT + (0..CONTEXT-1)."""

from __future__ import annotations

import json
import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from llm_assets.core.indexed import IndexedWriter
from llm_assets.loader import ReleaseLoader, plan_blocks, torch_dataset

N, CONTEXT = 1000, 16


SHARDS = (400, 0, 350, 250)  # a sharded release's shard sizes, an empty one included


def make_release(folder: Path, n: int = N, context: int = CONTEXT, shards: tuple[int, ...] = ()) -> Path:
    """One data.bin/.idx (a manifest without `shards`, as releases were written before them), or shards of these
    sizes listed in the manifest, each a consecutive range of the rows."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = np.arange(n * context, dtype=np.int64).reshape(n, context)
    manifest: dict = {"sequences": n, "context": context}
    if not shards:
        with IndexedWriter(folder / "data", np.uint16) as w:
            w.add_many(rows[: n // 2])
            w.add_many(rows[n // 2 :])
    else:
        assert sum(shards) == n
        manifest["shards"] = []
        for k, size in enumerate(shards):
            first, name = sum(shards[:k]), f"data-{k:05d}-of-{len(shards):05d}"
            with IndexedWriter(folder / name, np.uint16) as w:
                w.add_many(rows[first : first + size])
            manifest["shards"].append({"data": name, "provenance": f"{name}.parquet", "first": first,
                                       "sequences": size})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def ids(batches) -> list[int]:
    """Global indices of the rows of some batches (or of some sequences), checking every row is intact."""
    out = []
    for b in batches:
        b = np.atleast_2d(b)
        assert b.shape[1] == CONTEXT
        np.testing.assert_array_equal(b - b[:, :1], np.broadcast_to(np.arange(CONTEXT), b.shape))
        out += (b[:, 0] // CONTEXT).tolist()
    return out


@pytest.fixture(scope="module", params=["one file", "shards"])
def release(tmp_path_factory, request) -> Path:
    """Every test reads a release of one file and the same sequences written as shards: the same results."""
    return make_release(tmp_path_factory.mktemp("release") / "v1", shards=SHARDS if request.param == "shards" else ())


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ranks_partition_the_release(release, world_size):
    seen = []
    for rank in range(world_size):
        got = ids(ReleaseLoader(str(release), rank, world_size, batch_size=7))
        assert got == list(range(rank, N, world_size))
        seen += got
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("k", [0, 1, 2, 5, 499, 997, 999, 1000, 1001])
def test_resume_from_k_is_the_tail_of_the_full_stream(release, world_size, k):
    for rank in range(world_size):
        full = ids(ReleaseLoader(str(release), rank, world_size, batch_size=4))
        resumed = ids(ReleaseLoader(str(release), rank, world_size, start=k, batch_size=4))
        assert resumed == [i for i in full if i >= k]


def test_state_dict_round_trip_mid_iteration(release):
    loader = ReleaseLoader(str(release), rank=1, world_size=3, batch_size=5)
    it = iter(loader)
    first = ids(next(it) for _ in range(7))
    state = loader.state_dict()
    assert state == {"next_index": first[-1] + 3}
    rest = ids(it)
    again = ReleaseLoader(str(release), rank=1, world_size=3, batch_size=5)
    again.load_state_dict(state)
    assert ids(again) == rest
    assert first + rest == list(range(1, N, 3))
    assert loader.state_dict()["next_index"] >= N  # exhausted


def test_state_before_iterating_and_pickling(release):
    """Before any batch the state is the rank's first index; a pickled loader (a spawned worker's copy)
    reopens the release and reads the same stream."""
    loader = ReleaseLoader(str(release), rank=2, world_size=4, start=5, batch_size=3)
    assert loader.state_dict() == {"next_index": 6}
    assert loader.next_index_after(10) == 6 + 4 * 10
    copy = pickle.loads(pickle.dumps(loader))
    assert ids(copy.iter_batches(1, 2)) == ids(loader.iter_batches(1, 2))


def test_lockstep_checkpoint_resumes_every_rank_even_with_another_world_size(release):
    """Ranks consumed the same number of batches: the smallest next_index over ranks resumes the whole job."""
    consumed, states = [], []
    for rank in range(4):
        loader = ReleaseLoader(str(release), rank, 4, start=3, batch_size=6)
        it = iter(loader)
        consumed += ids(next(it) for _ in range(9))
        states.append(loader.state_dict()["next_index"])
    resume = min(states)
    assert sorted(consumed) == list(range(3, resume))
    rest = []
    for rank in range(3):
        rest += ids(ReleaseLoader(str(release), rank, 3, start=resume, batch_size=6))
    assert sorted(consumed + rest) == list(range(3, N))


@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_shapes(release, drop_last):
    loader = ReleaseLoader(str(release), rank=2, world_size=3, batch_size=64, drop_last=drop_last)
    shapes = [b.shape for b in loader]
    share = len(range(2, N, 3))  # 333
    expected = [(64, CONTEXT)] * (share // 64) + ([] if drop_last else [(share % 64, CONTEXT)])
    assert shapes == expected and len(loader) == len(expected)
    batch = next(iter(loader))
    assert batch.dtype == np.uint16 and batch.flags.writeable
    assert loader.num_sequences == share and loader.context == CONTEXT and loader.total_sequences == N
    assert loader.manifest == json.loads((release / "manifest.json").read_text())


def test_release_needs_its_manifest_and_matching_sizes(tmp_path):
    folder = make_release(tmp_path / "v1", n=10)
    sizes = {name: (folder / name).stat().st_size for name in ("data.bin", "data.idx")}
    (folder / "manifest.json").write_text(json.dumps({"files": sizes}))
    assert len(ReleaseLoader(str(folder))) == 10
    (folder / "manifest.json").write_text(json.dumps({"files": {**sizes, "data.bin": 4}}))
    with pytest.raises(ValueError, match="data.bin is 320 bytes, the manifest says 4"):
        ReleaseLoader(str(folder))
    (folder / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        ReleaseLoader(str(folder))


def test_sequences_of_different_lengths_are_refused(tmp_path):
    with IndexedWriter(tmp_path / "data", np.uint16) as w:
        w.add(np.arange(16))
        w.add(np.arange(15))
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(ValueError, match="sequence 1 has length 15"):
        ReleaseLoader(str(tmp_path))


@pytest.mark.parametrize("world_size, num_workers, batch_size", [(1, 1, 1), (1, 3, 1), (2, 4, 8), (3, 2, 5), (4, 3, 7)])
def test_workers_split_the_rank_share(release, world_size, num_workers, batch_size):
    for rank in range(world_size):
        loader = ReleaseLoader(str(release), rank, world_size, start=11, batch_size=batch_size)
        share = ids(loader)
        per_worker = [ids(loader.iter_sequences(w, num_workers)) for w in range(num_workers)]
        assert sorted(sum(per_worker, [])) == share
        # taking one batch from each worker in turn, as a torch DataLoader does, gives the rank's stream in order
        streams = [loader.iter_batches(w, num_workers) for w in range(num_workers)]
        interleaved = []
        for turn in range(len(loader)):
            interleaved += ids([next(streams[turn % num_workers])])
        assert interleaved == share


@pytest.mark.parametrize("shard_ends", [(), (400, 400, 750, 900)])
def test_plan_blocks_cover_each_row_once_in_order(shard_ends):
    batches = [(3 + 4 * 5 * k, 5) for k in range(40)]  # step 4, batches of 5 rows
    blocks = list(plan_blocks(batches, 4, 7, 900, shard_ends))
    rows = {3 + 4 * j for j in range(200)}
    covered = [r for g0, g1 in blocks for r in range(g0, g1) if r in rows]
    assert covered == sorted(rows)
    assert all(g0 in rows for g0, _ in blocks)  # a block starts at a row that is needed
    # one ranged read of one file: no block crosses a shard's end
    assert not any(g0 < end < g1 for g0, g1 in blocks for end in shard_ends)


@pytest.fixture
def torch_class_uncached():
    """The torch dataset class is built on first use and cached in the module: start and end without it."""
    import llm_assets.loader as module

    module.__dict__.pop("TorchReleaseDataset", None)
    yield
    module.__dict__.pop("TorchReleaseDataset", None)


def test_torch_dataset_without_torch_says_to_install_it(release, monkeypatch, torch_class_uncached):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ImportError, match="pip install torch"):
        torch_dataset(str(release))


def test_torch_dataset_splits_by_worker_info(release, monkeypatch, torch_class_uncached):
    """The wiring of the torch dataset, on a stand-in torch module (torch is not a dependency)."""
    info = types.SimpleNamespace(id=1, num_workers=2)
    data = types.SimpleNamespace(IterableDataset=object, get_worker_info=lambda: info)
    fake = types.SimpleNamespace(utils=types.SimpleNamespace(data=data), from_numpy=lambda a: a)
    monkeypatch.setitem(sys.modules, "torch", fake)
    dataset = torch_dataset(str(release), rank=1, world_size=2, batch_size=3)
    batches = list(dataset)
    assert all(b.dtype == np.int64 for b in batches)
    share = list(range(1, N, 2))
    expected = [i for k in range(1, len(share) // 3 + 1, 2) for i in share[3 * k : 3 * k + 3]]
    assert ids(batches) == expected


# S3, on the test SeaweedFS server -------------------------------------------------------------------------------


@pytest.fixture
def s3_release(lake, crawl, release) -> str:
    prefix = f"releases/test-{crawl}/v1"
    for path in release.iterdir():
        lake.put_file(f"{prefix}/{path.name}", path)
    return f"s3://{lake.bucket}/{prefix}"


def s3_options(store_config) -> dict:
    return store_config.boto_options()


@pytest.mark.parametrize("world_size, start", [(1, 0), (3, 0), (2, 321)])
def test_s3_stream_equals_local_stream(s3_release, release, store_config, world_size, start):
    block_bytes = 37 * CONTEXT * 2  # 37 sequences per ranged GET
    for rank in range(world_size):
        s3 = ReleaseLoader(s3_release, rank, world_size, start=start, batch_size=8,
                           storage_options=s3_options(store_config), block_bytes=block_bytes)
        local = ReleaseLoader(str(release), rank, world_size, start=start, batch_size=8)
        got = list(s3)
        assert len(got) == len(local)
        for a, b in zip(got, local, strict=True):
            np.testing.assert_array_equal(a, b)
        stats = s3.io_stats()
        # the .idx, then ranged GETs of 37 rows each, every one starting at a row of this rank
        assert stats["requests"] >= 1 + (N - start) // (37 + world_size - 1) >= 10
        assert stats["bytes"] <= sum(f.stat().st_size for f in release.iterdir())  # no row read twice


def test_s3_workers_and_resume(s3_release, release, store_config):
    """Worker split and resume on S3, with the lake's own (Polars-style) storage options."""
    opts = store_config.storage_options()
    loader = ReleaseLoader(s3_release, 1, 2, batch_size=4, storage_options=opts, block_bytes=50 * CONTEXT * 2)
    share = ids(loader)
    assert share == list(range(1, N, 2))
    per_worker = [ids(loader.iter_sequences(w, 3)) for w in range(3)]
    assert sorted(sum(per_worker, [])) == share
    it = iter(loader)
    head = ids(next(it) for _ in range(10))
    it.close()  # stops the prefetch threads mid-stream
    resumed = ReleaseLoader(s3_release, 1, 2, storage_options=opts, batch_size=4)
    resumed.load_state_dict(loader.state_dict())
    assert head + ids(resumed) == share
    assert loader.manifest == json.loads((release / "manifest.json").read_text())


def test_s3_missing_release_and_secrets(lake, crawl, store_config):
    uri = f"s3://{lake.bucket}/releases/test-{crawl}/absent"
    with pytest.raises(FileNotFoundError, match=f"releases/test-{crawl}/absent/manifest.json"):
        ReleaseLoader(uri, storage_options=s3_options(store_config))
    with pytest.raises(ValueError, match="unknown storage option 'secret'") as e:
        ReleaseLoader(uri, storage_options={"secret": store_config.credentials().secret_key})
    assert store_config.credentials().secret_key not in str(e.value)


def test_repr_holds_no_credentials(s3_release, store_config):
    loader = ReleaseLoader(s3_release, storage_options=s3_options(store_config))
    creds = store_config.credentials()
    assert creds.secret_key not in repr(loader) and creds.access_key not in repr(loader)


def test_a_shard_unlike_its_manifest_entry_is_refused(tmp_path):
    """A shard whose index holds other sequence counts than the manifest lists (a shard replaced, or listed out of
    order) is refused, naming the file."""
    folder = make_release(tmp_path / "v1", shards=SHARDS)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shards"][0], manifest["shards"][2] = manifest["shards"][2], manifest["shards"][0]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"shard data-00002-of-00004 starts at position 400, but the shards listed "
                                         r"before it hold 0 sequences"):
        ReleaseLoader(str(folder))
    manifest["shards"][0], manifest["shards"][2] = manifest["shards"][2], manifest["shards"][0]
    manifest["shards"][2]["sequences"] = 300
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"data-00002-of-00004.idx: 350 sequences, the manifest says 300"):
        ReleaseLoader(str(folder))
