"""Where one document went: `llm-assets trace URL|DOC_ID`, `why`, and `show rejected`. Reads the lake alone.

A document is found without scanning the crawl: each documents part's id index (`core.takedowns.IdIndex`) says
which partitions may hold the URL or doc id, and only those partitions' parts are read, filtered on the way in.
A record that never became a document (no text, not HTML, an error status, damaged) is found the same way in the
rejected parts of `documents`, which are indexed too."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from llm_assets.core.keys import (
    InvalidKey,
    PartitionRef,
    release_manifest_key,
    release_name_prefix,
    release_prefix,
    release_superseded_key,
)
from llm_assets.core.partition import Manifest, committed
from llm_assets.core.release import provenance_keys
from llm_assets.core.takedowns import IdIndex, part_index, partition_index
from llm_assets.core.thresholds import CHAIN, NOT_THRESHOLDS, AppliedThresholds, recorded_thresholds
from llm_assets.settings import Settings
from llm_assets.stages import SPECS
from llm_assets.stages.filtered import LANGUAGE_INPUT

# The shard stages a document passes, in order, and the columns that say why one set it aside.
STAGES = tuple(s.name for s in SPECS if s.documents)  # the stages holding documents, in build order
WHY = ("filter", "reason", "detail", "duplicate_of", "language", "language_score", "n_words", "quality_score")


@dataclass
class Step:
    stage: str
    crawl: str
    shard: str
    outcome: str  # "kept" or "dropped"
    doc_id: str
    facts: dict = field(default_factory=dict)  # the block and reason, the measured scores, the duplicate, ...
    # a document filtered dropped: the thresholds its build recorded for the document's language (None: none)
    thresholds: AppliedThresholds | None = None

    def to_json(self) -> dict:
        return {"stage": self.stage, "crawl": self.crawl, "shard": self.shard, "outcome": self.outcome,
                "doc_id": self.doc_id, "facts": self.facts}


@dataclass
class Trace:
    key: str
    steps: list[Step] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)  # release versions that hold it
    superseded: dict[str, str] = field(default_factory=dict)  # of those, the superseded ones: version -> by which

    def stops(self) -> list[Step]:
        return [s for s in self.steps if s.outcome == "dropped"]


def _match(key: str) -> pl.Expr:
    return pl.col("url") == key if "://" in key else pl.col("doc_id") == key


def _rows(lake, parts: list[str], key: str, columns: list[str] | None = None) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame()
    frame = lake.scan(parts)
    names = frame.collect_schema().names()
    wanted = [c for c in (columns or names) if c in names]
    if ("://" in key and "url" not in names) or ("://" not in key and "doc_id" not in names):
        return pl.DataFrame()
    return frame.filter(_match(key)).select(wanted).collect()


def trace(lake, settings: Settings, crawls: list[str], key: str) -> Trace:
    """Every stage the document (a URL or a doc id) reached in each crawl, and the releases holding it."""
    out = Trace(key)
    shards = settings.shard_keys()
    doc_ids: set[str] = set()
    for crawl in crawls:
        documents = committed(lake, "documents", crawl, shards)
        for shard, m in sorted(documents.items()):
            out.steps += _set_aside(lake, m, key)
            if not _holds(partition_index(lake, m), key):
                continue
            parts = [p for p in m.parts if _holds(part_index(lake, p), key)]
            found = _rows(lake, parts, key, ["doc_id", "url", "source_key", "record_offset"])
            if found.is_empty():
                continue
            for row in found.iter_rows(named=True):
                out.steps.append(Step("documents", crawl, shard, "kept", row["doc_id"], row))
                doc_ids.add(row["doc_id"])
            alive = set(found["doc_id"])
            for stage in STAGES[1:]:
                built = committed(lake, stage, crawl, [shard]).get(shard)
                if built is None or not (alive := _follow(lake, out, stage, built, alive)):
                    break
    out.releases = _releases_holding(lake, settings.release.name, doc_ids)
    for version in out.releases:
        marker = lake.get_bytes_if_exists(release_superseded_key(settings.release.name, version))
        if marker is not None:
            out.superseded[version] = json.loads(marker).get("superseded_by", "")
    return out


def trace_record(t: Trace, settings: Settings) -> dict:
    """`trace --json`: every step, a stop at filtered with its thresholds (`stop_thresholds`), and the releases."""
    return {"key": t.key, "releases": t.releases, "superseded": t.superseded,
            "steps": [s.to_json() | (stop_thresholds(s, settings) if s.outcome == "dropped" else {})
                      for s in t.steps]}


def releases_text(t: Trace) -> str:
    """The release versions holding the document, a superseded one with the version that replaced it."""
    return ", ".join(f"{v} (superseded by {t.superseded[v]})" if v in t.superseded else v for v in t.releases) \
        or "none"


def _set_aside(lake, m: Manifest, key: str) -> list[Step]:
    """The records of the documents partition with this URL or doc id that never became documents, and why."""
    if not m.rejected_parts or not _holds(partition_index(lake, m, rejected=True), key):
        return []
    parts = [p for p in m.rejected_parts if _holds(part_index(lake, p), key)]
    found = _rows(lake, parts, key, ["doc_id", "url", "reason", "detail", "source_key", "record_offset"])
    return [Step("documents", m.crawl, m.shard, "dropped", row.get("doc_id") or "",
                 {k: v for k, v in row.items() if v is not None}) for row in found.iter_rows(named=True)]


def _holds(index: IdIndex, key: str) -> bool:
    return index.has_url(key) if "://" in key else index.has_doc_id(key)


def _follow(lake, out: Trace, stage: str, built: Manifest, doc_ids: set[str]) -> set[str]:
    """Add the stage's outcome for the documents (a kept one with its language, where the stage holds it); -> those
    it kept."""
    kept = pl.concat([_rows(lake, built.parts, d, ["doc_id", *LANGUAGE]) for d in doc_ids], how="diagonal") \
        if built.parts else pl.DataFrame()
    went_on = set(kept["doc_id"]) if kept.width else set()
    for row in sorted(kept.unique("doc_id").iter_rows(named=True), key=lambda r: r["doc_id"]) if kept.width else []:
        out.steps.append(Step(stage, built.crawl, built.shard, "kept", row["doc_id"],
                              {k: row[k] for k in LANGUAGE if row.get(k) is not None}))
    for d in sorted(doc_ids - went_on):
        rejected = _rows(lake, built.rejected_parts, d, ["doc_id", *WHY]) if built.rejected_parts else pl.DataFrame()
        facts = {k: v for k, v in (rejected.row(0, named=True).items() if rejected.height else []) if v is not None}
        out.steps.append(Step(stage, built.crawl, built.shard, "dropped", d, facts,
                              _recorded(lake, built, facts.get("language")) if stage == FILTERED else None))
    return went_on


def _recorded(lake, built: Manifest, language: str | None) -> AppliedThresholds | None:
    """The thresholds the filtered partition's build recorded for the language: its manifest names them by their
    fingerprint. None for a partition built before builds recorded them."""
    fingerprint = built.inputs.get(LANGUAGE_INPUT + language) if language else None
    try:
        return recorded_thresholds(lake, language, fingerprint) if language and fingerprint else None
    except InvalidKey:  # a label no key can hold, so no build recorded it
        return None


def _releases_holding(lake, name: str, doc_ids: set[str]) -> list[str]:
    if not doc_ids:
        return []
    held = []
    for version in lake.folders(release_name_prefix(name)):
        prefix = release_prefix(name, version)
        if (manifest := lake.get_json(release_manifest_key(name, version))) is None:  # not committed (yet)
            continue
        prov = lake.scan(provenance_keys(prefix, manifest))
        if prov.filter(pl.col("doc_id").is_in(list(doc_ids))).select(pl.len()).collect().item():
            held.append(version)
    return held


NOT_FOUND = "not found in any crawl's documents, nor among the records documents set aside"


def format_trace(t: Trace, settings: Settings | None = None) -> str:
    """Each step on a line; with `settings`, a stop at filtered with the thresholds that dropped it
    (`stop_thresholds`)."""
    if not t.steps:
        return f"{t.key}: {NOT_FOUND}"
    lines = []
    for s in t.steps:
        where = PartitionRef(s.crawl, s.shard).key
        if s.outcome == "kept":
            lines.append(f"  {s.stage:<13} {where:<24} kept     {s.doc_id}{_language_text(s.facts)}")
        else:
            facts = dict(s.facts)
            facts.pop("doc_id", None)
            if "detail" in facts:
                facts["detail"] = _decoded(facts["detail"])
            lines.append(f"  {s.stage:<13} {where:<24} dropped  {s.doc_id}  {json.dumps(facts, default=str)}")
            if settings is not None and (applied := stop_thresholds(s, settings)):
                lines += [f"{' ' * 15}{line}" for line in _applied_lines(s.facts, applied)]
    lines.append(f"  releases holding it: {releases_text(t)}")
    return f"{t.key}:\n" + "\n".join(lines)


SCORES = ("language", "language_score", "n_words", "quality_score")
LANGUAGE = ("language", "language_score")
EXCLUDE = NOT_THRESHOLDS
FILTERED = "filtered"  # the stage whose thresholds apply per language


def _language_text(facts: dict) -> str:
    if not facts.get("language"):
        return ""
    score = facts.get("language_score")
    return f"  language {facts['language']}" + (f" ({score:.2f})" if isinstance(score, float) else "")


def applied_thresholds(settings: Settings, block: str, language: str | None) -> tuple[dict, dict[str, str]]:
    """The thresholds of `block` that applied to a document of `language`, and where each one comes from: the
    chain's value (`chain`: the settings' chain, the published defaults where it sets none), the FineWeb-2 table's
    row of the language (`fineweb2`; its language score re-derived for lid.176: `lid176`), or `filtered.overrides`
    (`override`). A document without a language (dropped
    before the language block) had the chain's."""
    config = settings.filtered.block(block)
    chain = config.model_dump(mode="json", exclude=set(EXCLUDE)) if config is not None else {}
    if not language:
        return chain, dict.fromkeys(chain, CHAIN)
    applied = AppliedThresholds.of(settings.filtered, language)
    return applied.block(block) if block in applied.values else (chain, dict.fromkeys(chain, CHAIN))


