"""The routing model (llm_assets.core.route_model): the shipped file, its provenance and leave-one-set-out figures,
its features on real pages, and that it is part of the documents stage's code version."""

from __future__ import annotations

import math

import pytest

from llm_assets.core import route_model
from llm_assets.core.extract import extract_html
from llm_assets.core.route_model import FEATURES, MODEL_PATH, RouteModel, page_features
from llm_assets_tests.core.test_extract import ARCHIVE_ORG, ARTICLE_URL, article, html_pages

PUBLIC_SETS = {"scrapinghub", "readability", "trafilatura", "newspaper4k", "cleanportaleval"}


def test_the_shipped_model_records_what_it_was_trained_on_and_how_it_did_on_sets_it_never_saw():
    model = route_model.load()
    assert model.features == FEATURES and len(model.weights) == len(FEATURES) == len(model.mean)
    assert all(s > 0 for s in model.scale)
    p = model.provenance
    assert set(p["sets"]) == PUBLIC_SETS
    for info in p["sets"].values():
        assert info["source"].startswith("https://github.com/") and len(info["commit"]) == 40 and info["pages"] > 0
    loso = p["leave_one_set_out"]
    assert PUBLIC_SETS <= set(loso)
    for name in PUBLIC_SETS:  # judged only on a set it was not trained on
        assert name not in loso[name]["trained_on"] and set(loso[name]["trained_on"]) == PUBLIC_SETS - {name}
    assert "warc" not in p["sets"]  # no ground truth there: never trained on


def test_features_of_real_pages_are_finite_and_describe_them():
    html = article()
    fast = extract_html(html, ARTICLE_URL, "resiliparse")
    features = dict(zip(FEATURES, page_features(html, fast.text), strict=True))
    assert all(math.isfinite(v) for v in features.values())
    assert features["log_text_chars"] == pytest.approx(math.log1p(len(fast.text)))
    assert 0 < features["text_per_html"] < 1 and 0 <= features["short_lines"] <= 1
    # a page without text: still features, no division by zero
    assert all(math.isfinite(v) for v in page_features("", ""))


def test_the_decision_is_a_pure_function_of_the_page():
    model = route_model.load()
    decisions = []
    for url, html in html_pages(ARCHIVE_ORG)[:20]:
        fast = extract_html(html, url, "resiliparse")
        text = fast.text if fast else ""
        decisions.append(model.wants_primary(html, text))
        assert model.wants_primary(html, text) == (model.gain(page_features(html, text)) > model.threshold)
    assert decisions == [model.wants_primary(html, (r.text if (r := extract_html(html, url, "resiliparse")) else ""))
                         for url, html in html_pages(ARCHIVE_ORG)[:20]]


def test_a_model_of_other_features_is_refused(tmp_path):
    text = MODEL_PATH.read_text(encoding="utf-8").replace('"log_tags"', '"log_divs"')
    with pytest.raises(ValueError, match="retrain it"):
        RouteModel.from_json(text)


def test_the_model_is_part_of_the_documents_code_version(tmp_path, monkeypatch):
    from llm_assets.settings import Settings
    from llm_assets.stages.documents import SPEC

    before = SPEC.version(Settings())
    retrained = tmp_path / "route_model.json"
    model = route_model.load()
    retrained.write_text(RouteModel(model.features, model.mean, model.scale, model.weights, model.bias,
                                    model.threshold + 0.01, model.provenance).to_json(), encoding="utf-8")
    monkeypatch.setattr(route_model, "MODEL_PATH", retrained)
    monkeypatch.setattr(route_model.fingerprint, "__defaults__", (retrained,))
    assert route_model.fingerprint() != route_model.fingerprint(MODEL_PATH)
    assert SPEC.version(Settings()) != before
