"""WARC 1.1 records as Common Crawl writes them: one gzip member per record; warcinfo, then request, response and
metadata records per capture, revisit records for payloads seen before, SHA-1 digests in base32.

Written by hand rather than with warcio's writer so that every byte is a function of the inputs (no clock, no
random record ids, a fixed gzip header) and at the speed of zlib: the corpus is gigabytes.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass, field

GZIP_LEVEL = 6  # zlib's default, as Common Crawl's writers use
CC_TRUNCATE_BYTES = 1024 * 1024  # Common Crawl keeps the first MiB of a larger payload (WARC-Truncated: length)
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def sha1_digest(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def gzip_member(data: bytes) -> bytes:
    """One gzip member, its header without a time or a name: the same bytes for the same data."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


@dataclass
class Record:
    """A WARC record: its type, named header fields in order, and its block."""

    type: str
    fields: list[tuple[str, str]]
    block: bytes
    content_type: str

    def to_bytes(self) -> bytes:
        lines = ["WARC/1.1", f"WARC-Type: {self.type}", *(f"{k}: {v}" for k, v in self.fields),
                 f"Content-Type: {self.content_type}", f"WARC-Block-Digest: {sha1_digest(self.block)}",
                 f"Content-Length: {len(self.block)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.block + b"\r\n\r\n"


@dataclass
class HttpResponse:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    payload: bytes
    truncated: bool = False  # the payload was cut at CC_TRUNCATE_BYTES

    @property
    def identified_type(self) -> str:
        """What Common Crawl's content detection would call the payload (its `WARC-Identified-Payload-Type`)."""
        head = self.payload[:8]
        if head.startswith(b"%PDF"):
            return "application/pdf"
        if head.startswith(b"\x89PNG"):
            return "image/png"
        return "text/html"

    def head(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {self.reason}", *(f"{k}: {v}" for k, v in self.headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


@dataclass
class Capture:
    """One fetch of a URL: the request, the response and Common Crawl's metadata record."""

    url: str
    date: str  # ISO 8601, seconds
    ip: str
    request_id: str
    response_id: str
    metadata_id: str
    response: HttpResponse
    user_agent: str = "CCBot/2.0 (https://commoncrawl.org/faq/)"
    metadata: list[tuple[str, str]] = field(default_factory=list)

    def records(self, warcinfo_id: str) -> list[Record]:
        host = self.url.split("/")[2] if "://" in self.url else ""
        path = "/" + self.url.split("/", 3)[3] if self.url.count("/") >= 3 else "/"
        request = (f"GET {path} HTTP/1.1\r\nUser-Agent: {self.user_agent}\r\nAccept: text/html,application/xhtml+xml,"
                   f"application/xml;q=0.9,*/*;q=0.8\r\nAccept-Encoding: br,gzip\r\nHost: {host}\r\n"
                   "Connection: Keep-Alive\r\n\r\n").encode("latin-1", "replace")
        common = [("WARC-Date", self.date), ("WARC-Target-URI", self.url), ("WARC-Warcinfo-ID", warcinfo_id)]
        response_fields = [("WARC-Record-ID", self.response_id), *common, ("WARC-IP-Address", self.ip),
                           ("WARC-Concurrent-To", self.request_id),
                           ("WARC-Payload-Digest", sha1_digest(self.response.payload)),
                           ("WARC-Identified-Payload-Type", self.response.identified_type)]
        if self.response.truncated:
            response_fields.append(("WARC-Truncated", "length"))
        metadata = "".join(f"{k}: {v}\r\n" for k, v in self.metadata).encode()
        return [
            Record("request", [("WARC-Record-ID", self.request_id), *common, ("WARC-IP-Address", self.ip)], request,
                   "application/http; msgtype=request"),
            Record("response", response_fields, self.response.head() + self.response.payload,
                   "application/http; msgtype=response"),
            Record("metadata", [("WARC-Record-ID", self.metadata_id), *common,
                                ("WARC-Concurrent-To", self.response_id)], metadata, "application/warc-fields"),
        ]


def revisit(record_id: str, url: str, date: str, warcinfo_id: str, refers_to: str, refers_to_url: str,
            refers_to_date: str, response: HttpResponse) -> Record:
    """A fetch whose payload is identical to an earlier one's: only the HTTP headers are kept."""
    return Record("revisit", [("WARC-Record-ID", record_id), ("WARC-Date", date), ("WARC-Target-URI", url),
                              ("WARC-Warcinfo-ID", warcinfo_id), ("WARC-Profile", REVISIT_PROFILE),
                              ("WARC-Refers-To", refers_to), ("WARC-Refers-To-Target-URI", refers_to_url),
                              ("WARC-Refers-To-Date", refers_to_date),
                              ("WARC-Payload-Digest", sha1_digest(response.payload))],
                  response.head(), "application/http; msgtype=response")


def warcinfo(record_id: str, filename: str, date: str, fields: list[tuple[str, str]]) -> Record:
    block = "".join(f"{k}: {v}\r\n" for k, v in fields).encode()
    return Record("warcinfo", [("WARC-Record-ID", record_id), ("WARC-Date", date), ("WARC-Filename", filename)],
                  block, "application/warc-fields")
