"""Scores apart from decisions: what every filter block measured for every document that entered the chain, kept or
dropped, stored beside each `filtered` part (`filtered.scores_key`), so that a change of thresholds only is decided
again over a whole crawl as a query, with no text read and no block re-run.

A scores part holds, per document: `doc_id`, `url`, `language`, `language_score`, `filter` and `reason` (null: kept;
else the block and the rule that dropped it, as the chain decided), and one column per measure, `<block>.<measure>`
(the columns of the block's `measure` stats its `rules` read). Counts are stored as integers and the ratios the rules
compare are computed from them when deciding, so a decision taken again is bit for bit the chain's.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

from llm_assets.core.lake import Lake

# What `redecide` returns, per document: the block and rule that drop it under the settings (null: kept), the value
# the rule measured (JSON, as `why` prints it) and the threshold it failed.
DECISION_SCHEMA = pl.Schema({"doc_id": pl.String, "language": pl.String, "filter": pl.String, "reason": pl.String,
                             "measured": pl.String, "threshold": pl.String})


def threshold_only(old, new) -> str | None:  # (FilteredSettings, FilteredSettings)
    """None when going from `old` to `new` settings changes only values a query over the stored scores decides
    again (the same blocks in the same order, no change to a text-rewriting block or to what a block measures);
    else why not, e.g. "c4_quality rewrites text"."""
    raise NotImplementedError


def redecide(scores: pl.DataFrame | pl.LazyFrame, settings) -> pl.DataFrame:  # settings: FilteredSettings
    """Per document of `scores`: `doc_id, language, filter, reason, measured, threshold` (`DECISION_SCHEMA`), what
    the chain of `settings` decides from the stored measures: the first failing rule of the first failing block."""
    raise NotImplementedError


def read_scores(lake: Lake, crawl: str, shards: Collection[str] | None = None) -> pl.LazyFrame:
    """The scores of the committed `filtered` partitions of a crawl (all shards, or those named)."""
    raise NotImplementedError
