"""A split WARC file's shares read byte ranges of it: together exactly the records of the whole file, each once, in
file order, whatever the file's layout (gzip per record, one gzip stream, uncompressed) or damage. Real pages of one
site that collapse to one text are extracted again."""

from __future__ import annotations

import gzip
import io
import zlib
from collections import defaultdict
from importlib.metadata import version

import pytest

from llm_assets.core import documents
from llm_assets.core.collapse import Collapse
from llm_assets.core.documents import (
    EXTRACTED_BY,
    ROUTED_FOR,
    DocumentsSettings,
    ExtractUnit,
    PageExtractor,
    extract_documents,
    reader_settings,
    share_records,
)
from llm_assets.core.extract import extract_html
from llm_assets.core.readers import ReadReport, member_layout, read_records
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import gzip_members
from llm_assets_tests.core.test_units import extract_unit, read, upload

GZIP_PER_RECORD = ["aut__example.IAH-2008-archive.org.warc.gz", "dolma__sample-0000.warc.gz",
                   "dolma__sample-0001.warc.gz", "pywb__iana.warc.gz", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"]
SETTINGS = reader_settings(DocumentsSettings())


class CountingFile(io.RawIOBase):
    """A local file read from `offset` on, counting the bytes read: what a ranged GET gives."""

    def __init__(self, data: bytes, offset: int):
        self.data, self.pos, self.read_bytes = data, offset, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        chunk = self.data[self.pos:self.pos + len(b)]
        b[:len(chunk)] = chunk
        self.pos += len(chunk)
        self.read_bytes += len(chunk)
        return len(chunk)


def key(rec) -> tuple:
    return rec.offset, rec.skip, rec.record_id, rec.url, rec.html, rec.text


def whole(data: bytes) -> tuple[list[tuple], ReadReport]:
    report = ReadReport()
    return [key(r) for r in read_records(io.BytesIO(data), "f", SETTINGS, report)], report


def shares(data: bytes, n: int, name: str = "raw/C/f.warc.gz") -> tuple[list[list[tuple]], list[ReadReport], list[int]]:
    """Every share's records and report, and the bytes each read, with the units `extract_units` plans."""
    units: list[ExtractUnit] = []
    for share in range(n):  # extract_units picks n by size: n is forced here, the ranges are its
        start = len(data) * share // n
        units.append(ExtractUnit(store=None, settings=DocumentsSettings(), crawl="C", source=name, unit=f"u{share}",
                                 part="p", size=len(data) * (share + 1) // n - start, offset=start, share=share,
                                 shares=n))
    records, reports, read = [], [], []
    for u in units:
        report, opened = ReadReport(), []

        def open_at(offset: int, opened=opened) -> CountingFile:
            opened.append(CountingFile(data, offset))
            return opened[-1]

        records.append([key(r) for r in share_records(open_at, name, u, SETTINGS, report)])
        reports.append(report)
        read.append(sum(f.read_bytes for f in opened))
    return records, reports, read


def drops(reports: list[ReadReport]) -> dict[str, int]:
    total: dict[str, int] = {}
    for r in reports:
        for reason, k in r.drops.items():
            total[reason] = total.get(reason, 0) + k
    return total


@pytest.mark.parametrize("name", GZIP_PER_RECORD)
@pytest.mark.parametrize("n", [2, 3, 8])
def test_shares_of_a_real_warc_read_each_record_once_and_only_their_bytes(name, n):
    data = shared("warc", name).read_bytes()
    assert member_layout(data[:64 * 1024], whole=len(data) < 64 * 1024) == "warc"
    expected, report = whole(data)
    got, reports, read = shares(data, n)
    assert [r for share in got for r in share] == expected  # each record once, in file order
    assert drops(reports) == dict(report.drops)
    set_aside = sorted((r["record_offset"], r["reason"]) for rep in reports for r in rep.set_aside_records)
    assert set_aside == sorted((r["record_offset"], r["reason"]) for r in report.set_aside_records)
    members = gzip_members(data)
    for k, records in enumerate(got):  # a share reads the members that start in its range
        start, end = len(data) * k // n, len(data) * (k + 1) // n
        assert {r[0] for r in records} <= {s for s, _ in members if start <= s < end}
    # No share reads far past its range: its own bytes, the members that run on past its end, and at most a chunk
    # of the file's head (the layout check) and of read-ahead.
    largest = max(e - s for s, e in members)
    assert all(r <= len(data) // n + largest + 3 * 64 * 1024 for r in read), (read, len(data) // n, largest)
    if len(data) > 16 * largest:
        assert sum(read) < 1.5 * len(data)


def warc_body() -> bytes:
    return gzip.decompress(shared("warc", "dolma__sample-0000.warc.gz").read_bytes())


@pytest.mark.parametrize("layout", ["one gzip stream", "uncompressed"])
def test_a_file_that_is_not_gzip_per_record_is_read_whole_by_every_share_with_the_same_output(layout):
    body = warc_body()
    data = gzip.compress(body) if layout == "one gzip stream" else body
    assert member_layout(data[:64 * 1024], whole=False) is None
    expected, report = whole(data)
    got, reports, _ = shares(data, 3)
    assert sorted(r for share in got for r in share) == sorted(expected) and sum(map(len, got)) == len(expected)
    assert all(len(share) > 0 for share in got)  # every share extracts its part of the HTML pages
    assert drops(reports) == dict(report.drops)  # counted once, by share 0


def test_gzip_members_holding_several_records_are_read_from_their_start():
    """A file of members of 5 records each (no per-record convention past the check of the first member): still
    each record once, by the share where its member starts."""
    data = shared("warc", "dolma__sample-0001.warc.gz").read_bytes()
    spans = gzip_members(data)
    grouped = data[spans[0][0]:spans[0][1]]  # the warcinfo record alone, as the convention has it
    rest = spans[1:]
    for i in range(0, len(rest), 5):
        grouped += gzip.compress(b"".join(zlib.decompress(data[s:e], 31) for s, e in rest[i:i + 5]))
    expected, _ = whole(grouped)
    got, _, _ = shares(grouped, 4)
    assert [(r[2], r[3], r[4]) for share in got for r in share] == [(r[2], r[3], r[4]) for r in expected]


def test_a_corrupt_member_is_quarantined_by_its_share_and_the_others_read():
    data = bytearray(shared("warc", "dolma__sample-0001.warc.gz").read_bytes())
    spans = gzip_members(bytes(data))
    start, end = spans[len(spans) // 2]
    data[start + 40:start + 60] = b"\x00" * 20  # inside the deflate data of a member in the middle
    data = bytes(data)
    intact = bytes(data[:start] + data[end:])
    expected_intact, _ = whole(intact)
    got, reports, _ = shares(data, 3)
    records = [r for share in got for r in share]
    assert len(records) == len({(r[0], r[1]) for r in records})  # none twice
    assert [r[2:] for r in records] == [r[2:] for r in expected_intact]  # every other record kept, in order
    quarantined = [q for rep in reports for q in rep.quarantined]
    assert [q["record_offset"] for q in quarantined] == [start]
    assert drops(reports).get("corrupt_record", 0) == 1


def test_gzip_magic_bytes_that_begin_no_record_are_not_taken_for_a_share_start():
    """Magic bytes planted where two shares meet, inside members' compressed data: no share starts there, no
    record is read twice."""
    data = shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz").read_bytes()
    # Plant gzip magic bytes (not a valid member) at every share boundary's position
    planted = bytearray(data)
    for k in (1, 2):
        at = len(data) * k // 3
        planted[at:at + 3] = b"\x1f\x8b\x08"
    got_whole, _ = whole(bytes(planted))
    got, _, _ = shares(bytes(planted), 3)
    records = [r for share in got for r in share]
    assert len(records) == len({(r[0], r[1]) for r in records})
    assert {r[0] for r in records} <= {r[0] for r in got_whole} | {s for s, _ in gzip_members(data)}


ARCHIVE_ORG = "aut__example.IAH-2008-archive.org.warc.gz"


def archive_org_pages() -> dict[str, str]:
    """The HTML of archive.org's 2008 crawl by URL."""
    with shared("warc", ARCHIVE_ORG).open("rb") as f:
        return {rec.url: rec.html for rec in read_records(f, ARCHIVE_ORG, SETTINGS, ReadReport()) if rec.html}


def test_real_pages_of_one_site_that_collapse_to_one_text_are_extracted_again(store_config, lake, crawl):
    """archive.org's 2008 crawl, one unit, the default extraction: distinct pages (the contribution and jobs pages,
    forum threads, a collection browser, URLs the crawler made of script strings) extract with trafilatura to the
    site's navigation bar alone, and "item cannot be found" pages to that bar and one line. Those pages are
    extracted again by resiliparse and counted under `collapse`; every other document is as it was."""
    key, size, etag = upload(lake, crawl, ARCHIVE_ORG)
    off = DocumentsSettings(collapse=Collapse(enabled=False))
    first = extract_documents(extract_unit(store_config, crawl, key, size, etag, tag="off", settings=off))
    caught = extract_documents(extract_unit(store_config, crawl, key, size, etag))
    before = {r["doc_id"]: r for r in read(lake, first.part).iter_rows(named=True)}
    after = {r["doc_id"]: r for r in read(lake, caught.part).iter_rows(named=True)}
    assert before.keys() == after.keys() and caught.dropped == first.dropped

    urls = defaultdict(set)
    for r in before.values():
        urls[r["domain"], r["text"]].add(r["url"])
    groups = {text: found for (_, text), found in urls.items() if len(found) >= 3 and len(text) >= 100}
    navigation_bar = min(groups, key=len)
    assert navigation_bar.startswith("|  |  |  | \n| Web \\| Moving Images \\| Texts") and len(navigation_bar) == 273
    assert [len(found) for found in groups.values()] == [11, 10]
    expected = {r["doc_id"] for r in before.values() if r["text"] in groups}

    html = archive_org_pages()
    for doc, row in after.items():
        if doc in expected:
            assert row["extractor"] == f"resiliparse {version('resiliparse')} (routed: collapse)"
            assert row["text"] == extract_html(html[row["url"]], row["url"], "resiliparse").text
        else:
            assert row == before[doc]
    assert caught.counts[ROUTED_FOR + "collapse"] == len(expected) == 21
    assert ROUTED_FOR + "collapse" not in first.counts
    assert sum(caught.counts.values()) == sum(first.counts.values()) + len(expected)  # each page counted once
    # the navigation bar's 11 pages get their own texts back: 6, as a few are one page under several crawled URLs
    assert len({after[doc]["text"] for doc in expected if before[doc]["text"] == navigation_bar}) == 6


def test_a_collapsed_page_goes_to_the_other_extractor_and_keeps_its_text_when_that_gives_none(monkeypatch):
    url = "http://www.archive.org/about/jobs.php"
    html = archive_org_pages()[url]
    extract = PageExtractor(DocumentsSettings(extractor="resiliparse"), "resiliparse")
    first = extract(html, url)
    again = extract.again(html, url, first)
    assert (again.extractor, again.reason) == ("trafilatura", "collapse")
    assert again.result == extract_html(html, url, "trafilatura")
    assert extract.counts == {EXTRACTED_BY + "trafilatura": 1, ROUTED_FOR + "collapse": 1}  # counted once, as written

    monkeypatch.setattr(documents, "extract_html", lambda *args, **kwargs: None)
    assert extract.again(html, url, again) is again
    assert extract.counts == {EXTRACTED_BY + "trafilatura": 1, ROUTED_FOR + "collapse": 1}
