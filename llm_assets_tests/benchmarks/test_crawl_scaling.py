"""Two workers against one on the corpus (benchmarks/crawl_scaling.py), on the corpus builder's slice: its inputs are
the chosen files and their pages' gold texts, both sides do the same work, and the summary rows judge the median."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

from benchmarks.crawl_scaling import inputs, measure, rows, start_cost

pytestmark = pytest.mark.corpus


def test_inputs_are_the_first_files_and_their_pages_gold_texts(corpus, tmp_path):
    warc_dir, texts, about = inputs(corpus, 2, tmp_path)
    first = sorted((corpus / "crawls").iterdir())[0]
    assert sorted(p.name for p in warc_dir.iterdir()) == about["files"] == sorted(
        p.name for p in first.glob("*.warc.gz"))[:2]
    gold = pl.read_parquet(corpus / "gold.parquet").filter(
        pl.col("crawl") == first.name, pl.col("file").is_in(about["files"]), pl.col("text") != "")
    with gzip.open(texts, "rt", encoding="utf-8") as f:
        written = [json.loads(line)["text"] for line in f]
    assert sorted(written) == sorted(gold["text"]) and about["texts"] == gold.height > 0


def test_one_and_two_workers_do_the_same_work(corpus):
    got = measure(corpus, files=2, pairs=1)
    for stage in ("documents", "tokenized"):
        one, two = got["stages"][stage]["rounds"][0]["1"], got["stages"][stage]["rounds"][0]["2"]
        assert (one["units"], one["items"], one["documents"]) == (two["units"], two["items"], two["documents"])
        assert one["items"] > 0 and len(got["stages"][stage]["ratios"]) == 1
        assert start_cost(two) > 0  # the fork server is a fresh interpreter: it always costs something


def test_rows_judge_the_median_ratio():
    def side(wall: float) -> dict:
        return {"timed_wall_s": wall, "unit_cpu_seconds": 10.0,
                "cpu_by_process": {"fork_server": 1.0, "workers": 10.5}}

    result = {"stages": {"documents": {"rounds": [{"1": side(10), "2": side(5)}] * 3, "ratios": [1.7, 1.9, 1.85]},
                         "tokenized": {"rounds": [{"1": side(10), "2": side(8)}], "ratios": [1.25]}}}
    got = {r.key: r for r in rows(result, "cmd")}
    assert got["crawl-scaling:documents"].met == "yes" and got["crawl-scaling:documents"].current.startswith("1.85×")
    assert got["crawl-scaling:tokenized"].met == "no"
    assert start_cost(side(1)) == pytest.approx(1.5)
