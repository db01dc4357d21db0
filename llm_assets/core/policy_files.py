"""What a crawl's responses say of text and data mining, as read: the captures of a host's policy files
(robots.txt, `/.well-known/tdmrep.json`, ai.txt) and a response's own reservation (a `tdm-reservation` or
`X-Robots-Tag: noai` header, or the same in a `<meta>` tag). The readers and the documents stage record them; what
they reserve, for which agents, is `optouts`' to decide."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import date
from typing import Literal
from urllib.parse import urlsplit

import polars as pl
import pyarrow as pa

from llm_assets.core.versions import digest

Kind = Literal["robots_txt", "tdm_reservation", "noai", "ai_txt"]
ROBOTS_TXT: Kind = "robots_txt"
TDM_RESERVATION: Kind = "tdm_reservation"
NOAI: Kind = "noai"
AI_TXT: Kind = "ai_txt"
KINDS: tuple[Kind, ...] = (ROBOTS_TXT, TDM_RESERVATION, NOAI, AI_TXT)  # the reason codes, one per policy kind
# The policy files of a host, by path, and the kind of capture each is.
POLICY_FILES = {"/robots.txt": "robots.txt", "/.well-known/tdmrep.json": "tdmrep.json", "/ai.txt": "ai.txt"}
ROBOTS_MAX_BYTES = 500 * 1024  # RFC 9309 2.5: a crawler parses at least the first 500 KiB

CAPTURE_SCHEMA = pa.schema([("file", pa.string()), ("url", pa.string()), ("host", pa.string()),
                            ("status", pa.int32()), ("fetched", pa.string()), ("source_key", pa.string()),
                            ("record_offset", pa.int64()), ("body", pa.string()), ("problems", pa.string())])


@dataclass(frozen=True)
class Capture:
    """One capture of a host's policy file: robots.txt, tdmrep.json or ai.txt."""

    file: str  # a value of POLICY_FILES
    url: str
    host: str
    status: int
    fetched: str  # the WARC-Date
    source_key: str  # the WARC it came from, and the record's offset there
    record_offset: int
    body: str  # decoded; robots.txt and ai.txt cut at ROBOTS_MAX_BYTES
    problems: str = ""  # what was wrong with the file, "; "-joined (named in the reports)

    @property
    def day(self) -> date | None:
        try:
            return date.fromisoformat(self.fetched[:10])
        except ValueError:
            return None

    @property
    def identity(self) -> str:
        return digest(self.source_key, str(self.record_offset), self.fetched, self.url)

    def cite(self) -> dict[str, object]:
        return {"capture": f"{self.source_key}@{self.record_offset}", "url": self.url, "fetched": self.fetched,
                "status": self.status}


def policy_file(url: str) -> str | None:
    """The kind of policy file a URL is (a value of POLICY_FILES), or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return POLICY_FILES.get(parts.path) if parts.hostname and not parts.query else None


def capture_of(url: str, status: int, fetched: str, payload: bytes, source_key: str, offset: int) -> Capture:
    """A policy file's response as evidence: decoded as UTF-8 (a file that is not is decoded with replacement
    characters, and says so), robots.txt and ai.txt cut at ROBOTS_MAX_BYTES (parsed that far, as RFC 9309 allows)."""
    file = policy_file(url) or "robots.txt"
    problems = []
    if file != "tdmrep.json" and len(payload) > ROBOTS_MAX_BYTES:
        problems.append(f"{len(payload)} bytes: parsed to {ROBOTS_MAX_BYTES} (RFC 9309 2.5)")
        payload = payload[:ROBOTS_MAX_BYTES]
    try:
        body = payload.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        body = payload.decode("utf-8", errors="replace").removeprefix("\ufeff")
        problems.append(f"not UTF-8 (byte {e.start}): undecodable bytes replaced, the lines they are in ignored")
    if file == "tdmrep.json" and 200 <= status < 300 and (problem := tdmrep_problem(body)):
        problems.append(problem)
    if 300 <= status < 400:
        problems.append(f"HTTP {status}: a redirect the crawl did not follow reads as unavailable (RFC 9309 2.3.1.2)")
    return Capture(file, url, (urlsplit(url).hostname or "").lower(), status, fetched, source_key, offset, body,
                   "; ".join(problems))


def captures_frame(captures: Iterable[Capture]) -> pa.Table:
    return pa.Table.from_pylist([asdict(c) for c in captures], CAPTURE_SCHEMA)


def captures_of(frame: pl.DataFrame) -> list[Capture]:
    return [Capture(**row) for row in frame.iter_rows(named=True)]


def tdmrep_problem(body: str) -> str:
    try:
        rules = json.loads(body)
    except json.JSONDecodeError as e:
        return f"tdmrep.json is not JSON ({e.msg}, line {e.lineno}): it reserves nothing"
    if not isinstance(rules, list) or not all(isinstance(r, dict) and isinstance(r.get("location"), str)
                                              for r in rules):
        return "tdmrep.json is not an array of rules with a `location`: it reserves nothing"
    return ""


# -------------------------------------------------------------------------------------- a response's own reservation

_META = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([a-zA-Z-]+)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""")
HEAD_CHARS = 100_000  # how far into a page its <meta> tags are looked for


def header_reservation(headers: Iterable[tuple[str, str]]) -> str | None:
    """A response's own reservation, from its HTTP headers: TDMRep's `tdm-reservation: 1` (with `tdm-policy`), or
    `X-Robots-Tag` with `noai` (for every agent, or `agent: noai`). JSON, or None."""
    found = {name.strip().lower(): value.strip() for name, value in headers}
    if found.get("tdm-reservation") == "1":
        return _reservation(TDM_RESERVATION, "header", "tdm-reservation: 1", found.get("tdm-policy"))
    if (tag := found.get("x-robots-tag")) and (agent := _noai(tag)) is not None:
        return _reservation(NOAI, "header", f"X-Robots-Tag: {tag}"[:200], agent=agent)
    return None


def meta_reservation(html: str) -> str | None:
    """A page's own reservation, from its `<meta>` tags: `tdm-reservation` with content 1, or `robots` (or an
    agent's name) with `noai`. JSON, or None."""
    for tag in _META.findall(html[:HEAD_CHARS]):
        attributes = {k.lower(): v.strip("'\"").strip() for k, v in _ATTRIBUTE.findall(tag)}
        name, content = attributes.get("name", "").lower(), attributes.get("content", "")
        if name == "tdm-reservation" and content == "1":
            return _reservation(TDM_RESERVATION, "meta", tag[:200])
        if name and content and {t.strip().lower() for t in content.split(",")} & {"noai"}:
            return _reservation(NOAI, "meta", tag[:200], agent="" if name == "robots" else name)
    return None


def _noai(tag: str) -> str | None:
    """The agent an X-Robots-Tag's `noai` is for ("" for every agent), or None."""
    agent, _, directives = tag.rpartition(":") if re.match(r"^\s*[A-Za-z_-]+\s*:", tag) else ("", "", tag)
    return agent.strip() if "noai" in {d.strip().lower() for d in directives.split(",")} else None


def _reservation(kind: str, source: str, value: str, policy: str | None = None, agent: str = "") -> str:
    return json.dumps({"kind": kind, "source": source, "value": value, **({"policy": policy} if policy else {}),
                       **({"agent": agent} if agent else {})}, sort_keys=True)
