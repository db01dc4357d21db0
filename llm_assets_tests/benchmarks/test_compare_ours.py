"""benchmarks/compare_ours.py, the project's side of `make bench-compare`: its filters task runs the chain as the
filtered stage does and says where the CPU went, block by block."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from benchmarks.compare_ours import SHARED_RULES
from llm_assets_support.shared_data import shared


def _ours(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.compare_ours", *args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.corpus  # a benchmark's run
def test_the_filters_task_keeps_what_the_stage_keeps_and_times_every_block(tmp_path):
    from llm_assets.core.filtered import FilteredSettings, filter_batch

    # English pages, and pages in the languages of a Common Crawl the chain does not keep
    _ours("make-docs", "--out", str(tmp_path), "--files", str(shared("warc", "dolma__sample-0000.warc.gz")),
          str(shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz")))
    docs = pl.read_parquet(tmp_path / "docs.parquet")
    kept, _ = filter_batch(docs, FilteredSettings.default_with(language={"languages": ("en",)}))
    assert 0 < kept.height < docs.height and docs["text"].str.contains(r"\p{Han}").any()
    default = _ours("filters", "--docs", str(tmp_path / "docs.parquet"), "--repeat", "2")
    assert default["items"] == 2 * docs.height and default["docs_kept"] == 2 * kept.height
    # every block's CPU is accounted for, the language block's too (its judge(), in a chain per language)
    assert set(default["block_cpu_s"]) == set(default["blocks"]) >= {"language", "pii", "decontaminate"}
    # the cascade datatrove runs (filtered.measure: until_dropped): the same documents kept, every block timed
    cascade = _ours("filters", "--docs", str(tmp_path / "docs.parquet"), "--repeat", "2", "--measure", "until_dropped")
    assert (default["measure"], cascade["measure"]) == ("every_document", "until_dropped")
    assert cascade["items"] == default["items"] and cascade["docs_kept"] == default["docs_kept"]
    assert set(cascade["block_cpu_s"]) == set(cascade["blocks"]) == set(default["blocks"])
    shared_only = _ours("filters", "--docs", str(tmp_path / "docs.parquet"), "--shared")
    assert set(shared_only["block_cpu_s"]) == set(shared_only["blocks"]) == set(SHARED_RULES)
