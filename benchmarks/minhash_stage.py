"""MinHash as a whole stage, ours against datasketch: read a Parquet file of documents, split words, shingle, hash,
write a Parquet file of signatures. Each side is one command, run in its own process, so that a harness can pin
it to a core (`taskset -c 1`) and interleave pairs:

    .venv/bin/python -m benchmarks.minhash_stage --make-input F [--shared-data DIR]
    .venv/bin/python -m benchmarks.minhash_stage --side ours|datasketch --input F --output G

`--make-input F` writes the input (`make_input`): the rows of `bench/seed003_input.jsonl.gz` (32,432 short
English texts, each written twice) and every document of the shared WARC, WET and JSON Lines files, extracted as
the `documents` stage extracts them (web pages, mean ~1,500 words), shaped as a `filtered` part
(`filtered.SCHEMA`: the columns the signatures stage does not read are there too, mostly null). The shared data
folder is `--shared-data`, else `$LLM_ASSETS_SHARED_DATA`, else `../shared/data` beside the project.

`--side` runs one side over `--input` and writes `--output`, then prints one JSON line:

    {"side", "rows", "cpu_seconds", "wall_seconds", "peak_rss_bytes", "stage_cpu_seconds", "stage_wall_seconds",
     "import_cpu_seconds", "import_wall_seconds", "output_bytes", "threads"}

`cpu_seconds` is the whole process (user + system, `resource.getrusage(RUSAGE_SELF)` at the end: interpreter
start, imports, reading, hashing, writing); `wall_seconds` the process's wall clock from interpreter start;
`stage_*` the same without interpreter start and imports; `peak_rss_bytes` `ru_maxrss`. Polars, OpenMP and
OpenBLAS are limited to one thread before they are imported (`threads`), so both sides use one core.

- ours: the signatures stage's own code path: `llm_assets.core.signatures.signature_table`, what
  `dedup.compute_signatures` runs for each batch of a `filtered` part, over the part read batch by batch
  (BATCH_ROWS rows, the columns the stage reads), the result written as `lake.PartWriter` writes a part (zstd
  Parquet, dictionaries for string columns only, `signature_schema`: ids, text and URL hashes, LSH band hashes,
  the 112 signature values). Only the object store's transport is left out: the part is a local file here. The
  hasher is `MinHasher()`, whose defaults a test holds equal to `DedupSettings()`'s, so the process imports
  NumPy, Polars and PyArrow and not the settings, Dagster or the object store client: a worker that only
  computes signatures needs no more.
- datasketch: the same documents in Python, as one would write the stage with datasketch: the same columns read
  with pyarrow in batches of the same size, per document the same word 5-gram shingles (lowercase; words are runs
  of anything but whitespace, punctuation and symbols: `minhash.shingle_set`) and
  `MinHash(num_perm=112, seed=1).update_batch(...)`, the 112 values written as `doc_id` + `signature` (zstd
  Parquet). Same permutation count, n-gram and seed as `DedupSettings()`; datasketch computes 112 independent
  permutations where ours computes one-permutation hashing, which is the point of the comparison.
"""

from __future__ import annotations

import os

for _var in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402 - after the thread limits, which must precede any import of Polars or NumPy
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SEED_INPUT = "bench/seed003_input.jsonl.gz"
# minhash._WORD and DedupSettings' defaults, repeated so the datasketch side imports neither Polars nor the project
WORD = r"[^\s\pP\pS]+"
NGRAM, NUM_PERM, SEED = 5, 112, 1
BATCH_ROWS = 2048  # dedup.BATCH_ROWS


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def process_wall_seconds() -> float:
    """Wall seconds since this process started (from /proc: the interpreter's start-up counts)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - ticks / os.sysconf("SC_CLK_TCK")


def shared_data_dir(given: Path | None = None) -> Path:
    return given or Path(os.environ.get("LLM_ASSETS_SHARED_DATA", ROOT.parent / "shared" / "data"))


def make_input(path: Path, shared_data: Path | None = None) -> dict:
    """Write the benchmark's input (see the module docstring) to `path`; -> rows and bytes of text."""
    import polars as pl
    import pyarrow.parquet as pq

    from llm_assets.core import filtered
    from llm_assets_support.corpus import shared_documents

    data = shared_data_dir(shared_data)
    seed = pl.read_ndjson(data / SEED_INPUT).select(
        doc_id=pl.format("seed003-{}", pl.col("id").cast(pl.String).str.zfill(6)),
        url=pl.format("https://manuals.example/{}/{}", pl.col("source"), pl.col("id")),
        source_key=pl.lit(f"raw/BENCH/{Path(SEED_INPUT).name}"), text=pl.col("text"))
    web = shared_documents(data).select("doc_id", "url", source_key=pl.format("raw/BENCH/{}", pl.col("source")),
                                        text="text")
    df = pl.concat([seed, web]).with_columns(
        crawl=pl.lit("BENCH"), fetch_time=pl.lit("2024-01-01T00:00:00Z"),
        n_words=pl.col("text").str.split(" ").list.len().cast(pl.Int32))
    # As the filtered stage writes a part (lake.PartWriter): its Arrow schema, zstd, a row group per batch.
    table = filtered.conform(df, filtered.SCHEMA).to_arrow().cast(filtered.SCHEMA)
    pq.write_table(table, path, compression="zstd", row_group_size=filtered.BATCH_ROWS)
    return {"rows": df.height, "text_bytes": int(df["text"].str.len_bytes().sum()), "seed_rows": seed.height,
            "web_rows": web.height}


