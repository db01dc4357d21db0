"""The routing model's training and judging (benchmarks/routing_model.py) on small made-up sets where the answer is
known: a feature that tells the pages apart is learnt, the threshold keeps every training set's F1, and each set is
judged by a model that never saw it."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import routing_model as rm
from llm_assets.core.route_model import FEATURES

pytestmark = pytest.mark.core


def made_up_set(name: str, n: int, seed: int) -> rm.SetData:
    """Pages whose first feature says whether trafilatura gets them right (F1 1) where resiliparse gets them half
    right; on the others both are right. Shingle terms are (tp, fp, fn) shares."""
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.3
    x = rng.normal(size=(n, len(FEATURES)))
    x[:, 0] = np.where(hard, 2.0, -1.0) + rng.normal(scale=0.1, size=n)
    right, half = (1.0, 0.0, 0.0), (0.5, 0.25, 0.25)
    terms = {"trafilatura": [right] * n, "resiliparse": [half if h else right for h in hard]}
    cpu = {"trafilatura": np.full(n, 1.0), "resiliparse": np.full(n, 0.1)}
    return rm.SetData(name, False, x, terms, cpu, 0.0)


@pytest.fixture
def sets() -> dict[str, rm.SetData]:
    return {name: made_up_set(name, 60, seed) for seed, name in enumerate(("a", "b", "c"))}


def test_a_feature_that_tells_the_pages_apart_is_learnt_and_the_threshold_keeps_f1(sets):
    train = list(sets.values())
    mean, scale, weights, bias = rm.fit(train, "trafilatura")
    assert np.argmax(np.abs(weights)) == 0 and weights[0] > 0
    gains = [rm.predict(s, mean, scale, weights, bias) for s in train]
    threshold = rm.choose_threshold(train, gains, "trafilatura", 0.005)
    for s, g in zip(train, gains, strict=True):
        to_primary = g > threshold
        assert s.f1("trafilatura", to_primary, "trafilatura") >= s.best_single()[1] - 0.005
        assert to_primary.mean() < 0.5 and s.speedup(to_primary, "trafilatura") > 1.5


def test_each_set_is_judged_by_a_model_trained_without_it(sets):
    loso = rm.judge(sets, "trafilatura", 0.005)
    assert set(loso) == set(sets)
    for name, r in loso.items():
        assert r["trained_on"] == [s for s in sets if s != name]
        assert r["shortfall"] <= 0.005 and r["auc"] == pytest.approx(1.0)
        assert r["oracle_to_primary"] == pytest.approx(r["to_primary"], abs=0.05)
        assert r["at_share"]["20%"]["perfect"] >= r["at_share"]["20%"]["random"]


def test_a_perfect_router_share_is_none_when_even_every_page_misses_the_target(sets):
    s = sets["a"]
    assert rm._oracle_share(s, "trafilatura", 1.01) is None
    assert rm._oracle_share(s, "trafilatura", 0.0) == 0.0
