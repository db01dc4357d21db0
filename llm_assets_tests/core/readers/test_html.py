"""Loose HTML files (`llm_assets.core.readers.html`): a saved page is one record, decoded as in its WARC."""

from __future__ import annotations

from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import MAX_PAYLOAD, WHIRLWIND, intact, payloads, read, read_path


def test_loose_html_file(tmp_path):
    """A saved web page under a non-HTML name is one `html` record named after the file, decoded like the same
    page in its WARC (the Aragonese Wikipedia page: UTF-8 by its <meta>, no HTTP header here)."""
    data = shared("warc", WHIRLWIND).read_bytes()
    ((url, payload),) = payloads(data, "text/html")
    (page,) = intact(WHIRLWIND)[2].values()
    path = tmp_path / "escopete.dat"
    path.write_bytes(payload)
    records, report = read_path(path)
    assert [(r.fmt, r.url, r.offset, r.html, r.charset) for r in records] == [("html", "escopete.dat", 0, page.html,
                                                                               "utf-8")]
    assert report.quarantined == []

    big = b"<html><body>" + b"<p>word</p>" * (MAX_PAYLOAD // 11 + 1) + b"</body></html>"
    records, report = read(big)
    assert records == [] and [q["reason"] for q in report.quarantined] == ["oversized"]
