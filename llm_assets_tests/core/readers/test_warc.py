"""The WARC reader (`llm_assets.core.readers.warc`) on the real files of ../shared/data: record counts, skip
reasons, provenance offsets, languages, the same records whatever the compression or the name, WATs, and
payloads that are too big or no HTML."""

from __future__ import annotations

import gzip
import io
import re

import polars as pl
import pytest
import zstandard
from warcio.archiveiterator import ArchiveIterator

from llm_assets.core.extract import extract_html
from llm_assets.core.filters import LanguageFilter
from llm_assets.core.readers import HTML_TYPES, ReaderSettings
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import (
    AUT,
    CC_2020,
    IANA,
    MAX_PAYLOAD,
    WHIRLWIND,
    content,
    first_record,
    gzip_members,
    intact,
    payloads,
    read,
    read_path,
    warc_file,
)

# ------------------------------------------------------------------------------------------ the shared WARCs


# file -> (HTML 2xx records yielded, skip counts, at least this many records with main text).
# Counted independently with warcio: e.g. the archive.org crawl holds 299 responses, of which 94 are 2xx HTML,
# 47 are 404/302/301 and 120 are 2xx non-HTML; 38 are `dns:` responses without HTTP headers (not_response). 38 of
# those non-HTML or error responses are robots.txt files, set aside as `policy_file` (opt-out evidence).
EXPECTED = {
    CC_2020: (16, {"not_response": 34}, 15),
    WHIRLWIND: (1, {"not_response": 3}, 1),
    AUT: (94, {"not_response": 561, "non_html": 87, "non_2xx": 42, "policy_file": 38}, 93),
    IANA: (16, {"not_response": 172, "non_html": 28, "revisit": 123, "non_2xx": 4}, 16),
    "dolma__sample-0000.warc.gz": (22, {"not_response": 26}, 22),
    "dolma__sample-0001.warc.gz": (15, {"not_response": 19}, 15),
}


def test_every_shared_warc_file_has_expectations():
    """The table covers every file in ../shared/data/warc, so a new file cannot go untested."""
    folder = shared("warc")
    assert sorted(p.name for p in folder.iterdir()) == sorted(EXPECTED)


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_html_records_and_skip_reasons(name):
    """Each file yields exactly its 2xx HTML responses; every other record is counted under one reason, and
    nothing in these intact files is quarantined."""
    n_html, expected_drops, min_with_text = EXPECTED[name]
    records, report = read(shared("warc", name).read_bytes())

    assert len(records) == n_html
    assert dict(report.drops) == expected_drops
    assert report.quarantined == [] and report.errors == []
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must be distinct and in file order"
    assert len({r.record_id for r in records}) == n_html
    for r in records:
        assert (r.fmt, r.skip, r.text) == ("warc", 0, None)
        assert r.url.startswith(("http://", "https://"))
        assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", r.record_id, re.I)
        assert re.match(r"\d{4}-\d{2}-\d{2}T", r.fetch_time)
        assert r.content_type.lower().split(";")[0].strip() in HTML_TYPES
        assert 0 < r.payload_bytes <= MAX_PAYLOAD
        assert isinstance(r.html, str) and r.html
    with_text = [e for e in (extract_html(r.html, r.url) for r in records) if e is not None]
    assert len(with_text) >= min_with_text
    assert all(e.text.strip() for e in with_text)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_record_offset_is_the_gzip_member_start_of_the_record(name):
    """`offset` is provenance: it is the start of the record's gzip member, and seeking the file there and
    reading one record with warcio gives back the same WARC record."""
    data, spans, records = intact(name)
    starts = {s for s, _ in spans}
    for r in records.values():
        assert r.offset in starts
        first = first_record(data, r.offset)
        assert first.rec_headers.get_header("WARC-Record-ID") == r.record_id
        assert first.rec_headers.get_header("WARC-Target-URI") == r.url


