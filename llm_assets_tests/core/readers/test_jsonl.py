"""JSON Lines (`llm_assets.core.readers.jsonl`): dolma's CCNet rows, a configured text field, bad lines, and lines
over the payload cap quarantined without being held whole."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from llm_assets.core.readers import ReaderSettings
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import CCNET, ccnet_rows, read, read_path, wikitext


def test_ccnet_json_lines_yield_their_10_documents():
    """dolma's CCNet JSON Lines: 10 documents with their `text`, `id` and (from metadata.url) URL."""
    rows = ccnet_rows()
    records, report = read(shared("text", CCNET).read_bytes())
    assert len(records) == 10 and report.quarantined == [] and dict(report.drops) == {}
    assert [(r.fmt, r.text, r.record_id, r.url) for r in records] == [
        ("jsonl", row["text"], row["id"], row["metadata"]["url"]) for row in rows]
    assert all(r.html is None for r in records)
    offsets = [r.offset for r in records]
    assert offsets[0] == 0 and offsets == sorted(set(offsets))
    plain = gzip.decompress(shared("text", CCNET).read_bytes())
    assert [json.loads(plain[o:].split(b"\n", 1)[0])["id"] for o in offsets] == [row["id"] for row in rows]


def _ccnet_renamed(field: str) -> bytes:
    rows = ccnet_rows()
    return b"".join(json.dumps({**{k: v for k, v in r.items() if k != "text"}, field: r["text"]}).encode() + b"\n"
                    for r in rows)


@pytest.mark.parametrize(("compression", "name"), [("plain", "docs.warc"), ("gzip", "docs.bin"), ("zstd", "docs.gz")])
def test_json_lines_with_a_configured_text_field(tmp_path, compression, name):
    """JSON Lines, plain, gzip or zstd, whose text is in `content`: read with text_field="content". With the
    default field every row is quarantined as `missing_text` instead of being yielded empty."""
    plain = _ccnet_renamed("content")
    blob = {"plain": plain, "gzip": gzip.compress(plain), "zstd": zstandard.ZstdCompressor().compress(plain)}
    path = tmp_path / name
    path.write_bytes(blob[compression])
    rows = ccnet_rows()
    records, report = read_path(path, ReaderSettings(text_field="content"))
    assert [(r.fmt, r.text, r.record_id) for r in records] == [("jsonl", row["text"], row["id"]) for row in rows]
    assert report.quarantined == []

    records, report = read_path(path)
    assert records == []
    assert dict(report.drops) == {"missing_text": 10}
    assert [q["record_offset"] for q in report.quarantined] == [
        m.start() for m in re.finditer(rb"^\{", plain, re.M)]


def test_json_lines_with_a_bad_line_keep_the_others():
    """A line that is no JSON, or no object, is quarantined (`corrupt_json`) at its offset; the others are read."""
    rows = ccnet_rows()
    lines = [json.dumps(r).encode() + b"\n" for r in rows]
    lines[3] = lines[3][: len(lines[3]) // 2] + b"\n"
    lines[6] = b'["not", "an", "object"]\n'
    records, report = read(b"".join(lines))
    assert [r.record_id for r in records] == [r["id"] for i, r in enumerate(rows) if i not in (3, 6)]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [
        ("corrupt_json", sum(map(len, lines[:3]))), ("corrupt_json", sum(map(len, lines[:6])))]


# ------------------------------------------------------------------------------------------- oversized lines


@pytest.mark.corpus
@pytest.mark.parametrize("compression", ["plain", "gzip"])
def test_a_60_mb_json_line_is_quarantined_and_its_neighbours_kept(compression):
    """A 60 MB JSON line between the CCNet rows is quarantined as `oversized` at its offset, never read whole;
    the rows before and after it are yielded with their own offsets."""
    rows = ccnet_rows()
    lines = [json.dumps(r).encode() + b"\n" for r in rows]
    big = json.dumps({"id": "big", "text": wikitext(60_000_000)}).encode() + b"\n"
    lines.insert(5, big)
    plain = b"".join(lines)
    records, report = read(plain if compression == "plain" else gzip.compress(plain, compresslevel=1))
    offsets = [sum(map(len, lines[:i])) for i in range(len(lines))]
    assert [(r.record_id, r.offset) for r in records] == [
        (json.loads(line)["id"], offsets[i]) for i, line in enumerate(lines) if i != 5]
    assert [(r.text, r.payload_bytes) for r in records] == [(row["text"], len(row["text"])) for row in rows]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [("oversized", offsets[5])]
    assert str(len(big)) in report.quarantined[0]["detail"]


def test_json_lines_at_and_over_the_cap():
    """The cap counts a line's bytes without its newline: a line of exactly max_payload_bytes is read, a longer
    one is quarantined, also as the last line without a newline; offsets stay right after each."""
    short, middle, long = sorted((json.dumps(r).encode() + b"\n" for r in ccnet_rows()), key=len)[::4][:3]
    cap = len(middle) - 1  # `middle` exactly at the cap
    data = middle + long + short + long.rstrip(b"\n")
    records, report = read(data, ReaderSettings(max_payload_bytes=cap))
    assert [(r.record_id, r.offset) for r in records] == [
        (json.loads(middle)["id"], 0), (json.loads(short)["id"], len(middle + long))]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [
        ("oversized", len(middle)), ("oversized", len(middle + long + short))]


_PEAK_RSS = """
import io, json, resource, sys
from llm_assets.core.readers import ReaderSettings, ReadReport, read_records
path = sys.argv[1]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = ReadReport()
with open(path, "rb") as f:
    ids = [r.record_id for r in read_records(f, path, ReaderSettings(), report)]
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"ids": ids, "reasons": [q["reason"] for q in report.quarantined], "grew_kib": after - before}))
"""


def test_memory_stays_bounded_on_a_200_mb_json_line(tmp_path):
    """A 200 MB JSON line, read in a fresh process: the peak memory grows by far less than the line (reading it
    whole and parsing it took 2.6 GB)."""
    path = tmp_path / "big.jsonl"
    piece = json.dumps(wikitext(1_000_000))[1:-1].encode()  # escaped: the pieces join into one JSON string
    with path.open("wb") as f:
        f.write(b'{"id": "before", "text": "a"}\n{"id": "big", "text": "')
        for _ in range(200):
            f.write(piece)
        f.write(b'"}\n{"id": "after", "text": "b"}\n')
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(path)], cwd=root, capture_output=True, text=True,
                          check=True)
    out = json.loads(done.stdout)
    assert (out["ids"], out["reasons"]) == (["before", "after"], ["oversized"])
    assert out["grew_kib"] < 50_000
