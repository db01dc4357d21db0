"""The processing core: plain functions over Arrow/Polars data. Nothing in this package imports Dagster."""
