"""Main-text quality and speed of the extractors (`llm_assets.core.extract`) on public extraction benchmarks with
ground truth, and their agreement with the trafilatura path (FineWeb's settings) on the shared WARC pages.

Sets (each is optional; pass a checkout by option or environment variable):

Each set is read at run time from its own checkout; none is copied here. The repositories' licences cover them; the
pages inside belong to their authors.

* ``scrapinghub``: github.com/scrapinghub/article-extraction-benchmark (MIT), 181 news/blog pages with a hand-made
  ``articleBody``. Scored with that benchmark's own metric (evaluate.py): token 4-gram shingles, precision and
  recall per page normalised so long pages do not weigh more, averaged over pages; F1 from the two means.
* ``readability``: github.com/mozilla/readability (Apache-2.0), ``test/test-pages/*/source.html`` with
  ``expected.html`` (the article as readability extracts it, checked by hand when a test is added); the expected
  HTML's text is the ground truth, scored with the same shingle metric.
* ``trafilatura``: github.com/adbar/trafilatura (Apache-2.0), ``tests/evaldata.json`` with ``tests/cache`` +
  ``tests/eval``: ~1,000 pages in many languages, each with up to 6 snippets that must be in the main text
  ("with") and up to 6 that must not ("without"); scored as that repository's evaluation scores it
  (whitespace-normalised substring matches counted over the whole set, F1 = 2tp / (2tp + fp + fn)).
  trafilatura's authors built this set to evaluate trafilatura: it favours it. No full ground-truth text: no
  ROUGE-LSum.
* ``newspaper4k``: github.com/AndyTheFactory/newspaper4k (MIT), ``tests/data/html/X.html`` with the text its tests
  expect (``tests/data/txt/X.txt``, newspaper4k's own extraction checked by its authors: it favours
  newspaper-style article bodies), 23 pages in 12 languages.
* ``cleanportaleval``: github.com/ppke-nlpg/CleanPortalEval (no licence stated: read as test input, never
  redistributed), 71 pages of 5 news portals with hand-cleaned text in CleanEval's format; several pages a host.

Every set with a ground-truth text is also scored with token-level ROUGE-LSum F1 (``rouge_lsum``: lines as
sentences, the union LCS of each truth line over the extracted lines; mean over pages).

Names: an extractor of ``llm_assets.core.extract``, a trafilatura preset in brackets (``trafilatura[recall]``;
the plain name is FineWeb's preset), ``routed`` (the documents stage's default routing) and ``routed[model]``
(with its quality model).

Checkouts (the commits the figures in BENCHMARKS.md were measured at)::

    git clone https://github.com/scrapinghub/article-extraction-benchmark /tmp/extraction-bench/scrapinghub
    git -C /tmp/extraction-bench/scrapinghub checkout 4a3bc979f76c0df73cb95fe272e2fc1b96f9f010
    git clone https://github.com/mozilla/readability /tmp/extraction-bench/readability
    git -C /tmp/extraction-bench/readability checkout ab4027a8b37669745016869a37a504727992b2ba
    git clone https://github.com/adbar/trafilatura /tmp/extraction-bench/trafilatura
    git -C /tmp/extraction-bench/trafilatura checkout e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5
    git clone https://github.com/AndyTheFactory/newspaper4k /tmp/extraction-bench/newspaper4k
    git -C /tmp/extraction-bench/newspaper4k checkout 540bff3e8344cb8291c4829fafd98860f30d9692
    git clone https://github.com/ppke-nlpg/CleanPortalEval /tmp/extraction-bench/cleanportaleval
    git -C /tmp/extraction-bench/cleanportaleval checkout 517726d64d8ded8846bf27ae2808853b1cd0ffe8

    EXTRACTION_BENCH_SCRAPINGHUB=/tmp/extraction-bench/scrapinghub \\
    EXTRACTION_BENCH_READABILITY=/tmp/extraction-bench/readability \\
    EXTRACTION_BENCH_TRAFILATURA=/tmp/extraction-bench/trafilatura \\
    EXTRACTION_BENCH_NEWSPAPER4K=/tmp/extraction-bench/newspaper4k \\
    EXTRACTION_BENCH_CLEANPORTALEVAL=/tmp/extraction-bench/cleanportaleval \\
        make bench-extraction-quality

Speed is pages per CPU-second of this process (``time.process_time``: steady whatever else the machine runs),
extractors interleaved page by page so that a change of load hits them alike; ``extract_html`` is called as the
documents unit calls it, without a time limit. The shared WARC pages are every 2xx HTML page that ``read_records``
yields from ../shared/data/warc; there, quality is agreement with the trafilatura path (the same shingle metric,
the trafilatura path's text taken as the truth).

``routed`` is the documents stage's default (``extract.Router`` with the default ``Routing``, each set one work
unit): beside its F1 and speed, the share of pages it sent to resiliparse, why, and those pages' token F1 (bags of
words) against trafilatura's text of the same pages. The sweep (``--no-sweep`` skips it) simulates every routing
setting of ``SWEEP_*`` from each page's measured trafilatura and resiliparse text and CPU, and marks the one
``best_routing`` picks: the defaults of ``Routing`` come from it.

``measure(extractors, sets)`` is the entry point for other benchmarks; ``--json FILE`` writes its result. The table
goes below the notes of benchmarks/results/extraction-quality.md, each extractor's F1 to a row of BENCHMARKS.md's
summary table (``--no-write``: printed only).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.summary import ROOT, Row, publish
from llm_assets.core.documents import DocumentsSettings
from llm_assets.core.extract import (
    DEFAULT_PRESET,
    EXTRACTORS,
    PRESETS,
    ROUTED,
    Router,
    Routing,
    extract_html,
    host_of,
    warm_up,
)

SHARED_WARC = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "warc"

SOURCES = {
    "scrapinghub": ("EXTRACTION_BENCH_SCRAPINGHUB", "https://github.com/scrapinghub/article-extraction-benchmark",
                    "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010"),
    "readability": ("EXTRACTION_BENCH_READABILITY", "https://github.com/mozilla/readability",
                    "ab4027a8b37669745016869a37a504727992b2ba"),
    "trafilatura": ("EXTRACTION_BENCH_TRAFILATURA", "https://github.com/adbar/trafilatura",
                    "e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5"),
    "newspaper4k": ("EXTRACTION_BENCH_NEWSPAPER4K", "https://github.com/AndyTheFactory/newspaper4k",
                    "540bff3e8344cb8291c4829fafd98860f30d9692"),
    "cleanportaleval": ("EXTRACTION_BENCH_CLEANPORTALEVAL", "https://github.com/ppke-nlpg/CleanPortalEval",
                        "517726d64d8ded8846bf27ae2808853b1cd0ffe8"),
}


@dataclass
class Page:
    id: str
    url: str | None
    html: str
    truth: str | None = None  # ground-truth main text (shingle metric)
    with_: list[str] = field(default_factory=list)  # snippets that must be in the main text
    without: list[str] = field(default_factory=list)  # snippets that must not


# --- sets --------------------------------------------------------------------------------------------------------


def scrapinghub_pages(root: Path) -> list[Page]:
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key in sorted(truth):
        html = gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()).decode("utf-8", errors="replace")
        pages.append(Page(key, truth[key].get("url"), html, truth=truth[key].get("articleBody", "")))
    return pages


def readability_pages(root: Path) -> list[Page]:
    pages = []
    for case in sorted((root / "test" / "test-pages").iterdir()):
        source, expected = case / "source.html", case / "expected.html"
        if not (source.is_file() and expected.is_file()):
            continue
        meta = case / "expected-metadata.json"
        url = None
        if meta.is_file():
            url = json.loads(meta.read_text(encoding="utf-8")).get("url") or None
        pages.append(Page(case.name, url or f"http://fakehost/{case.name}/",
                          source.read_text(encoding="utf-8", errors="replace"),
                          truth=html_text(expected.read_text(encoding="utf-8", errors="replace"))))
    return pages


def trafilatura_pages(root: Path) -> list[Page]:
    from trafilatura.utils import decode_file

    tests = root / "tests"
    data = json.loads((tests / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url in sorted(data):
        item = data[url]
        path = next((p for p in (tests / "cache" / item["file"], tests / "eval" / item["file"]) if p.is_file()), None)
        if path is None:
            raise FileNotFoundError(f"{url}: {item['file']} is in neither tests/cache nor tests/eval")
        html = decode_file(path.read_bytes())  # the pages come without HTTP headers: charset from the bytes
        pages.append(Page(item["file"], url, html, with_=item["with"], without=item["without"]))
    return pages


def newspaper4k_pages(root: Path) -> list[Page]:
    """newspaper4k's test articles: tests/data/html/X.html with the text its tests expect (tests/data/txt/X.txt)
    and the URL from tests/data/metadata/X.json where there is one."""
    data = root / "tests" / "data"
    pages = []
    for txt in sorted((data / "txt").glob("*.txt")):
        html = data / "html" / f"{txt.stem}.html"
        if not html.is_file():
            continue
        meta = data / "metadata" / f"{txt.stem}.json"
        url = json.loads(meta.read_text(encoding="utf-8")).get("url") if meta.is_file() else None
        pages.append(Page(txt.stem, url or f"http://fakehost/{txt.stem}/",
                          html.read_text(encoding="utf-8", errors="replace"),
                          truth=txt.read_text(encoding="utf-8", errors="replace")))
    return pages


_CLEANEVAL_MARK = re.compile(r"^\s*<(?:p|h|l)>", re.MULTILINE)


def cleanportaleval_pages(root: Path) -> list[Page]:
    """CleanPortalEval: input/X.html (wrapped in CleanEval's `<text id="URL">`) with the hand-cleaned text of
    GoldStandard/X.txt, CleanEval's format (a `URL:` line, paragraphs marked `<p>`, `<h>`, `<l>`)."""
    import html as entities

    pages = []
    for gold in sorted((root / "GoldStandard").glob("*.txt")):
        source = root / "input" / f"{gold.stem}.html"
        if not source.is_file():
            continue
        lines = gold.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        url = lines[0].removeprefix("URL:").strip() if lines and lines[0].startswith("URL:") else None
        paragraphs = _CLEANEVAL_MARK.split("\n".join(lines[1:] if url else lines))
        truth = "\n".join(" ".join(entities.unescape(par).split()) for par in paragraphs if par.strip())
        pages.append(Page(gold.stem, url, source.read_text(encoding="utf-8", errors="replace"), truth=truth))
    return pages


def warc_pages(warc_dir: Path) -> list[Page]:
    """Every 2xx HTML page of the WARC files in warc_dir, as the documents unit reads them."""
    from llm_assets.core.documents import reader_settings
    from llm_assets.core.readers import ReadReport, read_records
    from llm_assets.settings import DocumentsSettings

    reader = reader_settings(DocumentsSettings())
    pages = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in read_records(f, path.name, reader, ReadReport()):
                if rec.html is not None:
                    pages.append(Page(f"{path.name}@{rec.offset}", rec.url or None, rec.html))
    return pages


LOADERS: dict[str, Callable[[Path], list[Page]]] = {
    "scrapinghub": scrapinghub_pages,
    "readability": readability_pages,
    "trafilatura": trafilatura_pages,
    "newspaper4k": newspaper4k_pages,
    "cleanportaleval": cleanportaleval_pages,
    "warc": warc_pages,
}

_BLOCK_TAGS = frozenset("""address article aside blockquote body br dd details dialog div dl dt fieldset figcaption
figure footer form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section summary table td th tr ul""".split())


def html_text(html: str) -> str:
    """The text of an HTML fragment, block elements on lines of their own (so that their words do not run
    together)."""
    import lxml.html

    root = lxml.html.fromstring(html)
    parts: list[str] = []

    def walk(el) -> None:
        if not isinstance(el.tag, str) or el.tag in ("script", "style"):
            if el.tail:
                parts.append(el.tail)
            return
        block = el.tag in _BLOCK_TAGS
        if block:
            parts.append("\n")
        if el.text:
            parts.append(el.text)
        for child in el:
            walk(child)
        if block:
            parts.append("\n")
        if el.tail:
            parts.append(el.tail)

    walk(root)
    return re.sub(r"\n\s*\n+", "\n", "".join(parts)).strip()


# --- metrics -----------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\w+", re.UNICODE)


def _shingles(text: str, n: int = 4) -> Counter:
    tokens = _TOKEN.findall(text or "")
    return Counter(tuple(tokens[i: i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i: i + n])


def shingle_counts(truth: str, pred: str) -> tuple[float, float, float]:
    """(tp, fp, fn) over token 4-gram shingles, normalised to sum 1 (scrapinghub's evaluate.py)."""
    t, p = _shingles(truth), _shingles(pred)
    tp = fp = fn = 0.0
    for key in t.keys() | p.keys():
        tc, pc = t.get(key, 0), p.get(key, 0)
        tp += min(tc, pc)
        fp += max(0, pc - tc)
        fn += max(0, tc - pc)
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def shingle_scores(counts: list[tuple[float, float, float]]) -> dict[str, float]:
    """Mean precision and recall over pages, F1 of the two means (scrapinghub's evaluate.py)."""
    def precision(tp: float, fp: float, fn: float) -> float:
        return 1.0 if fp == fn == 0 else 0.0 if tp == fp == 0 else tp / (tp + fp)

    def recall(tp: float, fp: float, fn: float) -> float:
        return 1.0 if fp == fn == 0 else 0.0 if tp == fn == 0 else tp / (tp + fn)

    ps = [precision(*c) for c in counts if c[0] + c[1] > 0]
    rs = [recall(*c) for c in counts if c[0] + c[2] > 0]
    p = statistics.mean(ps) if ps else 0.0
    r = statistics.mean(rs) if rs else 0.0
    return {"f1": 2 * p * r / (p + r) if p + r else 0.0, "precision": p, "recall": r}


def _sentences(text: str) -> list[list[str]]:
    return [tokens for line in (text or "").splitlines() if (tokens := _TOKEN.findall(line.lower()))]


@functools.lru_cache(maxsize=8192)
def rouge_lsum(truth: str, pred: str) -> tuple[float, float, float]:
    """Token-level ROUGE-LSum (Lin 2004, summary-level LCS, as `rouge_score`'s rougeLsum): lines are sentences,
    tokens are lower-cased words; for each sentence of the truth, the union of its tokens on a longest common
    subsequence with each line of `pred`, hits clipped by the tokens' counts. (precision, recall, F1)."""
    from rapidfuzz.distance import Indel

    ref, got = _as_strings(_sentences(truth), _sentences(pred))
    n_ref, n_got = sum(map(len, ref)), sum(map(len, got))
    if not n_ref or not n_got:
        return (1.0, 1.0, 1.0) if n_ref == n_got else (0.0, 0.0, 0.0)
    left_ref, left_got = Counter(t for s in ref for t in s), Counter(t for s in got for t in s)
    lines_with: dict[str, set[int]] = {}
    for j, sentence in enumerate(got):
        for token in sentence:
            lines_with.setdefault(token, set()).add(j)
    hits = 0
    for sentence in ref:
        union: set[int] = set()
        for j in sorted(set().union(*(lines_with.get(t, ()) for t in sentence))):
            for tag, i1, i2, _j1, _j2 in Indel.opcodes(sentence, got[j]):
                if tag == "equal":
                    union.update(range(i1, i2))
        for i in sorted(union):
            token = sentence[i]
            if left_ref[token] > 0 and left_got[token] > 0:
                hits += 1
                left_ref[token] -= 1
                left_got[token] -= 1
    p, r = hits / n_got, hits / n_ref
    return p, r, 2 * p * r / (p + r) if hits else 0.0


def _as_strings(*texts: list[list[str]]) -> list[list[str]]:
    """Each sentence as a string of one character per token (the same token, the same character), which rapidfuzz
    aligns many times faster than lists of words."""
    codes: dict[str, str] = {}

    def code(token: str) -> str:
        if token not in codes:
            n = len(codes) + 0x100
            codes[token] = chr(n + 0x800 if n >= 0xD800 else n)  # past the surrogates
        return codes[token]

    return [["".join(map(code, sentence)) for sentence in text] for text in texts]


def rouge_scores(pages: list[Page], texts: list[str]) -> dict[str, float]:
    """Mean ROUGE-LSum precision, recall and F1 over the pages of a set with a ground-truth text."""
    scores = [rouge_lsum(page.truth or "", text) for page, text in zip(pages, texts, strict=True)]
    return {key: statistics.mean(s[k] for s in scores) if scores else 0.0
            for k, key in enumerate(("rouge_precision", "rouge_recall", "rouge_f1"))}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def snippet_scores(pages: list[Page], texts: list[str]) -> dict[str, float]:
    """trafilatura's evaluation: snippets found (tp), unwanted snippets found (fp), over the whole set."""
    tp = fp = fn = 0
    for page, text in zip(pages, texts, strict=True):
        found = _norm(text)
        hits = sum(1 for s in page.with_ if _norm(s) in found)
        bad = sum(1 for s in page.without if _norm(s) in found)
        tp, fp, fn = tp + hits, fp + bad, fn + len(page.with_) - hits
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0, "precision": p, "recall": r}


def score(pages: list[Page], texts: list[str], reference: list[str] | None = None) -> dict[str, float]:
    """Quality of `texts` against the set's ground truth, or against `reference` texts (agreement)."""
    if reference is not None:
        return shingle_scores([shingle_counts(ref, text) for ref, text in zip(reference, texts, strict=True)])
    if pages and pages[0].truth is None:
        return snippet_scores(pages, texts)
    return shingle_scores([shingle_counts(page.truth or "", text) for page, text in zip(pages, texts, strict=True)])


# --- runs --------------------------------------------------------------------------------------------------------


def variant(name: str) -> tuple[str, str]:
    """(extractor, option) of a name of the benchmark: an extractor, a trafilatura extractor with a preset in
    brackets ("trafilatura[recall]"; the plain name is FineWeb's preset, the documents' default), or "routed[model]"
    (routing with `quality_model` on)."""
    extractor, _, option = name.partition("[")
    option = option.removesuffix("]")
    if extractor == ROUTED:
        if option not in ("", "model"):
            raise ValueError(f"{name}: routed takes [model] only")
        return extractor, option
    return extractor, option or DEFAULT_PRESET


def router(name: str) -> Router:
    """The documents stage's default routing for "routed", with its quality model for "routed[model]"."""
    return Router(Routing(quality_model=variant(name)[1] == "model"), DocumentsSettings().trafilatura_preset)


def run(pages: list[Page], extractors: list[str]
        ) -> tuple[dict[str, list[str]], dict[str, list[float]], dict[str, list[str | None]]]:
    """Each extractor's text per page (empty when it finds none) and CPU seconds per page, extractors interleaved
    page by page, and per routed variant why it sent each page to the fast extractor (None: it did not). "routed"
    is the documents stage's routed path with the default `Routing`, the set taken as one work unit
    (`extract.Router`)."""
    for name in {*EXTRACTORS, *(variant(x)[0] for x in extractors)} - {ROUTED}:  # imports, lazy state: not timed
        warm_up(name)
    routers = {name: router(name) for name in extractors if variant(name)[0] == ROUTED}
    routes: dict[str, list[str | None]] = {name: [] for name in routers}
    texts: dict[str, list[str]] = {name: [] for name in extractors}
    cpu: dict[str, list[float]] = {name: [] for name in extractors}
    for page in pages:
        for name in extractors:
            start = time.process_time()
            if name in routers:
                routed = routers[name].extract(page.html, page.url, timeout_s=30.0)
                result = routed.result
                routes[name].append(routed.reason)
            else:
                extractor, preset = variant(name)
                result = extract_html(page.html, page.url, extractor=extractor, preset=preset)
            cpu[name].append(time.process_time() - start)
            texts[name].append(result.text if result is not None else "")
    return texts, cpu, routes


def measure(extractors: list[str], sets: dict[str, Path], reference: str = "trafilatura", sweep: bool = False,
            pages_out: Path | None = None) -> dict:
    """Per set and extractor: f1, precision, recall, pages, CPU seconds, pages per CPU-second and the speed-up
    over `reference`. Sets are named as in LOADERS ("warc": a directory of WARC files); on "warc", quality is
    agreement with `reference`, which is then run too. With "routed" among the extractors: the pages it routed
    to the fast extractor per reason, and their token F1 against `reference`'s text of the same pages.
    `sweep`: also the routing thresholds simulated from per-page costs (`routing_sweep`). `pages_out`: a JSON Lines
    file of each page's scores and CPU seconds per extractor (what `benchmarks.routing_model` learns from)."""
    result: dict = {"extractors": list(extractors), "reference": reference, "sets": {}}
    per_page: dict[str, tuple[list[Page], dict[str, list[str]], dict[str, list[float]]]] = {}
    for set_name, path in sets.items():
        pages = LOADERS[set_name](Path(path))
        names = list(dict.fromkeys([reference, *extractors, *(["resiliparse"] if sweep else [])]))
        texts, per_page_cpu, routes = run(pages, names)
        cpu = {name: sum(values) for name, values in per_page_cpu.items()}
        per_page[set_name] = (pages, texts, per_page_cpu)
        rows = {}
        if pages_out is not None:
            write_pages(pages_out, set_name, pages, texts, per_page_cpu, reference)
        for name in names:
            quality = score(pages, texts[name], texts[reference] if set_name == "warc" else None)
            if set_name != "warc" and pages and pages[0].truth is not None:
                quality |= rouge_scores(pages, texts[name])
            rows[name] = {**quality, "pages": len(pages), "pages_with_text": sum(1 for t in texts[name] if t),
                          "cpu_s": cpu[name], "pages_per_cpu_s": len(pages) / cpu[name] if cpu[name] else 0.0,
                          "speedup": cpu[reference] / cpu[name] if cpu[name] else 0.0}
            if name in routes:
                away = [i for i, why in enumerate(routes[name]) if why]
                rows[name]["routed_away"] = dict(Counter(routes[name][i] for i in away))
                rows[name]["routed_share"] = len(away) / len(pages) if pages else 0.0
                rows[name]["routed_token_f1"] = mean_token_f1([texts[reference][i] for i in away],
                                                              [texts[name][i] for i in away])
        result["sets"][set_name] = {"path": str(path), "quality": "agreement" if set_name == "warc" else "truth",
                                    "extractors": rows}
    if sweep:
        result["sweep"] = routing_sweep(per_page, reference)
    return result


def write_pages(path: Path, set_name: str, pages: list[Page], texts: dict[str, list[str]],
                cpu: dict[str, list[float]], reference: str) -> None:
    """Append a set's pages to `path`: per extractor, the terms the set's score sums (shingle or snippet counts),
    the page's ROUGE-LSum F1 where there is a ground-truth text, its CPU seconds and text length."""
    with open(path, "a", encoding="utf-8") as out:
        for i, page in enumerate(pages):
            row: dict = {"set": set_name, "id": page.id, "url": page.url, "extractors": {}}
            for name, got in texts.items():
                text = got[i]
                if set_name == "warc":
                    terms: tuple = shingle_counts(texts[reference][i], text)
                elif page.truth is None:
                    terms = _snippets(page, text)
                else:
                    terms = shingle_counts(page.truth, text)
                row["extractors"][name] = {
                    "terms": terms, "cpu_s": cpu[name][i], "chars": len(text),
                    "rouge_f1": rouge_lsum(page.truth, text)[2] if page.truth is not None else None}
            out.write(json.dumps(row) + "\n")


# --- routing thresholds ------------------------------------------------------------------------------------------


def token_f1(reference: str, text: str) -> float:
    """F1 of the bags of word tokens of `text` against `reference` (1.0 when both are empty)."""
    ref, got = Counter(_TOKEN.findall(reference or "")), Counter(_TOKEN.findall(text or ""))
    common = sum((ref & got).values())
    if not ref and not got:
        return 1.0
    return 2 * common / (sum(ref.values()) + sum(got.values()))


def mean_token_f1(references: list[str], texts: list[str]) -> float | None:
    scores = [token_f1(r, t) for r, t in zip(references, texts, strict=True)]
    return statistics.mean(scores) if scores else None


SWEEP_CHARS: tuple[int | None, ...] = (None, 100_000, 200_000, 300_000, 500_000)
SWEEP_TAGS: tuple[int | None, ...] = (None, 2_000, 5_000, 10_000, 20_000)
SWEEP_BUDGETS: tuple[float | None, ...] = (None, 0.1, 0.25, 0.5, 1.0)
SWEEP_HOSTS: tuple[int | None, ...] = (None, 1, 2)


def _routes(pages: list[Page], cpu: list[float], routing: Routing) -> list[str | None]:
    """Why each page would go to the fast extractor under `routing`, from the primary's measured cost per page (a
    page costing more than the budget goes over it), in set order as one unit."""
    router = Router(routing)
    reasons: list[str | None] = []
    for page, cost in zip(pages, cpu, strict=True):
        html = page.html[:DocumentsSettings().max_html_chars]
        host = host_of(page.url)
        reason = router.route(html, host)
        if reason is None and routing.budget_s is not None and cost > routing.budget_s:
            reason = "budget"
            if host:
                router.overruns[host] += 1
        reasons.append(reason)
    return reasons


def routing_sweep(per_page: dict[str, tuple[list[Page], dict[str, list[str]], dict[str, list[float]]]],
                  primary: str) -> list[dict]:
    """Every combination of SWEEP_* thresholds, simulated from the per-page texts and CPU seconds of the primary
    and the fast extractor: a page routed away costs the fast extractor's time (plus the budget when the budget
    routed it), and gets the fast extractor's text. F1 per set (agreement with the primary on "warc"), CPU
    seconds, share routed away and the token F1 of the routed pages against the primary's text."""
    def terms(set_name: str, pages: list[Page], reference: list[str], texts: list[str]) -> list:
        """Per page, what the set's score sums (shingle counts, or snippet counts on trafilatura's set)."""
        if set_name == "warc":
            return [shingle_counts(ref, text) for ref, text in zip(reference, texts, strict=True)]
        if pages and pages[0].truth is None:
            return [_snippets(page, text) for page, text in zip(pages, texts, strict=True)]
        return [shingle_counts(page.truth or "", text) for page, text in zip(pages, texts, strict=True)]

    pre = {set_name: tuple(terms(set_name, pages, texts[primary], texts[name]) for name in (primary, "resiliparse"))
           for set_name, (pages, texts, _) in per_page.items()}
    rows = []
    for chars, tags, budget, hosts in itertools.product(SWEEP_CHARS, SWEEP_TAGS, SWEEP_BUDGETS, SWEEP_HOSTS):
        if hosts is not None and budget is None:
            continue
        routing = Routing(primary=primary, max_chars=chars, max_tags=tags, budget_s=budget, host_overruns=hosts)
        row: dict = {"max_chars": chars, "max_tags": tags, "budget_s": budget, "host_overruns": hosts, "sets": {}}
        for set_name, (pages, texts, cpu) in per_page.items():
            reasons = _routes(pages, cpu[primary], routing)
            prim, fast = pre[set_name]
            terms = [fast[i] if why else prim[i] for i, why in enumerate(reasons)]
            cost = sum(cpu["resiliparse"][i] + (budget or 0.0 if why == "budget" else 0.0) if why else cpu[primary][i]
                       for i, why in enumerate(reasons))
            snippets = set_name != "warc" and bool(pages) and pages[0].truth is None
            f1 = _snippet_f1(terms) if snippets else shingle_scores(terms)["f1"]
            away = [i for i, why in enumerate(reasons) if why]
            row["sets"][set_name] = {
                "f1": f1, "cpu_s": cost, "speedup": sum(cpu[primary]) / cost if cost else 0.0,
                "routed_share": len(away) / len(pages) if pages else 0.0,
                "routed_away": dict(Counter(reasons[i] for i in away)),
                "routed_token_f1": mean_token_f1([texts[primary][i] for i in away],
                                                 [texts["resiliparse"][i] for i in away]),
            }
        rows.append(row)
    return rows


def _snippets(page: Page, text: str) -> tuple[int, int, int]:
    found = _norm(text)
    hits = sum(1 for s in page.with_ if _norm(s) in found)
    return hits, sum(1 for s in page.without if _norm(s) in found), len(page.with_) - hits


def _snippet_f1(terms: list) -> float:
    tp, fp, fn = (sum(t[k] for t in terms) for k in range(3))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


# Agreement with the primary on the shared WARC pages a setting must keep: the public sets hold one page per host,
# so they cannot judge the host rule, which on a one-host crawl sends most pages away after one overrun.
MIN_WARC_AGREEMENT = 0.98
# Settings within this share of the fastest one's CPU count as equally fast; of those, the one of best F1 on the
# public sets wins, then the largest budget (CPU time varies with load: a larger budget leaves fewer pages to it,
# and a budget at all bounds what a page the other rules miss can cost), then the fewest rules.
SPEED_TIE = 0.02


def acceptable(row: dict, reference_f1: dict[str, float], tolerance: float = 0.005) -> bool:
    """F1 within `tolerance` of the primary's on every public set, and agreement on the WARC pages kept."""
    sets = row["sets"]
    return (all(sets[s]["f1"] >= f1 - tolerance for s, f1 in reference_f1.items() if s in sets)
            and sets.get("warc", {}).get("f1", 1.0) >= MIN_WARC_AGREEMENT)


def _cpu(row: dict, by: str) -> tuple[float, float]:
    return (row["sets"][by]["cpu_s"] if by in row["sets"] else 0.0, sum(d["cpu_s"] for d in row["sets"].values()))


def best_routing(sweep: list[dict], reference_f1: dict[str, float], by: str = "warc") -> dict | None:
    """Of the acceptable rows within SPEED_TIE of the fastest on the `by` set: the best worst-set F1 difference
    with the primary, then the largest budget, then the fewest rules."""
    ok = sorted((row for row in sweep if acceptable(row, reference_f1)), key=lambda row: _cpu(row, by))
    if not ok:
        return None
    tied = [row for row in ok if _cpu(row, by)[0] <= _cpu(ok[0], by)[0] * (1 + SPEED_TIE)]

    def merit(row: dict) -> tuple:
        worst = min((row["sets"][s]["f1"] - f1 for s, f1 in reference_f1.items() if s in row["sets"]), default=0.0)
        rules = sum(row[k] is not None for k in ("max_chars", "max_tags", "budget_s", "host_overruns"))
        return round(worst, 3), row["budget_s"] is not None, row["budget_s"] or 0.0, -rules

    return max(tied, key=merit)


def configured_sets(args: argparse.Namespace) -> Iterator[tuple[str, Path]]:
    for name, (env, url, commit) in SOURCES.items():
        value = getattr(args, name) or os.environ.get(env)
        if not value:
            print(f"{name}: skipped; check out {url} at {commit} and pass --{name} DIR or {env}=DIR",
                  file=sys.stderr)
            continue
        yield name, Path(value)
    if args.warc_dir.is_dir():
        yield "warc", args.warc_dir


def table(result: dict) -> str:
    lines = ["| set | extractor | F1 | precision | recall | ROUGE-LSum F1 | pages with text | pages per CPU-s "
             "| speed-up | routed away (why) | routed pages' token F1 vs trafilatura |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|---|--:|"]
    for set_name, data in result["sets"].items():
        label = f"{set_name} (agreement)" if data["quality"] == "agreement" else set_name
        for name, row in data["extractors"].items():
            rouge = f"{row['rouge_f1']:.3f}" if "rouge_f1" in row else "–"
            lines.append(f"| {label} | {name} | {row['f1']:.3f} | {row['precision']:.3f} | {row['recall']:.3f} | "
                         f"{rouge} | "
                         f"{row['pages_with_text']} of {row['pages']} | {row['pages_per_cpu_s']:.1f} | "
                         f"{row['speedup']:.2f}x | {_routed_cells(row)} |")
    if result.get("sweep"):
        lines += ["", sweep_table(result)]
    return "\n".join(lines)


def _routed_cells(row: dict) -> str:
    if "routed_share" not in row:
        return " |"
    why = ", ".join(f"{k} {n}" for k, n in sorted(row["routed_away"].items())) or "none"
    f1 = row.get("routed_token_f1")
    return f"{row['routed_share']:.1%} ({why}) | {'–' if f1 is None else f'{f1:.3f}'}"


def reference_f1(result: dict) -> dict[str, float]:
    """The primary extractor's F1 on each public set (ground truth)."""
    return {s: d["extractors"][result["reference"]]["f1"] for s, d in result["sets"].items()
            if d["quality"] == "truth"}


def sweep_table(result: dict, top: int = 15) -> str:
    """The acceptable settings of the sweep, fastest on the WARC pages first (`top` of them), the chosen one
    marked."""
    ref = reference_f1(result)
    sets = list(result["sets"])
    ok = sorted((row for row in result["sweep"] if acceptable(row, ref)), key=lambda row: _cpu(row, "warc"))
    best = best_routing(result["sweep"], ref)
    head = "| max_chars | max_tags | budget_s | host_overruns | " + " | ".join(
        f"{s} F1 (Δ) / speed-up / routed" for s in sets) + " |"
    lines = [f"Routing sweep: {len(ok)} of {len(result['sweep'])} settings keep F1 within 0.005 of "
             f"{result['reference']} on every public set and agreement ≥ {MIN_WARC_AGREEMENT} on the WARC pages; "
             f"the fastest on the WARC pages (**chosen**: within {SPEED_TIE:.0%} of the fastest, the best F1, "
             "then the largest budget, then the fewest rules):", "", head, "|" + "--:|" * (4 + len(sets))]
    for row in ok[:top]:
        mark = "**" if row is best else ""
        cells = []
        for s in sets:
            d = row["sets"][s]
            delta = d["f1"] - ref[s] if s in ref else d["f1"] - 1.0
            cells.append(f"{d['f1']:.3f} ({delta:+.3f}) / {d['speedup']:.2f}x / {d['routed_share']:.1%}")
        lines.append(f"| {mark}{row['max_chars']} | {row['max_tags']} | {row['budget_s']} | "
                     f"{row['host_overruns']}{mark} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The arguments `make bench-extraction-quality` passes: a run with them is published as that command.
MAKE_ARGS = ["--json", ".bench/extraction_quality.json", "--pages", ".bench/extraction_pages.jsonl"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, (env, url, _commit) in SOURCES.items():
        parser.add_argument(f"--{name}", metavar="DIR", help=f"checkout of {url} (default: ${env})")
    parser.add_argument("--warc-dir", type=Path, default=SHARED_WARC, help=f"WARC files (default {SHARED_WARC})")
    every = (ROUTED, f"{ROUTED}[model]", *EXTRACTORS, *(f"trafilatura[{p}]" for p in PRESETS if p != DEFAULT_PRESET))
    parser.add_argument("--extractors", default=",".join(every),
                        help=f"comma-separated (default: all, {','.join(every)})")
    parser.add_argument("--no-sweep", action="store_true", help="skip the routing thresholds' sweep")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    parser.add_argument("--pages", type=Path, metavar="FILE",
                        help="also write each page's scores per extractor as JSON Lines (replaced)")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose rows are replaced (default BENCHMARKS.md); the table goes to "
                             "benchmarks/results/extraction-quality.md beside it, below the notes there")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    if args.pages:
        args.pages.parent.mkdir(parents=True, exist_ok=True)
        args.pages.unlink(missing_ok=True)
    result = measure(args.extractors.split(","), dict(configured_sets(args)), sweep=not args.no_sweep,
                     pages_out=args.pages)
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if not args.no_write:
        given = sys.argv[1:] if argv is None else argv
        command = "make bench-extraction-quality" if given == MAKE_ARGS else \
            " ".join([".venv/bin/python -m benchmarks.extraction_quality", *given])
        body = (f"## The latest run\n\n`{command}`, {time.strftime('%Y-%m-%d', time.gmtime())}:\n\n{table(result)}")
        publish(args.output, "extraction-quality", "<!-- extraction-quality-run:begin -->",
                "<!-- extraction-quality-run:end -->", body, summary(result, command))


def summary(result: dict, command: str) -> list[Row]:
    """The rows of BENCHMARKS.md's summary table: F1 on each set with ground truth and pages per CPU-second over them
    all, of the trafilatura presets, of the other extractors, of the routed default (judged against the bar: within
    TOLERANCE of the best single extractor on every set, at SPEED_BAR x trafilatura's pages per CPU-second) and of
    routing with the quality model (with pages per CPU-second on the WARC pages too)."""
    truth = {name: d for name, d in result["sets"].items() if d["quality"] == "truth"}
    if not truth:
        return []
    sets = list(truth.values())
    measured = result["extractors"]
    singles = [x for x in measured if variant(x)[0] != ROUTED]
    best = {s: max(d["extractors"][x]["f1"] for x in singles) for s, d in truth.items()}

    def speed(x: str, of: list[dict]) -> float:
        cpu = sum(d["extractors"][x]["cpu_s"] for d in of)
        return sum(d["extractors"][x]["pages"] for d in of) / cpu if cpu else 0.0

    def figures(x: str) -> str:
        warc = f", WARC {speed(x, [result['sets']['warc']]):.1f}" if "warc" in result["sets"] else ""
        return (" / ".join(f"{d['extractors'][x]['f1']:.3f}" for d in sets)
                + f" ({speed(x, sets):.1f}{warc if variant(x)[0] == ROUTED else ''})")

    what = f"main-text F1 {'/'.join(truth)} (pages per CPU-s)"
    presets = [x for x in singles if variant(x)[0] == "trafilatura"]
    groups = {"presets": (f"{what}, trafilatura's presets", presets),
              "extractors": (f"{what}, other extractors", [x for x in singles if x not in presets]),
              ROUTED: (f"{what}, `routed`", [x for x in (ROUTED, f"{ROUTED}[model]") if x in measured])}
    names_of = {ROUTED: "default", f"{ROUTED}[model]": "`quality_model` (in-sample)"}
    rows = []
    for key, (measure, names) in groups.items():
        if not names:
            continue
        current = "; ".join(f"{names_of.get(x) or f'`{variant(x)[1] if x in presets else x}`'} {figures(x)}"
                            for x in names)
        target = met = "—"
        if key == ROUTED and ROUTED in measured:
            ratio = speed(ROUTED, sets) / speed("trafilatura", sets)
            worst = min(d["extractors"][ROUTED]["f1"] - best[s] for s, d in truth.items())
            target = f"default ≤ {TOLERANCE} below the best per set, ≥ {SPEED_BAR:g}x trafilatura"
            met = "yes" if worst >= -TOLERANCE and ratio >= SPEED_BAR else f"no: {worst:+.3f}, {ratio:.2f}x"
        rows.append(Row(f"extraction-quality:{key}", measure, current, command, "extraction-quality.md", target, met))
    return rows


# The bar for the routed default: F1 within TOLERANCE of the best single extractor on every public set, at
# SPEED_BAR times trafilatura's pages per CPU-second over them.
TOLERANCE = 0.005
SPEED_BAR = 3.0


if __name__ == "__main__":
    main()
