"""benchmarks/minhash_stage.py runs the stage's MinHash and datasketch's on the same shingles."""

import polars as pl
import pytest
from datasketch import MinHash

from llm_assets.core.dedup import signature_frame
from llm_assets.core.minhash import shingle_set
from llm_assets_tests.core.test_dedup import SETTINGS, paragraphs  # noqa: F401 (a fixture)


@pytest.mark.corpus  # a benchmark's runs, each side in processes of its own
def test_the_stage_benchmark_runs_both_sides_on_the_same_shingles(tmp_path, paragraphs):
    """benchmarks/minhash_stage.py: each side reads the Parquet input and writes one signature row per document;
    ours writes what the stage writes; the datasketch side shingles as `shingle_set` does, with our settings."""
    import json
    import subprocess
    import sys

    from benchmarks import minhash_stage
    from llm_assets.core import minhash

    assert minhash_stage.WORD == minhash._WORD
    assert (minhash_stage.NGRAM, minhash_stage.NUM_PERM, minhash_stage.SEED) == \
        (SETTINGS.ngram, SETTINGS.bands * SETTINGS.rows, SETTINGS.seed)
    texts = paragraphs[:40] + ["", None]
    df = pl.DataFrame({"doc_id": [f"d{i}" for i in range(len(texts))], "source_key": "raw/C/f.warc.gz",
                       "url": "https://x.example/", "fetch_time": None, "text": texts},
                      schema={c: pl.String for c in ("doc_id", "source_key", "url", "fetch_time", "text")})
    df.write_parquet(tmp_path / "in.parquet")
    for side in ("ours", "datasketch"):
        out = subprocess.run([sys.executable, "-m", "benchmarks.minhash_stage", "--side", side, "--input",
                              str(tmp_path / "in.parquet"), "--output", str(tmp_path / f"{side}.parquet")],
                             capture_output=True, text=True, check=True).stdout
        line = json.loads(out)
        assert line["side"] == side and line["rows"] == len(texts) and line["cpu_seconds"] > 0
        assert pl.read_parquet(tmp_path / f"{side}.parquet")["doc_id"].to_list() == df["doc_id"].to_list()
    ours = pl.read_parquet(tmp_path / "ours.parquet")
    assert ours.equals(signature_frame(df, SETTINGS))
    theirs = pl.read_parquet(tmp_path / "datasketch.parquet")["signature"].to_numpy()
    m = MinHash(num_perm=112, seed=1)
    m.update_batch([s.encode() for s in shingle_set(texts[0])])
    assert (theirs[0] == m.hashvalues).all()
