"""Takedown requests: documents that must leave the curated data, by URL, by domain or by doc id.

A request names exactly one of them, with who asked, why and when. Lists are JSON Lines files under `takedowns/`
in the bucket (or written by `llm-assets takedown add`); a line that is not a valid request is an error naming the
file and the line: a takedown is never skipped silently. Matching is a join of a batch of documents against every
request, so a list of a million URLs costs a hash join, not a loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import date

import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

TAKEDOWN = "takedown"  # the reason code of a document a request removed
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
