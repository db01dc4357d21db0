"""URL filtering as in RefinedWeb and FineWeb: block listed domains and URLs, and URLs made of banned words.

The lists are a small built-in one (`assets/url_blocklist.txt`) plus what the deployment supplies, inline or as
files (one entry per line, `#` comments). Words are compared after lower-casing and removing non-alphanumerics.
"""

from __future__ import annotations

import importlib.resources
import re
from functools import cache
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import Block, Rule, drop_if

# scheme://[user@]host[:port]/...
HOST = r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/?#]*@)?(\[[^\]/]*\]|[^:/?#\[]*)"
LIST_KINDS = ("banned_words", "soft_banned_words", "banned_subwords", "domains")


def _normalized(word: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "", word).lower()


def read_list(path: str | Path) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ValueError(f"url filter: cannot read list {path}: {e}") from e
    return [x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#")]


@cache
def builtin_lists() -> dict[str, tuple[str, ...]]:
    text = (importlib.resources.files("llm_assets.core.filters") / "assets" / "url_blocklist.txt").read_text()
    lists: dict[str, list[str]] = {k: [] for k in LIST_KINDS}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        else:
            assert section is not None  # the packaged list opens with a [section] header
            lists[section].append(line)
    return {k: tuple(v) for k, v in lists.items()}


@cache
def _tld_extractor():
    import tldextract

    # The Public Suffix List snapshot inside the wheel: no download at run time.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@cache
def _lists(block: URLFilter) -> dict[str, frozenset[str]]:
    """A block's lists, read once per process, not once per batch."""
    return block.lists()


def registered_domain(host: str) -> str:
    return _tld_extractor()(host).top_domain_under_public_suffix


class URLFilter(Block):
    """Reasons, in order: domain (the registered domain is listed), subdomain (the full host is listed), url (the
    exact URL is listed), hard_blacklisted (a URL word is a banned word), soft_blacklisted (at least
    `soft_word_threshold` soft-banned words), blacklisted_subword (a banned subword occurs anywhere)."""

    name = "url"
    block: Literal["url"] = Field(default="url", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    context = ("url", "host", "registered")
    use_builtin: bool = Field(default=True, description=(
        "Start from the small built-in lists (RefinedWeb / FineWeb style) before adding the ones below."))
    soft_word_threshold: int = Field(default=2, description=(
        "URL words: a URL with at least this many soft-banned words is dropped (`soft_blacklisted`); datatrove's "
        "default."))
    blocked_domains: tuple[str, ...] = Field(default=(), description=(
        "Registered domains or full host names to drop (`domain`, `subdomain`)."))
    blocked_urls: tuple[str, ...] = Field(default=(), description="Exact URLs to drop (`url`).")
    banned_words: tuple[str, ...] = Field(default=(), description=(
        "Whole URL words that drop a URL (`hard_blacklisted`)."))
    soft_banned_words: tuple[str, ...] = Field(default=(), description=(
        "URL words counted towards `soft_word_threshold`."))
    banned_subwords: tuple[str, ...] = Field(default=(), description=(
        "Strings that drop a URL wherever they occur in it (`blacklisted_subword`)."))
    blocked_domains_file: str | None = Field(default=None, description=(
        "A file of blocked domains, one per line, `#` comments (relative paths: from the repository)."))
    blocked_urls_file: str | None = Field(default=None, description=(
        "A file of blocked URLs, one per line, `#` comments."))
    banned_words_file: str | None = Field(default=None, description=(
        "A file of banned URL words, one per line, `#` comments."))

    def lists(self) -> dict[str, frozenset[str]]:
        builtin = builtin_lists() if self.use_builtin else {k: () for k in LIST_KINDS}
        domains = [*builtin["domains"], *self.blocked_domains]
        urls = list(self.blocked_urls)
        words = [*builtin["banned_words"], *self.banned_words]
        if self.blocked_domains_file:
            domains += read_list(self.blocked_domains_file)
        if self.blocked_urls_file:
            urls += read_list(self.blocked_urls_file)
        if self.banned_words_file:
            words += read_list(self.banned_words_file)
        return {
            "domains": frozenset(d.strip().lower() for d in domains),
            "urls": frozenset(u.strip() for u in urls),
            "banned_words": frozenset(filter(None, map(_normalized, words))),
            "soft_banned_words": frozenset(filter(None, map(_normalized, [*builtin["soft_banned_words"],
                                                                           *self.soft_banned_words]))),
            "banned_subwords": frozenset(filter(None, map(_normalized, [*builtin["banned_subwords"],
                                                                         *self.banned_subwords]))),
        }

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Its measures are the URL, its host and registered domain: all of them follow from the URL the scores
        hold, so none is stored and the lists are applied again when deciding."""
        hosts = df["url"].str.extract(HOST, 1).str.to_lowercase().fill_null("")
        unique = hosts.unique().to_list()
        registered = dict(zip(unique, (registered_domain(h) if h else "" for h in unique), strict=True))
        return df, df.select("url").with_columns(host=hosts, registered=hosts.replace_strict(registered))

    def restore(self, stored: pl.DataFrame) -> pl.DataFrame:
        return self.measure(stored)[1]

    def rules(self) -> list[Rule]:
        lists = _lists(self)
        url = pl.col("url")
        url_words = url.str.to_lowercase().str.extract_all(r"[a-z0-9]+")
        banned = list(lists["banned_words"])
        soft = list(lists["soft_banned_words"])
        subwords = list(lists["banned_subwords"])
        squashed = url.str.to_lowercase().str.replace_all(r"[^a-z0-9]+", "")
        return [
            Rule(pl.col("registered").is_in(list(lists["domains"])), "domain", pl.col("registered"),
                 "registered domain is listed"),
            Rule(pl.col("host").is_in(list(lists["domains"])), "subdomain", pl.col("host"), "host is listed"),
            Rule(url.is_in(list(lists["urls"])), "url", url, "URL is listed"),
            Rule(url_words.list.eval(pl.element().is_in(banned)).list.any(), "hard_blacklisted",
                 url_words.list.eval(pl.element().filter(pl.element().is_in(banned))).list.first(),
                 "a URL word is a banned word"),
            drop_if(url_words.list.eval(pl.element().filter(pl.element().is_in(soft))).list.n_unique()
                    .alias("soft_banned_words"), ">=", self.soft_word_threshold, "soft_blacklisted"),
            Rule(squashed.str.contains_any(subwords) if subwords else pl.lit(False), "blacklisted_subword",
                 squashed.str.extract_many(subwords).list.first() if subwords else None,
                 "the URL contains a banned subword"),
        ]
