"""The chain's two ways of measuring (`filtered.measure`): every block every document, or each document only up to
the block that drops it (the reference cascade). They keep and drop the same documents with the same rows; only the
measures of the blocks a dropped document never reached differ (null)."""

from __future__ import annotations

import polars as pl
import pytest

from llm_assets.core.documents import PageExtractor, reader_settings
from llm_assets.core.filtered import FilteredSettings
from llm_assets.core.filters import GopherRepetition, score_filters
from llm_assets.core.filters.base import measure_names
from llm_assets.core.readers import ReadReport, read_records
from llm_assets.core.scores import threshold_only
from llm_assets.settings import DocumentsSettings
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.test_scores import SOURCES


@pytest.fixture(scope="module")
def batch() -> pl.DataFrame:
    """The documents of the shared WARC files (en, ru, zh, de, fr, nl …), the columns the filters read."""
    settings = DocumentsSettings()
    rows = []
    for name in SOURCES:
        extract = PageExtractor(settings, "trafilatura")
        with open(shared("warc", name), "rb") as f:
            for rec in read_records(f, name, reader_settings(settings), ReadReport()):
                got = extract(rec.html, rec.url).result if rec.html is not None else None
                if got is not None and len(got.text) >= settings.min_text_chars:
                    rows.append({"doc_id": f"{name}/{rec.offset}", "url": rec.url, "text": got.text})
    return pl.DataFrame(rows)


SETTINGS = {"every language the table has": FilteredSettings(),
            "English only": FilteredSettings.default_with(language={"languages": ("en",)})}


@pytest.mark.parametrize("per_language", [True, False], ids=["chain per language", "one chain"])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_until_dropped_keeps_and_drops_what_every_document_does(batch, name, per_language):
    s = SETTINGS[name]
    chain_for = s.chain_for if per_language else None
    every = score_filters(batch, s.blocks(), chain_for)
    cascade = score_filters(batch, s.blocks(), chain_for, "until_dropped")
    assert every.kept.equals(cascade.kept) and every.dropped.equals(cascade.dropped)
    assert every.kept.height and every.dropped["filter"].n_unique() >= 3  # more than one block drops
    assert every.measures.select("filter", "reason").equals(cascade.measures.select("filter", "reason"))
    assert every.reached == {} and set(cascade.reached) == set(cascade.fails)
    # a block counts the documents it measured, those no earlier block dropped
    assert all(cascade.fails[b] <= cascade.reached[b] for b in cascade.fails)
    assert all(cascade.fails[b] <= every.fails[b] for b in cascade.fails)
    assert cascade.reached["normalize"] == batch.height > cascade.reached.get("gopher_quality", 0)


def test_until_dropped_leaves_the_blocks_a_dropped_document_never_reached_null(batch):
    s = FilteredSettings()
    every = score_filters(batch, s.blocks(), s.chain_for).measures
    cascade = score_filters(batch, s.blocks(), s.chain_for, "until_dropped").measures
    names = measure_names(s.blocks())
    checked = 0
    for i, row in enumerate(cascade.iter_rows(named=True)):
        # the blocks up to the one that dropped the document (all of them for a kept one) measured it alike
        last = names.index(row["filter"]) if row["filter"] else len(names) - 1
        for column, value in row.items():
            block = column.split(".", 1)[0]
            if block not in names:
                continue
            if names.index(block) < last or names.index(block) == last and not unmeasured(s, row, column):
                assert value == every[column][i], (column, i)
            elif names.index(block) == last:
                assert value is None, (column, i)  # gopher_repetition stopped at its failing rule
            else:
                assert value is None, (column, i)
                checked += 1
    assert checked  # some dropped document's later blocks were left unmeasured
    # every measure of a document the chain kept, or that reached the block, is there in both modes
    assert cascade.height == every.height == batch.height


def unmeasured(s: FilteredSettings, row: dict, column: str) -> bool:
    """Whether `column`, a measure of the block that dropped the document `row`, is one of gopher_repetition's
    n-gram measures of a rule after the one the document failed (measuring until_dropped, that block stops there)."""
    if row["filter"] != "gopher_repetition" or not column.endswith("_gram_chars"):
        return False
    block = next(b for b in s.chain_for(row["language"]) if isinstance(b, GopherRepetition))
    codes = [r.code for r in block.rules()]
    kind, n = column.split(".")[1].split("_")[:2]
    return codes.index(f"top_{n}_gram" if kind == "top" else f"duplicated_{n}_n_grams") > codes.index(row["reason"])


def test_stored_scores_of_until_dropped_decide_no_other_thresholds():
    cascade = FilteredSettings(measure="until_dropped")
    tighter = FilteredSettings.default_with(gopher_quality={"min_doc_words": 100}).model_copy(
        update={"measure": "until_dropped"})
    why = threshold_only(cascade, tighter)
    assert why is not None and "filtered.measure is until_dropped" in why
    assert "filtered.measure is until_dropped" in (threshold_only(cascade, FilteredSettings()) or "")
    # scores measured of every document decide a cascade's thresholds: the decisions are the same
    assert threshold_only(FilteredSettings(), tighter) is None


def test_the_mode_is_in_the_chains_fingerprint_not_the_languages():
    every, cascade = FilteredSettings(), FilteredSettings(measure="until_dropped")
    assert every.fingerprint() != cascade.fingerprint()
    assert every.language_fingerprint("de") == cascade.language_fingerprint("de")
    with pytest.raises(ValueError, match="measure"):
        FilteredSettings(measure="some")
