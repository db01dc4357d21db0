"""Train and judge the documents stage's quality-aware routing model (`llm_assets.core.route_model`).

Input: the per-page scores and CPU seconds that `python -m benchmarks.extraction_quality --pages FILE` writes (every
extractor on every page of the public extraction sets and of the shared WARC files), and the same sets' checkouts
(the same options and environment variables), from which each page's features are computed as the documents
stage computes them: the HTML's counts and resiliparse's text of the page.

The label of a page is the primary extractor's F1 on it minus resiliparse's (per-page F1 of the set's metric: token
4-gram shingles against the ground-truth text, or trafilatura's snippets); the model is a ridge regression of it on
the standardised features, each set weighing the same. A page goes to the primary extractor when its predicted gain
passes a threshold, chosen on the training sets: the one that sends the fewest pages to the primary extractor while
every training set's F1 stays within `--tolerance` of its best single extractor's (when none does: the smallest
worst shortfall).

Judged by leaving one set out at a time: trained on the other public sets, threshold included, and scored on the set
left out, never on what it was trained on (the shared WARC pages, which have no ground truth, are never trained on:
their figure is agreement with the primary extractor). The shipped model is trained on every public set; its file
records its training provenance and the leave-one-set-out figures. Cost: resiliparse on every page plus the primary
on the pages sent to it, against the primary on every page (pages per CPU-second as measured by
extraction_quality, in one process; the features' own cost is measured here and added).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.extraction_quality import (
    LOADERS,
    SOURCES,
    Page,
    configured_sets,
    shingle_scores,
    variant,
)
from llm_assets.core.extract import extract_html
from llm_assets.core.route_model import FEATURES, MODEL_PATH, RouteModel, page_features

FAST = "resiliparse"
SINGLES = ("trafilatura", "trafilatura[trafilatura]", "trafilatura[recall]", "trafilatura_fast", "resiliparse")


@dataclass
class SetData:
    """One set's pages: features, each extractor's per-page score terms and CPU seconds."""

    name: str
    snippets: bool  # scored by trafilatura's snippets (counts summed over the set), else shingles (means of pages)
    x: np.ndarray  # pages x FEATURES
    terms: dict[str, list[tuple[float, float, float]]]
    cpu: dict[str, np.ndarray]
    feature_cpu_s: float

    def f1(self, name: str, to_primary: np.ndarray | None = None, primary: str = "") -> float:
        """The set's F1 of one extractor, or of routing (`to_primary`: pages the primary extracts, the rest FAST)."""
        terms = self.terms[name] if to_primary is None else [
            self.terms[primary][i] if go else self.terms[FAST][i] for i, go in enumerate(to_primary)]
        if self.snippets:
            tp, fp, fn = (sum(t[k] for t in terms) for k in range(3))
            return 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        return shingle_scores(terms)["f1"]

    def page_f1(self, name: str) -> np.ndarray:
        out = []
        for tp, fp, fn in self.terms[name]:
            out.append(2 * tp / (2 * tp + fp + fn) if tp else (1.0 if fp == fn == 0 else 0.0))
        return np.array(out)

    def speedup(self, to_primary: np.ndarray, primary: str) -> float:
        cost = self.cpu[FAST].sum() + self.feature_cpu_s + self.cpu[primary][to_primary].sum()
        return float(self.cpu[primary].sum() / cost) if cost else 0.0

    def best_single(self) -> tuple[str, float]:
        return max(((name, self.f1(name)) for name in SINGLES if name in self.terms), key=lambda kv: kv[1])


def load(pages_file: Path, sets: dict[str, Path]) -> dict[str, SetData]:
    rows: dict[str, dict[str, dict]] = {}
    for line in pages_file.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows.setdefault(row["set"], {})[row["id"]] = row
    out = {}
    for set_name, path in sets.items():
        pages: list[Page] = LOADERS[set_name](Path(path))
        scored = rows.get(set_name, {})
        if len(scored) != len(pages) or any(p.id not in scored for p in pages):
            raise SystemExit(f"{set_name}: the pages file has {len(scored)} of its {len(pages)} pages: run "
                             "benchmarks.extraction_quality --pages on the same checkouts first")
        features, start = [], time.process_time()
        for page in pages:
            fast = extract_html(page.html, page.url, FAST)
            features.append(page_features(page.html, fast.text if fast else ""))
        feature_cpu_s = time.process_time() - start
        # resiliparse's own time is counted by extraction_quality: the features' cost is what is left
        names = list(scored[pages[0].id]["extractors"])
        cpu = {n: np.array([scored[p.id]["extractors"][n]["cpu_s"] for p in pages]) for n in names}
        feature_cpu_s = max(0.0, feature_cpu_s - float(cpu[FAST].sum()))
        out[set_name] = SetData(
            set_name, set_name != "warc" and pages[0].truth is None, np.array(features),
            {n: [tuple(scored[p.id]["extractors"][n]["terms"]) for p in pages] for n in names}, cpu, feature_cpu_s)
    return out


