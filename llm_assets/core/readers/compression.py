"""Compression, one concern beside the formats: gzip (one member or one per record) and zstd, sniffed from the first
bytes, and the byte stream with a push-back buffer the readers sniff and resynchronize on.

Only the input's faults are the input's: an error of the store while the bytes stream in propagates (see
`errors.is_store_error`)."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable

import zstandard

from llm_assets.core.readers.base import ByteStream

GZIP_MAGIC = b"\x1f\x8b\x08"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
CHUNK = 64 * 1024
LOOKAHEAD = 1 << 20


class Source:
    """The compressed byte stream with its position and a push-back buffer."""

    def __init__(self, raw: ByteStream, pos: int = 0):
        self.raw, self.pos, self.buf = raw, pos, b""

    def read(self, n: int) -> bytes:
        data, self.buf = self.buf[:n], self.buf[n:]
        if len(data) < n:
            data += self.raw.read(n - len(data)) or b""
        self.pos += len(data)
        return data

    def unread(self, data: bytes) -> None:
        if data:
            self.buf = data + self.buf
            self.pos -= len(data)

    def peek(self, n: int) -> bytes:
        data = self.read(n)
        self.unread(data)
        return data


class DamagedMember(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class Member(io.RawIOBase):
    """The decompressed bytes of one gzip member. Raises DamagedMember on corrupt data or an early end.

    The member's compressed bytes are kept (up to RESYNC_LIMIT) so that after damage the scan for the next
    member starts right after this member's first byte: a corrupt member can decode into garbage for a while and
    swallow the bytes of intact members behind it.
    """

    RESYNC_LIMIT = 32 << 20

    def __init__(self, src: Source):
        self.src, self.start = src, src.pos
        self._d = zlib.decompressobj(31)
        self._out = b""
        self._raw = bytearray()
        self._chunk = b""
        self.done = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        """Decompress the next piece onto the end of the output buffer."""
        if self._d.unconsumed_tail:
            data = self._d.unconsumed_tail
        else:
            self._chunk = data = self.src.read(CHUNK)
            if not data:
                # cut short, or damaged so that it decoded on to the end: members after it may still be intact
                self.damaged(f"file ends inside the gzip member at offset {self.start}", "truncated_file")
            if len(self._raw) <= self.RESYNC_LIMIT:
                self._raw += data
        try:
            self._out += self._d.decompress(data, CHUNK)
        except zlib.error as e:
            self.damaged(f"gzip member at offset {self.start}: {e}")
        if self._d.eof:
            self.src.unread(self._d.unused_data)
            self.done = True

    def readinto(self, b) -> int:
        while not self._out and not self.done:
            self._fill()
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def damaged(self, detail: str, reason: str = "corrupt_record"):
        """Give back the bytes after this member's first byte, for the scan to the next member, and raise."""
        if not self.done:
            if len(self._raw) <= self.RESYNC_LIMIT:
                self.src.unread(bytes(self._raw[1:]))
            else:  # too big to keep: the next member may still start in the last chunk
                self.src.unread(self._chunk[1:])
            self.done = True
        raise DamagedMember(reason, detail)

    def ends_within(self, limit: int) -> bool:
        """Decompress ahead (without consuming) until the member ends, checking its CRC, or `limit` bytes."""
        while not self.done and len(self._out) < limit:
            self._fill()
        return self.done

    def drain(self) -> None:
        while not self.done:
            self._out = b""
            self._fill()


def scan_to_next_member(src: Source) -> bool:
    """Skip to the next gzip header. False at the end of the file."""
    tail = b""
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return False
        data = tail + chunk
        i = data.find(GZIP_MAGIC)
        if i >= 0:
            src.unread(data[i:])
            return True
        tail = data[-(len(GZIP_MAGIC) - 1):]  # a header split across two chunks


def decompressing(src: Source) -> io.BufferedReader:
    """The source's bytes, gzip (any number of members) or zstd (any number of frames) decompressed when its first
    bytes say so, else as they are."""
    magic = src.peek(4)
    if magic.startswith(GZIP_MAGIC):
        # typeshed wants a fileobj that can seek; GzipFile seeks it only when itself rewound, never done here
        return io.BufferedReader(gzip.GzipFile(fileobj=src), CHUNK)  # type: ignore[call-overload]
    if magic == ZSTD_MAGIC:
        # zstandard reads any object with read(); its stub asks for a whole IO[bytes]
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(
            src, read_across_frames=True), CHUNK)  # type: ignore[arg-type]
    return io.BufferedReader(SourceIO(src), CHUNK)


def decompressed(raw: ByteStream) -> io.BufferedReader:
    """A whole file's bytes, streaming, decompressed as the raw readers sniff them. For small files read whole (eval
    sets); raw crawl files go through `read_records`, which also resynchronizes after damage."""
    return decompressing(Source(raw))


def gzip_head(src: Source, known: Callable[[bytes], object]) -> bytes:
    """The first decompressed bytes, without consuming the source. When the first member is damaged, the first
    one of the next members (within the first MiB) that decompresses to something `known` stands in for it."""
    data = src.peek(LOOKAHEAD)
    start = 0
    while start >= 0:
        try:
            head = zlib.decompressobj(31).decompress(data[start:], 4096)
            if known(head):
                return head
        except zlib.error:
            pass
        start = data.find(GZIP_MAGIC, start + 1)
    return b""


class SourceIO(io.RawIOBase):
    def __init__(self, src: Source):
        self.src = src

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.src.read(len(b))
        b[: len(data)] = data
        return len(data)
