"""What every format's reader shares: the record it yields, the report of what it passed over, its settings, and
`Format`, the declaration a format module makes for the table in `readers/__init__.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, Protocol

from llm_assets.core.units import DropCounter

if TYPE_CHECKING:
    from llm_assets.core.policy_files import Capture


@dataclass
class SourceRecord:
    """One document's raw material: HTML to extract, or text a WET/JSON/Parquet source already holds."""

    fmt: str  # warc | arc | wet | jsonl | json | parquet | html
    offset: int  # compressed offset of the record's gzip member, or of the record in an uncompressed stream
    skip: int = 0  # uncompressed bytes from `offset` to the record (records inside one big gzip member)
    url: str = ""
    record_id: str = ""
    fetch_time: str = ""
    content_type: str = ""
    charset: str = ""
    html: str | None = None
    text: str | None = None
    title: str | None = None
    payload_bytes: int = 0
    reservation: str | None = None  # the response's own reservation of TDM rights, from its headers (`policy_files`)


@dataclass
class ReadReport:
    """What a reader passed over: skips by reason, quarantined records, file-level errors, and the records set
    aside for what they hold (a reader drains `set_aside` as it goes, so it is bounded by a batch)."""

    drops: DropCounter = field(default_factory=DropCounter)
    quarantined: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    set_aside_records: list[dict] = field(default_factory=list)
    policy_files: list[Capture] = field(default_factory=list)  # robots.txt, tdmrep.json, ai.txt responses
    max_quarantined: int = 10_000
    keep_set_aside: bool = True  # False for a report that is only counted, then discarded

    def skip(self, reason: str) -> None:
        self.drops.drop(reason)

    def set_aside(self, reason: str, offset: int, skip: int, url: str, record_id: str, detail: str = "") -> None:
        """A record skipped for its content (not HTML, an error status, no text): counted like a skip, and kept
        by URL and record id, so that `why URL` finds it."""
        self.drops.drop(reason)
        if self.keep_set_aside:
            self.set_aside_records.append({"record_offset": offset, "record_skip": skip, "url": url,
                                           "record_id": record_id, "reason": reason, "detail": detail[:500]})

    def quarantine(self, reason: str, offset: int, skip: int = 0, url: str = "", detail: str = "") -> None:
        self.drops.drop(reason)
        if len(self.quarantined) < self.max_quarantined:
            self.quarantined.append({"record_offset": offset, "record_skip": skip, "url": url, "reason": reason,
                                     "detail": detail[:500]})


@dataclass(frozen=True)
class ReaderSettings:
    max_payload_bytes: int = 5_000_000  # per record: HTML/WET payload, JSON line or array element, Parquet text
    text_field: str = "text"
    url_field: str = "url"
    id_field: str = "id"


class UnreadableFile(ValueError):
    """A file that is no archive or document format this platform reads."""


class ByteStream(Protocol):
    """What the readers need of a raw file: reads from the front. Asking for a BinaryIO would exclude a store's
    object stream and a stream with bytes put back in front."""

    def read(self, n: int, /) -> bytes | None: ...


class RecordSource(Protocol):
    """Where a format finds one record again (`why`, `trace`): the store's objects, streamed from a byte or opened
    with random access."""

    def open(self, key: str, start: int = 0) -> ByteStream: ...

    def open_arrow(self, key: str): ...


Reader = Callable[[BinaryIO, str, ReaderSettings, ReadReport], Iterator[SourceRecord]]


@dataclass(frozen=True)
class Format:
    """One raw file format, as its module declares it.

    `sniff` tells the format from a file's first decompressed bytes (a byte-order mark and leading whitespace
    stripped); a format that is never sniffed (WET: its files are WARC files) leaves it None. `magic`: the raw
    (compressed) first bytes of a format that needs random access, read with `read_file` from a seekable file
    instead of `read` from a stream. `read_members`: reads gzip-per-record files member by member from the
    compressed stream, resynchronizing after damage. `read_range` with `layout` is how a large file splits into
    work units: `layout(head, whole)` is the format's name when a file whose first bytes are `head` can be read from
    any member on, and `read_range` reads the records whose members start in a byte range. `record_at` finds one
    record again by its offsets (random access); without it, the file is read up to the record.
    """

    name: str
    suffixes: tuple[str, ...]
    read: Reader | None = None
    sniff: Callable[[bytes], bool] | None = None
    magic: bytes = b""
    read_file: Callable[..., Iterator[SourceRecord]] | None = None
    read_members: Callable[..., Iterator[SourceRecord]] | None = None
    layout: Callable[[bytes, bool], str | None] | None = None
    read_range: Callable[..., Iterator[SourceRecord]] | None = None
    record_at: Callable[[RecordSource, str, int, int, int], str] | None = None

    @property
    def splits(self) -> bool:
        """Whether a large file of this format is split into shares (work units by byte range)."""
        return self.read_range is not None

    def named(self, key: str) -> bool:
        return key.lower().endswith(self.suffixes)
