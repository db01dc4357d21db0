"""What every filter block is: typed thresholds with the published defaults, and `apply` over a whole batch.

A block takes a Polars frame of documents (at least `text`, and `url` for the URL filter) and returns
`(frame, reasons)`: the frame may carry added columns or a rewritten `text` (normalization, C4's line cleanup,
PII masking), and `reasons` holds, per row, the code of the rule that drops the document, or null to keep it.
The frame's `detail` column, where a block adds one, says for each dropped row why: for a rule, the value the block
measured and the threshold it failed (`Rule`, `verdict`), as JSON `{"measured": 12, "threshold": "n_words < 50"}`.
A block never loops over rows in Python where a Polars expression will do.

`apply` is `measure` (the frame, and the block's named measures per row) then `decide` (its `rules` over those
measures): the chain (`score_filters`) keeps every block's measures of every document, which `core.scores` stores and
decides again under other thresholds with the same rules; or, measuring `until_dropped` (the reference cascade), only
of the documents that reached the block.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, cast

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

KEEP = pl.lit(None, dtype=pl.String)
WORDS = "_words"  # the words of `text`, split once per batch and shared by the blocks that count words
EXTRACTED = "_extracted_text"  # `text` as the chain received it, for the blocks that ask (`reads_extracted_text`)
# What the blocks' `apply` measured, where the chain asked (`score_filters`): through the context, so that `apply`
# keeps its signature (a test or a deployment may wrap it) and each thread of a worker collects its own.
_STATS: ContextVar[list[pl.DataFrame] | None] = ContextVar("filter_stats", default=None)


def report_stats(stats: pl.DataFrame) -> None:
    """Hands a block's stats to the chain that runs it, if one asked."""
    collected = _STATS.get()
    if collected is not None:
        collected.append(stats)


def measuring() -> Measure:
    """How the chain running the block measures (`score_filters`' `measure`; `every_document` outside a chain):
    measuring `until_dropped`, a block whose rules are measured one after another may stop measuring a document at
    its first failing rule."""
    return _MEASURE.get()


def _applied(block: Block, df: pl.DataFrame, apply: Callable[[], tuple[pl.DataFrame, pl.Series]],
             measure: Measure = "every_document") -> tuple[pl.DataFrame, pl.Series, pl.DataFrame]:
    """`apply()` of the block, measuring as `measure` says, and the stats it measured."""
    collected: list[pl.DataFrame] = []
    token, mode = _STATS.set(collected), _MEASURE.set(measure)
    try:
        df, reasons = apply()
    finally:
        _MEASURE.reset(mode)
        _STATS.reset(token)
    if len(collected) != 1:
        raise RuntimeError(f"filter block {block.name}: apply measured {len(collected)} times (expected once)")
    return df, reasons, collected[0]
DETAIL = "detail"  # per dropped row: the measured value and the threshold (JSON), or a block's own record
SIGNIFICANT_DIGITS = 4  # of a measured float in a detail

Op = Literal["<", "<=", ">", ">=", "=="]
# what the chain measures: every block every document (`every_document`: the stored scores decide any other
# thresholds exactly), or a document only up to the block that drops it (`until_dropped`: the reference cascade)
Measure = Literal["every_document", "until_dropped"]
# the chain's way of measuring while a block's apply runs (`measuring`), beside `_STATS` and for the same reasons
_MEASURE: ContextVar[Measure] = ContextVar("filter_measure", default="every_document")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


