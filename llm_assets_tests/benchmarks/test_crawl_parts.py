"""benchmarks/crawl.py's parts that need no deployment: reading datatrove's kept documents, classing the documents
kept on one side only, the corpus manifest's counts, telling the deployment's processes apart, a file's balance."""

from __future__ import annotations

import json

import polars as pl

from benchmarks.crawl import (
    Corpus,
    FileAccount,
    _kept_documents,
    _role,
    classify,
    forecast_verdicts,
)
from llm_assets.core.documents import doc_id

A = "<urn:uuid:0000000a>"
B = "<urn:uuid:0000000b>"
C = "<urn:uuid:0000000c>"
D = "<urn:uuid:0000000d>"


def test_the_anchors_kept_documents_from_rows_or_files(tmp_path):
    rows = [{"file": "crawls/X/one.warc.gz", "warc_record_id": A, "url": "http://a"},
            {"file": "two.warc.gz", "warc_record_id": B, "url": "http://b"}]
    expected = {("one.warc.gz", A), ("two.warc.gz", B)}
    assert _kept_documents(rows) == expected
    assert _kept_documents([("one.warc.gz", A, "http://a"), ("two.warc.gz", B, "http://b")]) == expected
    (tmp_path / "kept.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pl.DataFrame(rows).write_parquet(tmp_path / "kept.parquet")
    assert _kept_documents([tmp_path / "kept.jsonl"]) == expected == _kept_documents(str(tmp_path / "kept.parquet"))


def test_documents_kept_on_one_side_are_classed_by_where_ours_dropped_them():
    ours = {("f.warc.gz", A), ("f.warc.gz", B)}
    theirs = {("f.warc.gz", A), ("f.warc.gz", C), ("f.warc.gz", D), ("g.warc.gz", "<urn:uuid:e>")}
    dropped = {("f.warc.gz", C): "filtered gopher_quality too_few_words", doc_id("raw/X/f.warc.gz", D, 123):
               "documents no_text"}
    got = classify(ours, theirs, dropped, {("f.warc.gz", B): "de"})
    # among ours in datatrove's languages only: one it kept that we kept as another language
    assert classify(set(), {("f.warc.gz", B)}, {}, {("f.warc.gz", B): "de"}).classes == {
        "only datatrove's: ours kept it as language de": 1}
    assert (got.ours, got.anchor, got.both) == (2, 4, 1)
    assert got.rate == 1 / 5
    assert got.classes == {"only datatrove's: ours dropped it at documents no_text": 1,
                           "only datatrove's: ours dropped it at filtered gopher_quality too_few_words": 1,
                           "only datatrove's: no document of ours (not read as an HTML response)": 1,
                           "only ours: datatrove dropped it (ours: language de)": 1}


def test_the_corpus_manifests_record_counts_as_make_corpus_writes_them_or_none(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({
        "crawls": {"A": ["crawls/A/1.warc.gz"], "B": ["crawls/B/2.warc.gz"]},
        # make corpus: records by WARC type per file, and kinds of response counted among the responses too
        "files": [{"path": "crawls/A/1.warc.gz", "records": {"warcinfo": 1, "response": 5, "request": 5,
                                                             "redirect": 1, "image": 1, "damaged": 1}}],
        "counts": {"crawls/B/2.warc.gz": {"records": 9}, "html_pages": 3, "records": {"response": 5}}}))
    corpus = Corpus.load(tmp_path)
    assert list(corpus.crawls) == ["A", "B"] and corpus.crawls["A"] == [tmp_path / "crawls/A/1.warc.gz"]
    assert corpus.counts == {"crawls/A/1.warc.gz": 11, "crawls/B/2.warc.gz": 9}
    (tmp_path / "manifest.json").write_text(json.dumps({"crawls": {"A": [], "B": []}}))
    assert Corpus.load(tmp_path).counts == {}


def test_the_deployments_processes_are_told_apart():
    assert _role("/v/bin/python -m llm_assets.platform.deploy run-daemon", None) == "daemon"
    assert _role("/v/bin/dagster code-server start --host 127.0.0.1", None) == "code_server"
    assert _role("/v/bin/python -m dagster api grpc --lazy-load-user-code", "code_server") == "code_server"
    run = "/v/bin/python -B -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=12)"
    assert _role(run, "code_server") == "run_worker"
    assert _role("/v/bin/python -c from multiprocessing.forkserver import main", "run_worker") == "units"
    assert _role("/v/bin/llm-assets drop --crawl A f.warc.gz", None) == "cli"


def test_a_file_balances_when_every_record_has_one_outcome():
    ok = FileAccount("A", "raw/A/f.warc.gz", read=10, documents=4, set_aside={"no_text": 1},
                     quarantined={"truncated_file": 1}, skipped={"not_response": 4}, written_documents=4,
                     written_rejected=2, manifest_records=10)
    assert ok.outcomes == 10 and ok.balanced and ok.as_written
    assert not FileAccount(**{**ok.__dict__, "read": 11}).balanced
    assert not FileAccount(**{**ok.__dict__, "written_documents": 3}).balanced  # the parts hold fewer
    differs = FileAccount(**{**ok.__dict__, "manifest_records": 12})  # the corpus wrote records we did not read
    assert differs.balanced and differs.as_written is False
    assert FileAccount(**{**ok.__dict__, "manifest_records": None}).as_written is None


def test_forecast_verdicts_judge_only_the_stages_that_cost_enough():
    cmp = pl.DataFrame({"asset": ["documents", "filtered"], "cpu_s_forecast": [110.0, 10.0],
                        "cpu_s_actual": [100.0, 5.0], "cpu_s_error": [0.1, 1.0],
                        "bytes_out_forecast": [90, 10], "bytes_out_actual": [100, 10], "bytes_out_error": [-0.1, 0.0]})
    judged, within, total = forecast_verdicts(cmp)
    assert judged == ["documents"] and within
    assert total["figures"]["cpu_s"] == (120.0, 105.0)
    assert abs(total["errors"]["cpu_s"] - (120 / 105 - 1)) < 1e-9


def test_datatrove_reads_a_file_without_its_damaged_gzip_members():
    import gzip

    from benchmarks.crawl_datatrove import intact_members

    members = [gzip.compress(f"record {i} ".encode() * 200, mtime=0) for i in range(5)]
    damaged = members[2][: len(members[2]) // 2]
    data = b"".join([members[0], members[1], damaged, members[3], members[4]])
    intact, dropped = intact_members(data)
    assert dropped == 1
    assert intact == b"".join([members[0], members[1], members[3], members[4]])
    assert intact_members(b"".join(members)) == (b"".join(members), 0)
