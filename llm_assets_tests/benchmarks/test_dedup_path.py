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


@pytest.mark.core
def test_an_input_unlike_its_report_fails_the_run():
    from benchmarks.dedup_path import check_input

    with pytest.raises(ValueError, match="not what its report describes"):
        check_input({"documents": 1_000, "kinds": {"original": 1_000}})  # no copies planted at all
    with pytest.raises(ValueError, match="not what its report describes"):
        check_input({"documents": 1_000, "kinds": {"original": 500, "exact": 500}})  # no near copies
    check_input({"documents": 1_000, "kinds": {"original": 400, "composite": 100, "exact": 150, "near": 350}})


@pytest.mark.corpus  # the originals: every text of the shared data
def test_a_small_input_is_still_half_planted_copies(tmp_path):
    """Below twice the shared data's originals, the input took every original and planted no copy while its report
    said half were copies; now it takes the first originals it needs."""
    from benchmarks.dedup_path import make_input
    from llm_assets_support.shared_data import SHARED_DATA

    made = make_input(tmp_path / "in.parquet", tmp_path / "truth.parquet", 2_000, 27, SHARED_DATA)
    assert made["originals"] == 1_000 and made["kinds"]["exact"] + made["kinds"]["near"] == 1_000
    assert pl.read_parquet(tmp_path / "in.parquet").height == 2_000
