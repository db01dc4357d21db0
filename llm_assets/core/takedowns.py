"""Takedown requests: documents that must leave the curated data, by URL, by domain or by doc id.

A request names exactly one of them, with who asked, why and when. Lists are JSON Lines files under `takedowns/`
in the bucket (or written by `llm-assets takedown add`); a line that is not a valid request is an error naming the
file and the line: a takedown is never skipped silently. Matching is a join of a batch of documents against every
request, so a list of a million URLs costs a hash join, not a loop.

Which partitions hold a listed document is answered without reading them: every part written gets a small
`IdIndex` (64-bit hashes of its URLs, hosts with their parent domains, and doc ids; about 30 bytes a document),
so the stale planner plans exactly the partitions a request names, and a work unit is given only the requests
that name something in its part. A hash collision only costs a rebuild that removes nothing: the removal itself
is the exact join.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from llm_assets.core.lake import id_index_key, partition_index_key
from llm_assets.core.versions import digest

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake
    from llm_assets.core.partition import Manifest

TAKEDOWN = "takedown"  # the reason code of a document a request removed
PREFIX = "takedowns/"  # where lists are dropped in the bucket
_DOC_ID = re.compile(r"[0-9a-f]{32}")
_DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9-]{1,63}\.)*[a-z0-9-]{1,63}")


class TakedownRequest(BaseModel):
    """One request: exactly one of `url`, `domain` (the domain and its subdomains) or `doc_id`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None
    domain: str | None = None
    doc_id: str | None = None
    reason: str
    requested_by: str
    date: date

    @model_validator(mode="after")
    def _one_target(self) -> TakedownRequest:
        targets = [t for t in (self.url, self.domain, self.doc_id) if t is not None]
        if len(targets) != 1:
            raise ValueError("a request names exactly one of url, domain, doc_id")
        if self.doc_id is not None and not _DOC_ID.fullmatch(self.doc_id):
            raise ValueError(f"doc_id {self.doc_id!r} is not 32 hex digits")
        if self.domain is not None and not _DOMAIN.fullmatch(self.domain):
            raise ValueError(f"domain {self.domain!r} is not a lower-case host name")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} is not an http(s) URL")
        return self

    @property
    def target(self) -> str:
        return next(f"{k}={v}" for k, v in (("url", self.url), ("domain", self.domain), ("doc_id", self.doc_id))
                    if v is not None)

    def to_line(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=True), sort_keys=True)


def read_takedowns(lines: Iterable[bytes | str], name: str) -> list[TakedownRequest]:
    """The requests of one JSON Lines file; the first bad line is an error naming the file and the line."""
    requests = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            requests.append(TakedownRequest.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as e:
            detail = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
            raise ValueError(f"takedown list {name}, line {number}: {detail}") from e
    return requests


MATCH_SCHEMA = pl.Schema({"doc_id": pl.String, "request": pl.UInt32})


def takedown_matches(requests: list[TakedownRequest], docs: pl.DataFrame) -> pl.DataFrame:
    """(doc_id, request): every document of `docs` (doc_id, url, domain) a request names, with the index of the
    first request that names it."""
    if not requests or docs.is_empty():
        return pl.DataFrame(schema=MATCH_SCHEMA)
    table = pl.DataFrame({"request": range(len(requests)), "url": [r.url for r in requests],
                          "domain": [r.domain for r in requests], "doc_id": [r.doc_id for r in requests]},
                         schema={"request": pl.UInt32, "url": pl.String, "domain": pl.String, "doc_id": pl.String})
    # A domain request covers its subdomains: every suffix of a document's host that starts at a label is a key.
    hosts = docs.select("doc_id", host=pl.col("domain").str.to_lowercase()).with_columns(
        suffix=pl.col("host").map_elements(_suffixes, return_dtype=pl.List(pl.String))).explode("suffix")
    by_url = docs.select("doc_id", "url").join(table.select("url", "request").drop_nulls(), on="url")
    by_domain = hosts.join(table.select(pl.col("domain").alias("suffix"), "request").drop_nulls(), on="suffix")
    by_id = docs.select("doc_id").join(table.select("doc_id", "request").drop_nulls(), on="doc_id")
    return (pl.concat([by_url.select("doc_id", "request"), by_domain.select("doc_id", "request"),
                       by_id.select("doc_id", "request")])
            .group_by("doc_id").agg(pl.col("request").min()).sort("doc_id").cast(MATCH_SCHEMA))


def _suffixes(host: str | None) -> list[str]:
    if not host:
        return []
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


def load_takedowns(lake: Lake) -> list[TakedownRequest]:
    """Every request of every list under `takedowns/`, in key order; a target listed twice keeps its first request."""
    requests: dict[str, TakedownRequest] = {}
    for key in sorted(k for k in lake.keys(PREFIX) if k.endswith((".jsonl", ".json"))):
        for request in read_takedowns(lake.get_bytes(key).splitlines(), key):
            requests.setdefault(request.target, request)
    return list(requests.values())


def takedowns_version(requests: Sequence[TakedownRequest]) -> str:
    """What a partition records of the requests that name something in it: a new request there changes it."""
    return digest("takedowns", *sorted(r.target for r in requests))


def _hashes(values: Iterable[str]) -> np.ndarray:
    return np.unique(np.fromiter((int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little")
                                  for v in values if v), np.uint64))


def _member(column: np.ndarray, value: str) -> bool:
    h = _hashes([value])
    return bool(len(h) and len(column)) and bool(column[min(np.searchsorted(column, h[0]), len(column) - 1)] == h[0])


@dataclass(frozen=True)
class IdIndex:
    """A part's URLs, domains (each host and its parent domains) and doc ids, as sorted 64-bit hashes."""

    urls: np.ndarray
    domains: np.ndarray
    doc_ids: np.ndarray

    @classmethod
    def of(cls, docs: pl.DataFrame) -> IdIndex:
        hosts = docs["domain"].drop_nulls().str.to_lowercase().unique().to_list()
        return cls(_hashes(docs["url"].drop_nulls().to_list()),
                   _hashes(s for host in hosts for s in _suffixes(host)), _hashes(docs["doc_id"].to_list()))

    def holds(self, request: TakedownRequest) -> bool:
        """True when a document of the part may be the one requested (a hash match)."""
        if request.url:
            return self.has_url(request.url)
        return self.has_domain(request.domain or "") if request.domain else self.has_doc_id(request.doc_id or "")

    def has_url(self, url: str) -> bool:
        return _member(self.urls, url)

    def has_domain(self, domain: str) -> bool:
        return _member(self.domains, domain)

    def has_doc_id(self, doc_id: str) -> bool:
        return _member(self.doc_ids, doc_id)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, urls=self.urls, domains=self.domains, doc_ids=self.doc_ids)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> IdIndex:
        with np.load(io.BytesIO(data)) as z:
            return cls(z["urls"], z["domains"], z["doc_ids"])


