"""bench-extraction-quality's own parts: the ROUGE-LSum metric, the loaders of the sets it adds (on files laid out as
their repositories lay them out), the names of presets and routed variants, and the summary's verdict on the bar."""

from __future__ import annotations

import json

import pytest

from benchmarks import extraction_quality as eq

pytestmark = pytest.mark.core


def test_rouge_lsum_is_the_union_lcs_of_each_truth_line_over_the_lines_extracted():
    # "a b c d" / "e f" against "a x c d" / "q": a c d on one LCS, nothing for "e f": P 3/5, R 3/6
    p, r, f1 = eq.rouge_lsum("a b c d\ne f", "a x c d\nq")
    assert (p, r) == (pytest.approx(0.6), pytest.approx(0.5)) and f1 == pytest.approx(2 * 0.3 / 1.1)
    # lines are sentences: the same words split across two lines still match, in order; case does not count
    assert eq.rouge_lsum("The cat sat\non the mat", "the cat sat on the mat") == (1.0, 1.0, 1.0)
    # a word is counted once however many lines align it (hits clipped by counts)
    assert eq.rouge_lsum("b a\nb", "b")[1] == pytest.approx(1 / 3)
    assert eq.rouge_lsum("", "") == (1.0, 1.0, 1.0) and eq.rouge_lsum("words", "") == (0.0, 0.0, 0.0)
    # order matters within a line, unlike a bag of words
    assert eq.rouge_lsum("a b c", "c b a")[2] < eq.token_f1("a b c", "c b a")


def test_cleanportaleval_pages_read_cleaneval_gold_texts(tmp_path):
    (tmp_path / "input").mkdir()
    (tmp_path / "GoldStandard").mkdir()
    (tmp_path / "input" / "site_01.html").write_text('<text id="http://x.org/a"><html><body><p>Hi</p></body></html>')
    (tmp_path / "GoldStandard" / "site_01.txt").write_text(
        "\nURL: http://x.org/a\n<h>A title\n\n<p>First paragraph\n broken over lines &amp; more\n<l>An item\n")
    (tmp_path / "GoldStandard" / "orphan_02.txt").write_text("URL: http://x.org/b\n<p>No page for it\n")
    [page] = eq.cleanportaleval_pages(tmp_path)
    assert (page.id, page.url) == ("site_01", "http://x.org/a")
    assert page.truth == "A title\nFirst paragraph broken over lines & more\nAn item"


def test_newspaper4k_pages_pair_html_with_expected_text_and_url(tmp_path):
    data = tmp_path / "tests" / "data"
    for folder in ("html", "txt", "metadata"):
        (data / folder).mkdir(parents=True)
    (data / "html" / "cnn.html").write_text("<html><body><p>Body</p></body></html>")
    (data / "txt" / "cnn.txt").write_text("Body")
    (data / "metadata" / "cnn.json").write_text(json.dumps({"url": "https://cnn.com/x"}))
    (data / "txt" / "summary_only.txt").write_text("no html for this one")
    [page] = eq.newspaper4k_pages(tmp_path)
    assert (page.id, page.url, page.truth) == ("cnn", "https://cnn.com/x", "Body")


def test_names_of_presets_and_routed_variants():
    assert eq.variant("trafilatura") == ("trafilatura", "fineweb")
    assert eq.variant("trafilatura[recall]") == ("trafilatura", "recall")
    assert eq.variant("resiliparse") == ("resiliparse", "fineweb")
    assert eq.variant("routed") == ("routed", "") and eq.variant("routed[model]") == ("routed", "model")
    assert eq.router("routed[model]").routing.quality_model and not eq.router("routed").routing.quality_model
    with pytest.raises(ValueError, match="routed takes"):
        eq.variant("routed[recall]")


def _result(routed_f1: dict[str, float], routed_cpu: float) -> dict:
    """Two sets: trafilatura is the best single extractor of `a`, resiliparse of `b`."""
    def row(f1: float, cpu: float) -> dict:
        return {"f1": f1, "pages": 10, "cpu_s": cpu}

    best = {"a": (0.90, 0.85), "b": (0.90, 0.95)}
    return {"extractors": ["trafilatura", "resiliparse", "routed"], "sets": {name: {"quality": "truth", "extractors": {
        "trafilatura": row(t, 1.0), "resiliparse": row(r, 0.1), "routed": row(routed_f1[name], routed_cpu)}}
        for name, (t, r) in best.items()}}


@pytest.mark.parametrize(("routed_f1", "routed_cpu", "met"), [
    ({"a": 0.90, "b": 0.95}, 1 / 3, "yes"),  # the best single extractor of each set, 3x faster
    ({"a": 0.90, "b": 0.90}, 1 / 3, "no: -0.050, 3.00x"),  # set b loses to resiliparse
    ({"a": 0.90, "b": 0.95}, 1 / 2, "no: +0.000, 2.00x"),  # not fast enough
])
def test_the_summary_judges_the_routed_default_against_the_best_single_extractor_per_set(routed_f1, routed_cpu, met):
    rows = {r.key: r for r in eq.summary(_result(routed_f1, routed_cpu), "make bench-extraction-quality")}
    assert rows["extraction-quality:routed"].met == met
    assert rows["extraction-quality:presets"].met == "—"
    assert rows["extraction-quality:presets"].current == "`fineweb` 0.900 / 0.900 (10.0)"
    assert rows["extraction-quality:extractors"].current == "`resiliparse` 0.850 / 0.950 (100.0)"
    assert rows["extraction-quality:routed"].current.startswith("default 0.900 / ")
    assert "F1 a/b (pages per CPU-s)" in rows["extraction-quality:routed"].measure
