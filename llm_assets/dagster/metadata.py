"""How a stage's report is shown in Dagster's UI: tables, the common funnel chart, the units table."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import polars as pl

from llm_assets import charts
from llm_assets.core.partition import PartitionOutput
from llm_assets.core.units import UnitResult

_COLUMN_KINDS = {"String": "string", "Int64": "int", "UInt32": "int", "Int32": "int", "Float64": "float"}

# What Dagster takes as a materialization's metadata: its metadata values, or plain values it wraps in one.
Metadata = dict[str, dg.MetadataValue | str | int | float | bool | list | dict | None]


def table(df: pl.DataFrame) -> dg.TableMetadataValue:
    """A Polars frame as a metadata table, its column types kept."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord(row) for row in df.iter_rows(named=True)],
        schema=dg.TableSchema(columns=[dg.TableColumn(n, _COLUMN_KINDS.get(str(t), "string"))
                                       for n, t in df.schema.items()]),
    )


def partition_funnel_chart(asset: str, out: PartitionOutput) -> dg.MarkdownMetadataValue:
    """The partition's funnel as a chart: records in, dropped by reason, out."""
    return dg.MetadataValue.md(charts.funnel(f"{asset}: records in, dropped by reason, out", out.rows_in,
                                             list(out.dropped().items()), out.rows_out, unit="records"))


def units_table(units: Sequence[UnitResult]) -> dg.TableMetadataValue:
    """What each work unit of a partition did."""
    return dg.MetadataValue.table(
        records=[
            dg.TableRecord({"source": u.source, "rows_in": u.rows_in, "rows_out": u.rows_out,
                            "dropped": sum(u.dropped.values()), "seconds": round(u.seconds, 2),
                            "cpu_seconds": round(u.cpu_seconds, 3), "requests": u.requests,
                            "errors": len(u.errors)})
            for u in units
        ],
        schema=dg.TableSchema(columns=[
            dg.TableColumn("source", "string"), dg.TableColumn("rows_in", "int"), dg.TableColumn("rows_out", "int"),
            dg.TableColumn("dropped", "int"), dg.TableColumn("seconds", "float"),
            dg.TableColumn("cpu_seconds", "float"), dg.TableColumn("requests", "int"), dg.TableColumn("errors", "int"),
        ]),
    )