def stop_thresholds(step: Step, settings: Settings) -> dict:
    """The thresholds of the block that dropped a document at filtered: as its build recorded them for the
    document's language (`thresholds_from: build`), else as today's settings give them (`settings`: a partition
    built before builds recorded them, or a document dropped before the language block, which had the chain's: a
    change of those is a new code version of the stage). `today`, only where today's settings differ from the
    build's: the block's values now, and each value that changed with its source now (`block.field` for another
    block's; null: gone, the block being off for the language now)."""
    block = step.facts.get("filter") or step.stage
    if step.stage != FILTERED or settings.filtered.block(block) is None:
        return {}
    language = step.facts.get("language")
    if step.thresholds is None:
        values, sources = applied_thresholds(settings, block, language)
        return {"thresholds": values, "threshold_sources": sources, "thresholds_from": "settings"}
    built = step.thresholds
    values, sources = built.block(block)
    out = {"thresholds": values, "threshold_sources": sources, "thresholds_from": "build"}
    now = AppliedThresholds.of(settings.filtered, built.language)
    if now.fingerprint != built.fingerprint:
        values, sources = now.block(block)
        changed = {}
        for name, key in built.changed(now):
            value, source = (now.block(name)[i].get(key) for i in (0, 1))
            changed[key if name == block else f"{name}.{key}"] = {"value": value, "source": source}
        out["today"] = {"thresholds": values, "threshold_sources": sources, "changed": changed,
                        **({"keeps": now.keeps} if now.keeps != built.keeps else {})}
    return out


