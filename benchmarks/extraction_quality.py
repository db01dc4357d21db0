"""Main-text quality and speed of the extractors (`llm_assets.core.extract`) on public extraction benchmarks with
ground truth, and their agreement with the trafilatura path (FineWeb's settings) on the shared WARC pages.

Sets (each is optional; pass a checkout by option or environment variable):

* ``scrapinghub``: github.com/scrapinghub/article-extraction-benchmark, 181 news/blog pages with a hand-made
  ``articleBody``. Scored with that benchmark's own metric (evaluate.py): token 4-gram shingles, precision and
  recall per page normalised so long pages do not weigh more, averaged over pages; F1 from the two means.
* ``readability``: github.com/mozilla/readability, ``test/test-pages/*/source.html`` with ``expected.html`` (the
  article as readability extracts it, checked by hand when a test is added); the expected HTML's text is the
  ground truth, scored with the same shingle metric.
* ``trafilatura``: github.com/adbar/trafilatura, ``tests/evaldata.json`` with ``tests/cache`` + ``tests/eval``:
  ~1,000 pages in many languages, each with up to 6 snippets that must be in the main text ("with") and up to 6
  that must not ("without"); scored as that repository's evaluation scores it (whitespace-normalised substring
  matches counted over the whole set, F1 = 2tp / (2tp + fp + fn)). trafilatura's authors built this set to
  evaluate trafilatura: it favours it.

Checkouts (the commits the figures in BENCHMARKS.md were measured at)::

    git clone https://github.com/scrapinghub/article-extraction-benchmark /tmp/extraction-bench/scrapinghub
    git -C /tmp/extraction-bench/scrapinghub checkout 4a3bc979f76c0df73cb95fe272e2fc1b96f9f010
    git clone https://github.com/mozilla/readability /tmp/extraction-bench/readability
    git -C /tmp/extraction-bench/readability checkout ab4027a8b37669745016869a37a504727992b2ba
    git clone https://github.com/adbar/trafilatura /tmp/extraction-bench/trafilatura
    git -C /tmp/extraction-bench/trafilatura checkout e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5

    EXTRACTION_BENCH_SCRAPINGHUB=/tmp/extraction-bench/scrapinghub \\
    EXTRACTION_BENCH_READABILITY=/tmp/extraction-bench/readability \\
    EXTRACTION_BENCH_TRAFILATURA=/tmp/extraction-bench/trafilatura \\
        make bench-extraction-quality

Speed is pages per CPU-second of this process (``time.process_time``: steady whatever else the machine runs),
extractors interleaved page by page so that a change of load hits them alike; ``extract_html`` is called as the
documents unit calls it, without a time limit. The shared WARC pages are every 2xx HTML page that ``read_records``
yields from ../shared/data/warc; there, quality is agreement with the trafilatura path (the same shingle metric,
the trafilatura path's text taken as the truth).

``measure(extractors, sets)`` is the entry point for other benchmarks; ``--json FILE`` writes its result. The table
goes below the notes of benchmarks/results/extraction-quality.md, each extractor's F1 to a row of BENCHMARKS.md's
summary table (``--no-write``: printed only).
"""

from __future__ import annotations

import argparse
import gzip
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
from llm_assets.core.extract import DEFAULT_EXTRACTOR, EXTRACTORS, extract_html

SHARED_WARC = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "warc"

