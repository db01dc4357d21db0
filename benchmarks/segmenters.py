"""Word segmenters: what each costs (CPU-seconds per MB of text, words per CPU-second, first load) and how well it
agrees with datatrove 0.10.1's word tokenizer for the same language (FineWeb-2's), ours against datatrove's on the
same documents: the Universal Declaration of Human Rights, one document per paragraph, in each language
(shared data `text/nltk-data__udhr2.zip`), repeated to about `--kb` KB per language and split in batches of one
copy (so that no batch sees a paragraph twice), one core, ours and theirs interleaved round by round (A B A B).
Japanese also has MeCab (fugashi on UniDic-lite) and Korean Kiwi's default model, the candidates not picked.

    taskset -c 1 .venv/bin/python -m benchmarks.segmenters [--rounds 3] [--kb 300] [--no-write] [--json PATH]
    make bench-segmenters

The table goes to benchmarks/results/segmenters.md, a row per family to BENCHMARKS.md's summary table.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import polars as pl

from benchmarks.summary import ROOT, Row, publish
from llm_assets.core import segment
from llm_assets_support.shared_data import SHARED_DATA

# language -> (UDHR file, datatrove's key, family)
LANGUAGES = {
    "zh": ("cmn_hans", "cmn_Hani", "Chinese (jieba)"),
    "ja": ("jpn", "jpn_Jpan", "Japanese (Sudachi A)"),
    "ko": ("kor", "kor_Hang", "Korean (Kiwi)"),
    "th": ("tha", "tha_Thai", "Thai (newmm)"),
    "en": ("eng", "eng_Latn", "spaced: spaCy"),
    "de": ("deu", "deu_Latn", "spaced: spaCy"),
    "fr": ("fra", "fra_Latn", "spaced: spaCy"),
    "ru": ("rus", "rus_Cyrl", "spaced: spaCy"),
    "ar": ("arb", "arb_Arab", "spaced: spaCy"),
    "hi": ("hin", "hin_Deva", "Hindi (IndicNLP rules)"),
}


@dataclass
class Result:
    language: str
    segmenter: str
    mb: float
    words: int
    cpu_s: list[float]  # per round
    load_cpu_s: float
    agreement: float  # with datatrove's tokenizer, Dice over word multisets

    @property
    def best(self) -> float:
        return min(self.cpu_s)

    def summary(self) -> dict:
        return asdict(self) | {"cpu_s_per_mb": [c / self.mb for c in self.cpu_s],
                               "words_per_cpu_s": self.words / self.best}


def paragraphs(name: str) -> list[str]:
    with zipfile.ZipFile(SHARED_DATA / "text" / "nltk-data__udhr2.zip") as z:
        text = z.read(f"udhr2/{name}.txt").decode()
    return [line.strip() for line in text.splitlines() if line.strip()]


def agreement(ours: list[list[str]], theirs: list[list[str]]) -> float:
    same = total = 0
    for a, b in zip(ours, theirs, strict=True):
        same += sum((collections.Counter(a) & collections.Counter(b)).values())
        total += len(a) + len(b)
    return 2 * same / total if total else 1.0


def _fugashi() -> Callable[[list[str]], list[list[str]]]:
    import fugashi

    tagger = fugashi.Tagger()
    return lambda texts: [[w.surface for w in tagger(t)] for t in texts]


def _kiwi_knlm() -> Callable[[list[str]], list[list[str]]]:
    import warnings

    from kiwipiepy import Kiwi

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiwi = Kiwi(model_type="knlm", num_workers=1)
    return lambda texts: [[t[s.start:s.end] for s in kiwi.tokenize(t)] for t in texts]


def candidates(language: str, key: str) -> dict[str, Callable[[], Callable[[list[str]], list[list[str]]]]]:
    """name -> a loader returning a batch splitter."""
    def ours():
        split = segment.words_column
        split(pl.Series(["warm"]), language)  # loads the segmenter: its cost is the load column
        return lambda texts: split(pl.Series(texts, dtype=pl.String), language).to_list()

    def datatroves():
        from datatrove.utils.word_tokenizers import load_word_tokenizer

        tokenizer = load_word_tokenizer(key)
        tokenizer.word_tokenize("warm")
        return lambda texts: [tokenizer.word_tokenize(t) for t in texts]

    out = {"ours": ours, "datatrove": datatroves}
    if language == "ja":
        out["fugashi (UniDic-lite)"] = _fugashi
    if language == "ko":
        out["Kiwi, knlm model"] = _kiwi_knlm
    return out


def measure(language: str, kb: int, rounds: int) -> list[Result]:
    name, key, _ = LANGUAGES[language]
    batch = paragraphs(name)
    copies = max(1, round(kb * 1000 / sum(len(p.encode()) for p in batch)))
    mb = copies * sum(len(p.encode()) for p in batch) / 1e6
    splitters, loads, words = {}, {}, {}
    for label, load in candidates(language, key).items():
        start = time.process_time()
        splitters[label] = load()
        loads[label] = time.process_time() - start
        words[label] = splitters[label](batch)
    cpu: dict[str, list[float]] = {label: [] for label in splitters}
    for _ in range(rounds):  # interleaved: ours, theirs, (candidate), ours, theirs, ...
        for label, split in splitters.items():
            start = time.process_time()
            for _ in range(copies):
                split(batch)
            cpu[label].append(time.process_time() - start)
    return [Result(language, label, mb, copies * sum(map(len, words[label])), cpu[label], loads[label],
                   agreement(words[label], words["datatrove"])) for label in splitters]


def table(results: list[Result]) -> list[str]:
    lines = ["| language | segmenter | agreement with datatrove | CPU-s per MB (min / median / max) | "
             "words per CPU-s | first load CPU-s | vs datatrove |", "|---|---|--:|--:|--:|--:|--:|"]
    by_language: dict[str, dict[str, Result]] = collections.defaultdict(dict)
    for r in results:
        by_language[r.language][r.segmenter] = r
    for language, rs in by_language.items():
        theirs = rs["datatrove"].best
        for label, r in rs.items():
            per_mb = [c / r.mb for c in r.cpu_s]
            lines.append(f"| {language} ({LANGUAGES[language][2]}) | {label} | {r.agreement:.4f} | "
                         f"{min(per_mb):.3f} / {statistics.median(per_mb):.3f} / {max(per_mb):.3f} | "
                         f"{r.words / r.best:,.0f} | {r.load_cpu_s:.2f} | {theirs / r.best:.1f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose rows are replaced (default BENCHMARKS.md); the table goes to "
                             "benchmarks/results/segmenters.md beside it")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kb", type=int, default=300, help="text per language and segmenter and round, KB")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    args = parser.parse_args()
    results = [r for language in args.languages.split(",") for r in measure(language, args.kb, args.rounds)]
    lines = table(results)
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.summary() for r in results], indent=1))
    if not args.no_write:
        write(args.output, results, f"{args.rounds} interleaved rounds of about {args.kb} KB per language, one core")


def write(output: Path, results: list[Result], how: str) -> None:
    """The table into benchmarks/results/segmenters.md beside `output`, a row per family into its summary."""
    body = (f"## The latest run\n\n`make bench-segmenters` ({how}), {time.strftime('%Y-%m-%d', time.gmtime())}:\n\n"
            + "\n".join(table(results)))
    rows = []
    # one row for every segmenter: the table per language and candidate is in segmenters.md
    ours = {r.language: r for r in results if r.segmenter == "ours"}
    theirs = {r.language: r for r in results if r.segmenter == "datatrove"}
    dedicated = [lang for lang in ("zh", "ja", "ko", "th", "hi") if lang in ours and lang in theirs]
    spaced = [lang for lang, r in ours.items() if LANGUAGES[lang][2].startswith("spaced") and lang in theirs]
    if dedicated or spaced:
        parts = [f"{lang} {ours[lang].best / ours[lang].mb:.2f} ({theirs[lang].best / theirs[lang].mb:.2f})"
                 for lang in dedicated]
        if spaced:
            speedup = statistics.median(theirs[lang].best / ours[lang].best for lang in spaced)
            parts.append(f"spaced languages {speedup:.1f}× faster (median)")
        rows.append(Row("segmenters", "Word segmentation vs datatrove's word tokenizers: CPU-s per MB, ours "
                        "(datatrove's); the lowest word agreement", ", ".join(parts) + "; agreement ≥ "
                        f"{min(r.agreement for r in ours.values()):.4f}", "make bench-segmenters", "segmenters.md"))
    publish(output, "segmenters", "<!-- segmenters-run:begin -->", "<!-- segmenters-run:end -->", body, rows)


if __name__ == "__main__":
    main()