def _applied_lines(facts: dict, applied: dict) -> list[str]:
    """How `why` and `trace` print a stop's thresholds: as built, or as today's settings give them, and what today's
    settings change."""
    block, language = facts.get("filter"), facts.get("language")
    if applied["thresholds_from"] == "build":
        whose = f" for {language} (as built)"
    elif language:
        whose = f" for {language} (as today's settings give them; this build recorded none)"
    else:
        whose = " (the chain's, as today's settings give them)"
    lines = [f"{block} thresholds{whose}: {_threshold_text(applied['thresholds'], applied['threshold_sources'])}"]
    if (today := applied.get("today")) is not None:
        changed = [f"{name} gone" if new["value"] is None else
                   _threshold_text({name: new["value"]}, {name: new["source"]})
                   for name, new in today["changed"].items()]
        if "keeps" in today:
            changed.append(f"{language} {'now kept' if today['keeps'] else 'no longer kept'}")
        lines.append(f"today's settings differ: {', '.join(changed) or 'other settings of ' + str(language)} — the "
                     "partition is stale; llm-assets stale shows its rebuild")
    return lines


def _threshold_text(values: dict, sources: dict[str, str]) -> str:
    """min_doc_words=50 (chain), stop_words=[15 values] (fineweb2): long lists counted, not printed."""
    def shown(v) -> str:
        return f"[{len(v)} values]" if isinstance(v, list) and len(v) > 6 else json.dumps(v, ensure_ascii=False)

    return ", ".join(f"{k}={shown(v)} ({sources.get(k, CHAIN)})" for k, v in values.items())


