"""Routed extraction (`extractor: routed`): the rules that send a page to the fast extractor before extracting, the
CPU budget after which the fast extractor takes a page over (a document, not a drop), what each document records
and the counts per extractor and reason. No timing: the budgets are either far below any real page's cost or
absent."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from llm_assets.core import route_model
from llm_assets.core.documents import (
    EXTRACTED_BY,
    ROUTED_FOR,
    DocumentsSettings,
    ExtractUnit,
    PageExtractor,
    _document,
)
from llm_assets.core.extract import ROUTED, Router, Routing, extract_html
from llm_assets.core.readers import ReadReport, SourceRecord
from llm_assets_tests.core.test_extract import ARCHIVE_ORG, ARTICLE_URL, article, biggest_page, html_pages

RESILIPARSE = f"resiliparse {version('resiliparse')}"
TRAFILATURA = f"trafilatura {version('trafilatura')}"
# far below the CPU any real page costs trafilatura, so it always runs out (no timing in the outcome)
TINY_BUDGET = 1e-6


def settings(**rules) -> DocumentsSettings:
    """Routed extraction with only the given rules on."""
    off = {"max_chars": None, "max_tags": None, "budget_s": None, "host_overruns": None}
    return DocumentsSettings(extractor=ROUTED, routing=Routing(**{**off, **rules}))


def unit(s: DocumentsSettings) -> ExtractUnit:
    return ExtractUnit(store=None, source="raw/c/pages.warc.gz", settings=s, crawl="c", size=0, part="")


def record(url: str, html: str) -> SourceRecord:
    return SourceRecord(fmt="warc", offset=0, url=url, record_id="<urn:uuid:1>", html=html)


def test_routed_is_the_default_and_versions_follow_its_settings():
    from llm_assets.settings import Settings
    from llm_assets.stages.documents import SPEC

    assert DocumentsSettings().extractor == ROUTED
    base = Settings()
    other = base.model_copy(update={"documents": base.documents.model_copy(
        update={"routing": Routing(max_tags=123)})})
    assert SPEC.version(base) != SPEC.version(other)


def test_over_budget_page_becomes_a_document_by_the_fast_extractor():
    """trafilatura cannot finish the biggest shared page in a microsecond of CPU: the page is extracted again by
    resiliparse, kept as a document that says who made it and why, and counted."""
    url, html = biggest_page()
    s = settings(budget_s=TINY_BUDGET)
    extract = PageExtractor(s, ROUTED)
    report = ReadReport()
    row = _document(unit(s), record(url, html), report, extract)
    assert row is not None, report
    assert not report.drops and not report.quarantined
    assert row["extractor"] == f"{RESILIPARSE} (routed: budget)"
    assert row["text"] == extract_html(html, url, extractor="resiliparse", max_chars=s.max_html_chars).text
    assert extract.counts == {EXTRACTED_BY + "resiliparse": 1, ROUTED_FOR + "budget": 1}


def test_within_budget_page_is_trafilaturas():
    s = settings(budget_s=30.0)
    extract = PageExtractor(s, ROUTED)
    row = _document(unit(s), record(ARTICLE_URL, article()), ReadReport(), extract)
    assert row is not None and row["extractor"] == TRAFILATURA
    assert row["text"] == extract_html(article(), ARTICLE_URL, extractor="trafilatura").text
    assert extract.counts == {EXTRACTED_BY + "trafilatura": 1}


@pytest.mark.parametrize(("rule", "value", "reason"), [("max_chars", 10_000, "size"), ("max_tags", 100, "tags")])
def test_size_and_tag_rules_route_before_extracting(rule, value, reason):
    html = article()
    assert len(html) > 10_000 and html.count("<") > 100
    router = Router(settings(**{rule: value}).routing)
    assert router.route(html, "creativecommons.org") == reason
    got = router.extract(html, ARTICLE_URL)
    assert (got.extractor, got.reason, got.label) == ("resiliparse", reason, f"{RESILIPARSE} (routed: {reason})")
    assert got.result == extract_html(html, ARTICLE_URL, extractor="resiliparse")


def test_thresholds_are_strict_and_none_turns_a_rule_off():
    html = "<p>" + "word " * 50 + "</p>"
    assert Router(Routing(max_chars=len(html))).route(html, "") is None
    assert Router(Routing(max_chars=len(html) - 1)).route(html, "") == "size"
    assert Router(Routing(max_tags=2)).route(html, "") is None
    assert Router(Routing(max_tags=1)).route(html, "") == "tags"
    assert Router(Routing(max_chars=None, max_tags=None, budget_s=None, host_overruns=None)).route(html, "") is None


def test_a_host_over_budget_goes_straight_to_the_fast_extractor_within_the_unit():
    url, html = biggest_page()
    s = settings(budget_s=TINY_BUDGET, host_overruns=1)
    extract = PageExtractor(s, ROUTED)
    same_host = url.split("://", 1)[0] + "://" + url.split("://", 1)[1].split("/", 1)[0] + "/another-page"
    first = extract(html, url)
    second = extract(article(), same_host)
    # another host's page goes over the budget in its own right: the biggest page again, as a small one can end
    # before the CPU timer's first tick and so pass under any budget (it did on a loaded machine)
    other = extract(html, ARTICLE_URL)
    assert (first.reason, second.reason, other.reason) == ("budget", "host", "budget")
    assert second.result == extract_html(article(), same_host, extractor="resiliparse")
    assert extract.counts == {EXTRACTED_BY + "resiliparse": 3, ROUTED_FOR + "budget": 2, ROUTED_FOR + "host": 1}
    # another unit starts without that history
    assert PageExtractor(settings(budget_s=30.0, host_overruns=1), ROUTED)(article(), same_host).reason is None


def test_single_extractor_settings_are_unchanged():
    s = DocumentsSettings(extractor="trafilatura")
    extract = PageExtractor(s, "trafilatura")
    row = _document(unit(s), record(ARTICLE_URL, article()), ReadReport(), extract)
    assert row is not None and row["extractor"] == TRAFILATURA
    assert extract.counts == {EXTRACTED_BY + "trafilatura": 1}


def test_partition_metadata_counts_pages_per_extractor_and_reason():
    from llm_assets.core.partition import PartitionOutput
    from llm_assets.core.units import UnitResult
    from llm_assets.stages.documents import Documents

    units = [UnitResult("a", "a", counts={EXTRACTED_BY + "trafilatura": 5, EXTRACTED_BY + "resiliparse": 2,
                                          ROUTED_FOR + "tags": 1, ROUTED_FOR + "budget": 1}),
             UnitResult("b", "b", counts={EXTRACTED_BY + "resiliparse": 1, ROUTED_FOR + "size": 1})]
    meta = Documents().report(None, PartitionOutput(units=units))  # type: ignore[arg-type]
    assert meta["pages_by_extractor"] == {"resiliparse": 3, "trafilatura": 5}
    assert meta["pages_routed_by_reason"] == {"budget": 1, "size": 1, "tags": 1}


def test_quality_model_keeps_the_fast_text_unless_the_model_predicts_the_primary_gains():
    """With `quality_model`, resiliparse reads every real page first; trafilatura extracts only the pages the
    model picks, the others keep resiliparse's text as documents routed for reason `model`, all counted."""
    model = route_model.load()
    extract = PageExtractor(settings(quality_model=True), ROUTED)
    picked = 0
    pages = html_pages(ARCHIVE_ORG)[:40]
    for url, html in pages:
        routed = extract(html, url)
        fast = extract_html(html, url, "resiliparse")
        if model.wants_primary(html, fast.text if fast else ""):
            picked += 1
            assert (routed.extractor, routed.reason) == ("trafilatura", None)
            assert routed.result == extract_html(html, url, "trafilatura")
        else:
            assert (routed.extractor, routed.reason, routed.result) == ("resiliparse", "model", fast)
            assert routed.label == f"{RESILIPARSE} (routed: model)"
    assert 0 < picked < len(pages)  # real pages of both kinds
    assert extract.counts[ROUTED_FOR + "model"] == len(pages) - picked
    assert extract.counts[EXTRACTED_BY + "trafilatura"] == picked


def test_quality_model_reuses_the_fast_text_when_the_primary_runs_out_of_budget():
    model = route_model.load()
    url, html = next((u, h) for u, h in html_pages(ARCHIVE_ORG)
                     if (r := extract_html(h, u, "resiliparse")) and model.wants_primary(h, r.text))
    routed = Router(Routing(quality_model=True, max_tags=None, budget_s=TINY_BUDGET)).extract(html, url)
    assert (routed.extractor, routed.reason) == ("resiliparse", "budget")
    assert routed.result == extract_html(html, url, "resiliparse")
