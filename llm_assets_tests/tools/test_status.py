"""`llm-assets status` on a real store: raw files the documents stage could not read are counted per crawl, with
the command that lists them (they used to appear nowhere: green runs, "documents 0 rows")."""

from __future__ import annotations

from llm_assets.core.partition import PartitionOutput, commit
from llm_assets.core.units import UnitResult
from llm_assets.settings import load_settings
from llm_assets.tools.status import format_summary, lake_status


def test_raw_files_quarantined_at_ingestion_are_counted_per_crawl_with_the_command_that_lists_them(lake, crawl):
    lake.put_bytes(f"raw/{crawl}/good.warc.gz", b"x")
    bad, cut = f"raw/{crawl}/bad.warc.gz", f"raw/{crawl}/cut.warc.gz"
    units = [UnitResult(unit="u1", source=bad, rows_in=1, dropped={"unreadable_file": 1}),
             UnitResult(unit="u2", source=cut, rows_in=3, dropped={"truncated_file": 1, "non_html": 2}),
             UnitResult(unit="u3", source=cut, rows_in=2, dropped={"truncated_file": 1, "no_text": 1}),  # a range
             UnitResult(unit="u4", source=f"raw/{crawl}/good.warc.gz", rows_in=5, dropped={"non_2xx": 5})]
    commit(lake, "documents", crawl, "0000", PartitionOutput(units=units))
    status = lake_status(lake, load_settings(), rejected=False)
    assert status["quarantined_files"][crawl] == 2
    text = format_summary(status)
    assert (f"2 raw files of crawl {crawl} could not be read, whole or in part (quarantined: "
            f"`llm-assets show rejected --stage documents --crawl {crawl}` lists them)") in text
