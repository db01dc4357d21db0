"""Metadata helpers shared by the stages: how numbers, tables and charts are shown in Dagster's UI."""

from __future__ import annotations

import dagster as dg

_COLUMN_KINDS = {"String": "string", "Int64": "int", "UInt32": "int", "Int32": "int", "Float64": "float"}


def table(df) -> dg.TableMetadataValue:
    """A Polars frame as a metadata table, its column types kept."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord(row) for row in df.iter_rows(named=True)],
        schema=dg.TableSchema(columns=[dg.TableColumn(n, _COLUMN_KINDS.get(str(t), "string"))
                                       for n, t in df.schema.items()]),
    )