SOURCES = {
    "scrapinghub": ("EXTRACTION_BENCH_SCRAPINGHUB", "https://github.com/scrapinghub/article-extraction-benchmark",
                    "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010"),
    "readability": ("EXTRACTION_BENCH_READABILITY", "https://github.com/mozilla/readability",
                    "ab4027a8b37669745016869a37a504727992b2ba"),
    "trafilatura": ("EXTRACTION_BENCH_TRAFILATURA", "https://github.com/adbar/trafilatura",
                    "e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5"),
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


def run(pages: list[Page], extractors: list[str]) -> tuple[dict[str, list[str]], dict[str, float]]:
    """Each extractor's text per page (empty when it finds none) and CPU seconds over the set, extractors
    interleaved page by page."""
    for name in extractors:  # imports and lazily compiled patterns outside the timed calls
        extract_html("<html><body><p>" + "Warm words here. " * 40 + "</p></body></html>", None, extractor=name)
    texts: dict[str, list[str]] = {name: [] for name in extractors}
    cpu = dict.fromkeys(extractors, 0.0)
    for page in pages:
        for name in extractors:
            start = time.process_time()
            result = extract_html(page.html, page.url, extractor=name)
            cpu[name] += time.process_time() - start
            texts[name].append(result.text if result is not None else "")
    return texts, cpu


def measure(extractors: list[str], sets: dict[str, Path], reference: str = DEFAULT_EXTRACTOR) -> dict:
    """Per set and extractor: f1, precision, recall, pages, CPU seconds, pages per CPU-second and the speed-up
    over `reference`. Sets are named as in LOADERS ("warc": a directory of WARC files); on "warc", quality is
    agreement with `reference`, which is then run too."""
    result: dict = {"extractors": list(extractors), "reference": reference, "sets": {}}
    for set_name, path in sets.items():
        pages = LOADERS[set_name](Path(path))
        names = list(dict.fromkeys([reference, *extractors]))
        texts, cpu = run(pages, names)
        rows = {}
        for name in names:
            quality = score(pages, texts[name], texts[reference] if set_name == "warc" else None)
            rows[name] = {**quality, "pages": len(pages), "pages_with_text": sum(1 for t in texts[name] if t),
                          "cpu_s": cpu[name], "pages_per_cpu_s": len(pages) / cpu[name] if cpu[name] else 0.0,
                          "speedup": cpu[reference] / cpu[name] if cpu[name] else 0.0}
        result["sets"][set_name] = {"path": str(path), "quality": "agreement" if set_name == "warc" else "truth",
                                    "extractors": rows}
    return result


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
    lines = ["| set | extractor | F1 | precision | recall | pages with text | pages per CPU-s | speed-up |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for set_name, data in result["sets"].items():
        label = f"{set_name} (agreement)" if data["quality"] == "agreement" else set_name
        for name, row in data["extractors"].items():
            lines.append(f"| {label} | {name} | {row['f1']:.3f} | {row['precision']:.3f} | {row['recall']:.3f} | "
                         f"{row['pages_with_text']} of {row['pages']} | {row['pages_per_cpu_s']:.1f} | "
                         f"{row['speedup']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, (env, url, commit) in SOURCES.items():
        parser.add_argument(f"--{name}", metavar="DIR", help=f"checkout of {url} (default: ${env})")
    parser.add_argument("--warc-dir", type=Path, default=SHARED_WARC, help=f"WARC files (default {SHARED_WARC})")
    parser.add_argument("--extractors", default=",".join(EXTRACTORS),
                        help=f"comma-separated (default: all, {','.join(EXTRACTORS)})")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose rows are replaced (default BENCHMARKS.md); the table goes to "
                             "benchmarks/results/extraction-quality.md beside it, below the notes there")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    result = measure(args.extractors.split(","), dict(configured_sets(args)))
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if not args.no_write:
        command = " ".join([".venv/bin/python -m benchmarks.extraction_quality", *(sys.argv[1:] if argv is None
                                                                                   else argv)])
        body = (f"## The latest run\n\n`{command}`, {time.strftime('%Y-%m-%d', time.gmtime())}:\n\n{table(result)}")
        publish(args.output, "extraction-quality", "<!-- extraction-quality-run:begin -->",
                "<!-- extraction-quality-run:end -->", body, summary(result, command))


def summary(result: dict, command: str) -> list[Row]:
    """The rows of BENCHMARKS.md's summary table: each extractor's F1 on the sets with ground truth."""
    truth = {name: d for name, d in result["sets"].items() if d["quality"] == "truth"}
    names = " / ".join(truth)
    return [Row(f"extraction-quality:{x}", f"main-text F1, `{x}`: {names}",
                " / ".join(f"{d['extractors'][x]['f1']:.3f}" for d in truth.values()) + " ("
                + " / ".join(f"{d['extractors'][x]['pages_per_cpu_s']:.1f}" for d in truth.values())
                + " pages per CPU-s)", command, "extraction-quality.md")
            for x in result["extractors"] if truth]


if __name__ == "__main__":
    main()
