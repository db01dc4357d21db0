"""How numbers are shown in Dagster's UI: a table's floats rounded for a person, its other columns as they are."""

import polars as pl

from llm_assets.dagster.metadata import table
from llm_assets.report import rounded


def test_a_shown_table_rounds_floats_to_three_significant_digits_and_leaves_the_rest():
    exact = pl.DataFrame({"asset": ["documents", "total"], "units": [3, 5],
                          "cpu_hours": [0.0013768124, 1234.5678], "cost_total": [None, 0.000123456]})
    shown = rounded(exact)
    assert shown["cpu_hours"].to_list() == [0.00138, 1230.0]
    assert shown["cost_total"].to_list() == [None, 0.000123]
    assert shown.select("asset", "units").equals(exact.select("asset", "units")) and shown.schema == exact.schema
    assert exact["cpu_hours"][0] == 0.0013768124  # the frame given is not changed: it is what gets stored
    records = table(shown).value.records
    assert records[0].data == {"asset": "documents", "units": 3, "cpu_hours": 0.00138, "cost_total": None}
