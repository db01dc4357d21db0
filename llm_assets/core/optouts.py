"""Opt-outs: machine-readable reservations of text and data mining, read from the crawl itself.

Two kinds of evidence (the EU AI Act's Art. 53(1)(c) points to the DSM Directive's Art. 4(3) reservations), both
read by `policy_files`:

- **per document**, carried by the response: a `tdm-reservation: 1` HTTP header (W3C TDMRep), an `X-Robots-Tag`
  with `noai`, or the same in the page's `<meta>` tags. The documents stage records what it finds
  (`documents.reservation`).
- **per host**, from captures of its policy files: `/robots.txt` (RFC 9309, parsed by Protego for each configured AI
  user agent), `/.well-known/tdmrep.json` (TDMRep) and `/ai.txt`. They come from any WARC of the crawl (the documents
  stage keeps them beside its parts) and from the `robots/<crawl>/` zone, where Common Crawl's separate robots.txt
  WARCs are dropped.

`decide` turns a batch of documents and the crawl's `Evidence` into the documents a reservation covers, each with
its reason code (`robots_txt`, `tdm_reservation`, `noai`, `ai_txt`) and the evidence as JSON: which capture, which
rule line, captured when. A policy file that is damaged is treated as its standard says and its problem is named:
RFC 9309 reads an unreachable (5xx) robots.txt as a complete disallow, an unavailable one (4xx, or a redirect the
crawl did not follow) as no rule, parses what lines it can, and at least the first 500 KiB; a tdmrep.json that is
not the documented JSON reserves nothing, and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from functools import lru_cache
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlsplit

import polars as pl
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.policy_files import (
    AI_TXT,
    CAPTURE_SCHEMA,
    KINDS,
    ROBOTS_TXT,
    TDM_RESERVATION,
    Capture,
    Kind,
    captures_frame,
    captures_of,
    tdmrep_problem,
)
from llm_assets.core.versions import digest

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake
    from llm_assets.core.partition import Manifest
    from llm_assets.core.takedowns import IdIndex

OPT_OUT = "opt_out"  # the block name of a dropped document in `rejected/filtered/`
ZONE = "robots/"  # robots.txt WARCs dropped for a crawl: robots/<crawl>/<file>

# The AI crawlers' product tokens as their operators publish them, and the day the list was last checked.
AI_AGENTS = ("CCBot", "GPTBot", "ChatGPT-User", "OAI-SearchBot", "Google-Extended", "ClaudeBot", "anthropic-ai",
             "Claude-Web", "Applebot-Extended", "PerplexityBot", "Bytespider", "meta-externalagent", "cohere-ai",
             "Amazonbot", "Diffbot", "Omgilibot", "Timpibot", "ImagesiftBot")
AGENTS_AS_OF = date(2026, 11, 1)


class OptOutSettings(Section):
    """Which reservations of text and data mining the `filtered` stage honours, and how."""

    enabled: bool = Field(default=True, description=(
        "`false`: no opt-out is looked at (the documents' evidence is still recorded)."))
    mode: Literal["drop", "flag"] = Field(default="drop", description=(
        "`drop`: a covered document goes to `rejected/filtered/` (block `opt_out`, a reason code per policy kind); "
        "`flag`: it is kept with its `opt_out` column set to the evidence."))
    honour: tuple[Kind, ...] = Field(
        default=KINDS, description=(
            "The policy kinds honoured: `robots_txt` (a host's robots.txt disallows the path to one of `agents`), "
            "`tdm_reservation` (TDMRep: the header, the `<meta>` tag or the host's `/.well-known/tdmrep.json`), "
            "`noai` (`X-Robots-Tag` or robots `<meta>`), `ai_txt` (the host's `/ai.txt`)."))
    agents: tuple[str, ...] = Field(default=AI_AGENTS, min_length=1, description=(
        "AI crawlers' user-agent product tokens: a robots.txt rule for any of them (or for `*`, when it has no group "
        "of its own) reserves the path."))
    agents_as_of: date = Field(default=AGENTS_AS_OF, description="When `agents` was last checked against the "
                                                                 "operators' published tokens.")
    retroactive: bool = Field(default=True, description=(
        "`true`: a host's newest capture of a policy file covers all its documents, also those fetched before it (an "
        "opt-out honoured in this and every later release); `false`: the newest capture at or before each "
        "document's fetch."))
    cutoff: date | None = Field(default=None, description=(
        "Captures made after this day are not evidence (a release reproducible as of a date)."))

    def honours(self, kind: str) -> bool:
        return self.enabled and kind in self.honour


# ---------------------------------------------------------------------------------------------------- verdicts

@dataclass(frozen=True)
class Verdict:
    """Why a document is covered: its reason code, the agent (or `*`) and the rule, and the capture, if any."""

    kind: str
    rule: str
    agent: str = ""
    capture: Capture | None = None
    source: str = ""  # header | meta for a document's own evidence

    def detail(self) -> str:
        cited = {"kind": self.kind, "rule": self.rule, **({"agent": self.agent} if self.agent else {}),
                 **({"source": self.source} if self.source else {}),
                 **(self.capture.cite() if self.capture else {})}
        return json.dumps(cited, sort_keys=True)


_PRODUCT_TOKEN = re.compile(r"(?im)^([ \t]*user-agent[ \t]*:[ \t]*)([A-Za-z_-]+)/[^\s#]*")


@lru_cache(maxsize=4096)
def _parsed(body: str):
    from protego import Protego

    # A `User-agent: CCBot/2.0` line names the product token CCBot (as Google's parser reads it).
    return Protego.parse(_PRODUCT_TOKEN.sub(r"\1\2", body))


def robots_verdict(capture: Capture, url: str, agents: Iterable[str], kind: str = ROBOTS_TXT) -> Verdict | None:
    """Whether a robots.txt (or ai.txt, `kind`) capture bars `url` to one of `agents`: RFC 9309 2.3.1 reads a 5xx
    robots.txt as a complete disallow, and a 4xx (or an unfollowed redirect) as no rule at all; an ai.txt that was
    not served reserves nothing."""
    if kind == ROBOTS_TXT and (capture.status >= 500 or capture.status == 429):
        return Verdict(kind, f"HTTP {capture.status}: unreachable, a complete disallow (RFC 9309 2.3.1.3)", "*",
                       capture)
    if not 200 <= capture.status < 300:
        return None
    parser = _parsed(capture.body)
    for agent in agents:
        if not parser.can_fetch(url, agent):
            return Verdict(kind, rule_line(capture.body, agent, _path(url)), agent, capture)
    return None


def _path(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def rule_line(body: str, agent: str, path: str) -> str:
    """The line of a robots.txt that decides `path` for `agent`, as `line N: Disallow: /x`: RFC 9309's longest match
    in the groups that name the agent (else the `*` groups). Only words the evidence: the verdict is Protego's."""
    groups: list[tuple[set[str], list[tuple[int, str, bool, str]]]] = []
    in_agents = False
    for number, raw in enumerate(body.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "user-agent":
            if not in_agents:
                groups.append((set(), []))
            groups[-1][0].add(re.split(r"[/\s]", value, maxsplit=1)[0].lower())
            in_agents = True
        elif key in ("allow", "disallow") and groups:
            groups[-1][1].append((number, raw.strip(), key == "allow", value))
            in_agents = False
    named = [rules for names, rules in groups if agent.lower() in names] or \
            [rules for names, rules in groups if "*" in names]
    best: tuple[int, bool, int, str] | None = None
    for number, text, allow, pattern in (r for rules in named for r in rules):
        if pattern and _matches(pattern, path) and (best is None or (len(pattern), allow) > best[:2]):
            best = (len(pattern), allow, number, text)
    return f"line {best[2]}: {best[3]}" if best else "no rule (the agent's group is empty)"


def _matches(pattern: str, path: str) -> bool:
    regex = "".join(".*" if c == "*" else re.escape(c) for c in unquote(pattern.removesuffix("$")))
    return re.match(regex + ("$" if pattern.endswith("$") else ""), unquote(path)) is not None


def tdmrep_verdict(capture: Capture, url: str) -> Verdict | None:
    """TDMRep's file: its first rule whose `location` matches the path decides; `tdm-reservation: 1` reserves."""
    if not 200 <= capture.status < 300 or tdmrep_problem(capture.body):
        return None
    path = _path(url)
    for number, rule in enumerate(json.loads(capture.body), 1):
        if _matches(rule["location"], path):
            if str(rule.get("tdm-reservation")) != "1":
                return None
            policy = f", tdm-policy {rule['tdm-policy']}" if rule.get("tdm-policy") else ""
            return Verdict(TDM_RESERVATION, f"rule {number}: location {rule['location']}{policy}", "", capture)
    return None


def own_verdict(reservation: str, settings: OptOutSettings) -> Verdict | None:
    """A document's own recorded reservation, when the settings honour it (a `noai` for one agent: one of theirs)."""
    found = json.loads(reservation)
    kind, agent = found["kind"], found.get("agent", "")
    if not settings.honours(kind) or agent and agent.lower() not in {a.lower() for a in settings.agents}:
        return None
    return Verdict(kind, found["value"], agent, None, found["source"])


# ----------------------------------------------------------------------------------------------- the evidence

@dataclass(frozen=True)
class Evidence:
    """A crawl's policy captures by host, oldest first."""

    by_host: Mapping[str, tuple[Capture, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, captures: Iterable[Capture], cutoff: date | None = None) -> Evidence:
        hosts: dict[str, list[Capture]] = {}
        for c in captures:
            if c.host and (cutoff is None or (c.day is not None and c.day <= cutoff)):
                hosts.setdefault(c.host, []).append(c)
        return cls({h: tuple(sorted(cs, key=lambda c: (c.fetched, c.identity))) for h, cs in sorted(hosts.items())})

    @property
    def hosts(self) -> list[str]:
        return list(self.by_host)

    def version(self, hosts: Iterable[str] | None = None) -> str:
        """The captures of these hosts (every host by default), as one version."""
        chosen = self.hosts if hosts is None else sorted(set(hosts) & self.by_host.keys())
        return digest("evidence", *(c.identity for h in chosen for c in self.by_host[h]))

    def of_hosts(self, index: IdIndex) -> Evidence:
        """The evidence of the hosts an id index (may) hold."""
        return Evidence({h: cs for h, cs in self.by_host.items() if index.has_domain(h)})

    def applying(self, host: str, fetched: str, retroactive: bool) -> list[Capture]:
        """Per policy file, the capture that holds for a document of `host` fetched at `fetched`: the newest, or
        (not `retroactive`) the newest at or before it."""
        newest: dict[str, Capture] = {}
        for c in self.by_host.get(host, ()):
            if retroactive or c.fetched[:19] <= fetched[:19]:
                newest[c.file] = c
        return list(newest.values())


def verdict(url: str, host: str, fetched: str, reservation: str | None, evidence: Evidence,
            settings: OptOutSettings) -> Verdict | None:
    """The first reservation that covers one document: its own (header, meta), then its host's files."""
    if reservation and (own := own_verdict(reservation, settings)) is not None:
        return own
    for capture in evidence.applying(host, fetched, settings.retroactive):
        found = None
        if capture.file == "robots.txt" and settings.honours(ROBOTS_TXT):
            found = robots_verdict(capture, url, settings.agents)
        elif capture.file == "ai.txt" and settings.honours(AI_TXT):
            found = robots_verdict(capture, url, settings.agents, AI_TXT)
        elif capture.file == "tdmrep.json" and settings.honours(TDM_RESERVATION):
            found = tdmrep_verdict(capture, url)
        if found is not None:
            return found
    return None


DECISIONS = pl.Schema({"doc_id": pl.String, "reason": pl.String, "detail": pl.String, "host": pl.String})


def decide(docs: pl.DataFrame, evidence: Evidence, settings: OptOutSettings) -> pl.DataFrame:
    """(doc_id, reason, detail, host): the documents of `docs` (doc_id, url, domain, fetch_time, reservation) a
    reservation covers. Only the documents with evidence are looked at one by one."""
    if not settings.enabled or docs.is_empty():
        return pl.DataFrame(schema=DECISIONS)
    candidates = docs.with_columns(host=pl.col("domain").str.to_lowercase()).filter(
        pl.col("reservation").is_not_null() | pl.col("host").is_in(evidence.hosts))
    rows = []
    for doc_id, url, host, fetched, reservation in candidates.select(
            "doc_id", "url", "host", pl.col("fetch_time").fill_null(""), "reservation").iter_rows():
        found = verdict(url or "", host or "", fetched, reservation, evidence, settings)
        if found is not None:
            rows.append((doc_id, found.kind, found.detail(), host))
    return pl.DataFrame(rows, schema=DECISIONS, orient="row")


COVERAGE = pl.Schema({"kind": pl.String, "documents": pl.UInt32, "hosts": pl.UInt32, "evidence_from": pl.String,
                      "evidence_to": pl.String})


def coverage(covered: pl.DataFrame) -> pl.DataFrame:
    """Per policy kind, in KINDS' order: the documents and hosts covered and the days their evidence was captured,
    from (reason, host, detail) rows: a partition's decisions, or a release's rejected documents."""
    fetched = pl.col("detail").str.json_path_match("$.fetched").str.slice(0, 10)
    by_kind = covered.group_by(kind="reason").agg(
        documents=pl.len(), hosts=pl.col("host").drop_nulls().n_unique(), evidence_from=fetched.min(),
        evidence_to=fetched.max())
    return pl.DataFrame({"kind": list(KINDS)}).join(by_kind, on="kind", how="left", maintain_order="left") \
        .with_columns(pl.col("documents", "hosts").fill_null(0)).cast(COVERAGE)


def problems_of(evidence: Evidence) -> list[str]:
    """Every damaged policy file of the evidence, named: `<source>@<offset> (<url>): <problem>`."""
    return [f"{c.source_key}@{c.record_offset} ({c.url}): {c.problems}"
            for cs in evidence.by_host.values() for c in cs if c.problems]


# -------------------------------------------------------------------------------------------------- in the lake

POLICY_SIDE_PART = "policy"  # the documents unit's side part that holds the policy files its source held
_DOC_COLUMNS = ["doc_id", "url", "domain", "fetch_time", "reservation"]


@dataclass(frozen=True)
class CrawlEvidence:
    """What a crawl's policy files say, and the files that could not be read as written (named)."""

    evidence: Evidence
    problems: tuple[str, ...] = ()


def crawl_evidence(lake: Lake, crawl: str, documents: Iterable[Manifest], cutoff: date | None) -> CrawlEvidence:
    """The crawl's policy files: those its documents partitions kept (`documents`: every shard's committed manifest)
    and the captures in the WARCs dropped under `robots/<crawl>/`."""
    captures: list[Capture] = []
    for manifest in documents:
        keys = [u.side_parts[POLICY_SIDE_PART] for u in manifest.units if POLICY_SIDE_PART in u.side_parts]
        if keys:
            captures += captures_of(lake.scan(keys, CAPTURE_SCHEMA).collect())
    zone, unreadable = zone_captures(lake, crawl)
    evidence = Evidence.of([*captures, *zone], cutoff)
    return CrawlEvidence(evidence, (*unreadable, *problems_of(evidence)))


def zone_captures(lake: Lake, crawl: str) -> tuple[list[Capture], list[str]]:
    """The captures of the WARCs under `robots/<crawl>/`, each file read once per version: its captures and its
    problems are kept under `index/policy/`. A damaged file keeps the captures around the damage; a file that is no
    WARC gives none; both are named, every time."""
    from llm_assets.core.keys import validate_crawl

    captures: list[Capture] = []
    problems: list[str] = []
    for info in lake.list(f"{ZONE}{validate_crawl(crawl)}/"):
        cache = f"index/policy/{digest(info.key, info.etag)}"
        if (said := lake.get_json(cache + ".json")) is None:
            found, said = _read_zone_file(lake, info.key)
            with lake.part_writer(cache + ".parquet", CAPTURE_SCHEMA) as out:
                out.write(captures_frame(found))
            lake.put_json(cache + ".json", said)  # last: a cache without its captures is never read
        captures += captures_of(lake.scan([cache + ".parquet"], CAPTURE_SCHEMA).collect())
        problems += said["problems"]
    return captures, problems


def _read_zone_file(lake: Lake, key: str) -> tuple[list[Capture], dict]:
    from llm_assets.core.errors import is_store_error
    from llm_assets.core.readers import ReaderSettings, ReadReport, read_records

    report = ReadReport(keep_set_aside=False)
    problems = []
    try:
        for _ in read_records(lake.open(key), key, ReaderSettings(), report):
            pass  # the policy files are what the reader sets aside; a page in the file is not a document here
    except Exception as e:  # noqa: BLE001 - a file that is no WARC costs its own captures, named, no more
        if is_store_error(e):
            raise
        problems.append(f"{key}: not a readable WARC ({type(e).__name__}: {e}); no capture taken from it")
    problems += [f"{key}: {e}" for e in report.errors]
    if damaged := sum(report.drops.get(r, 0) for r in ("truncated_file", "corrupt_record")):
        problems.append(f"{key}: {damaged} damaged record(s) skipped; the captures around them are kept")
    return [replace(c, source_key=key) for c in report.policy_files], {"problems": problems}


def part_decisions(lake: Lake, part: str, reserved: bool, evidence: Evidence,
                   settings: OptOutSettings) -> pl.DataFrame:
    """The decisions (`decide`) over one documents part: read only when it holds a document that carries its own
    reservation (`reserved`, from its unit's counts) or one of a host with evidence (its id index says so)."""
    from llm_assets.core.takedowns import part_index

    if not settings.enabled:
        return pl.DataFrame(schema=DECISIONS)
    hosts = evidence.of_hosts(part_index(lake, part)).hosts if evidence.by_host else []
    if not reserved and not hosts:
        return pl.DataFrame(schema=DECISIONS)
    frame = lake.scan([part])
    if "reservation" not in frame.collect_schema().names():  # a part written before documents recorded it
        frame = frame.with_columns(reservation=pl.lit(None, pl.String))
    docs = frame.select(_DOC_COLUMNS).filter(
        pl.col("reservation").is_not_null() | pl.col("domain").str.to_lowercase().is_in(hosts)).collect()
    return decide(docs, Evidence({h: evidence.by_host[h] for h in hosts}), settings)
