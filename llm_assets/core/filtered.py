"""Stage `filtered`: takedown requests, opt-outs, then the filter chain of the settings (normalization, URL,
language, Gopher, C4, FineWeb, the optional blocks, PII masking, decontamination) over one `documents` part, batch by
batch. Every
dropped document goes to `rejected/` with the block that dropped it, its reason code and a `detail` (JSON): for a
filter rule, the value the block measured and the threshold it failed, `{"measured": 17, "threshold": "n_words <
50"}`; for a takedown, an opt-out or a contaminated document, the request, the evidence or the match.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, cast

import polars as pl
import pyarrow as pa
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from llm_assets.core import documents, quality_model
from llm_assets.core.config import Section
from llm_assets.core.decontamination import EvalSetSettings, eval_index
from llm_assets.core.filters import (
    DEFAULT_CHAIN,
    Block,
    ChainBlock,
    Decontaminate,
    QualityModelFilter,
    score_filters,
)
from llm_assets.core.filters.base import Measure
from llm_assets.core.filters.language import DEFAULT_THRESHOLD, LanguageFilter, table_threshold
from llm_assets.core.filters.pii import TYPES as PII_TYPES
from llm_assets.core.gates import FAILS, LANGUAGE_COUNT, REACHED
from llm_assets.core.lake import InvalidKey, Lake, ReadCount
from llm_assets.core.languages import language_table, lid176_thresholds, table_version
from llm_assets.core.optouts import DECISIONS, OPT_OUT
from llm_assets.core.segment import segmenters_for, word_counts
from llm_assets.core.takedowns import TAKEDOWN, TakedownRequest, takedown_matches
from llm_assets.core.units import DropCounter, UnitResult, Warmup, WorkUnit, timed_unit, unit_id
from llm_assets.core.versions import digest

# 6: each language through its own thresholds (the language table), `und` for unknown scripts; words split per
# language (core/segment): word counts, densities and n_words change
# 7: every block measures every document that entered the chain; each unit writes its scores beside its part
# 8: words split by each language's spaCy tokenizer itself, as datatrove's (the pattern differed on real prose)
# 9: opt-outs (`optouts`) removed or flagged after the takedowns
STAGE_VERSION = "9"
BATCH_ROWS = 1024

ADDED = [
    ("language", pa.string()),
    ("language_score", pa.float32()),
    ("n_words", pa.int32()),  # words of the final text: whitespace-separated, or a segmenter's (core/segment)
    ("pii", pa.struct([(t, pa.uint32()) for t in PII_TYPES])),
    ("profanity_density", pa.float32()),
    ("domain_density", pa.float32()),
    ("quality_score", pa.float32()),
    ("contamination", pa.struct([("benchmark", pa.string()), ("ngrams", pa.uint32()), ("match_start", pa.int32()),
                                 ("match_end", pa.int32()), ("text", pa.string())])),
    ("opt_out", pa.string()),  # `opt_outs.mode: flag`: the reservation that covers the document (JSON evidence)
]
SCHEMA = pa.schema(list(documents.SCHEMA) + ADDED)
# detail (JSON): what the rule measured and the threshold it failed ({"measured": 0.4235, "threshold":
# "hash_ratio > 0.1"}, floats to 4 significant digits), the takedown request that removed the document, or the
# contamination match; null for normalization's `empty`
REJECTED_SCHEMA = pa.schema(list(SCHEMA) + [("filter", pa.string()), ("reason", pa.string()), ("detail", pa.string())])
TAKEDOWN_COUNT = "takedown:"  # a unit's counts: documents removed per request target
OPT_OUT_FLAGGED = "opt_out_flagged:"  # + policy kind: documents kept with their reservation flagged
# A unit's counts per language (the language block's label, or NO_LANGUAGE for a document dropped before it): the
# documents in, and those each block dropped; the kept ones are the quality gate's `language:` counts.
LANGUAGE_IN = "language_in:"
LANGUAGE_DROPPED = "language_dropped:"  # + language + "/" + block
NO_LANGUAGE = "?"
_EMPTY_SCORES = {"doc_id": pl.String, "url": pl.String, "language": pl.String, "language_score": pl.Float32,
                 "filter": pl.String, "reason": pl.String}


class FilteredSettings(Section):
    """The filter chain: blocks in the order they run, each named by `block` with its thresholds (the published
    defaults where omitted). A deployment may reorder, repeat or drop blocks; `enabled: false` keeps a block listed
    but skips it. Unknown blocks and keys are errors.

    Per language, the blocks from `language` on take their values from the chain, then from the language's row of
    the language table (`fineweb2`: FineWeb-2's thresholds for that language; `none`: the chain's for every
    language), then from `overrides` ({language: {"block.field": value}}): `chain_for`."""

    chain: tuple[ChainBlock, ...] = Field(default=DEFAULT_CHAIN, description=(
        "The filter blocks in the order they run, each `- block: NAME` with the thresholds it changes (the published "
        "defaults where omitted); a deployment may reorder, repeat or drop blocks, and the code version follows the "
        "list. One table per block below."))
    language_table: Literal["fineweb2", "none"] = Field(default="fineweb2", description=(
        "Per-language values of the blocks from `language` on: `fineweb2` (FineWeb-2's per-language configs, "
        "`core/languages/fineweb2.json`) or `none` (the chain's values for every language)."))
    overrides: dict[str, dict[str, Any]] = Field(default={}, description=(
        "Per language, `\"block.field\": value` for the blocks from `language` on, applied after the language table, "
        "e.g. `{de: {\"gopher_quality.min_stop_words\": 3}}`."))
    measure: Measure = Field(default="every_document", description=(
        "`every_document`: every block measures every document, also those an earlier block dropped, so that the "
        "stored scores decide other thresholds exactly (`llm-assets preview`). `until_dropped`: a block measures "
        "only the documents no earlier block dropped (the reference cascade: the same kept and dropped documents, "
        "about a third less filter CPU); a preview then rebuilds a sample instead."))
    _chains: dict[str, list[Block]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _decontaminate_last(self) -> FilteredSettings:
        enabled = self.blocks()
        if any(b.name == "decontaminate" for b in enabled[:-1]):
            raise ValueError("decontaminate must be the last enabled block of filtered.chain: it checks the documents "
                             "the curated data holds, so a new eval set rebuilds only the partitions it changes")
        return self

    @model_validator(mode="after")
    def _overrides_valid(self) -> FilteredSettings:
        per_language = self._per_language()
        for language, keys in self.overrides.items():
            if language not in language_table():
                raise ValueError(f"filtered.overrides: unknown language {language!r} (not a lid.176 label)")
            for key in keys:
                block, _, field = key.partition(".")
                if block not in per_language:
                    where = ("is not in the chain" if self.block(block) is None else
                             "runs before the language block, on documents of every language")
                    raise ValueError(f"filtered.overrides.{language}: block {block!r} of {key!r} {where}")
                if field in ("", "block") or field not in type(self._named(block)).model_fields:
                    raise ValueError(f"filtered.overrides.{language}: {block} has no field {field!r} ({key!r})")
            try:
                self.chain_for(language)
            except ValidationError as e:
                raise ValueError(f"filtered.overrides.{language}: {e}") from e
        return self

    def _named(self, name: str) -> Block:
        block = self.block(name)
        assert block is not None
        return block

    def _per_language(self) -> set[str]:
        """The names of the blocks that run per language: the language block and those after it."""
        names = [b.name for b in self.chain]
        return set(names[names.index("language"):]) if "language" in names else set()

    @classmethod
    def default_with(cls, **blocks: Block | dict) -> FilteredSettings:
        """The default chain with some blocks replaced (a block, or the fields to change): `language={"enabled":
        False}`."""
        changed = {name: b if isinstance(b, Block) else DEFAULT_CHAIN[_index(DEFAULT_CHAIN, name)].model_copy(update=b)
                   for name, b in blocks.items()}
        # a Block that is no chain block fails pydantic's validation of `chain`
        return cls(chain=cast("tuple[ChainBlock, ...]", tuple(changed.get(b.name, b) for b in DEFAULT_CHAIN)))

    def blocks(self) -> list[Block]:
        """The enabled blocks, in order."""
        return [b for b in self.chain if b.enabled]

    def funnel(self) -> list[str]:
        """What may drop a document, in the order it runs: the takedowns, the opt-outs, then the chain's blocks."""
        return [TAKEDOWN, OPT_OUT, *dict.fromkeys(b.name for b in self.blocks())]

    def block(self, name: str) -> Block | None:
        """The first block of that kind in the chain, enabled or not."""
        return next((b for b in self.chain if b.name == name), None)

    def replaced(self, name: str, block: Block) -> FilteredSettings:
        """These settings with every block of that kind replaced."""
        return self.model_copy(update={"chain": tuple(block if b.name == name else b for b in self.chain)})

    def __eq__(self, other: object) -> bool:
        # the values, not the chains cached per language
        return type(other) is type(self) and self.__dict__ == cast(FilteredSettings, other).__dict__

    __hash__ = None  # type: ignore[assignment]  # `overrides` is a dict

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> FilteredSettings:
        copy = super().model_copy(update=update, deep=deep)
        copy._chains = {}  # the chains of the copy's own values
        return copy

    def chain_for(self, language: str) -> list[Block]:
        """The enabled blocks a document in `language` (a lid.176 label, or `und`) goes through, with the values
        that apply to it: the chain's, replaced by the table's row, replaced by the overrides. The language block's
        `threshold` comes out resolved: the chain's when it sets one, else the table's, else 0.65."""
        chain = self._chains.get(language)
        if chain is None:
            chain = self._chains[language] = [b for b in self._resolved(language) if b.enabled]
        return chain

    def _updates(self, language: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """(the table row's values, the overrides) for the language, by block name."""
        row = language_table().get(language) if self.language_table == "fineweb2" else None
        table = {block: dict(fields) for block, fields in row.overrides.items()} if row else {}
        mine: dict[str, dict[str, Any]] = {}
        for key, value in self.overrides.get(language, {}).items():
            block, _, field = key.partition(".")
            mine.setdefault(block, {})[field] = value
        language_block = self.block("language")
        if isinstance(language_block, LanguageFilter) and language_block.threshold is not None:
            table.get("language", {}).pop("threshold", None)  # the chain's threshold is every language's
        elif isinstance(language_block, LanguageFilter) and "threshold" in table.get("language", {}):
            table["language"]["threshold"] = table_threshold(language, language_block.thresholds)
        return table, mine

    def _resolved(self, language: str) -> list[Block]:
        table, mine = self._updates(language)
        per_language = self._per_language()
        out: list[Block] = []
        for b in self.chain:
            if b.name in per_language:
                update = {**table.get(b.name, {}), **mine.get(b.name, {})}
                if isinstance(b, LanguageFilter) and b.threshold is None and update.get("threshold") is None:
                    update["threshold"] = DEFAULT_THRESHOLD
                if update:
                    b = type(b).model_validate({**b.model_dump(), **update})
            out.append(b)
        return out

    def keeps(self, language: str) -> bool:
        """Whether the language block keeps documents in that language (at their threshold); True without one."""
        block = self.block("language")
        return not isinstance(block, LanguageFilter) or not block.enabled or block.keeps(language)

    def applied_thresholds(self, language: str) -> dict[str, dict[str, Any]]:
        """What `why`, `trace` and `show` print: per enabled block (by name), its values for a document in that
        language (JSON values)."""
        return {b.name: b.model_dump(mode="json", exclude={"block", "enabled"}) for b in self.chain_for(language)}

    def threshold_sources(self, language: str) -> dict[str, dict[str, str]]:
        """Per block, the fields whose value for that language is not the chain's: "fineweb2" (the table's row),
        "lid176" (the row's language score re-derived for lid.176: `LanguageFilter.thresholds`) or "override" (the
        settings')."""
        table, mine = self._updates(language)
        out: dict[str, dict[str, str]] = {}
        for source, updates in (("fineweb2", table), ("override", mine)):
            for block, fields in updates.items():
                out.setdefault(block, {}).update(dict.fromkeys(fields, source))
        language_block = self.block("language")
        if (out.get("language", {}).get("threshold") == "fineweb2" and isinstance(language_block, LanguageFilter)
                and language_block.thresholds == "lid176" and language in lid176_thresholds()):
            out["language"]["threshold"] = "lid176"
        return out

    def fingerprint(self) -> str:
        """The chain, without what applies per language (the table, the overrides, the language block's keep list
        and threshold): `language_fingerprint` hashes those for each language a partition holds."""
        chain = [b.model_dump(mode="json", exclude={"languages", "threshold"} if b.name == "language" else None)
                 for b in self.chain]
        # the mode changes the scores of every language (not the kept documents); the default hashes as before it
        # existed, so that its partitions stay current
        measured = {} if self.measure == "every_document" else {"measure": self.measure}
        return digest(json.dumps({"chain": chain, **measured} if measured else chain, sort_keys=True))

    def language_fingerprint(self, language: str) -> str:
        """A hash of how documents in that language are filtered: kept or not, and every value of the blocks they
        go through."""
        chain = [b.model_dump(mode="json", exclude={"languages"} if b.name == "language" else None)
                 for b in self.chain_for(language)]
        return digest(json.dumps({"keeps": self.keeps(language), "chain": chain}, sort_keys=True))


def _index(chain, name: str) -> int:
    return next(i for i, b in enumerate(chain) if b.name == name)


@cache
def _polars_schema(schema: pa.Schema) -> pl.Schema:
    return pl.DataFrame(schema.empty_table()).schema


def conform(df: pl.DataFrame, schema: pa.Schema) -> pl.DataFrame:
    """`df` with exactly the schema's columns, in order; a column a disabled block did not add is null."""
    target = _polars_schema(schema)
    return df.select([
        pl.col(name).cast(dtype) if name in df.columns else pl.lit(None, dtype).alias(name)
        for name, dtype in target.items()
    ])


def filter_batch(df: pl.DataFrame, settings: FilteredSettings, takedowns: tuple[TakedownRequest, ...] = (),
                 opt_outs: OptOuts | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """-> (kept, rejected) for one batch of documents, both in the stage's schemas: the documents the takedown
    requests name are removed first, then those an opt-out covers (or flagged), then the chain runs on the rest."""
    return score_batch(df, settings, takedowns, opt_outs).batch


@dataclass(frozen=True)
class ScoredBatch:
    kept: pl.DataFrame  # SCHEMA
    rejected: pl.DataFrame  # REJECTED_SCHEMA
    scores: pl.DataFrame  # per document that entered the chain (`core.scores`)
    fails: Mapping[str, int]  # block -> documents its rules fail, of those it measured
    reached: Mapping[str, int]  # block -> documents it measured, `measure: until_dropped` only (else every one)

    @property
    def batch(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        return self.kept, self.rejected


def score_batch(df: pl.DataFrame, settings: FilteredSettings, takedowns: tuple[TakedownRequest, ...] = (),
                opt_outs: OptOuts | None = None) -> ScoredBatch:
    """`filter_batch`, with the scores of the documents that entered the chain (those no takedown or opt-out
    removed)."""
    df, removed = remove_takedowns(df, takedowns)
    if opt_outs is not None:
        df, opted_out = opt_outs.apply(df)
        removed = pl.concat([removed, opted_out], how="diagonal_relaxed")
    scored = score_filters(df, settings.blocks(), settings.chain_for, settings.measure)
    kept = scored.kept
    languages = kept["language"] if "language" in kept.columns else None
    kept = kept.with_columns(n_words=word_counts(kept["text"], languages))
    rejected = pl.concat([conform(removed, REJECTED_SCHEMA), conform(scored.dropped, REJECTED_SCHEMA)])
    scores = pl.concat([df.select("doc_id", "url"), scored.measures], how="horizontal")
    return ScoredBatch(conform(kept, SCHEMA), rejected, compact_scores(scores), scored.fails, scored.reached)


def compact_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """The scores in their stored types: counts as UInt32 (every measure counted is at least 0 and fits), the
    rest as measured (the language and quality scores are float32 as fastText gives them)."""
    return scores.with_columns(pl.col(name).cast(pl.UInt32) for name, dtype in scores.schema.items()
                               if dtype.is_integer() and dtype != pl.UInt32)


def scores_key(part: str) -> str:
    """Where a unit's scores (`core.scores`) are kept: beside its part, in the same partition prefix, so that the
    commit lists it with the part (`UnitResult.side_parts["scores"]`) and the vacuum deletes it with it."""
    prefix, _, name = part.rpartition("/")
    # a part in the lake, or one a preview writes under its scratch prefix
    if "filtered/crawl=" not in prefix or not name.startswith("part-") or not name.endswith(".parquet"):
        raise InvalidKey(f"not a filtered part: {part!r}")
    return f"{prefix}/scores-{name.removeprefix('part-')}"


def remove_takedowns(df: pl.DataFrame, requests: tuple[TakedownRequest, ...]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """-> (kept, removed): `removed` holds the documents a request names, with the request as `detail`."""
    if not requests:
        return df, df.clear()
    matches = takedown_matches(list(requests), df.select("doc_id", "url", "domain"))
    if matches.is_empty():
        return df, df.clear()
    detail = pl.DataFrame({"request": range(len(requests)), "detail": [r.to_line() for r in requests]},
                          schema={"request": pl.UInt32, "detail": pl.String})
    named = matches.join(detail, on="request").select("doc_id", "detail")
    removed = df.join(named, on="doc_id").with_columns(filter=pl.lit(TAKEDOWN), reason=pl.lit(TAKEDOWN))
    return df.join(named, on="doc_id", how="anti"), removed


@dataclass(frozen=True)
class OptOuts:
    """The opt-out decisions (`optouts.decide`) over one documents part: its documents a reservation covers, each
    with its reason code and evidence; `flag` keeps them with the evidence in `opt_out` instead."""

    decisions: tuple[tuple[str, str, str, str], ...]  # (doc_id, reason, detail, host): `optouts.DECISIONS`
    flag: bool = False

    @classmethod
    def of(cls, decisions: pl.DataFrame, flag: bool) -> OptOuts:
        return cls(tuple(decisions.select(DECISIONS.names()).iter_rows()), flag)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(list(self.decisions), schema=DECISIONS, orient="row")

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """-> (kept, removed): `removed` holds the covered documents (block `opt_out`, the policy kind as reason)."""
        if not self.decisions:
            return df, df.clear()
        table = self.frame().drop("host")
        covered = df.join(table, on="doc_id", how="inner", maintain_order="left")
        if self.flag:
            return df.join(table.select("doc_id", opt_out="detail"), on="doc_id", how="left",
                           maintain_order="left"), df.clear()
        return df.join(table, on="doc_id", how="anti"), covered.with_columns(filter=pl.lit(OPT_OUT))


def opt_outs_version(opt_outs: OptOuts) -> str:
    return digest("opt_outs", str(opt_outs.flag), *(f"{d}={r}" for d, r, *_ in sorted(opt_outs.decisions)))


def with_eval_index(settings: FilteredSettings, lake: Lake, evals: EvalSetSettings) -> tuple[FilteredSettings, str]:
    """The settings a run filters with, and the version of the eval index its decontaminate block uses ("" when the
    block is off): the index of the sets under `evals/` now, built the first time they are seen."""
    block = settings.block("decontaminate")
    if block is None or not block.enabled:
        return settings, ""
    assert isinstance(block, Decontaminate)
    index = eval_index(lake, evals)
    path = str(index.path) if index.path else None
    return settings.replaced("decontaminate", block.model_copy(update={"index_path": path})), index.version


def with_quality_model(settings: FilteredSettings, lake: Lake) -> tuple[FilteredSettings, str]:
    """The settings a run filters with, and the identity of its quality model ("" when the block is off): a block
    that names no model file gets the one `quality_classifier` published last, fetched once into a local cache."""
    block = settings.block("quality_model")
    if block is None or not block.enabled:
        return settings, ""
    assert isinstance(block, QualityModelFilter)  # the only block named quality_model
    if block.model_path:
        return settings, file_sha256(Path(block.model_path))
    path, sha = quality_model.latest_model(lake)
    return settings.replaced("quality_model", block.model_copy(update={"model_path": str(path)})), sha


def file_sha256(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise ValueError(f"quality_model: cannot read model_path {path}: {e}") from e


@dataclass(frozen=True)
class FilterUnit(WorkUnit):  # source: the upstream documents part
    settings: FilteredSettings
    part: str
    rejected_part: str
    takedowns: tuple[TakedownRequest, ...] = ()  # the requests that may name a document of the part
    opt_outs: OptOuts | None = None  # the documents of the part an opt-out covers
    # What the unit's output depends on before its languages are known. Given, the result is named by `base` and the
    # `languages_version` of the languages it held (under `declared`), so that a committed unit is reused only while
    # its own languages' thresholds are unchanged; empty: the result is named `unit`. `declared`: the settings as the
    # deployment declares them (`settings` also holds this machine's paths to the model and the eval index).
    base: str = ""
    declared: FilteredSettings | None = None

    @property
    def warmup(self) -> Warmup:
        """The word segmenters of the languages the chain keeps (Sudachi's and Kiwi's dictionaries: ~1 CPU-s
        each), loaded once by the pool's fork server rather than by each worker on its first page in them."""
        block = self.settings.block("language")
        languages = block.languages if isinstance(block, LanguageFilter) and block.enabled else ()
        return Warmup("llm_assets.core.segment:warm", segmenters_for(languages))


@timed_unit
def filter_documents(u: FilterUnit) -> UnitResult:
    lake = Lake(u.store)
    drops = DropCounter()
    counts: dict[str, int] = {}  # PII masked per type, documents removed per takedown request
    rows_in = 0
    fetched = ReadCount()
    scores = []
    with lake.part_writer(u.part, SCHEMA) as out, lake.part_writer(u.rejected_part, REJECTED_SCHEMA) as rejected:
        for batch in lake.iter_batches(u.source, BATCH_ROWS, fetched=fetched):
            df = cast(pl.DataFrame, pl.from_arrow(batch))
            rows_in += df.height
            scored = score_batch(df, u.settings, u.takedowns, u.opt_outs)
            kept, dropped = scored.batch
            out.write(kept)
            rejected.write(dropped)
            scores.append(scored.scores)
            for block, n in scored.fails.items():
                counts[FAILS + block] = counts.get(FAILS + block, 0) + n
            for block, n in scored.reached.items():
                counts[REACHED + block] = counts.get(REACHED + block, 0) + n
            for block, reason, n in dropped.group_by("filter", "reason").len().iter_rows():
                drops.drop(f"{block}/{reason}", n)
            _count_languages(counts, kept, dropped)
            for line, n in dropped.filter(pl.col("reason") == TAKEDOWN).group_by("detail").len().iter_rows():
                target = TakedownRequest.model_validate_json(line).target
                counts[TAKEDOWN_COUNT + target] = counts.get(TAKEDOWN_COUNT + target, 0) + n
            for kind, n in kept.filter(pl.col("opt_out").is_not_null()).group_by(
                    pl.col("opt_out").str.json_path_match("$.kind")).len().iter_rows():
                counts[OPT_OUT_FLAGGED + kind] = counts.get(OPT_OUT_FLAGGED + kind, 0) + n
            for kind, n in kept.select(pl.col("pii").struct.unnest().sum()).row(0, named=True).items():
                counts[f"pii_{kind}"] = counts.get(f"pii_{kind}", 0) + (n or 0)
            for language, n in kept.group_by("language").len().iter_rows():  # the quality gate's language mix
                key = LANGUAGE_COUNT + (language or NO_LANGUAGE)
                counts[key] = counts.get(key, 0) + n
    # a batch's columns are its languages' blocks: another batch may lack one (null there)
    table = (pl.concat(scores, how="diagonal_relaxed") if scores else pl.DataFrame(schema=_EMPTY_SCORES)).to_arrow()
    with lake.part_writer(scores_key(u.part), table.schema) as written:
        written.write(table)
    fingerprint = (u.declared or u.settings).language_fingerprint
    return UnitResult(
        unit=unit_id(u.base, languages_version(fingerprint, languages_held(counts))) if u.base else u.unit,
        source=u.source,
        part=u.part,
        rejected_part=u.rejected_part,
        rows_in=rows_in,
        rows_out=out.rows,
        dropped=dict(drops),
        bytes_in=fetched.bytes,
        bytes_out=out.bytes,
        columns=SCHEMA.names,
        counts=counts,
        side_parts={"scores": scores_key(u.part)},
    )


def _count_languages(counts: dict[str, int], kept: pl.DataFrame, dropped: pl.DataFrame) -> None:
    """Adds one batch's documents in and dropped per block, per language, to a unit's counts."""
    for frame in (kept, dropped):
        for language, n in frame.group_by("language").len().iter_rows():
            key = LANGUAGE_IN + (language or NO_LANGUAGE)
            counts[key] = counts.get(key, 0) + n
    for language, block, n in dropped.group_by("language", "filter").len().iter_rows():
        key = f"{LANGUAGE_DROPPED}{language or NO_LANGUAGE}/{block}"
        counts[key] = counts.get(key, 0) + n


@dataclass(frozen=True)
class LanguageFunnel:
    """One language's documents in a unit or a partition: in, kept, and dropped by each block (chain order)."""

    language: str  # the language block's label (`und`: a script it does not know), or NO_LANGUAGE
    documents: int
    kept: int
    dropped: Mapping[str, int]  # block -> documents


def language_funnels(counts: Mapping[str, int]) -> list[LanguageFunnel]:
    """The per-language funnels a unit's counts (or a partition's, summed) record, most documents first."""
    dropped: dict[str, dict[str, int]] = {}
    for key, n in counts.items():
        if key.startswith(LANGUAGE_DROPPED):
            language, block = key.removeprefix(LANGUAGE_DROPPED).rsplit("/", 1)
            dropped.setdefault(language, {})[block] = n
    funnels = [LanguageFunnel(language, n, counts.get(LANGUAGE_COUNT + language, 0), dropped.get(language, {}))
               for key, n in counts.items() if key.startswith(LANGUAGE_IN)
               and (language := key.removeprefix(LANGUAGE_IN))]
    return sorted(funnels, key=lambda f: (-f.documents, f.language))


def languages_held(counts: Mapping[str, int]) -> list[str]:
    """The languages of the documents a unit or partition held, kept or dropped after the language block: those
    whose thresholds its output depends on (sorted)."""
    return sorted(f.language for f in language_funnels(counts) if f.language != NO_LANGUAGE)


def languages_version(fingerprint: Callable[[str], str], languages: Iterable[str]) -> str:
    """The thresholds that applied to these languages (`fingerprint`: `FilteredSettings.language_fingerprint`, or a
    memo of it), as one version: it changes when the table's row or the settings' overrides of one of them change,
    or when one joins or leaves the languages the chain keeps."""
    return digest(*(f"{language}={fingerprint(language)}" for language in sorted(languages)))


def thresholds_version(settings: FilteredSettings) -> str:
    """Every language's thresholds at once: the settings with their overrides, and the table. It names the parts a
    unit writes, so that a unit redone because one of its languages' thresholds changed never overwrites a part a
    committed manifest lists."""
    return digest(json.dumps(settings.model_dump(mode="json"), sort_keys=True), table_version())


def filter_units(lake: Lake, store: Any, settings: FilteredSettings, declared: FilteredSettings, crawl: str, shard: str,
                 sources: Iterable[str], unit_code: str, extra: Iterable[str], requests: Iterable[TakedownRequest],
                 previous: Mapping[str, UnitResult], opt_outs: Mapping[str, OptOuts] | None = None,
                 prefix: str = "") -> tuple[list[FilterUnit], list[TakedownRequest]]:
    """The units that filter these documents parts, and the takedown requests that name a document of them: what the
    stage runs, and a preview on a sample (its parts under `prefix`, before the zones). `settings`: the chain as it
    runs (this machine's model and eval index paths), `declared`: as the deployment declares it; `extra`: the quality
    model's and eval index's identities; `previous`: source -> the committed unit of that source; `opt_outs`:
    source -> the opt-out decisions over it (a unit whose decisions change is redone, no other).

    A unit is named by its base and the thresholds of the languages it held: the committed unit of a source is
    reused while both are unchanged, so a change of one language redoes the units that held it only."""
    from llm_assets.core.lake import part_key
    from llm_assets.core.takedowns import requests_in, takedowns_version

    thresholds, extra, requests = thresholds_version(declared), tuple(extra), tuple(requests)
    units: list[FilterUnit] = []
    named: list[TakedownRequest] = []
    for source in sources:
        takedowns = requests_in(lake, source, requests)
        named += takedowns
        opted = (opt_outs or {}).get(source)
        base = unit_id("filtered", unit_code, source, *extra, takedowns_version(takedowns),
                       *([opt_outs_version(opted)] if opted and opted.decisions else []))
        done = previous.get(source)
        if done is not None and done.unit != unit_id(
                base, languages_version(declared.language_fingerprint, languages_held(done.counts))):
            done = None  # another input, or the thresholds of a language it held changed: redone
        part = unit_id(base, thresholds)
        units.append(FilterUnit(store=store, settings=settings, source=source, unit=done.unit if done else base,
                                base=base, declared=declared,
                                part=part_key("filtered", crawl, shard, part, zone=prefix + "lake"),
                                takedowns=takedowns, opt_outs=opted,
                                rejected_part=part_key("filtered", crawl, shard, part, zone=prefix + "rejected")))
    return units, named
