"""Read speed of the release loader against a plain sequential read of the same `.bin`; prints a markdown table.

    .venv/bin/python -m benchmarks.loader [--gib 1.0] [--context 2048] [--passes 3]

A release of random uint16 tokens (about `--gib` GiB, sequences of `--context` tokens) is written with
IndexedWriter into a temporary folder, deleted at the end. Rows:

- raw read: the `.bin` read front to back in 16 MiB `readinto` calls into one buffer (what `dd bs=16M` does);
- ReleaseLoader, local: iterating the loader (memory map, each batch copied out) at batch sizes 1 and 32, and as
  rank 0 of 4 (a quarter of the sequences, strided).

Each is measured cold, after `posix_fadvise(DONTNEED)` asked the kernel to drop the file's cached pages (the
writer fsynced them, so they are clean and can go), then warm (cached): the median of `--passes` passes. MB/s
counts the token bytes handed to the caller (10^6 bytes); "vs raw" divides by the raw read of the same state.

S3, only when LLM_ASSETS_S3_ENDPOINT is set (with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the embedded
store's credentials file, and LLM_ASSETS_BUCKET): the release is uploaded under `bench/loader-<random>/`, read
once by one GET streamed in 16 MiB reads (raw) and by the loader (32 MiB ranged GETs, 2 ahead), then deleted.
Results are printed only; BENCHMARKS.md is not touched.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.report import MB, MIB, n, table
from llm_assets.core.indexed import IndexedWriter
from llm_assets.loader import ReleaseLoader

CHUNK = 16 * MIB
VOCAB = 50257
WRITE_ROWS = 4096  # rows generated and written per add_many


def make_release(folder: Path, gib: float, context: int, seed: int = 0) -> int:
    """A release of random tokens; returns its sequence count."""
    rows = int(gib * 2**30) // (context * 2)
    rng = np.random.default_rng(seed)
    with IndexedWriter(folder / "data", np.uint16) as w:
        for lo in range(0, rows, WRITE_ROWS):
            w.add_many(rng.integers(0, VOCAB, size=(min(WRITE_ROWS, rows - lo), context), dtype=np.uint16))
    (folder / "manifest.json").write_text(f'{{"sequences": {rows}, "context": {context}}}\n')
    return rows


def evict(path: Path) -> None:
    """Ask the kernel to drop the file's cached pages, so that the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def raw_read(path: Path) -> tuple[int, int]:
    """(bytes, 0): the file read sequentially in 16 MiB chunks into one reused buffer."""
    buf = bytearray(CHUNK)
    total = 0
    with open(path, "rb", buffering=0) as f:
        while got := f.readinto(buf):
            total += got
    return total, 0


def loader_read(loader: ReleaseLoader) -> tuple[int, int]:
    """(bytes, sequences) handed over by iterating the loader."""
    total = rows = 0
    for batch in loader:
        total += batch.nbytes
        rows += len(batch)
    return total, rows


def timed(fn: Callable[[], tuple[int, int]]) -> tuple[float, int, int]:
    t = time.perf_counter()
    nbytes, rows = fn()
    return time.perf_counter() - t, nbytes, rows


def measure(name: str, fn: Callable[[], tuple[int, int]], path: Path, passes: int) -> list[dict]:
    """A cold pass (file evicted first) and the median of `passes` warm passes."""
    evict(path)
    cold = timed(fn)
    warm = sorted((timed(fn) for _ in range(passes)), key=lambda r: r[0])[passes // 2]
    return [{"name": name, "state": state, "seconds": s, "bytes": b, "rows": r}
            for state, (s, b, r) in (("cold", cold), ("warm", warm))]


def s3_measurements(folder: Path) -> list[dict]:
    """Raw single-GET read and loader read of the release uploaded to the configured store (deleted after)."""
    from llm_assets.core.lake import Lake
    from llm_assets.platform.environment import store_config
    from llm_assets.settings import load_settings

    config = store_config(load_settings().store)
    lake = Lake(config)
    prefix = f"bench/loader-{secrets.token_hex(6)}"
    keys = [f"{prefix}/{name}" for name in ("data.bin", "data.idx", "manifest.json")]
    try:
        for key in keys:
            lake.put_file(key, folder / key.rsplit("/", 1)[1])

        def raw() -> tuple[int, int]:
            body, total = lake.open(keys[0]), 0
            while chunk := body.read(CHUNK):
                total += len(chunk)
            return total, 0

        def loader() -> tuple[int, int]:
            return loader_read(ReleaseLoader(lake.url(prefix), batch_size=32,
                                             storage_options=config.storage_options()))

        return [{"name": name, "state": "S3", "seconds": s, "bytes": b, "rows": r}
                for name, (s, b, r) in (("raw GET, 16 MiB reads", timed(raw)),
                                        ("ReleaseLoader, S3, batch 32", timed(loader)))]
    finally:
        lake.delete(keys)


def render(results: list[dict], context: int, rows: int, file_bytes: int) -> str:
    raw = {r["state"]: r for r in results if r["name"].startswith("raw")}
    lines = []
    for r in results:
        mbps = r["bytes"] / MB / r["seconds"]
        base = raw[r["state"]]
        versus = mbps / (base["bytes"] / MB / base["seconds"])
        seqs = r["rows"] or r["bytes"] // (context * 2)
        lines.append([r["name"], r["state"], n(seqs), f"{r['seconds']:.3f}", n(seqs / r["seconds"]),
                      n(mbps), f"{versus:.2f}×"])
    head = (f"Release: {rows:,} sequences × {context} uint16 tokens = {file_bytes / 2**30:.2f} GiB "
            f"(raw rows count sequences' worth of bytes)\n\n")
    return head + table(["read", "cache", "sequences", "seconds", "sequences/s", "MB/s", "vs raw"], lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loader", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="release size in GiB (default 1)")
    parser.add_argument("--context", type=int, default=2048, help="tokens per sequence (default 2048)")
    parser.add_argument("--passes", type=int, default=3, help="warm passes, median reported (default 3)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="llm-assets-bench-loader-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        rows = make_release(folder, args.gib, args.context)
        bin_path = folder / "data.bin"
        print(f"wrote {bin_path.stat().st_size / 2**30:.2f} GiB in {time.perf_counter() - t:.1f} s", file=sys.stderr)

        uri = str(folder)
        results = measure("raw read, 16 MiB chunks", lambda: raw_read(bin_path), bin_path, args.passes)
        for name, kwargs in (("ReleaseLoader, local, batch 1", {"batch_size": 1}),
                             ("ReleaseLoader, local, batch 32", {"batch_size": 32}),
                             ("ReleaseLoader, local, batch 32, rank 0 of 4", {"batch_size": 32, "world_size": 4})):
            results += measure(name, lambda kw=kwargs: loader_read(ReleaseLoader(uri, **kw)), bin_path, args.passes)

        if os.environ.get("LLM_ASSETS_S3_ENDPOINT"):
            results += s3_measurements(folder)
        else:
            print("S3: skipped (LLM_ASSETS_S3_ENDPOINT is not set)", file=sys.stderr)
        print(render(results, args.context, rows, bin_path.stat().st_size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