def test_oversized_payloads_are_quarantined_not_truncated():
    """A payload above max_payload_bytes is quarantined as `oversized` with its URL and offset, never yielded
    cut short; the records after it are still read."""
    data, _, full = intact(CC_2020)
    limit = sorted(r.payload_bytes for r in full.values())[len(full) // 2]
    small, report = read(data, ReaderSettings(max_payload_bytes=limit))
    big = [r for r in full.values() if r.payload_bytes > limit]
    assert content(small) == content([r for r in full.values() if r.payload_bytes <= limit])
    assert report.drops["oversized"] == len(big) > 0
    assert [(q["reason"], q["record_offset"], q["url"]) for q in report.quarantined] == [
        ("oversized", r.offset, r.url) for r in big]


def test_iana_revisits_are_counted_and_never_yielded():
    """pywb's iana crawl holds 123 revisit records (deduplicated re-fetches with no payload)."""
    data, _, records = intact(IANA)
    revisit_ids = {r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(io.BytesIO(data))
                   if r.rec_type == "revisit"}
    _, report = read(data)
    assert report.drops["revisit"] == len(revisit_ids) == 123
    assert not revisit_ids & {r.record_id for r in records.values()}


def test_archive_org_counts_non_html_and_non_2xx():
    """The 2008 archive.org crawl: robots.txt files are `policy_file` whatever their status; other 404s and
    redirects are `non_2xx`; images, text, XML and JS are `non_html`."""
    data = shared("warc", AUT).read_bytes()
    non_2xx = non_html = robots = 0
    for r in ArchiveIterator(io.BytesIO(data), arc2warc=True):
        if r.rec_type != "response" or r.http_headers is None:
            continue
        status = r.http_headers.get_statuscode()
        ctype = (r.http_headers.get_header("Content-Type") or "").split(";")[0].strip().lower()
        if r.rec_headers.get_header("WARC-Target-URI").endswith("/robots.txt"):
            robots += 1
        elif not status.startswith("2"):
            non_2xx += 1
        elif ctype not in HTML_TYPES:
            non_html += 1
    _, report = read(data)
    assert (report.drops["non_2xx"], report.drops["non_html"]) == (non_2xx, non_html) == (42, 87)
    assert report.drops["policy_file"] == len(report.policy_files) == robots == 38


def _cc_metadata_languages(data: bytes) -> dict[str, str]:
    """Common Crawl's own cld2 top language per URL, from the file's metadata records."""
    out = {}
    for r in ArchiveIterator(io.BytesIO(data)):
        if r.rec_type == "metadata":
            m = re.search(rb'languages-cld2: \{.*?"code":"([a-z]+)"', r.content_stream().read())
            if m:
                out[r.rec_headers.get_header("WARC-Target-URI")] = m.group(1).decode()
    return out


def test_cc_2020_languages_by_fasttext():
    """fastText lid.176 (as LanguageFilter applies it) on the extracted text of the CC-MAIN-2020-34 excerpt.

    The truth of this file is 5 languages, not the 7 (zh, de, en, fr, tg, nl, sv) the data README lists: Common
    Crawl's own cld2 labels in its metadata records say zh x12, de x2, ru, en, nl, and fastText finds the same
    set. fastText's known weakness is short text: it may disagree with cld2 (which saw the whole page) where the
    extracted text is under 100 characters, e.g. a Chinese page whose main text is an English copyright line.
    """
    data, _, records = intact(CC_2020)
    cld2 = _cc_metadata_languages(data)
    assert len(cld2) == 16
    assert sorted(set(cld2.values())) == ["de", "en", "nl", "ru", "zh"]

    docs = [(r.url, e.text) for r in records.values() if (e := extract_html(r.html, r.url)) is not None]
    df, _ = LanguageFilter(languages=()).apply(pl.DataFrame(docs, schema=["url", "text"], orient="row"))
    assert df["language_score"].min() > 0
    assert set(df["language"]) == {"zh", "de", "en", "ru", "nl"}
    long = df.filter(pl.col("text").str.len_chars() >= 100)
    assert long.height >= 12
    for url, language in long.select("url", "language").iter_rows():
        assert language == cld2[url], url
    assert (df["language"] == "zh").sum() >= 9


def test_cc_2020_gbk_page_decodes_and_the_others_yield_main_text():
    """096355.com is labelled gb2312 but uses GBK bytes: it decodes as GB18030 (its title reads as Chinese). It is a
    video page with no article, so trafilatura (favor precision) finds no main text; every other page has some."""
    _, _, records = intact(CC_2020)
    (gbk,) = [r for r in records.values() if "096355.com" in r.url]
    assert gbk.charset == "gb18030" and "正在播放" in gbk.html and "\ufffd" not in gbk.html
    missing = [r.url for r in records.values() if extract_html(r.html, r.url) is None]
    assert missing == [gbk.url]


def test_wat_yields_no_documents():
    """A WAT holds JSON metadata records, no responses and no conversions: nothing is yielded, nothing raises."""
    records, report = read(shared("wet", "whirlwind__CC-MAIN-2024-22.warc.wat.gz").read_bytes())
    assert records == []
    assert dict(report.drops) == {"not_response": 2} and report.quarantined == []


# ------------------------------------------------------------------- any compression, any name: the same records


def _zstd_per_record(data: bytes) -> bytes:
    """A gzip-per-record WARC re-compressed as one zstd frame per record."""
    return b"".join(zstandard.ZstdCompressor().compress(gzip.decompress(data[s:e])) for s, e in gzip_members(data))


WARC_VARIANTS = {
    # variant -> (bytes from the per-record gzip file, a misleading file name)
    "gzip per record": (lambda d: d, "page.html"),
    "whole-file gzip": (lambda d: gzip.compress(gzip.decompress(d)), "notes.txt"),
    "uncompressed": (lambda d: gzip.decompress(d), "data.jsonl"),
    "zstd": (lambda d: zstandard.ZstdCompressor().compress(gzip.decompress(d)), "table.parquet"),
    "zstd frame per record": (_zstd_per_record, "archive.warc.gz"),
}


@pytest.mark.parametrize("variant", WARC_VARIANTS)
def test_warc_variants_read_alike_whatever_their_names(tmp_path, variant):
    """The CC-MAIN-2020-34 WARC, recompressed (or not) and saved under a misleading name, gives the same records.
    Where records share one compressed stream, `offset` is 0 and `skip` the uncompressed position of the record."""
    data, _, full = intact(CC_2020)
    make, name = WARC_VARIANTS[variant]
    path = tmp_path / name
    path.write_bytes(make(data))
    records, report = read_path(path)
    assert content(records) == content(list(full.values()))
    assert dict(report.drops) == EXPECTED[CC_2020][1] and report.quarantined == []
    assert {r.fmt for r in records} == {"warc"}
    if variant == "gzip per record":
        assert [r.offset for r in records] == list(full)
    else:
        plain = gzip.decompress(data)
        assert {r.offset for r in records} == {0}
        for r in records:
            assert first_record(plain, r.skip).rec_headers.get_header("WARC-Record-ID") == r.record_id


# -------------------------------------------------------------------------------- bad records


@pytest.mark.corpus
def test_a_50_mb_payload_is_quarantined_and_the_next_record_read():
    """A 50 MB HTML response (over the default 5 MB cap) is quarantined as `oversized` with its URL and member
    offset, never read whole into a document; the record after it is read."""
    page = b"<html><body>" + (b"<p>" + b"x" * 1000 + b"</p>\n") * 50_000 + b"</body></html>"
    assert len(page) > 50_000_000
    data = warc_file([("http://huge.example/", "text/html", page),
                      ("http://next.example/", "text/html; charset=utf-8", b"<html><body><p>after</p></body></html>")])
    records, report = read(data)
    assert [(r.url, r.html) for r in records] == [("http://next.example/", "<html><body><p>after</p></body></html>")]
    assert [(q["reason"], q["record_offset"], q["url"]) for q in report.quarantined] == [
        ("oversized", 0, "http://huge.example/")]
    assert records[0].offset == gzip_members(data)[1][0]


def test_binary_payload_in_an_html_response_is_quarantined():
    """Real image bytes (archive.org's logo JPEG, a GIF, a PNG) served as text/html are quarantined as
    `non_html_payload`, not decoded into a document; the HTML record between them is read."""
    images = {}
    for url, payload in payloads(shared("warc", AUT).read_bytes(), "image/"):
        images.setdefault(payload[:3], (url, payload))
    jpeg, gif, png = images[b"\xff\xd8\xff"], images[b"GIF"], images[b"\x89PN"]
    data = warc_file([(jpeg[0], "text/html", jpeg[1]), (gif[0], "text/html; charset=utf-8", gif[1]),
                      ("http://ok.example/", "text/html", b"<p>fine</p>"), (png[0], "application/xhtml+xml", png[1])])
    records, report = read(data)
    assert [r.url for r in records] == ["http://ok.example/"]
    assert [(q["reason"], q["url"]) for q in report.quarantined] == [
        ("non_html_payload", jpeg[0]), ("non_html_payload", gif[0]), ("non_html_payload", png[0])]
