"""ARC files (`llm_assets.core.readers.arc`), the Internet Archive's pre-WARC format, built from a real WARC's
responses: read as the WARC is, gzip per record or not."""

from __future__ import annotations

import gzip
import io
import re

import pytest
from warcio.archiveiterator import ArchiveIterator

from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import CC_2020, WHIRLWIND, intact, read


def _arc_record(r) -> bytes:
    block = r.http_headers.to_bytes() + r.raw_stream.read()
    date = re.sub(r"\D", "", r.rec_headers.get_header("WARC-Date"))[:14]
    ip = r.rec_headers.get_header("WARC-IP-Address") or "0.0.0.0"
    ctype = r.http_headers.get_header("Content-Type").split(";")[0]
    return f"{r.rec_headers.get_header('WARC-Target-URI')} {ip} {date} {ctype} {len(block)}\n".encode() + block + b"\n"


def _arc_from(data: bytes) -> list[bytes]:
    """ARC v1 records (filedesc first) holding the HTML responses of a real WARC."""
    body = b"1 0 llm-assets-tests\nURL IP-address Archive-date Content-type Archive-length\n\n"
    out = [f"filedesc://test.arc 0.0.0.0 20200801000000 text/plain {len(body)}\n".encode() + body + b"\n"]
    for r in ArchiveIterator(io.BytesIO(data)):
        if r.rec_type == "response" and (r.http_headers.get_header("Content-Type") or "").startswith("text/html"):
            out.append(_arc_record(r))
    return out


@pytest.mark.parametrize("compression", ["gzip per record", "uncompressed"])
def test_arc_file(compression):
    """An ARC (the Internet Archive's pre-WARC format) built from the CC-MAIN-2020-34 responses reads as the WARC
    does: same URLs, fetch times, Content-Types and decoded HTML; gzip-per-record offsets are the member starts."""
    _, _, full = intact(CC_2020)
    arc = _arc_from(intact(CC_2020)[0])
    members = [gzip.compress(r) for r in arc]
    blob = b"".join(members) if compression == "gzip per record" else b"".join(arc)
    records, report = read(blob, name="crawl.warc.gz")
    assert [(r.fmt, r.url, r.fetch_time, r.content_type, r.charset, r.html) for r in records] == [
        ("arc", r.url, r.fetch_time, r.content_type, r.charset, r.html) for r in full.values()]
    assert dict(report.drops) == {"not_response": 1} and report.quarantined == []
    if compression == "gzip per record":
        starts = [sum(map(len, members[:i])) for i in range(len(members))]
        assert [r.offset for r in records] == starts[1:]


def test_arc_record_ids_are_stable_across_reads():
    """Reading the same ARC twice gives the same record ids (documents derive stable doc ids from them)."""
    arc = b"".join(_arc_from(shared("warc", WHIRLWIND).read_bytes()))
    assert [r.record_id for r in read(arc)[0]] == [r.record_id for r in read(arc)[0]]
