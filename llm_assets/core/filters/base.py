"""What every filter block is: typed thresholds with the published defaults, and `apply` over a whole batch.

A block takes a Polars frame of documents (at least `text`, and `url` for the URL filter) and returns
`(frame, reasons)`: the frame may carry added columns or a rewritten `text` (normalization, C4's line cleanup,
PII masking), and `reasons` holds, per row, the code of the rule that drops the document, or null to keep it.
A block never loops over rows in Python where a Polars expression will do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import polars as pl
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

KEEP = pl.lit(None, dtype=pl.String)
WORDS = "_words"  # the words of `text`, split once per batch and shared by the blocks that count words


class Block(BaseModel):
    """Base of every filter: frozen typed config, `enabled`, a stable `name` for the funnel and rejected rows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]
    rewrites_text: ClassVar[bool] = False  # then words split from the old text are stale
    enabled: bool = True

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        raise NotImplementedError


def first_reason(*rules: tuple[pl.Expr, str]) -> pl.Expr:
    """The code of the first rule whose condition holds, else null: reference filters stop at the first failing
    rule, so a document's reason is the first one in the rule order."""
    expr: Then | ChainedThen | None = None
    for condition, code in rules:
        expr = pl.when(condition).then(pl.lit(code)) if expr is None else expr.when(condition).then(pl.lit(code))
    return expr.otherwise(KEEP) if expr is not None else KEEP


def reasons_of(df: pl.DataFrame, expr: pl.Expr) -> pl.Series:
    """The reason expression evaluated over `df`, one value per row (a constant too)."""
    return df.select(pl.repeat(None, df.height, dtype=pl.String).alias("_"), expr.alias("reason"))["reason"]


def apply_filters(df: pl.DataFrame, filters: list[Block]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run the enabled blocks in order, each on what the previous ones kept.

    -> (kept, dropped), where dropped carries `filter` (the block's name) and `reason` (its code)."""
    dropped = []
    for f in filters:
        if not f.enabled or df.height == 0:
            continue
        df, reason = f.apply(df)
        if f.rewrites_text:
            df = df.drop(WORDS, strict=False)
        df = df.with_columns(reason.alias("reason"))
        out = df.filter(pl.col("reason").is_not_null())
        if out.height:
            dropped.append(out.drop(WORDS, strict=False).with_columns(filter=pl.lit(f.name)))
        df = df.filter(pl.col("reason").is_null()).drop("reason")
    df = df.drop(WORDS, strict=False)
    if dropped:
        return df, pl.concat(dropped, how="diagonal_relaxed")
    return df, df.clear().with_columns(reason=pl.lit("", pl.String), filter=pl.lit("", pl.String))
