"""benchmarks/dedup_path.py, our side, runs the stage's code on its input."""

import polars as pl
import pytest

from llm_assets.core.dedup import find_clusters
from llm_assets_tests.core.test_dedup import SETTINGS, one_word_changed, paragraphs  # noqa: F401 (a fixture)


@pytest.mark.corpus  # a benchmark's runs, each side in processes of its own
def test_the_dedup_path_benchmark_runs_the_stages_code_on_its_input(tmp_path, paragraphs):
    """benchmarks/dedup_path.py, our side: its three steps, each in its own process as the benchmark runs them, remove
    what `find_clusters` removes from the same documents, and the removal keeps every other document."""
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from llm_assets.core import filtered

    texts = paragraphs[:30] + paragraphs[:5] + [one_word_changed(p, i) for i, p in enumerate(paragraphs[5:10])]
    df = pl.DataFrame({"doc_id": [f"doc-{i:07d}" for i in range(len(texts))], "source_key": "raw/BENCH/dedup-path",
                       "url": [f"https://dedup-path.example/{i}" for i in range(len(texts))], "crawl": "BENCH",
                       "fetch_time": "2024-01-01T00:00:00Z", "text": texts})
    pq.write_table(filtered.conform(df, filtered.SCHEMA).to_arrow().cast(filtered.SCHEMA), tmp_path / "in.parquet")
    lines = {}
    for step in ("signatures", "clusters", "removal"):
        out = subprocess.run([sys.executable, "-m", "benchmarks.dedup_path", "--step", step, "--input",
                              str(tmp_path / "in.parquet"), "--work", str(tmp_path)],
                             capture_output=True, text=True, check=True).stdout
        lines[step] = json.loads(out)
        assert lines[step]["timed_cpu_s"] > 0 and lines[step]["vm_hwm_bytes"] > 0
    expected = find_clusters(pl.read_parquet(tmp_path / "signatures.parquet")
                             .with_columns(crawl=pl.lit("BENCH"), shard=pl.lit("0000")), SETTINGS, "BENCH").removed
    removed = pl.read_parquet(tmp_path / "removed.parquet")
    assert removed.equals(expected) and removed.height == 10
    assert lines["clusters"]["reasons"] == {"exact": 5, "near": 5}
    kept = pl.read_parquet(tmp_path / "deduplicated.parquet")["doc_id"].to_list()
    assert kept == [d for d in df["doc_id"] if d not in set(removed["doc_id"])]
    assert lines["removal"] == {**lines["removal"], "rows": len(texts), "kept": len(texts) - 10}