def fit(train: Sequence[SetData], primary: str, ridge: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                                 float]:
    """(mean, scale, weights, bias) of the ridge regression of the primary's per-page F1 gain over FAST, each set
    weighing the same."""
    x = np.vstack([s.x for s in train])
    y = np.concatenate([s.page_f1(primary) - s.page_f1(FAST) for s in train])
    w = np.concatenate([np.full(len(s.x), 1.0 / len(s.x)) for s in train])
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale[scale == 0] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    penalty = ridge * np.eye(z.shape[1]) / len(train)
    penalty[-1, -1] = 0.0  # the intercept is not shrunk
    coef = np.linalg.solve(z.T @ (z * w[:, None]) + penalty, z.T @ (w * y))
    return mean, scale, coef[:-1], float(coef[-1])


def predict(s: SetData, mean: np.ndarray, scale: np.ndarray, weights: np.ndarray, bias: float) -> np.ndarray:
    return ((s.x - mean) / scale) @ weights + bias


def choose_threshold(train: Sequence[SetData], gains: Sequence[np.ndarray], primary: str,
                     tolerance: float) -> float:
    """The threshold that sends the fewest pages to the primary extractor with every training set within
    `tolerance` of its best single extractor's F1; without one, the smallest worst shortfall."""
    candidates = np.unique(np.concatenate([*gains, [np.inf]]))[::-1]
    best: tuple[float, float] | None = None  # (worst shortfall, threshold)
    for t in candidates:
        worst = max(s.best_single()[1] - s.f1(primary, g > t, primary) for s, g in zip(train, gains, strict=True))
        if worst <= tolerance:
            return float(t)
        if best is None or worst < best[0] - 1e-9:
            best = (worst, float(t))
    assert best is not None
    return best[1]


def judge(sets: dict[str, SetData], primary: str, tolerance: float) -> dict[str, dict]:
    """Leave one public set out at a time; the WARC pages (no ground truth) are judged by the model trained on all
    public sets."""
    public = [s for name, s in sets.items() if name != "warc"]
    out = {}
    for held in [*public, *([sets["warc"]] if "warc" in sets else [])]:
        train = [s for s in public if s is not held]
        mean, scale, weights, bias = fit(train, primary)
        threshold = choose_threshold(train, [predict(s, mean, scale, weights, bias) for s in train], primary,
                                     tolerance)
        gains = predict(held, mean, scale, weights, bias)
        to_primary = gains > threshold
        best_name, best_f1 = held.best_single()
        f1 = held.f1(primary, to_primary, primary)
        truth = held.page_f1(primary) - held.page_f1(FAST)
        out[held.name] = {
            "trained_on": [s.name for s in train], "threshold": threshold, "f1": f1,
            "primary_f1": held.f1(primary), "fast_f1": held.f1(FAST), "best_single": best_name,
            "best_single_f1": best_f1, "shortfall": best_f1 - f1, "to_primary": float(to_primary.mean()),
            "speedup": held.speedup(to_primary, primary), "pages": len(to_primary),
            "oracle_to_primary": _oracle_share(held, primary, best_f1 - tolerance),
            "auc": _auc(gains, truth > GAIN), "at_share": {
                f"{share:.0%}": {"model": _top(held, primary, gains, share), "random": _random(held, primary, share),
                                 "perfect": _top(held, primary, truth, share)} for share in SHARES},
        }
    return out


# The F1 gain of the primary extractor on a page that counts as a gain (for the area under the ROC curve), and the
# shares of pages sent to the primary at which the model is compared with a random and a perfect router.
GAIN = 0.01
SHARES = (0.2, 0.33, 0.5)


def _auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """The probability that a page where the primary gains scores above one where it does not."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return None
    return float(np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))


def _top(s: SetData, primary: str, scores: np.ndarray, share: float) -> float:
    """The set's F1 when the `share` of pages of highest `scores` go to the primary extractor."""
    to_primary = np.zeros(len(scores), dtype=bool)
    to_primary[np.argsort(-scores, kind="stable")[: round(share * len(scores))]] = True
    return s.f1(primary, to_primary, primary)


