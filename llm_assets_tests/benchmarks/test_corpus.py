"""The benchmark corpus builder (`make corpus`, benchmarks/corpus/) on a slice: two of its Debian packages (the German
and Japanese LibreOffice help, fetched with apt-get as the full build fetches all of them) in a few hundred pages.
The same seed gives the same bytes whatever the number of workers; every page holds its gold text inside a real
template; the product's reader sees exactly the records the manifest counts, the planted bad ones included."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import lxml.html
import polars as pl
import pytest

from benchmarks.corpus.__main__ import main as corpus_main
from benchmarks.corpus.build import Options, Rates, build, load_texts, plan
from llm_assets.core.documents import DocumentsSettings, reader_settings
from llm_assets.core.extract import extract_html
from llm_assets.core.readers import ReadReport, read_records
from llm_assets_support.shared_data import shared
from llm_assets_tests.benchmarks.conftest import SLICE

pytestmark = pytest.mark.corpus


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_the_same_seed_builds_the_same_bytes_with_one_worker_or_two(corpus, tmp_path):
    corpus_main([*SLICE, "--out", str(tmp_path / "again"), "--workers", "1", "--warc-dir", str(shared("warc"))])
    first, again = _manifest(corpus), _manifest(tmp_path / "again")
    assert [(f["path"], f["sha256"]) for f in first["files"]] == [(f["path"], f["sha256"]) for f in again["files"]]
    assert first["sha256"] == again["sha256"]
    assert pl.read_parquet(corpus / "gold.parquet").equals(pl.read_parquet(tmp_path / "again" / "gold.parquet"))
    texts, _, _ = load_texts(Options(out=tmp_path, full=False))
    assert plan(Options(out=tmp_path, pages=240, full=False, seed=7), texts) != plan(
        Options(out=tmp_path, pages=240, full=False), texts)


def test_the_manifest_records_each_source_and_what_was_built(corpus):
    m = _manifest(corpus)
    assert [s["name"] for s in m["sources"]] == ["libreoffice-help-de", "libreoffice-help-ja"]
    for source in m["sources"]:
        assert source["version"] and len(source["sha256"]) == 64 and source["licence"].startswith("MPL-2.0")
    assert set(m["crawls"]) == {"BENCH-2026-A", "BENCH-2026-B"}
    assert m["counts"]["html_pages"] == 240 and m["counts"]["languages"].keys() == {"de", "ja"}
    assert sum(f["bytes"] for f in m["files"]) == m["counts"]["bytes"]
    for f in m["files"]:
        assert (corpus / f["path"]).stat().st_size == f["bytes"]
    # the page sizes follow the shared Common Crawl WARC's, recorded beside them
    assert m["page_sizes"]["cc_sample"]["p50"] == sorted(m["page_sizes"]["model"]["cc_sample_bytes"])[8]
    assert m["page_sizes"]["corpus"]["p10"] < m["page_sizes"]["corpus"]["p50"] < m["page_sizes"]["corpus"]["p90"]


def _pages(out: Path):
    settings = DocumentsSettings()
    for f in _manifest(out)["files"]:
        report = ReadReport()
        with open(out / f["path"], "rb") as fh:
            records = list(read_records(fh, f["path"], reader_settings(settings), report))
        yield f, records, report


def test_every_page_holds_its_gold_text_inside_a_real_template(corpus):
    gold = {r["warc_record_id"]: r for r in pl.read_parquet(corpus / "gold.parquet").iter_rows(named=True)}
    seen, f1 = 0, []
    for _, records, _ in _pages(corpus):
        for rec in records:
            row = gold[rec.record_id]
            doc = lxml.html.document_fromstring(rec.html)
            article = doc.xpath('//article[@class="post"]')[0]
            # text_content() joins the blocks without a separator: compared without white space. A page planted
            # with a wrong charset label reads as mojibake, as it would in a browser.
            misdeclared = row["declared_charset"] == "utf-8" and row["charset"] != "utf-8"
            assert misdeclared or re.sub(r"\s+", "", article.text_content()) == re.sub(r"\s+", "", row["text"])
            article.getparent().remove(article)
            assert doc.text_content().strip(), "the template around the text is empty"
            seen += 1
            if seen % 4 == 0:  # the extractor finds the text among the template's furniture
                got = Counter((extract_html(rec.html, rec.url, max_chars=2_000_000).text or "").split())
                want = Counter(row["text"].split())
                overlap = sum((got & want).values())
                p, r = overlap / max(1, sum(got.values())), overlap / max(1, sum(want.values()))
                f1.append(2 * p * r / (p + r) if p + r else 0.0)
    assert seen == len(gold)
    assert sum(f1) / len(f1) > 0.8


def test_copies_are_planted_as_stated(corpus):
    gold = pl.read_parquet(corpus / "gold.parquet")
    by_page = {r["page"]: r for r in gold.iter_rows(named=True)}
    kinds = Counter(gold["kind"].to_list())
    assert kinds["exact_duplicate"] > 0 and kinds["near_duplicate"] > 0 and kinds["original"] > 200
    crossing = 0
    for row in gold.filter(pl.col("kind").is_in(["exact_duplicate", "near_duplicate"])).iter_rows(named=True):
        source = by_page[row["source_page"]]
        assert source["kind"] == "original" and source["source_path"] == row["source_path"]
        crossing += source["crawl"] != row["crawl"]
        if row["kind"] == "exact_duplicate":
            assert row["text"] == source["text"] and row["url"] != source["url"]
        else:
            assert 0.5 < row["jaccard"] < 1.0 and row["text"] != source["text"]
    assert crossing > 0, "no copy across the two crawls"


def test_the_reader_sees_the_records_the_manifest_counts(corpus):
    for f, records, report in _pages(corpus):
        counted = f["records"]
        drops = dict(report.drops)
        assert len(records) == counted["response"] - counted.get("redirect", 0) - counted.get("not_found", 0) \
            - counted.get("server_error", 0) - counted.get("image", 0) - counted.get("pdf", 0)
        assert drops.get("non_2xx", 0) == counted.get("redirect", 0) + counted.get("not_found", 0) \
            + counted.get("server_error", 0)
        assert drops.get("non_html", 0) == counted.get("image", 0) + counted.get("pdf", 0)
        assert drops.get("revisit", 0) == counted.get("revisit", 0)


def test_bad_records_are_planted_where_stated_and_quarantined_by_the_reader(tmp_path):
    rates = replace(Rates(), oversized=0.05, damaged=0.05, misdeclared_charset=0.05, unknown_charset=0.05)
    opts = Options(out=tmp_path, pages=120, pages_per_file=60, full=False, workers=1, rates=rates)
    build(opts, shared("warc"))
    gold = pl.read_parquet(tmp_path / "gold.parquet")
    damaged = gold.filter("damaged").height
    whole_oversized = gold.filter(pl.col("oversized") & ~pl.col("truncated") & ~pl.col("damaged")).height
    cut = gold.filter(pl.col("truncated") & ~pl.col("damaged"))
    assert damaged and whole_oversized and cut.height
    assert (cut["payload_bytes"] == 1024 * 1024).all()
    assert gold.filter(pl.col("declared_charset") == "x-unknown-charset").height
    quarantined: Counter[str] = Counter()
    for _, records, report in _pages(tmp_path):
        quarantined.update(q["reason"] for q in report.quarantined)
        for rec in records:  # a page cut at 1 MiB is read (its head holds the text); a whole one over 5 MB is not
            assert len(rec.html) <= 5_000_000
    assert quarantined["oversized"] == whole_oversized
    assert quarantined["corrupt_record"] == damaged
    text = gold.filter(pl.col("declared_charset") == "x-unknown-charset")["text"][0]
    assert html.unescape(text) == text
