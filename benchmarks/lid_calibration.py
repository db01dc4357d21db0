"""FineWeb-2's per-language minimum language scores re-derived for lid.176, the identifier llm-assets ships: writes
`llm_assets/core/languages/lid176.json` and `benchmarks/results/lid-calibration.md`.

    .venv/bin/python -m benchmarks.lid_calibration [--keep 0.95] [--check]

Why: FineWeb-2 set each language's `language_score` on GlotLID's scores; lid.176 spreads its probability over more
related languages and scores the same text lower (the demo's German page: 0.793 against German's 0.821), so
FineWeb-2's values, applied to lid.176's scores, cut into the body of a language, not its tail. GlotLID has no
offline package (its model is only on the Hugging Face hub), so its own scores cannot be computed here.

Method: a labelled sample of real prose (`llm_assets_support.corpus_prose`: Debian's handbook and LibreOffice's
help, 120 documents per language, 23 languages, each document's language known from its package and confirmed by
lid.176's top label). Per language, the calibrated minimum is the score that keeps `--keep` of the sample's
documents (its lower quantile), never above FineWeb-2's own value and never below 0.3, FineWeb-2's lowest: a
threshold meant to cut a language's noisy tail keeps nearly all of its clean prose. The assumption, unmeasured:
that GlotLID at FineWeb-2's threshold keeps at least that share of such text. Languages outside the sample keep
FineWeb-2's value. `--check` recomputes and fails when the committed file differs (`make test` runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from llm_assets.core.languages import CALIBRATION
from llm_assets.core.languages import language_table as table

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "benchmarks" / "results" / "lid-calibration.md"
FLOOR = 0.3
KEEP = 0.95


def scores(texts: list[str]) -> np.ndarray:
    """lid.176's top score per text, as the language block takes it (newlines joined)."""
    from llm_assets.core.filters.language import language_model

    probs = language_model().predict([t.replace("\n", " ") for t in texts])[1]
    return np.array([p[0] for p in probs])


def calibrate(keep: float = KEEP) -> dict:
    from llm_assets_support.corpus_prose import PACKAGES, prose_documents
    from llm_assets_support.debian_docs import DEBS, fetch, package_info, unpack

    languages = {}
    for language, docs in prose_documents().items():
        found = scores(docs["text"].to_list())
        published = table()[language].overrides.get("language", {}).get("threshold")
        if published is None:
            continue
        threshold = round(float(min(published, max(FLOOR, np.quantile(found, 1 - keep, method="lower")))), 3)
        languages[language] = {"threshold": threshold, "fineweb2": published, "documents": int(found.size),
                               "kept_before": round(float((found >= published).mean()), 3),
                               "kept_after": round(float((found >= threshold).mean()), 3)}
    debs = fetch(PACKAGES, DEBS)
    sources = [package_info(p, debs[p.name], unpack(debs[p.name], DEBS / "unpacked")) for p in PACKAGES]
    return {
        "method": (f"per language, the lid.176 score that keeps {keep:.0%} of a labelled sample of real prose in the "
                   f"language, never above FineWeb-2's language_score (set on GlotLID's scores), never below {FLOOR}"),
        "assumption": "GlotLID at FineWeb-2's threshold keeps at least that share of such text (unmeasured: no "
                      "offline GlotLID)",
        "keep": keep,
        "generator": "python -m benchmarks.lid_calibration",
        "sample": {"corpus": "llm_assets_support/corpus_prose.py", "documents_per_language": 120,
                   "packages": [{"name": s.name, "version": s.version, "sha256": s.sha256, "licence": s.licence}
                                for s in sources]},
        "languages": languages,
    }


def report(data: dict) -> str:
    rows = [f"| {lang} | {r['documents']} | {r['fineweb2']:.3f} | {r['threshold']:.3f} | "
            f"{100 * r['kept_before']:.1f}% | {100 * r['kept_after']:.1f}% |" for lang, r in data["languages"].items()]
    return "\n".join([
        "# lid.176's minimum scores per language, re-derived from FineWeb-2's", "",
        f"Written by `{data['generator']}` on {datetime.now(timezone.utc):%Y-%m-%d}; the method, the sample and "
        "the assumption are in `llm_assets/core/languages/lid176.json` and the module's docstring.", "",
        f"Method: {data['method']}.", "", f"Assumption: {data['assumption']}.", "",
        "Kept: the share of the sample's documents (all in the language, by their package and lid.176's top label) "
        "at or above the threshold, with FineWeb-2's value (before) and the calibrated one (after).", "",
        "| language | documents | FineWeb-2 (GlotLID) | lid.176 | kept before | kept after |",
        "|---|--:|--:|--:|--:|--:|", *rows, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=float, default=KEEP)
    parser.add_argument("--check", action="store_true", help="fail when the committed thresholds differ")
    args = parser.parse_args(argv)
    data = calibrate(args.keep)
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        committed = json.loads(CALIBRATION.read_text())
        if committed["languages"] != data["languages"]:
            print(f"{CALIBRATION} differs from its recomputation: run {data['generator']}", file=sys.stderr)
            return 1
        return 0
    CALIBRATION.write_text(text)
    REPORT.write_text(report(data))
    print(f"{CALIBRATION}: {len(data['languages'])} languages; {REPORT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