def why_record(t: Trace, settings: Settings) -> dict:
    """Where the document stopped and why, as data (`why --json`): per stop, the stage, the block and its reason,
    the value the block measured and the threshold that dropped it (a filter rule's rejection), or the block's own
    record (the takedown request, the contamination match), the block's configured thresholds and the document's
    scores. `reached` is the last stage of a document nothing dropped."""
    stops = []
    for s in t.stops():
        facts = s.facts
        block = facts.get("filter") or s.stage
        stop = {"stage": s.stage, "crawl": s.crawl, "shard": s.shard, "doc_id": s.doc_id, "filter": block,
                "reason": facts.get("reason")}
        detail = _decoded(facts.get("detail"))
        if isinstance(detail, dict) and "threshold" in detail:  # a filter rule: {"measured": ..., "threshold": ...}
            stop |= {"measured": detail.get("measured"), "threshold": detail["threshold"]}
        elif detail is not None:
            stop["detail"] = detail
        if facts.get("duplicate_of"):
            stop["duplicate_of"] = facts["duplicate_of"]
        if facts.get("language"):
            stop |= {k: facts[k] for k in LANGUAGE if k in facts}
        stop |= stop_thresholds(s, settings)
        if scores := {k: facts[k] for k in SCORES if k in facts}:
            stop["scores"] = scores
        stops.append(stop)
    return {"key": t.key, "found": bool(t.steps), "stops": stops,
            "reached": t.steps[-1].stage if t.steps and not stops else None, "releases": t.releases,
            "superseded": t.superseded}


def why(t: Trace, settings: Settings) -> str:
    """Where the document stopped and why: the block, the reason, the value measured and the threshold that dropped
    it, the block's thresholds and the document's scores."""
    if not t.steps:
        return f"{t.key}: {NOT_FOUND}"
    record = why_record(t, settings)
    if not record["stops"]:
        return (f"{t.key}: not dropped; it reached {record['reached']}"
                f"{_language_text(next((s.facts for s in reversed(t.steps) if s.facts.get('language')), {}))} "
                f"({releases_text(t) if t.releases else 'no release yet'})")
    lines = []
    for stop in record["stops"]:
        line = (f"{t.key} ({stop['doc_id']}) dropped at {stop['stage']} in "
                f"{PartitionRef(stop['crawl'], stop['shard']).key}: "
                f"{stop['filter']}/{stop['reason']}")
        if "duplicate_of" in stop:
            line += f", a duplicate of {stop['duplicate_of']}"
        if "detail" in stop:
            line += f", {json.dumps(stop['detail'], default=str)}"
        if "threshold" in stop:
            measured = json.dumps(stop["measured"], ensure_ascii=False)
            line += f"\n  measured: {measured} (dropped when {stop['threshold']})"
        if stop.get("language"):
            score = stop.get("language_score")
            line += f"\n  language: {stop['language']}" + (f" (score {score:.4f})" if isinstance(score, float) else "")
        if "thresholds" in stop:
            line += "".join(f"\n  {text}" for text in _applied_lines(stop, stop))
        if scores := {k: v for k, v in stop.get("scores", {}).items() if k not in LANGUAGE}:  # language: above
            line += f"\n  scores: {json.dumps(scores, default=str)}"
        lines.append(line)
    return "\n".join(lines)


def _decoded(detail):
    """A rejected row's detail: JSON (a rule's measure and threshold, a takedown request, a contamination match)."""
    if not isinstance(detail, str):
        return detail
    try:
        return json.loads(detail)
    except ValueError:
        return detail


def rejected_thresholds(lake, settings: Settings, crawl: str, rows: pl.DataFrame) -> list[str]:
    """`show rejected --stage filtered`: under the rows shown, once per partition, language and block that dropped
    one, the block's thresholds that applied there (as built, as `why` prints them). A row's partition is its raw
    file's shard."""
    from llm_assets.core.inventory import shard_of

    if not {"source_key", "language", "filter"} <= set(rows.columns):
        return []
    found = rows.filter(pl.col("language").is_not_null()).select("source_key", "language", "filter").unique()
    stops = sorted({(shard_of(source, settings.shards), language, block) for source, language, block in
                    found.iter_rows()})
    manifests = committed(lake, FILTERED, crawl, sorted({shard for shard, _, _ in stops}))
    lines, records = [], {}
    for shard, language, block in stops:
        if (built := manifests.get(shard)) is None:
            continue
        if (shard, language) not in records:  # one record per partition and language, whatever its blocks
            records[shard, language] = _recorded(lake, built, language)
        facts = {"filter": block, "language": language}
        step = Step(FILTERED, crawl, shard, "dropped", "", facts, records[shard, language])
        if applied := stop_thresholds(step, settings):
            where = PartitionRef(crawl, shard).key
            lines += [f"{where}: {text}" for text in _applied_lines(facts, applied)]
    return lines


def rejected(lake, stage: str, crawl: str, shards: list[str], reason: str | None = None) -> pl.LazyFrame | None:
    """What `stage` set aside in the crawl's shards (with `reason`, when given), or None when nothing was."""
    parts = [p for m in committed(lake, stage, crawl, shards).values() for p in m.rejected_parts]
    if not parts:
        return None
    frame = lake.scan(parts)
    return frame.filter(pl.col("reason") == reason) if reason else frame
