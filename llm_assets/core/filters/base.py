"""What every filter block is: typed thresholds with the published defaults, and `apply` over a whole batch.

A block takes a Polars frame of documents (at least `text`, and `url` for the URL filter) and returns
`(frame, reasons)`: the frame may carry added columns or a rewritten `text` (normalization, C4's line cleanup,
PII masking), and `reasons` holds, per row, the code of the rule that drops the document, or null to keep it.
The frame's `detail` column, where a block adds one, says for each dropped row why: for a rule, the value the block
measured and the threshold it failed (`Rule`, `verdict`), as JSON `{"measured": 12, "threshold": "n_words < 50"}`.
A block never loops over rows in Python where a Polars expression will do.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, ClassVar, Literal, NamedTuple

import polars as pl
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

KEEP = pl.lit(None, dtype=pl.String)
WORDS = "_words"  # the words of `text`, split once per batch and shared by the blocks that count words
EXTRACTED = "_extracted_text"  # `text` as the chain received it, for the blocks that ask (`reads_extracted_text`)
DETAIL = "detail"  # per dropped row: the measured value and the threshold (JSON), or a block's own record
SIGNIFICANT_DIGITS = 4  # of a measured float in a detail

Op = Literal["<", "<=", ">", ">=", "=="]
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


class Block(BaseModel):
    """Base of every filter: frozen typed config, `enabled`, a stable `name` for the funnel and rejected rows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]
    rewrites_text: ClassVar[bool] = False  # then words split from the old text are stale
    # then the frame also holds EXTRACTED: the text before any block rewrote it (a block that checks what a
    # document quoted must not miss what C4's line cleanup or a PII mask removed)
    reads_extracted_text: ClassVar[bool] = False
    enabled: bool = True

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        raise NotImplementedError


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
    if not rules or not dropped.any():
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


def apply_filters(df: pl.DataFrame, filters: list[Block]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run the enabled blocks in order, each on what the previous ones kept.

    -> (kept, dropped), where dropped carries `filter` (the block's name), `reason` (its code) and `detail` (what the
    block measured and the threshold it failed, or the block's own record, e.g. decontamination's match)."""
    dropped = []
    if any(f.enabled and f.reads_extracted_text for f in filters):
        df = df.with_columns(pl.col("text").alias(EXTRACTED))  # shares the text's buffers: no copy
    for f in filters:
        if not f.enabled or df.height == 0:
            continue
        df, reason = f.apply(df)
        if f.rewrites_text:
            df = df.drop(WORDS, strict=False)
        if reason.null_count() == df.height:  # nothing dropped: no copy of the frame's columns
            df = df.drop(DETAIL, strict=False)
            continue
        df = df.with_columns(reason.alias("reason"))
        out = df.filter(pl.col("reason").is_not_null())
        if out.height:
            dropped.append(out.drop(WORDS, EXTRACTED, strict=False).with_columns(filter=pl.lit(f.name)))
        df = df.filter(pl.col("reason").is_null()).drop("reason", DETAIL, strict=False)
    df = df.drop(WORDS, EXTRACTED, strict=False)
    if dropped:
        return df, pl.concat(dropped, how="diagonal_relaxed")
    return df, df.clear().with_columns(reason=pl.lit("", pl.String), filter=pl.lit("", pl.String),
                                       detail=pl.lit("", pl.String))