class Block(BaseModel):
    """Base of every filter: frozen typed config, `enabled`, a stable `name` for the funnel and rejected rows.

    A block measures, then decides: `measure` returns the frame (with the block's added columns, or its rewritten
    text) and its stats, one row per document, the named measures its `rules` read; `decide` turns stats into
    reasons and details. Kept apart, the measures of every document can be stored and decided again under other
    thresholds (`core.scores`) with the same rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]
    rewrites_text: ClassVar[bool] = False  # then words split from the old text are stale
    # then the frame also holds EXTRACTED: the text before any block rewrote it (a block that checks what a
    # document quoted must not miss what C4's line cleanup or a PII mask removed)
    reads_extracted_text: ClassVar[bool] = False
    # stats columns that only word a detail, or that the scores hold already (`url`): not stored as measures
    context: ClassVar[tuple[str, ...]] = ()
    # settings that change what the block measures (not only how it decides): `core.scores.threshold_only`
    measured_by: ClassVar[tuple[str, ...]] = ()
    enabled: bool = Field(default=True, description="`false` keeps the block listed but skips it.")

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """-> (frame, stats): the frame with the block's columns added (or its text rewritten), and its measures,
        one row per document, in the frame's order."""
        raise NotImplementedError

    def rules(self) -> list[Rule]:
        """The block's rules over its stats' columns, in the order a reference checks them."""
        return []

    def restore(self, stored: pl.DataFrame) -> pl.DataFrame:
        """The stats `decide` reads, from the stored measures (named as in stats) and the scores' own columns
        (`url`, `language`, `language_score`): what `context` left out, put back."""
        return stored

    def decide(self, stats: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
        """-> (reasons, detail) per row of `stats`."""
        return verdict(stats, *self.rules())

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        """-> (frame, reasons): measure and decide; the frame also holds the detail, where the block words one."""
        df, stats = self.measure(df)
        reasons, detail = self.decide(stats)
        report_stats(stats)
        worded = type(self).decide is not Block.decide or any(r.measured is not None or r.threshold
                                                                for r in self.rules())
        return (df.with_columns(detail) if worded else df), reasons


class Rule(NamedTuple):
    """A document is dropped with reason `code` when `condition` holds. `measured` is the value the condition tests
    and `threshold` the condition in words; both are kept with the rejection."""

    condition: pl.Expr
    code: str
    measured: pl.Expr | None = None
    threshold: str = ""


def drop_if(measured: pl.Expr, op: Op, limit: float, code: str) -> Rule:
    """The rule "drop when `measured` `op` `limit`", e.g. `drop_if(pl.col("n_words"), "<", 50, "gopher_short_doc")`.
    The measure's name (its column, or an `alias`) names it in the threshold text: "n_words < 50"."""
    return Rule(_OPS[op](measured, limit), code, measured, f"{measured.meta.output_name()} {op} {number(limit)}")


def number(x: float) -> str:
    """A threshold as a person writes it: 50, 0.12, 3 (not 3.0)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def first_reason(*rules: Rule) -> pl.Expr:
    """The code of the first rule whose condition holds, else null: reference filters stop at the first failing
    rule, so a document's reason is the first one in the rule order."""
    expr: Then | ChainedThen | None = None
    for r in rules:
        expr = (pl.when(r.condition) if expr is None else expr.when(r.condition)).then(pl.lit(r.code))
    return expr.otherwise(KEEP) if expr is not None else KEEP


def reasons_of(df: pl.DataFrame, expr: pl.Expr) -> pl.Series:
    """The reason expression evaluated over `df`, one value per row (a constant too)."""
    return df.select(pl.repeat(None, df.height, dtype=pl.String).alias("_"), expr.alias("reason"))["reason"]


def verdict(stats: pl.DataFrame, *rules: Rule) -> tuple[pl.Series, pl.Series]:
    """-> (reasons, detail) over the rows of `stats`: the code of the first rule that holds (null: kept), and for a
    dropped row that rule's measured value and threshold (`details_of`)."""
    reasons = reasons_of(stats, first_reason(*rules))
    return reasons, details_of(stats, reasons, *rules)


def details_of(stats: pl.DataFrame, reasons: pl.Series, *rules: Rule) -> pl.Series:
    """The `detail` column: for each row with a reason, JSON of the first rule that holds there,
    `{"measured": 0.4235, "threshold": "hash_ratio > 0.1"}` (floats to 4 significant digits, a non-finite one
    null); null for the kept rows. Only the dropped rows are measured and formatted."""
    dropped = reasons.is_not_null()
    out = pl.repeat(None, len(reasons), dtype=pl.String, eager=True).alias(DETAIL)
    if not any(r.measured is not None or r.threshold for r in rules) or not dropped.any():
        return out
    rows = stats.filter(dropped)
    # which rule each dropped row failed first: only those rules are measured and formatted (most batches meet one
    # or two of a block's rules)
    first: Then | ChainedThen | None = None
    for i, r in enumerate(rules):
        first = (pl.when(r.condition) if first is None else first.when(r.condition)).then(pl.lit(i, pl.Int32))
    assert first is not None
    failed = rows.select(first.otherwise(None).alias("rule"))["rule"]
    detail = pl.repeat(None, rows.height, dtype=pl.String, eager=True).alias(DETAIL)
    for i in failed.unique().drop_nulls().sort().to_list():
        r = rules[i]
        at = (failed == i).fill_null(False)
        measured = rows.filter(at).select((pl.lit(None) if r.measured is None else r.measured).alias("measured"))
        if measured.schema["measured"].is_float():
            measured = measured.select(pl.col("measured").cast(pl.Float64).round_sig_figs(SIGNIFICANT_DIGITS))
        encoded = measured.select(pl.struct("measured", pl.lit(r.threshold).alias("threshold")).struct.json_encode())
        detail = detail.scatter(at.arg_true(), encoded.to_series())
    return out.scatter(dropped.arg_true(), detail)


class Scored(NamedTuple):
    """A batch through the chain: the documents it keeps, those it drops (with `filter`, `reason`, `detail`), and
    what every block measured of every document, one row per document in the batch's order: `language` and
    `language_score` (null without a language block), then each block's measures as `<block>.<measure>`
    (`measures`), `<block>#2.<measure>` for a block listed twice, and the decision."""

    kept: pl.DataFrame
    dropped: pl.DataFrame
    measures: pl.DataFrame  # + `filter` and `reason`: the block and rule that dropped the document (null: kept)
    fails: dict[str, int]  # block name -> documents its rules fail, of those it measured (`reached`)
    # block name -> documents it measured, `until_dropped` only (every document otherwise: empty)
    reached: dict[str, int]


def apply_filters(df: pl.DataFrame, filters: list[Block], chain_for: Callable[[str], list[Block]] | None = None,
                  measure: Measure = "every_document") -> tuple[pl.DataFrame, pl.DataFrame]:
    """-> (kept, dropped) of `score_filters`."""
    scored = score_filters(df, filters, chain_for, measure)
    return scored.kept, scored.dropped


def score_filters(df: pl.DataFrame, filters: list[Block], chain_for: Callable[[str], list[Block]] | None = None,
                  measure: Measure = "every_document") -> Scored:
    """Run the enabled blocks in order over every document, then decide as the reference cascade does: a
    document's reason is the first failing rule of the first failing block, and every block also measured the
    documents an earlier block dropped (text-rewriting blocks rewrote them as they would have), so that the stored
    measures decide any other thresholds exactly (`core.scores`). Measuring `until_dropped`, a block runs only on
    the documents no earlier block dropped, as the reference cascade does: the same kept and dropped rows, the
    measures of the blocks a dropped document never reached null, and `fails` counted over the documents that
    reached each block (`reached`).

    With `chain_for` (language -> its blocks, `FilteredSettings.chain_for`), the blocks before the language block
    run on the whole batch, the language block with each language's threshold, and the blocks after it per group of
    languages whose blocks are the same, on that group's rows only (they carry `language`); rows come back in their
    order.

    The dropped rows carry `filter` (the block's name), `reason` (its code) and `detail` (what the block measured
    and the threshold it failed, or the block's own record, e.g. decontamination's match), and the columns as they
    were when that block dropped them."""
    filters = [f for f in filters if f.enabled]
    names = measure_names(filters)
    tally = _Tally(parked=[] if measure == "until_dropped" else None)
    df = df.with_row_index(ROW).with_columns(pl.lit(False).alias(FAILED))
    at = next((i for i, f in enumerate(filters) if f.name == "language"), None) if chain_for else None
    if chain_for is None or at is None:
        if any(f.reads_extracted_text for f in filters):
            df = df.with_columns(pl.col("text").alias(EXTRACTED))  # shares the text's buffers: no copy
        df, dropped, measures = _run(df, filters, names, tally)
        return _finish(df, dropped, measures, tally)
    # a language's blocks may read the extracted text where the chain's do not (an override enables one)
    df = df.with_columns(pl.col("text").alias(EXTRACTED))
    df, dropped, measures = _run(df, filters[:at], names, tally)
    language = filters[at]

    def threshold_of(code: str) -> float:
        block = next(b for b in chain_for(code) if b.name == "language")
        return cast(Any, block).threshold

    if df.height:
        df, reasons, stats = _applied(language, df, lambda: cast(Any, language).judge(df, threshold_of))
        measures.append(_stored(language, stats, names[at], df[ROW]))
        df = _dropping(df, language, reasons, dropped, tally)
    groups: list[tuple[list[Block], list[str], list[str]]] = []
    for code in df["language"].unique().sort().to_list() if df.height else []:
        chain = chain_for(code)
        after = next(i for i, b in enumerate(chain) if b.name == "language") + 1
        # a language the chain does not keep, or a script it does not know, is dropped whatever its scores: not
        # measured further (a third of a web crawl's CPU, in languages nobody asked for). Keeping one more
        # language is then no threshold change (`core.scores.threshold_only`).
        rest = chain[after:] if code != UNKNOWN and cast(Any, language).keeps(code) else []
        group = next((g for g in groups if g[0] == rest), None)
        if group is None:
            groups.append((rest, measure_names(chain)[after:], [code]))
        else:
            group[2].append(code)
    rows, grouped = [], []
    for blocks, prefixes, codes in groups:
        part = df if len(groups) == 1 else df.filter(pl.col("language").is_in(codes))
        entered = part.select(ROW)
        part, out, scored = _run(part, blocks, prefixes, tally)
        rows.append(part)
        grouped.append(_by_row(entered, scored))
        dropped += out
    if len(rows) > 1:
        df = pl.concat(rows, how="diagonal_relaxed").sort(ROW)
        measures.append(pl.concat(grouped, how="diagonal_relaxed").sort(ROW))
    elif rows:
        df = rows[0]
        measures.append(grouped[0])
    return _finish(df, dropped, measures, tally, sort=True)


UNKNOWN = "und"  # the language of a script lid.176 does not know (`core.languages.UNKNOWN`)
ROW = "_row"  # a row's place in the batch, to put the groups of languages back in order
FAILED = "_failed"  # a row an earlier block dropped: measured on, never dropped twice


def measure_names(filters: list[Block]) -> list[str]:
    """The prefix of each block's measures: its name, `name#2` for its second occurrence in the chain."""
    seen: dict[str, int] = {}
    out = []
    for f in filters:
        seen[f.name] = seen.get(f.name, 0) + 1
        out.append(f.name if seen[f.name] == 1 else f"{f.name}#{seen[f.name]}")
    return out


def _stored(block: Block, stats: pl.DataFrame, prefix: str, rows: pl.Series) -> pl.DataFrame:
    """The measures of a block that the scores keep, named `<prefix>.<measure>`, after the `rows` it measured."""
    return stats.select(rows, *(pl.col(c).alias(f"{prefix}.{c}") for c in stats.columns if c not in block.context))


def _by_row(rows: pl.DataFrame, measures: list[pl.DataFrame]) -> pl.DataFrame:
    """`rows` (ROW first) with each block's measures beside them, null where the block did not measure a row."""
    for m in measures:
        # a block that measured as many rows measured these, in their order (every block, every_document)
        rows = rows.hstack(m.drop(ROW)) if m.height == rows.height else \
            rows.join(m, on=ROW, how="left", maintain_order="left")
    return rows


@dataclass
class _Tally:
    fails: dict[str, int] = field(default_factory=dict)  # block -> documents its rules fail (`Scored.fails`)
    reached: dict[str, int] = field(default_factory=dict)  # block -> documents it measured, until_dropped
    # until_dropped: the row, language and language score of the documents a block dropped, which leave the frame
    parked: list[pl.DataFrame] | None = None


def _run(df: pl.DataFrame, filters: list[Block], names: list[str], tally: _Tally
         ) -> tuple[pl.DataFrame, list[pl.DataFrame], list[pl.DataFrame]]:
    dropped: list[pl.DataFrame] = []
    measures: list[pl.DataFrame] = []
    for f, name in zip(filters, names, strict=False):  # filters may be a prefix of the chain the names cover
        if not f.enabled or df.height == 0:
            continue
        df, reasons, stats = _applied(f, df, partial(f.apply, df),
                                      "until_dropped" if tally.parked is not None else "every_document")
        measures.append(_stored(f, stats, name, df[ROW]))
        df = _dropping(df, f, reasons, dropped, tally)
    return df, dropped, measures


def _dropping(df: pl.DataFrame, f: Block, reason: pl.Series, dropped: list[pl.DataFrame], tally: _Tally
              ) -> pl.DataFrame:
    """The frame with the rows the block drops first marked failed; those go to `dropped` with its name and
    detail, as they are now. Measuring until_dropped (`tally.parked`), they leave the frame: their row,
    language and language score are parked."""
    detail = df[DETAIL] if DETAIL in df.columns else pl.repeat(None, df.height, dtype=pl.String, eager=True)
    df = df.drop(DETAIL, strict=False)
    fails, parked = tally.fails, tally.parked
    fails[f.name] = fails.get(f.name, 0) + reason.len() - reason.null_count()
    if parked is not None:
        tally.reached[f.name] = tally.reached.get(f.name, 0) + reason.len()
    if f.rewrites_text:
        df = df.drop(WORDS, strict=False)
    first = reason.is_not_null() & ~df[FAILED]
    if not first.any():
        return df
    out = df.filter(first).with_columns(reason.filter(first).alias("reason"), detail.filter(first).alias(DETAIL))
    dropped.append(out.drop(WORDS, EXTRACTED, FAILED, strict=False).with_columns(filter=pl.lit(f.name)))
    if parked is not None:
        parked.append(out.select(c for c in (ROW, "language", "language_score") if c in out.columns))
        return df.filter(~first)
    return df.with_columns(df[FAILED] | first)


def _finish(df: pl.DataFrame, dropped: list[pl.DataFrame], measures: list[pl.DataFrame], tally: _Tally,
            sort: bool = False) -> Scored:
    every, parked = df, tally.parked
    if parked:
        every = pl.concat([df.select(c for c in (ROW, "language", "language_score") if c in df.columns), *parked],
                          how="diagonal_relaxed").sort(ROW)
    df = df.filter(~pl.col(FAILED)).drop(WORDS, EXTRACTED, FAILED, ROW, strict=False)
    measured = every.select(
        pl.col("language") if "language" in every.columns else pl.repeat(None, pl.len(), dtype=pl.String)
        .alias("language"),
        pl.col("language_score") if "language_score" in every.columns
        else pl.repeat(None, pl.len(), dtype=pl.Float32).alias("language_score"),
    )
    measured = _by_row(pl.concat([every.select(ROW), measured], how="horizontal"), measures)
    if dropped:
        out = pl.concat(dropped, how="diagonal_relaxed")
        measured = measured.join(out.select(ROW, "filter", "reason"), on=ROW, how="left", maintain_order="left")
        return Scored(df, (out.sort(ROW) if sort else out).drop(ROW), measured.drop(ROW), tally.fails,
                      tally.reached)
    measured = measured.drop(ROW).with_columns(filter=pl.repeat(None, pl.len(), dtype=pl.String),
                                               reason=pl.repeat(None, pl.len(), dtype=pl.String))
    return Scored(df, df.clear().with_columns(reason=pl.lit("", pl.String), filter=pl.lit("", pl.String),
                                              detail=pl.lit("", pl.String)), measured, tally.fails,
                  tally.reached)