def run_ours(src: Path, dst: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from llm_assets.core.minhash import MinHasher
    from llm_assets.core.signatures import BATCH_ROWS as STAGE_BATCH_ROWS
    from llm_assets.core.signatures import SIGNATURE_INPUT, signature_schema, signature_table

    hasher = MinHasher()  # DedupSettings().hasher(), without importing the settings (a test holds them equal)
    schema = signature_schema(hasher.bands, hasher.rows)
    rows = 0
    # As lake.PartWriter writes a part: zstd, dictionaries for the string columns only, a cast only when needed.
    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    with pq.ParquetWriter(dst, schema, compression="zstd", use_dictionary=strings) as out:
        for batch in pq.ParquetFile(src).iter_batches(batch_size=STAGE_BATCH_ROWS, columns=SIGNATURE_INPUT):
            table = signature_table(batch, hasher)
            if table.num_rows:
                out.write(table if table.schema == schema else table.select(schema.names).cast(schema))
            rows += batch.num_rows
    return rows


def run_datasketch(src: Path, dst: Path) -> int:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import regex
    from datasketch import MinHash

    word = regex.compile(WORD)
    schema = pa.schema([("doc_id", pa.string()), ("signature", pa.list_(pa.uint32(), NUM_PERM))])
    rows = 0
    with pq.ParquetWriter(dst, schema, compression="zstd") as out:
        for batch in pq.ParquetFile(src).iter_batches(batch_size=BATCH_ROWS, columns=["doc_id", "text"]):
            texts = batch.column("text").to_pylist()
            sig = np.empty((len(texts), NUM_PERM), np.uint32)
            for i, text in enumerate(texts):
                w = word.findall((text or "").lower())
                shingles = {" ".join(w[j:j + NGRAM]) for j in range(max(len(w) - NGRAM + 1, 1))} if w else set()
                m = MinHash(num_perm=NUM_PERM, seed=SEED)
                m.update_batch([s.encode() for s in shingles])
                sig[i] = m.hashvalues
            values = pa.FixedSizeListArray.from_arrays(pa.array(sig.ravel()), NUM_PERM)
            out.write(pa.table([batch.column("doc_id"), values], schema=schema))
            rows += len(texts)
    return rows


SIDES = {"ours": run_ours, "datasketch": run_datasketch}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.minhash_stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=sorted(SIDES), help="run one side and print its JSON line")
    parser.add_argument("--input", type=Path, help="the input Parquet file (from --make-input)")
    parser.add_argument("--output", type=Path, help="the signatures Parquet file to write")
    parser.add_argument("--make-input", type=Path, metavar="F", help="write the input Parquet file F and exit")
    parser.add_argument("--shared-data", type=Path, help="the shared data folder (default ../shared/data)")
    args = parser.parse_args(argv)

    if args.make_input:
        print(json.dumps(make_input(args.make_input, args.shared_data)))
        return 0
    if not (args.side and args.input and args.output):
        parser.error("--side, --input and --output are required (or --make-input)")
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    if args.side == "ours":
        import polars  # noqa: F401 - imports are timed apart from the stage
        import pyarrow.parquet  # noqa: F401

        import llm_assets.core.signatures  # noqa: F401
    else:
        import datasketch  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    import_cpu = cpu_seconds() - cpu0
    cpu1, wall1 = cpu_seconds(), time.perf_counter()
    rows = SIDES[args.side](args.input, args.output)
    stage_cpu, stage_wall = cpu_seconds() - cpu1, time.perf_counter() - wall1
    print(json.dumps({
        "side": args.side, "rows": rows, "cpu_seconds": round(cpu_seconds(), 4),
        "wall_seconds": round(process_wall_seconds(), 3),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "stage_cpu_seconds": round(stage_cpu, 4), "stage_wall_seconds": round(stage_wall, 4),
        "import_cpu_seconds": round(import_cpu, 4), "import_wall_seconds": round(wall1 - wall0, 4),
        "output_bytes": args.output.stat().st_size, "threads": os.environ["POLARS_MAX_THREADS"],
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