def _random(s: SetData, primary: str, share: float, draws: int = 20) -> float:
    """The mean F1 of `draws` random choices of that share of pages (seeded: the same figure every run)."""
    rng = np.random.default_rng(0)
    return float(np.mean([_top(s, primary, rng.random(len(s.x)), share) for _ in range(draws)]))


def _oracle_share(s: SetData, primary: str, target: float) -> float | None:
    """The fewest pages a router that knew each page's scores would send to the primary extractor to reach
    `target` F1 (pages in order of F1 gained), or None when even all of them do not."""
    order = np.argsort(-(s.page_f1(primary) - s.page_f1(FAST)), kind="stable")
    to_primary = np.zeros(len(order), dtype=bool)
    for k in range(len(order) + 1):
        if s.f1(primary, to_primary, primary) >= target:
            return k / len(order)
        if k < len(order):
            to_primary[order[k]] = True
    return None


def train_model(sets: dict[str, SetData], primary: str, tolerance: float, loso: dict,
                sources: dict[str, Path]) -> RouteModel:
    public = [s for name, s in sets.items() if name != "warc"]
    mean, scale, weights, bias = fit(public, primary)
    threshold = choose_threshold(public, [predict(s, mean, scale, weights, bias) for s in public], primary, tolerance)
    provenance = {
        "trained": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": "python -m benchmarks.routing_model " + " ".join(sys.argv[1:]),
        "primary": primary, "fast": FAST, "label": "per-page F1 of the primary minus the fast extractor's",
        "tolerance": tolerance,
        "sets": {s.name: {"source": SOURCES[s.name][1], "commit": SOURCES[s.name][2], "pages": len(s.x)}
                 for s in public},
        "leave_one_set_out": loso,
    }
    return RouteModel(FEATURES, tuple(map(float, mean)), tuple(map(float, scale)), tuple(map(float, weights)),
                      bias, threshold, provenance)


def table(loso: dict[str, dict], primary: str) -> str:
    shares = list(next(iter(loso.values()))["at_share"]) if loso else []
    lines = [f"| set left out (pages) | routed F1 | `{primary}` F1 | resiliparse F1 | best single (F1) | shortfall | "
             "pages to primary | perfect router's share | speed-up over primary | AUC | "
             + " | ".join(f"F1 at {share} to primary: model / random / perfect" for share in shares) + " |",
             "|---|--:|--:|--:|---|--:|--:|--:|--:|--:|" + "--:|" * len(shares)]
    for name, r in loso.items():
        oracle = "–" if r["oracle_to_primary"] is None else f"{r['oracle_to_primary']:.0%}"
        auc = "–" if r["auc"] is None else f"{r['auc']:.2f}"
        at = " | ".join("{model:.3f} / {random:.3f} / {perfect:.3f}".format(**r["at_share"][k]) for k in shares)
        lines.append(f"| {name} ({r['pages']}) | {r['f1']:.3f} | {r['primary_f1']:.3f} | {r['fast_f1']:.3f} | "
                     f"`{r['best_single']}` ({r['best_single_f1']:.3f}) | {r['shortfall']:+.3f} | "
                     f"{r['to_primary']:.0%} | {oracle} | {r['speedup']:.2f}x | {auc} | {at} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, (env, url, _commit) in SOURCES.items():
        parser.add_argument(f"--{name}", metavar="DIR", help=f"checkout of {url} (default: ${env})")
    parser.add_argument("--warc-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" /
                        "warc", help="the shared WARC files")
    parser.add_argument("--pages", type=Path, required=True, help="extraction_quality's --pages file")
    parser.add_argument("--primary", default="trafilatura", help="the primary extractor (a benchmark name)")
    parser.add_argument("--tolerance", type=float, default=0.005, help="F1 a set may lose to its best extractor")
    parser.add_argument("--write", action="store_true", help=f"write the model trained on every set to {MODEL_PATH}")
    args = parser.parse_args(argv)
    variant(args.primary)
    sources = dict(configured_sets(args))
    if sum(1 for name in sources if name != "warc") < 2:
        raise SystemExit("leaving one set out needs at least two public sets: pass their checkouts")
    sets = load(args.pages, sources)
    loso = judge(sets, args.primary, args.tolerance)
    print(table(loso, args.primary))
    if args.write:
        model = train_model(sets, args.primary, args.tolerance, loso, sources)
        MODEL_PATH.write_text(model.to_json(), encoding="utf-8")
        print(f"wrote {MODEL_PATH}: threshold {model.threshold:.4f}")


if __name__ == "__main__":
    main()
