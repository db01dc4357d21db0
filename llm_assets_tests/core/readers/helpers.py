"""What the reader tests share: the real files of ../shared/data they read, reading bytes or a file into records
and its report, gzip members walked independently of the reader, record comparisons, and WARCs written with
warcio."""

from __future__ import annotations

import functools
import gzip
import io
import json
import zlib
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from llm_assets.core.readers import ReaderSettings, ReadReport, SourceRecord, read_records
from llm_assets_support.shared_data import shared

SETTINGS = ReaderSettings()
MAX_PAYLOAD = SETTINGS.max_payload_bytes
CC_2020 = "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"
WHIRLWIND = "whirlwind__CC-MAIN-2024-22.warc.gz"
AUT = "aut__example.IAH-2008-archive.org.warc.gz"
IANA = "pywb__iana.warc.gz"
CC_WET = "jeffharwell__filter_test_1.CC-MAIN-2016-50.wet.gz"
CCNET = "dolma__cc_en_head-0091.ccnet.jsonl.gz"
DAMAGE = ("truncated_file", "corrupt_record")


def read(data: bytes, settings: ReaderSettings = SETTINGS, name: str = "raw") -> tuple[list[SourceRecord], ReadReport]:
    """Every record of `data` read as a non-seekable stream would be, and the report."""
    report = ReadReport()
    return list(read_records(io.BytesIO(data), name, settings, report)), report


def read_path(path: Path, settings: ReaderSettings = SETTINGS) -> tuple[list[SourceRecord], ReadReport]:
    report = ReadReport()
    with path.open("rb") as f:
        return list(read_records(f, path.name, settings, report)), report


def damage(report: ReadReport) -> int:
    return sum(report.drops.get(reason, 0) for reason in DAMAGE)


def gzip_members(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every gzip member, walked with zlib alone (independently of the reader)."""
    spans, pos = [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        d.decompress(data[pos:])
        assert d.eof
        end = len(data) - len(d.unused_data)
        spans.append((pos, end))
        pos = end
    return spans


def same(a: SourceRecord, b: SourceRecord) -> bool:
    return (a.url, a.record_id, a.fetch_time, a.content_type, a.charset, a.html, a.text) == (
        b.url, b.record_id, b.fetch_time, b.content_type, b.charset, b.html, b.text)


def content(records: list[SourceRecord]) -> list[tuple]:
    return [(r.url, r.record_id, r.fetch_time, r.content_type, r.charset, r.html, r.text, r.payload_bytes)
            for r in records]


@functools.cache
def intact(name: str) -> tuple[bytes, list[tuple[int, int]], dict[int, SourceRecord]]:
    """A shared WARC file, its gzip members and its records by offset, read once per test session."""
    data = shared("warc", name).read_bytes()
    records, report = read(data)
    assert not report.quarantined
    return data, gzip_members(data), {r.offset: r for r in records}


def first_record(data: bytes, offset: int = 0):
    """The first WARC record warcio reads at `offset` (of a gzip-per-record or uncompressed file)."""
    stream = io.BytesIO(data)
    stream.seek(offset)
    return next(iter(ArchiveIterator(stream, arc2warc=True)))


def warc_file(records: list[tuple[str, str, bytes]], compress: bool = True) -> bytes:
    """A WARC written by warcio: one 200 response per (url, Content-Type, payload)."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=compress)
    for url, content_type, payload in records:
        http = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(payload),
                                                      length=len(payload), http_headers=http))
    return out.getvalue()


def payloads(data: bytes, content_type_prefix: str) -> list[tuple[str, bytes]]:
    """(url, payload) of the 200 responses of a real WARC whose Content-Type starts with the prefix."""
    out = []
    for r in ArchiveIterator(io.BytesIO(data), arc2warc=True):
        if r.rec_type == "response" and r.http_headers is not None and r.http_headers.get_statuscode() == "200":
            if (r.http_headers.get_header("Content-Type") or "").startswith(content_type_prefix):
                out.append((r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read()))
    return out


def ccnet_rows() -> list[dict]:
    with gzip.open(shared("text", CCNET)) as f:
        return [json.loads(line) for line in f]


def wikitext(n_bytes: int) -> str:
    """Real English text (WikiText-2), repeated to n_bytes characters."""
    text = shared("text", "pytorch-examples__wikitext-2-v1.valid.txt").read_text()
    return (text * (n_bytes // len(text) + 1))[:n_bytes]
