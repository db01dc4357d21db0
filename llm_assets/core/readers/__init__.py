"""Raw crawl files -> source records, streaming, whatever the format.

One module per format declares its `Format` (`base.py`): its name, suffixes, how it is sniffed, how it reads, whether
and how a file splits into work units, how a record is found again. `FORMATS` is their table, in sniffing order;
callers dispatch through it. The format is sniffed from the bytes, not taken from the file name: compression first
(gzip or zstd, `compression.py`, one concern beside the formats), then each format's `sniff` on the decompressed
bytes. Memory is bounded by a record or a batch, never a file.

Every record a reader passes over is accounted for: yielded, counted under a skip reason (`report.skip`; a
response skipped for what it holds, `report.set_aside`, also keeps its URL so that it can be looked up), or
quarantined with its offset and what is wrong (`report.quarantine`). Damage never ends the shard: a
gzip-per-record file resynchronizes at the next gzip member; other damage ends the file, keeping what came
before it. A record over `max_payload_bytes` (an HTML or WET payload, a JSON line or array element, a Parquet
text) is quarantined as `oversized` without being held whole.

Only the input's faults are quarantined: an error of the store or the machine while the raw bytes stream in (the
store unreachable, a connection reset, a key gone; see `errors.is_store_error`) propagates, so that the unit fails
instead of committing a file that looks damaged.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import zstandard

from llm_assets.core.errors import is_store_error
from llm_assets.core.readers import arc, html, json, jsonl, parquet, warc, wet
from llm_assets.core.readers.base import (
    ByteStream,
    Format,
    ReaderSettings,
    ReadReport,
    RecordSource,
    SourceRecord,
    UnreadableFile,
)
from llm_assets.core.readers.compression import (
    CHUNK,
    GZIP_MAGIC,
    LOOKAHEAD,
    ZSTD_MAGIC,
    Source,
    decompressed,
    decompressing,
    gzip_head,
)
from llm_assets.core.readers.parquet import PARQUET_MAGIC, read_parquet
from llm_assets.core.readers.warc import HTML_TYPES

# Sniffing order: the first format whose `sniff` (or raw `magic`) matches reads the file. Looked up when a file is
# read, so that a format added to the table (a test's) is read like the others.
FORMATS: tuple[Format, ...] = (warc.FORMAT, wet.FORMAT, arc.FORMAT, jsonl.FORMAT, json.FORMAT, parquet.FORMAT,
                               html.FORMAT)

__all__ = ["CHUNK", "FORMATS", "GZIP_MAGIC", "HTML_TYPES", "LOOKAHEAD", "PARQUET_MAGIC", "ZSTD_MAGIC", "ByteStream",
           "Format", "ReadReport", "ReaderSettings", "RecordSource", "SourceRecord", "UnreadableFile", "by_name",
           "decompressed", "format_named", "is_parquet", "member_layout", "random_access", "read_member_range",
           "read_parquet", "read_records", "sniff", "sniff_format"]


def by_name(name: str) -> Format:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(f"no reader format {name!r}; known: {', '.join(f.name for f in FORMATS)}")


def format_named(key: str) -> Format | None:
    """The format a file's name says (by suffix), for what is decided before its bytes are read (splitting)."""
    return next((fmt for fmt in FORMATS if fmt.named(key)), None)


def sniff(head: bytes) -> Format | None:
    """The format of a stream whose first decompressed bytes are `head`."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return next((fmt for fmt in FORMATS if fmt.sniff is not None and fmt.sniff(text)), None)


def sniff_format(head: bytes) -> str | None:
    """The name of the format `sniff` finds, or None."""
    fmt = sniff(head)
    return fmt.name if fmt is not None else None


def random_access(head: bytes) -> Format | None:
    """The format of a file read with random access (`Format.read_file`), told by its raw first bytes."""
    return next((fmt for fmt in FORMATS if fmt.magic and head.startswith(fmt.magic)), None)


def is_parquet(head: bytes) -> bool:
    return random_access(head) is parquet.FORMAT


def member_layout(head: bytes, whole: bool) -> str | None:
    """The format that can read a file whose first bytes are `head` (`whole`: the whole file) from any record on
    (`Format.layout`: a gzip-per-record WARC or ARC), or None: the file is read from its start."""
    layouts = dict.fromkeys(fmt.layout for fmt in FORMATS if fmt.layout is not None)
    return next((name for layout in layouts if (name := layout(head, whole)) is not None), None)


def read_member_range(raw: ByteStream, start: int, end: int, fmt: str, settings: ReaderSettings,
                      report: ReadReport) -> Iterator[SourceRecord]:
    """The records of the members starting in [start, end) of a file of format `fmt` that splits
    (`Format.read_range`)."""
    read_range = by_name(fmt).read_range
    if read_range is None:
        raise ValueError(f"reader format {fmt!r} does not split")
    return read_range(raw, start, end, settings, report)


def read_records(raw: ByteStream, name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    """Records of one raw file (a streaming, non-seekable byte stream). A format that needs random access is read
    by its `read_file` instead (callers check `random_access`). Raises UnreadableFile for what is no known format."""
    src = Source(raw)
    magic = src.peek(4)
    if not magic:
        raise UnreadableFile("empty file")
    if (seekable := random_access(magic)) is not None:
        raise UnreadableFile(f"{seekable.name} needs random access: read it with its format's read_file")

    def known(head: bytes) -> bool:
        return sniff(head) is not None

    fmt: Format | None = None
    gzipped = magic.startswith(GZIP_MAGIC)
    if gzipped or (magic != ZSTD_MAGIC and GZIP_MAGIC in src.peek(LOOKAHEAD)):
        # gzip, or gzip members after a damaged start (the first member's own header is broken)
        fmt = sniff(gzip_head(src, known))
        if fmt is not None and fmt.read_members is not None:
            yield from fmt.read_members(src, settings, report)
            return
    stream = decompressing(src)
    if not gzipped:  # a gzip file is what its (first intact) member says
        try:
            fmt = sniff(stream.peek(4096)[:4096])
        except (OSError, EOFError, zstandard.ZstdError) as e:
            if is_store_error(e):
                raise
            raise UnreadableFile(f"cannot decompress: {e}") from e
    if fmt is None or fmt.read is None:
        raise UnreadableFile(f"not a {', '.join(f.name for f in FORMATS)} file")
    try:
        yield from fmt.read(stream, name, settings, report)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
        if is_store_error(e):  # e.g. a connection reset: says nothing about the file
            raise
        # a whole-file gzip or zstd stream damaged part-way: what was read before the damage is kept
        report.quarantine("truncated_file", 0, detail=f"damaged after the last intact record: {type(e).__name__}: {e}")
