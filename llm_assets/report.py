"""What a stage reports, Dagster-free: the kinds of value (`Markdown`, `Url`; a polars frame is a table), and how
numbers and funnels are shown to a person. `llm_assets.dagster.adapter` turns a report into Dagster's metadata."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from llm_assets import charts
from llm_assets.core.partition import PartitionOutput

if TYPE_CHECKING:
    from llm_assets.core.filtered import LanguageFunnel


class Markdown(str):
    """Report text shown as Markdown: a chart, a funnel, a list."""


class Url(str):
    """Report text shown as a link."""


Report = dict[str, Any]  # plain values (dicts and lists shown as JSON), Markdown, Url, or a polars frame (a table)


SIGNIFICANT = 3  # digits of a float shown in a table: 0.00138 CPU-hours, not 0.0013768124


def significant(x: float, digits: int = SIGNIFICANT) -> float:
    """One float rounded as `rounded` rounds a table's, for a figure shown alone."""
    return float(f"{x:.{digits}g}")


def rounded(df: pl.DataFrame, digits: int = SIGNIFICANT) -> pl.DataFrame:
    """The frame with its float columns rounded to `digits` significant digits, for a person to read; what a machine
    reads (the stored part, the ledger, JSON) keeps the exact values."""
    return df.with_columns(pl.col(pl.Float32, pl.Float64).round_sig_figs(digits))


MIB = 2 ** 20


def in_mib(df: pl.DataFrame, columns: dict[str, str]) -> pl.DataFrame:
    """The byte columns (`columns`: name → shown name) in MiB, three significant digits: a panel shows `1.23` MiB
    where 1288490 bytes would widen it and be read digit by digit."""
    return df.with_columns(**{shown: (pl.col(name) / MIB).round_sig_figs(SIGNIFICANT) for name, shown in
                              columns.items()}).select([columns.get(c, c) for c in df.columns])


def partition_funnel(out: PartitionOutput) -> str:
    """In → dropped by reason → out: the exact numbers (the chart is `funnel_chart`)."""
    lines = ["| step | records | share |", "|---|---:|---:|", f"| in | {out.rows_in:,} | 100% |"]
    share = (lambda n: f"{n / out.rows_in:.1%}") if out.rows_in else (lambda n: "–")
    lines += [f"| dropped: `{r}` | {n:,} | {share(n)} |" for r, n in out.dropped().items()]
    lines.append(f"| out | {out.rows_out:,} | {share(out.rows_out)} |")
    return "\n".join(lines)


def block_funnel(chain: list[str], rows_in: int, dropped: dict[str, int]) -> str:
    """In → dropped by each block, in chain order → out, with the documents left after each block."""
    lines = ["| block | dropped | left | reasons |", "|---|---:|---:|---|", f"| in | | {rows_in:,} | |"]
    left = rows_in
    for block in dict.fromkeys(chain):  # a block listed twice reports once: its drops share its name
        reasons = {k.split("/", 1)[1]: n for k, n in dropped.items() if k.split("/", 1)[0] == block}
        left -= sum(reasons.values())
        detail = ", ".join(f"`{r}` {n:,}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {block} | {sum(reasons.values()):,} | {left:,} | {detail} |")
    return "\n".join(lines)


def language_funnel_frame(funnels: Sequence[LanguageFunnel], chain: list[str]) -> pl.DataFrame:
    """One row per language: documents in, kept, and dropped by each block that dropped any (chain order)."""
    from llm_assets.core.filtered import NO_LANGUAGE  # the filters' modules: only where a filtered partition reports

    blocks = [b for b in dict.fromkeys(chain) if any(f.dropped.get(b) for f in funnels)]
    rows = [{"language": charts.NO_LANGUAGE if f.language == NO_LANGUAGE else f.language, "documents": f.documents,
             "kept": f.kept, **{f"dropped: {b}": f.dropped.get(b, 0) for b in blocks}} for f in funnels]
    schema = {"language": pl.String, "documents": pl.Int64, "kept": pl.Int64,
              **{f"dropped: {b}": pl.Int64 for b in blocks}}
    return pl.DataFrame(rows, schema=schema)