def write_id_index(lake: Lake, part: str, docs: pl.DataFrame) -> IdIndex:
    index = IdIndex.of(docs)
    lake.put_bytes(id_index_key(part), index.to_bytes())
    return index


def part_index(lake: Lake, part: str) -> IdIndex:
    """The part's index; a part written before indexes existed is indexed now (its id columns are read; a rejected
    part of an older version may lack the doc id or the domain)."""
    if (data := lake.get_bytes_if_exists(id_index_key(part))) is not None:
        return IdIndex.from_bytes(data)
    frame = lake.scan([part])
    names = frame.collect_schema().names()
    host = pl.col("url").str.extract(r"://([^/:?#]+)").str.to_lowercase()
    ids = frame.select(pl.col("doc_id") if "doc_id" in names else pl.lit(None, pl.String).alias("doc_id"),
                       pl.col("url"), pl.col("domain") if "domain" in names else host.alias("domain")).collect()
    return write_id_index(lake, part, ids)


def partition_index(lake: Lake, manifest: Manifest, rejected: bool = False) -> IdIndex:
    """The union of a committed partition's part indexes (with `rejected`, of its rejected parts': what documents
    set aside), kept beside them (by data version) once built: a lookup reads one object per partition, and the
    parts' own indexes only where it may hold what is looked for."""
    key = partition_index_key(manifest.asset, manifest.crawl, manifest.shard, manifest.data_version,
                              "rejected" if rejected else "lake")
    if (data := lake.get_bytes_if_exists(key)) is not None:
        return IdIndex.from_bytes(data)
    parts = [part_index(lake, p) for p in (manifest.rejected_parts if rejected else manifest.parts)]
    index = IdIndex(*(np.unique(np.concatenate([getattr(i, c) for i in parts] or [np.zeros(0, np.uint64)]))
                      for c in ("urls", "domains", "doc_ids")))
    lake.put_bytes(key, index.to_bytes())
    return index


def requests_in_partition(lake: Lake, manifest: Manifest, requests: Sequence[TakedownRequest]
                          ) -> list[TakedownRequest]:
    """The requests that (may) name a document of each part of a committed documents partition, part by part (a
    request named in two parts twice): one index read for the partition, the parts' only where it may hold one."""
    if not requests:
        return []
    index = partition_index(lake, manifest)
    held = [r for r in requests if index.holds(r)]
    return [r for part in manifest.parts for r in requests_in(lake, part, held)]


def requests_in(lake: Lake, part: str, requests: Sequence[TakedownRequest]) -> tuple[TakedownRequest, ...]:
    """The requests that (may) name a document of the part."""
    if not requests:
        return ()
    index = part_index(lake, part)
    return tuple(r for r in requests if index.holds(r))
