"""Which extractor gives a page the better main text, predicted per page from what the fast extractor's pass gives.

Under `extractor: routed` with `routing.quality_model` on, the fast extractor (resiliparse, ~0.1 of trafilatura's
CPU per page) reads every page first; this model then predicts, from the page's HTML counts and the fast text's
size and shape, how much more F1 the primary extractor (trafilatura) would give the page, and only the pages
where that gain passes the model's threshold are extracted again by the primary one.

The model is data (`route_model.json`, beside this module): a linear model on standardised features with its
threshold and its training provenance (the public extraction sets, their commits, pages and the leave-one-set-out
figures), written by `python -m benchmarks.routing_model` and part of the documents stage's code version
(`FINGERPRINT`): a retrained model is a new code version.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_PATH = Path(__file__).with_name("route_model.json")

# What the features say, in the model's order. HTML counts are of tags opened (`<a`, `<p`, ...) over all tags
# (`<`), so they describe the page's make-up whatever its size.
FEATURES = (
    "log_html_chars",     # the page's size
    "log_tags",           # its markup
    "log_text_chars",     # the fast text's size
    "text_per_html",      # share of the HTML's characters the fast text kept
    "link_tags",          # <a per tag: navigation-heavy pages
    "paragraph_tags",     # <p per tag: article-like pages
    "list_item_tags",     # <li per tag: menus, lists
    "table_cell_tags",    # <td per tag
    "article_or_main",    # an <article> or <main> element is present
    "comment_marks",      # "comment" per tag: comment sections trafilatura and resiliparse treat differently
    "log_lines",          # the fast text's lines
    "short_lines",        # share of its lines under 40 characters: menus, bylines, link lists kept
    "mean_line_chars",    # log of its mean line length
    "sentence_lines",     # share of its lines ending like a sentence
)


def page_features(html: str, fast_text: str) -> list[float]:
    """The FEATURES of a page: a few counts over its HTML (one lower-cased copy, C-speed `count`s) and over the
    fast extractor's text; no parse of its own."""
    lower = html.lower()
    tags = max(1, lower.count("<"))
    lines = [line for line in fast_text.splitlines() if line.strip()]
    n_lines = max(1, len(lines))
    return [
        math.log1p(len(html)),
        math.log1p(tags),
        math.log1p(len(fast_text)),
        len(fast_text) / max(1, len(html)),
        (lower.count("<a ") + lower.count("<a>")) / tags,
        (lower.count("<p ") + lower.count("<p>")) / tags,
        lower.count("<li") / tags,
        lower.count("<td") / tags,
        1.0 if ("<article" in lower or "<main" in lower) else 0.0,
        lower.count("comment") / tags,
        math.log1p(len(lines)),
        sum(1 for line in lines if len(line) < 40) / n_lines,
        math.log1p(sum(map(len, lines)) / n_lines),
        sum(1 for line in lines if line.rstrip()[-1:] in ".!?:;\"'”。！？") / n_lines,
    ]


@dataclass(frozen=True)
class RouteModel:
    """A linear model of the primary extractor's F1 gain over the fast one's, on standardised FEATURES: a page
    goes to the primary extractor when its predicted gain is above `threshold`."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float
    provenance: dict[str, Any]

    def gain(self, features: list[float]) -> float:
        """The predicted F1 gain of the primary extractor over the fast one on a page of these features."""
        return self.bias + sum(w * (x - m) / s for w, x, m, s in
                               zip(self.weights, features, self.mean, self.scale, strict=True))

    def wants_primary(self, html: str, fast_text: str) -> bool:
        return self.gain(page_features(html, fast_text)) > self.threshold

    def to_json(self) -> str:
        return json.dumps({"features": list(self.features), "mean": list(self.mean), "scale": list(self.scale),
                           "weights": list(self.weights), "bias": self.bias, "threshold": self.threshold,
                           "provenance": self.provenance}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RouteModel:
        data = json.loads(text)
        if tuple(data["features"]) != FEATURES:
            raise ValueError(f"routing model features {data['features']} are not this code's {list(FEATURES)}: "
                             "retrain it (python -m benchmarks.routing_model)")
        return cls(tuple(data["features"]), tuple(data["mean"]), tuple(data["scale"]), tuple(data["weights"]),
                   float(data["bias"]), float(data["threshold"]), data["provenance"])


@functools.cache
def load(path: Path = MODEL_PATH) -> RouteModel:
    return RouteModel.from_json(path.read_text(encoding="utf-8"))


def fingerprint(path: Path = MODEL_PATH) -> str:
    """The model file's SHA-256, for the documents stage's code version."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "no model"
