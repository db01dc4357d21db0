"""lid.176's minimum scores per language (`llm_assets/core/languages/lid176.json`) are what their method gives on
their sample: recomputed from the real-prose corpus, they equal the committed ones."""

from __future__ import annotations

import json

import pytest

from benchmarks import lid_calibration
from llm_assets.core.languages import CALIBRATION, language_table, lid176_thresholds

pytestmark = pytest.mark.corpus  # the sample: Debian's handbook and LibreOffice's help, fetched with apt-get


def test_the_committed_thresholds_are_their_methods_on_their_sample():
    assert lid_calibration.main(["--check"]) == 0


def test_each_threshold_is_fineweb2s_or_lower_and_keeps_the_share_it_says():
    data = json.loads(CALIBRATION.read_text())
    assert data["method"] and data["assumption"] and data["sample"]["packages"]
    assert len(data["languages"]) >= 20
    for language, row in data["languages"].items():
        published = language_table()[language].overrides["language"]["threshold"]
        assert row["fineweb2"] == published and lid_calibration.FLOOR <= row["threshold"] <= published
        assert row["kept_after"] >= row["kept_before"]
        if row["threshold"] < published:  # lowered: to the quantile that keeps the share
            assert row["kept_after"] >= data["keep"] or row["threshold"] == lid_calibration.FLOOR
    assert lid176_thresholds()["de"] == data["languages"]["de"]["threshold"]
