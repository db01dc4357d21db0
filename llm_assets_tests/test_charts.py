"""Charts in asset metadata (llm_assets/charts.py)."""

import numpy as np

from llm_assets import charts
from llm_assets_tests.conftest import png_size


def test_a_chart_asked_for_again_is_the_image_drawn_first_and_any_other_is_drawn_anew(monkeypatch):
    drawn = []
    savefig = charts._markdown
    monkeypatch.setattr(charts, "_markdown", lambda fig, title: drawn.append(title) or savefig(fig, title))
    empty = charts.funnel("documents in, dropped, kept", 0, [], 0)
    assert charts.funnel("documents in, dropped, kept", 0, [], 0) == empty and len(drawn) == 1
    assert charts.funnel("documents in, dropped, kept", 3, [("gopher", 1)], 2) != empty and len(drawn) == 2
    assert png_size(empty) == (720, png_size(empty)[1])
    # a long array's repr elides its middle: arrays that differ there are two charts
    lengths = np.arange(1, 5001, dtype=float)
    other = lengths.copy()
    other[2500] = 1.0
    assert charts.histogram("lengths", lengths, "words") != charts.histogram("lengths", other, "words")
    assert len(drawn) == 4
