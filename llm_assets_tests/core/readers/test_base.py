"""The reader table and the "Add a reader" list of the extending guide (docs/extending.md): every format is one
module's `Format` in `FORMATS`, and a new format declared as the list says (a toy one, a line per record) is sniffed,
read and split through the table like the others, compressed or not. Formats are sniffed from the bytes, not the name;
bytes of no known format are unreadable; and a store failure mid-file propagates instead of being counted as
damage."""

from __future__ import annotations

import gzip
import importlib
import io
import json
import pkgutil
import random
import re
import sys
import textwrap
from pathlib import Path

import pytest
import zstandard
from botocore.exceptions import ResponseStreamingError

from llm_assets.core import documents, readers
from llm_assets.core.errors import StoreUnavailable
from llm_assets.core.readers import (
    FORMATS,
    Format,
    ReaderSettings,
    ReadReport,
    UnreadableFile,
    read_records,
    sniff_format,
)
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import AUT, CC_WET, SETTINGS, damage, payloads, read

ROOT = Path(__file__).resolve().parents[3]
TABLE_MODULES = {"base", "compression"}  # what every format shares, not a format

# Step 1 of the README's list: the module, as a newcomer would write it.
TOY_MODULE = '''
"""Toy lines: a header line, then one record's text per line."""

from llm_assets.core.readers.base import Format, SourceRecord

HEADER = b"TOYLINES\\n"


def sniff(head):
    return head.startswith(HEADER)


def _lines(stream, offset):
    for line in stream:
        yield offset, line
        offset += len(line)


def _record(offset, line):
    text = line.decode().rstrip("\\n")
    return SourceRecord(fmt="toylines", offset=offset, text=text, payload_bytes=len(text))


def read(stream, name, settings, report):
    for offset, line in _lines(stream, 0):
        if offset:
            yield _record(offset, line)


def read_range(raw, start, end, settings, report):
    """The records whose line starts in (start, end]: read from `start`, the line holding it is the range before's
    (or the header)."""
    stream = io.BufferedReader(_Raw(raw))
    first = stream.readline()
    for offset, line in _lines(stream, start + len(first)):
        if offset > end:
            return
        yield _record(offset, line)


class _Raw(io.RawIOBase):
    def __init__(self, raw):
        self.raw = raw

    def readable(self):
        return True

    def readinto(self, b):
        data = self.raw.read(len(b)) or b""
        b[:len(data)] = data
        return len(data)


FORMAT = Format(name="toylines", suffixes=(".toylines", ".toylines.gz"), sniff=sniff, read=read,
                read_range=read_range)
'''


@pytest.fixture
def toylines(tmp_path, monkeypatch) -> Format:
    """The toy format's module imported from its file, and (step 2) its entry in the table."""
    (tmp_path / "toylines.py").write_text("import io\n" + textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toylines")
    monkeypatch.setattr(readers, "FORMATS", (*FORMATS, module.FORMAT))
    yield module.FORMAT
    sys.modules.pop("toylines", None)


TEXTS = [f"record {i}: " + "word " * (i % 7) for i in range(200)]
TOY = b"TOYLINES\n" + b"".join(t.encode() + b"\n" for t in TEXTS)


def read_all(data: bytes, name: str = "raw/c/a.toylines") -> list:
    return list(readers.read_records(io.BytesIO(data), name, ReaderSettings(), ReadReport()))


@pytest.mark.parametrize("compress", [lambda b: b, gzip.compress, zstandard.ZstdCompressor().compress],
                         ids=["plain", "gzip", "zstd"])
def test_a_new_format_is_sniffed_and_read_through_the_table(toylines, compress):
    records = read_all(compress(TOY), name="raw/c/no-suffix-needed")
    assert [r.text for r in records] == TEXTS
    assert {r.fmt for r in records} == {"toylines"}
    assert readers.sniff(TOY) is toylines and readers.by_name("toylines") is toylines


def test_without_its_table_entry_the_format_is_unknown():
    with pytest.raises(UnreadableFile, match="not a warc, wet, arc, jsonl, json, parquet, html file"):
        read_all(TOY)


def test_a_new_format_that_reads_ranges_is_split_into_shares_that_read_each_record_once(toylines):
    key = "raw/c/big.toylines"
    n = documents.shares_of(key, len(TOY) * 10_000)
    assert readers.format_named(key) is toylines and toylines.splits and n == documents.MAX_SHARES
    assert documents.shares_of("raw/c/big.jsonl", len(TOY) * 10_000) == 1  # a format that does not split
    cuts = [len(TOY) * k // n for k in range(n + 1)]
    texts = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        texts += [r.text for r in readers.read_member_range(io.BytesIO(TOY[start:]), start, end, "toylines",
                                                            ReaderSettings(), ReadReport())]
    assert texts == TEXTS


def test_every_format_in_the_table_is_one_module_of_the_readers_package():
    """A format's name is its module (`core/readers/<name>.py`), which declares it as `FORMAT`; every module of the
    package but the shared ones is a format in the table."""
    names = [fmt.name for fmt in FORMATS]
    assert len(set(names)) == len(names)
    for fmt in FORMATS:
        assert importlib.import_module(f"llm_assets.core.readers.{fmt.name}").FORMAT is fmt
        assert fmt.suffixes and all(s.startswith(".") for s in fmt.suffixes)
        assert fmt.read is not None or fmt.read_file is not None or fmt.record_at is not None, fmt.name
    modules = {m.name for m in pkgutil.iter_modules(readers.__path__)}
    assert modules - TABLE_MODULES == set(names)


def extending_section(title: str) -> str:
    """A section of the extending guide, docs/extending.md (the README's "Add a …" sections moved there)."""
    text = (ROOT / "docs" / "extending.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n#", 1)[0]


def test_the_readme_list_names_the_files_a_new_format_takes():
    section = extending_section("Add a reader")
    steps = re.findall(r"^\d\. (.*(?:\n   .*)*)", section, re.M)
    assert len(steps) == 3
    paths = re.findall(r"`((?:llm_assets|llm_assets_tests)/[^`]+)`", section)
    assert "llm_assets/core/readers/<format>.py" in steps[0] and "llm_assets/core/readers/__init__.py" in steps[1]
    assert "llm_assets_tests/core/readers/test_<format>.py" in steps[2]
    for path in paths:
        assert (ROOT / path.replace("<format>", "base")).exists(), path
    # the names the list asks for are the table's
    assert "FORMATS" in steps[1] and hasattr(readers, "FORMATS")
    for name in re.findall(r"`(\w+)`", steps[0]):
        if name not in {"FORMAT", "Format", "SourceRecord", "report", "why", "trace"}:
            assert name in Format.__dataclass_fields__, name


# ----------------------------------------------------------------- formats sniffed from the bytes, bad files


def test_sniff_format_reads_the_first_bytes():
    """The format comes from the first decompressed bytes (BOM and blank lines allowed), never the name."""
    assert sniff_format(b"WARC/1.0\r\n") == "warc"
    assert sniff_format(b"\xef\xbb\xbf\r\n WARC/1.1\r\n") == "warc"
    assert sniff_format(b"filedesc://x.arc 0.0.0.0 20080101000000 text/plain 76\n") == "arc"
    assert sniff_format(b'  {"text": "x"}\n') == "jsonl"
    assert sniff_format(b'[{"text": "x"}]') == "json"
    assert sniff_format(b"<!DOCTYPE html><html>") == sniff_format(b"\n<HTML lang=en>") == "html"
    assert sniff_format(b"hello world") is None and sniff_format(b"") is None


def test_empty_file_is_unreadable():
    """An empty object is UnreadableFile("empty file"), not an empty success."""
    with pytest.raises(UnreadableFile, match="empty"):
        read(b"")


@pytest.mark.parametrize("kind", ["random bytes", "png", "plain text", "gzipped text", "zstd text", "gzip magic only",
                                  "parquet magic"])
def test_files_that_are_no_known_format_are_unreadable(kind):
    """Bytes that are no archive or document format raise UnreadableFile (which the documents stage reports),
    never another exception, and yield nothing."""
    text = shared("text", "pytorch-examples__wikitext-2-v1.valid.txt").read_bytes()[:20_000]
    png = next(p for _, p in payloads(shared("warc", AUT).read_bytes(), "image/png"))
    data = {"random bytes": random.Random(0).randbytes(5000), "png": png, "plain text": text,
            "gzipped text": gzip.compress(text), "zstd text": zstandard.ZstdCompressor().compress(text),
            "gzip magic only": b"\x1f\x8b\x08", "parquet magic": b"PAR1" + bytes(100)}[kind]
    with pytest.raises(UnreadableFile):
        read(data)


@pytest.mark.parametrize("kind", ["html", "jsonl"])
def test_small_text_formats_are_read_not_rejected(kind):
    """Loose HTML and JSON Lines bytes are formats the reader knows: read, not rejected."""
    data = {"html": b"<html><body>hello</body></html>\n" * 10, "jsonl": b'{"id": 1, "text": "hello"}\n' * 5}[kind]
    records, report = read(data)
    assert len(records) == {"html": 1, "jsonl": 5}[kind] and report.quarantined == []


# ---------------------------------------------------------------- infrastructure errors are not bad input


class _FailingStream(io.RawIOBase):
    """The bytes of a file until `at`, then the error a broken connection to the store raises."""

    def __init__(self, data: bytes, at: int, error: Exception):
        self.data, self.at, self.error, self.pos = data, at, error, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.pos >= self.at:
            raise self.error
        n = min(len(b), self.at - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def _jsonl_of_random_text() -> bytes:
    rng = random.Random(5)
    return b"".join(json.dumps({"id": i, "text": rng.randbytes(1500).hex()}).encode() + b"\n" for i in range(1500))


INFRA_FILES = {
    "gzip per record WARC": lambda: shared("warc", AUT).read_bytes(),
    "uncompressed WARC": lambda: gzip.decompress(shared("warc", AUT).read_bytes()),
    "whole-file gzip WET": lambda: gzip.compress(gzip.decompress(shared("wet", CC_WET).read_bytes()) * 30),
    "JSON Lines": _jsonl_of_random_text,
    "gzip JSON Lines": lambda: gzip.compress(_jsonl_of_random_text(), compresslevel=1),
    "zstd JSON Lines": lambda: zstandard.ZstdCompressor().compress(_jsonl_of_random_text()),
    "JSON array": lambda: json.dumps([json.loads(line) for line in _jsonl_of_random_text().splitlines()]).encode(),
}


INFRA_ERRORS = {
    "StoreUnavailable": lambda: StoreUnavailable("object store http://127.0.0.1:1: reading raw/x kept failing"),
    "ResponseStreamingError": lambda: ResponseStreamingError(error="Connection broken: IncompleteRead"),
    "ConnectionResetError": lambda: ConnectionResetError(104, "Connection reset by peer"),
}


@pytest.mark.parametrize("error", sorted(INFRA_ERRORS))
@pytest.mark.parametrize("kind", sorted(INFRA_FILES))
def test_a_store_failure_mid_file_propagates_and_quarantines_nothing(kind, error):
    """The stream of a raw file breaks three quarters in (the store gone, a connection reset): the reader raises
    that error after the records before it, and quarantines nothing; before, it counted a `truncated_file` or a
    `corrupt_record` and the partition would have committed without the rest of the file."""
    data = INFRA_FILES[kind]()
    assert len(data) > 2 * readers.LOOKAHEAD  # the break comes after the format sniffing, mid-records
    raised = INFRA_ERRORS[error]()
    report, records = ReadReport(), []
    with pytest.raises(type(raised)) as caught:
        for record in read_records(io.BufferedReader(_FailingStream(data, len(data) * 3 // 4, raised)), "raw",
                                   SETTINGS, report):
            records.append(record)
    assert caught.value is raised
    assert records and report.quarantined == [] and damage(report) == 0
