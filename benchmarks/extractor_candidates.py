"""`make bench-extractors`: extractors that are not dependencies, beside ours, on the same pages and metric.

    .venv/bin/python -m benchmarks.extractor_candidates [--only NAME,...] [--core 1] [--page-limit-s 120]
                                                        [--output benchmarks/results/extractors.md] [--json FILE]

Ours are the project's own paths, ``extract_html`` with ``trafilatura`` (FineWeb's settings), ``trafilatura_fast``
and ``resiliparse``, run in the project's environment. The candidates are installed on first use with uv from
PyPI into ``.bench/extractors/venv`` (never project dependencies), on the first Python >= 3.12 found (``uv python
find``, then pyenv's versions, then /usr/bin): trafipy and magic-html require it. Without one, that environment is
made on 3.11 and those two are reported as not measured, with the reason.

The sets are those of ``benchmarks.extraction_quality`` (the three public checkouts named by the
EXTRACTION_BENCH_* variables, and the shared WARC pages), loaded and scored by that module: F1 / precision /
recall against each set's ground truth (agreement with our trafilatura path on the WARC pages), plus, on every set,
agreement with our trafilatura path (how close a fast extractor's text is to what trafilatura gives the same page).

Each environment runs one worker process, pinned with ``taskset`` to one core (``--core``, both workers on the
same one), that loads the set's pages from a JSON file and answers requests "page i, extractor X" on its stdin
with the text and the CPU seconds (``time.process_time``) of that one call as a JSON line. The driver asks page by
page, every extractor in turn, the order rotated each page, so that a change of load hits all alike; imports and a
first warm-up call are outside the timed calls. An extractor that takes longer than ``--page-limit-s`` (wall) on
one page is dropped for that set (its worker is restarted without it) and reported so: hopeless as a production
extractor. Extractors whose output is HTML (magic-html, readability-lxml, trafilaturacore) are turned into text by
html-text, inside the timed call.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".bench" / "extractors"
VENV = SCRATCH / "venv"
OURS_PYTHON = ROOT / ".venv" / "bin" / "python"
SCRIPT = Path(__file__).resolve()
OUTPUT = ROOT / "benchmarks" / "results" / "extractors.md"
REFERENCE = "trafilatura"
QUALITY_TOLERANCE = 0.005  # "trafilatura's quality": F1 at most this much below it, on every public set
PUBLIC_SETS = ("scrapinghub", "readability", "trafilatura")


@dataclass(frozen=True)
class Candidate:
    name: str
    env: str  # "ours" (the project's .venv) or "candidates" (.bench/extractors/venv)
    requirements: tuple[str, ...] = ()
    min_python: tuple[int, int] = (3, 11)
    note: str = ""
    skip: str = ""  # why it is not run by default (measured once, hopeless); `--only` still runs it


CANDIDATES = [
    Candidate("trafilatura", "ours", note="ours: extract_html, FineWeb's settings (the reference)"),
    Candidate("trafilatura_fast", "ours", note="ours: the same with fast=True"),
    Candidate("resiliparse", "ours", note="ours: extract_plain_text(main_content=True)"),
    Candidate("trafipy", "candidates", ("trafipy",), (3, 12),
              "rs-trafilatura's Rust port via trafipy; favor_recall=False, tables, no comments"),
    Candidate("trafipy_recall", "candidates", ("trafipy",), (3, 12), "trafipy with its defaults (favor_recall=True)"),
    Candidate("rs_trafilatura", "candidates", ("rs-trafilatura",), note=(
        "rs-trafilatura's own bindings (page-type classifier); favor_precision=True, tables, no comments")),
    Candidate("magic_html", "candidates", ("magic-html", "html-text"), (3, 12), "GeneralExtractor, HTML -> html-text"),
    Candidate("trafilaturacore", "candidates", ("trafilaturacore", "html-text"),
              note="pure-Python trafilatura rework; boilerplate=precision, HTML -> html-text",
              skip="hopeless: on the readability set 2.2 pages per CPU-s (trafilatura 29.8: 0.07x), F1 0.838 "
                   "(trafilatura 0.931), 13 of 130 pages failed (2026-11-26)"),
    Candidate("selectolax_heuristic", "candidates", ("selectolax",),
              note="selectolax (lexbor) with trafilatura-like main-content rules, written here"),
    Candidate("justext", "candidates", ("justext",), note="English stop list, non-boilerplate paragraphs"),
    Candidate("readability_lxml", "candidates", ("readability-lxml", "html-text"),
              note="Document.summary() -> html-text"),
    Candidate("goose3", "candidates", ("goose3",), note="cleaned_text"),
    Candidate("newspaper4k", "candidates", ("newspaper4k",), note="Article.download(input_html=...).parse().text"),
    Candidate("boilerpy3", "candidates", ("boilerpy3",), note="ArticleExtractor"),
    Candidate("inscriptis", "candidates", ("inscriptis",), note="whole-page text (no main-content detection)"),
    Candidate("html_text", "candidates", ("html-text",), note="whole-page text (no main-content detection)"),
]
BY_NAME = {c.name: c for c in CANDIDATES}


# --- the extractors, as run inside a worker (stdlib imports only at module level: the candidates' environment does
# not have the project) ------------------------------------------------------------------------------------------


def _html_to_text(html: str | None) -> str:
    import html_text

    return html_text.extract_text(html or "", guess_layout=True) if html else ""


def _factories() -> dict:
    def ours(name):
        def make():
            from llm_assets.core.extract import extract_html

            def run(html, url):
                result = extract_html(html, url, extractor=name)
                return result.text if result is not None else ""
            return run
        return make

    def trafipy_(favor_recall):
        def make():
            import trafipy

            def run(html, url):
                return trafipy.extract(html, url=url, include_tables=True, include_links=False, include_images=False,
                                       include_comments=False, favor_recall=favor_recall, deduplicate=False).text
            return run
        return make

    def rs_trafilatura():
        import rs_trafilatura

        def run(html, url):
            return rs_trafilatura.extract(html, url=url, favor_precision=True, include_tables=True,
                                          include_images=False, include_comments=False).main_content
        return run

    def magic_html():
        from magic_html import GeneralExtractor

        extractor = GeneralExtractor()
        return lambda html, url: _html_to_text(extractor.extract(html, base_url=url or "").get("html"))

    def trafilaturacore():
        import trafilaturacore

        def run(html, url):
            return _html_to_text(trafilaturacore.clean(html, url=url, boilerplate="precision", image_handling="exclude",
                                                       link_handling="exclude", comment_handling="exclude").html)
        return run

    def justext_():
        import justext

        stoplist = justext.get_stoplist("English")

        def run(html, url):
            return "\n".join(p.text for p in justext.justext(html, stoplist) if not p.is_boilerplate)
        return run

    def readability_lxml():
        from readability import Document

        return lambda html, url: _html_to_text(Document(html, url=url).summary(html_partial=True))

    def goose3():
        from goose3 import Goose

        goose = Goose({"enable_image_fetching": False, "http_timeout": 0.001})
        return lambda html, url: goose.extract(url=url, raw_html=html).cleaned_text

    def newspaper4k():
        import newspaper

        def run(html, url):
            article = newspaper.Article(url or "http://example.org/", fetch_images=False)
            article.download(input_html=html)
            article.parse()
            return article.text
        return run

    def boilerpy3():
        from boilerpy3 import extractors

        extractor = extractors.ArticleExtractor(raise_on_failure=False)
        return lambda html, url: extractor.get_content(html)

    def inscriptis():
        from inscriptis import get_text

        return lambda html, url: get_text(html)

    def html_text_():
        return lambda html, url: _html_to_text(html)

    return {
        "trafilatura": ours("trafilatura"), "trafilatura_fast": ours("trafilatura_fast"),
        "resiliparse": ours("resiliparse"), "trafipy": trafipy_(False), "trafipy_recall": trafipy_(True),
        "rs_trafilatura": rs_trafilatura, "magic_html": magic_html, "trafilaturacore": trafilaturacore,
        "selectolax_heuristic": lambda: _selectolax_extract, "justext": justext_,
        "readability_lxml": readability_lxml, "goose3": goose3, "newspaper4k": newspaper4k,
        "boilerpy3": boilerpy3, "inscriptis": inscriptis, "html_text": html_text_,
    }


# --- a selectolax (lexbor) extractor with trafilatura-like rules --------------------------------------------------

_DROP_TAGS = ("script", "style", "noscript", "iframe", "svg", "form", "button", "input", "select", "textarea",
              "nav", "footer", "aside", "template", "object", "embed", "canvas", "map", "dialog")
# class/id words of boilerplate containers (trafilatura's OVERALL_DISCARD and COMMENTS_DISCARD patterns, shortened)
_BOILERPLATE = ("comment", "share", "social", "related", "sidebar", "menu", "breadcrumb", "cookie", "newsletter",
                "subscribe", "popup", "modal", "widget", "advert", "banner", "promo", "sponsor", "footer", "navbar",
                "masthead", "byline", "author-bio", "tags", "pagination", "signup", "disqus", "recommend", "outbrain",
                "taboola", "skip-link", "teaser", "toolbar")
_BOILERPLATE_EXACT = ("nav", "ad", "ads", "header", "top", "print")
# where trafilatura's BODY_XPATH looks first, most specific first
_MAIN_SELECTORS = ('[itemprop="articleBody"]', ".article-body", ".article__body", ".articleBody", ".entry-content",
                   ".post-content", ".post-body", ".story-body", ".article-content", ".content-body", ".post-entry",
                   "article", '[role="main"]', "main", "#content", ".content")
_BLOCKS = frozenset("p h1 h2 h3 h4 h5 h6 li blockquote pre td th dd dt figcaption".split())
_CONTAINERS = frozenset("div section article main body table tbody tr ul ol dl header span".split())


def _selectolax_extract(html: str, url: str | None) -> str:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    body = tree.body
    if body is None:
        return ""
    tree.strip_tags(list(_DROP_TAGS))
    for node in body.css("[class], [id]"):
        words = f"{node.attributes.get('class') or ''} {node.attributes.get('id') or ''}".lower()
        if node.tag in ("body", "html", "article", "main"):
            continue
        tokens = words.replace("_", "-").split()
        if any(t in _BOILERPLATE_EXACT for t in tokens) or any(b in words for b in _BOILERPLATE):
            if not any(k in words for k in ("content", "article", "post-body", "entry", "story")):
                node.decompose()
    for node in body.css('[hidden], [aria-hidden="true"], [style*="display:none"], [style*="display: none"]'):
        node.decompose()
    main = _main_node(body)
    lines = _block_lines(main)
    return "\n".join(lines)


def _text_len(node) -> int:
    return len(node.text(deep=True, separator=" ", strip=True))


def _link_density(node) -> float:
    total = _text_len(node)
    if not total:
        return 1.0
    return sum(_text_len(a) for a in node.css("a")) / total


def _main_node(body):
    """The first specific container that holds enough text, else the container whose paragraphs hold most text
    (readability's score: a paragraph's text counts fully for its parent, half for its grandparent)."""
    body_len = _text_len(body)
    for selector in _MAIN_SELECTORS:
        best = max(body.css(selector), key=_text_len, default=None)
        if best is not None and _text_len(best) >= max(250, 0.2 * body_len) and _link_density(best) < 0.5:
            return best
    scores: dict = {}
    for p in body.css("p, pre, blockquote, td"):
        length = _text_len(p)
        if length < 25:
            continue
        score = 1 + min(length // 100, 3) + length / 100
        parent = p.parent
        if parent is not None:
            scores[parent] = scores.get(parent, 0) + score
            if parent.parent is not None:
                scores[parent.parent] = scores.get(parent.parent, 0) + score / 2
    if not scores:
        return body
    best = max(scores, key=lambda n: scores[n] * (1 - min(_link_density(n), 0.9)))
    return best


def _block_lines(root) -> list[str]:
    """The text of `root`, one line per block element, leaving out blocks that are mostly links (menus, lists of
    related articles) and short lines between them."""
    lines: list[str] = []

    def walk(node) -> None:
        tag = node.tag
        if tag in _BLOCKS:
            text = node.text(deep=True, separator=" ", strip=True)
            text = " ".join(text.split())
            if text and not (len(text) < 80 and _link_density(node) > 0.5):
                lines.append(text)
            return
        if tag == "-text":
            text = " ".join((node.text_content or "").split())
            if len(text) > 30:
                lines.append(text)
            return
        if tag in ("ul", "ol", "table", "div", "section") and _text_len(node) > 0 and _link_density(node) > 0.6:
            return
        child = node.child
        while child is not None:
            walk(child)
            child = child.next

    walk(root)
    return lines


# --- the worker --------------------------------------------------------------------------------------------------


def worker(pages_file: Path, names: list[str]) -> None:
    """Answer "page i, extractor X" requests on stdin with {"text", "cpu_s", "error"} lines; the first line says
    the extractors' package versions. Anything the libraries print goes to stderr."""
    from importlib import metadata

    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pages = json.loads(pages_file.read_text(encoding="utf-8"))
    factories = _factories()
    runs = {name: factories[name]() for name in names}
    warm = ("<html><head><title>t</title></head><body><article><p>" + "Warm words here. " * 40
            + "</p></article></body></html>")
    for run in runs.values():
        run(warm, "https://example.org/warm-up")
    versions = {}
    for name in names:
        for req in BY_NAME[name].requirements or (("trafilatura",) if "trafilatura" in name else ("resiliparse",)):
            try:
                versions[req] = metadata.version(req)
            except metadata.PackageNotFoundError:
                pass
    out.write(json.dumps({"ready": True, "python": sys.version.split()[0], "versions": versions}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        page = pages[req["page"]]
        error = None
        start = time.process_time()
        try:
            text = runs[req["extractor"]](page["html"], page["url"]) or ""
        except Exception as err:  # noqa: BLE001 - a candidate failing on a page scores an empty text there
            text, error = "", f"{type(err).__name__}: {err}"[:300]
        cpu = time.process_time() - start
        out.write(json.dumps({"text": text, "cpu_s": cpu, "error": error}) + "\n")
        out.flush()


# --- the driver --------------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def find_python312() -> Path | None:
    """A Python >= 3.12 on this machine without downloading one: uv's view of the PATH, pyenv's versions, /usr/bin."""
    from benchmarks.scratch_env import uv_command

    found = subprocess.run([*uv_command(), "python", "find", "--no-python-downloads", ">=3.12"],
                           capture_output=True, text=True)
    if found.returncode == 0 and found.stdout.strip():
        return Path(found.stdout.strip())
    roots = [Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"]
    candidates = [p for r in roots if r.is_dir() for p in sorted(r.glob("3.1[2-9]*/bin/python3.1[2-9]"))]
    candidates += sorted(Path("/usr/bin").glob("python3.1[2-9]"))
    for python in candidates:
        if subprocess.run([str(python), "-c", "import venv"], capture_output=True).returncode == 0:
            return python
    return None


def candidates_python(wanted: list[Candidate]) -> tuple[Path, tuple[int, int], str]:
    """The candidates' interpreter (made with uv on first use), its version, and how it was found."""
    from benchmarks.scratch_env import uv_command

    python = VENV / "bin" / "python"
    base = find_python312()
    how = f"{base}" if base else "no Python >= 3.12 here (uv, pyenv, /usr/bin): made on 3.11"
    version = _version(python) if python.exists() else None
    if version is None or (base is not None and version < (3, 12)):
        log(f"creating {VENV.relative_to(ROOT)} on {base or '3.11'} (uv)")
        subprocess.run([*uv_command(), "venv", "--quiet", "--python", str(base or "3.11"), str(VENV)], check=True)
        version = _version(python)
    installable = [r for c in wanted for r in c.requirements if c.min_python <= version]
    missing = subprocess.run([str(python), "-c", _MISSING, *sorted(set(installable))], capture_output=True, text=True)
    if missing.stdout.split():
        log(f"installing {' '.join(missing.stdout.split())} into {VENV.relative_to(ROOT)} (uv, PyPI)")
        subprocess.run([*uv_command(), "pip", "install", "--quiet", "--python", str(python),
                        *missing.stdout.split()], check=True)
    return python, version, how


_MISSING = ("import sys\nfrom importlib import metadata\nfor n in sys.argv[1:]:\n    try:\n        "
            "metadata.version(n)\n    except metadata.PackageNotFoundError:\n        print(n)")


def _version(python: Path) -> tuple[int, int] | None:
    if not python.exists():
        return None
    out = subprocess.run([str(python), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                         text=True)
    return tuple(int(x) for x in out.stdout.split()) if out.returncode == 0 else None  # type: ignore[return-value]


class Worker:
    """One environment's worker process, pinned to `core`."""

    def __init__(self, python: Path, pages_file: Path, names: list[str], core: str | None):
        pin = ["taskset", "-c", core] if core else []
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1",
               "RAYON_NUM_THREADS": "1"}
        self.names = names
        self.proc = subprocess.Popen([*pin, str(python), str(SCRIPT), "--worker", str(pages_file), ",".join(names)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=ROOT, text=True, encoding="utf-8")
        ready = self._read(600)
        if ready is None:
            self.close()
            raise RuntimeError(f"worker for {names} did not start")
        self.python, self.versions = ready["python"], ready["versions"]

    def _read(self, timeout_s: float) -> dict | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def ask(self, page: int, name: str, timeout_s: float) -> dict | None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"page": page, "extractor": name}) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout_s)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run_set(set_name: str, pages: list, wanted: list[Candidate], pythons: dict[str, Path], core: str | None,
            limit_s: float) -> dict:
    """Every wanted extractor over `pages`, interleaved page by page: texts, CPU seconds, errors, and the extractors
    dropped (over the page limit or their worker died)."""
    pages_file = SCRATCH / f"pages-{set_name}.json"
    pages_file.write_text(json.dumps([{"id": p.id, "url": p.url, "html": p.html} for p in pages]), encoding="utf-8")
    by_env: dict[str, list[str]] = {}
    for c in wanted:
        by_env.setdefault(c.env, []).append(c.name)
    workers = {env: Worker(pythons[env], pages_file, names, core) for env, names in by_env.items()}
    info = {env: {"python": w.python, "versions": w.versions} for env, w in workers.items()}
    names = [c.name for c in wanted]
    texts: dict[str, list[str]] = {n: [] for n in names}
    cpu = dict.fromkeys(names, 0.0)
    errors: dict[str, list[str]] = {n: [] for n in names}
    dropped: dict[str, str] = {}
    try:
        for i, page in enumerate(pages):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                if name in dropped:
                    continue
                env = BY_NAME[name].env
                answer = workers[env].ask(i, name, limit_s)
                if answer is None:  # over the limit, or the worker died: restart it without this extractor
                    dropped[name] = f"more than {limit_s:g} s (wall) on {page.id} ({len(page.html) / 1e6:.2f} MB)"
                    log(f"{set_name}: {name} dropped: {dropped[name]}")
                    workers[env].close()
                    rest = [n for n in workers[env].names if n not in dropped]
                    if rest:
                        workers[env] = Worker(pythons[env], pages_file, rest, core)
                    continue
                texts[name].append(answer["text"])
                cpu[name] += answer["cpu_s"]
                if answer["error"]:
                    errors[name].append(f"{page.id}: {answer['error']}")
            if (i + 1) % 100 == 0:
                log(f"{set_name}: {i + 1} of {len(pages)} pages")
    finally:
        for w in workers.values():
            w.close()
        pages_file.unlink(missing_ok=True)
    return {"texts": texts, "cpu": cpu, "errors": errors, "dropped": dropped, "envs": info}


def measure(wanted: list[Candidate], sets: dict[str, Path], core: str | None, limit_s: float,
            checkpoint: Callable[[dict], None] = lambda result: None) -> dict:
    """Every set in turn; `checkpoint` gets the result so far after each set."""
    from benchmarks.extraction_quality import LOADERS, score

    python, version, how = candidates_python([c for c in wanted if c.env == "candidates"])
    pythons = {"ours": OURS_PYTHON, "candidates": python}
    not_measured = {c.name: f"needs Python >= {'.'.join(map(str, c.min_python))}; {how}"
                    for c in wanted if c.env == "candidates" and c.min_python > version}
    runnable = [c for c in wanted if c.name not in not_measured]
    if REFERENCE not in [c.name for c in runnable]:
        runnable.insert(0, BY_NAME[REFERENCE])
    not_measured.update({c.name: c.skip for c in CANDIDATES if c.skip and c not in wanted})
    result: dict = {"candidates_python": how, "not_measured": not_measured, "sets": {}, "envs": {},
                    "notes": {c.name: c.note for c in runnable}}
    for set_name, path in sets.items():
        pages = LOADERS[set_name](Path(path))
        log(f"{set_name}: {len(pages)} pages, {len(runnable)} extractors")
        run = run_set(set_name, pages, runnable, pythons, core, limit_s)
        result["envs"] = run["envs"]
        reference = run["texts"][REFERENCE]
        rows = {}
        for c in runnable:
            name = c.name
            if name in run["dropped"]:
                rows[name] = {"dropped": run["dropped"][name]}
                continue
            texts = run["texts"][name]
            quality = score(pages, texts, reference if set_name == "warc" else None)
            agreement = score(pages, texts, reference)
            rows[name] = {**quality, "agreement_f1": agreement["f1"], "pages": len(pages),
                          "pages_with_text": sum(1 for t in texts if t.strip()), "errors": len(run["errors"][name]),
                          "first_errors": run["errors"][name][:3], "cpu_s": run["cpu"][name],
                          "pages_per_cpu_s": len(pages) / run["cpu"][name] if run["cpu"][name] else 0.0}
        ref_cpu = rows[REFERENCE]["cpu_s"]
        for row in rows.values():
            if "cpu_s" in row:
                row["speedup"] = ref_cpu / row["cpu_s"] if row["cpu_s"] else 0.0
        result["sets"][set_name] = {"path": str(path), "quality": "agreement" if set_name == "warc" else "truth",
                                    "extractors": rows}
        result["verdicts"] = verdicts(result)
        checkpoint(result)
    return result


def merge(results: list[dict]) -> dict:
    """Runs over different sets (e.g. the sets split across two invocations) as one result."""
    merged = {**results[0], "sets": {}, "not_measured": {}, "notes": {}}
    for result in results:
        merged["sets"].update(result["sets"])
        merged["not_measured"].update(result["not_measured"])
        merged["notes"].update(result["notes"])
    merged["verdicts"] = verdicts(merged)
    merged["meta"] = {**results[0]["meta"], "runs": [r["meta"] for r in results]}
    return merged


def verdicts(result: dict) -> dict[str, dict]:
    """Per extractor: F1 minus trafilatura's on each public set, speed-up over all sets' CPU seconds, and whether it
    is of trafilatura's quality (within QUALITY_TOLERANCE on every public set measured) and faster."""
    sets = result["sets"]
    names = list(result["notes"])
    out = {}
    for name in names:
        deltas, cpu, ref = {}, 0.0, 0.0
        dropped = [s for s, d in sets.items() if "dropped" in d["extractors"].get(name, {"dropped": True})]
        for set_name, data in sets.items():
            row = data["extractors"].get(name, {})
            if "f1" not in row:
                continue
            if set_name in PUBLIC_SETS:
                deltas[set_name] = row["f1"] - data["extractors"][REFERENCE]["f1"]
            cpu += row["cpu_s"]
            ref += data["extractors"][REFERENCE]["cpu_s"]
        public = [s for s in PUBLIC_SETS if s in sets]
        quality = bool(public) and not dropped and all(deltas.get(s, -1.0) >= -QUALITY_TOLERANCE for s in public)
        speedup = ref / cpu if cpu else 0.0
        out[name] = {"f1_delta": deltas, "speedup": speedup, "dropped_on": dropped,
                     "trafilatura_quality": quality, "faster_at_quality": quality and speedup > 1.0}
    return out


# --- rendering ---------------------------------------------------------------------------------------------------


def render(result: dict, meta: dict) -> str:
    sets = result["sets"]
    runs = "; ".join(f"`{m['command']}` on {m['date']} (commit {m['commit']}, load {m['load']}, taskset -c {m['core']})"
                     for m in meta.get("runs", [meta]))
    lines = [
        "# Extractor candidates",
        "",
        f"Generated by {runs}, on {meta['cpu']}. Each run: one core, CPU seconds of each call (process_time), "
        "extractors interleaved page by page; quality scored by `benchmarks.extraction_quality` (F1 / precision / "
        "recall against each set's ground truth; on the WARC pages, agreement with our trafilatura path). "
        "\"agreement\" is the same shingle F1 against our trafilatura's text of the same page, on every set. Method: "
        "`benchmarks/extractor_candidates.py`.",
        "",
        "Candidates' environment: `.bench/extractors/venv`, Python "
        f"{result['envs'].get('candidates', {}).get('python', '-')} ({result['candidates_python']}); ours: `.venv`, "
        f"Python {result['envs'].get('ours', {}).get('python', '-')}.",
        "",
        "## Summary",
        "",
        f"F1 minus our trafilatura's on each public set, speed-up in CPU seconds over every set; \"trafilatura's "
        f"quality\": within {QUALITY_TOLERANCE} F1 on every public set.",
        "",
        "| extractor | " + " | ".join(f"ΔF1 {s}" for s in PUBLIC_SETS if s in sets) +
        " | speed-up | trafilatura's quality and faster | what it runs |",
        "|---|" + "--:|" * sum(1 for s in PUBLIC_SETS if s in sets) + "--:|---|---|",
    ]
    versions = {**result["envs"].get("ours", {}).get("versions", {}),
                **result["envs"].get("candidates", {}).get("versions", {})}
    for name, v in result["verdicts"].items():
        deltas = " | ".join(f"{v['f1_delta'][s]:+.3f}" if s in v["f1_delta"] else "-" for s in PUBLIC_SETS if s in sets)
        verdict = "reference" if name == REFERENCE else "yes" if v["faster_at_quality"] else (
            f"no (dropped on {', '.join(v['dropped_on'])})" if v["dropped_on"] else
            "quality yes, not faster" if v["trafilatura_quality"] else "no")
        reqs = BY_NAME[name].requirements or ((REFERENCE,) if "trafilatura" in name else ("resiliparse",))
        pkgs = ", ".join(f"{r} {versions[r]}" for r in reqs if r in versions)
        lines.append(f"| {name} | {deltas} | {v['speedup']:.2f}× | {verdict} | {pkgs}: {result['notes'][name]} |")
    for name, why in result["not_measured"].items():
        lines.append(f"| {name} | " + " | ".join("-" for s in PUBLIC_SETS if s in sets)
                     + f" | - | not measured: {why} | |")
    lines += ["", "## Per set", "",
              "| set | extractor | F1 | precision | recall | agreement | pages with text | errors | pages per CPU-s "
              "| speed-up |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for set_name, data in sets.items():
        label = f"{set_name} (agreement)" if data["quality"] == "agreement" else set_name
        for name, row in data["extractors"].items():
            if "dropped" in row:
                lines.append(f"| {label} | {name} | dropped: {row['dropped']} | | | | | | | |")
                continue
            lines.append(f"| {label} | {name} | {row['f1']:.3f} | {row['precision']:.3f} | {row['recall']:.3f} | "
                         f"{row['agreement_f1']:.3f} | {row['pages_with_text']} of {row['pages']} | {row['errors']} | "
                         f"{row['pages_per_cpu_s']:.1f} | {row['speedup']:.2f}× |")
    return "\n".join(lines) + "\n"


def _meta(args: argparse.Namespace, argv: list[str]) -> dict:
    import platform

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"command": "make bench-extractors" if argv == MAKE_ARGS else
            " ".join([".venv/bin/python -m benchmarks.extractor_candidates", *argv]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit.stdout.strip() or "?",
            "cpu": cpu, "load": " ".join(f"{x:.1f}" for x in os.getloadavg()), "core": args.core}


MAKE_ARGS = ["--output", "benchmarks/results/extractors.md", "--json", ".bench/extractors/results.json"]


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--worker"]:
        worker(Path(argv[1]), argv[2].split(","))
        return
    from benchmarks.extraction_quality import SHARED_WARC, SOURCES, configured_sets

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, (env, url, _) in SOURCES.items():
        parser.add_argument(f"--{name}", metavar="DIR", help=f"checkout of {url} (default: ${env})")
    parser.add_argument("--warc-dir", type=Path, default=SHARED_WARC, help=f"WARC files (default {SHARED_WARC})")
    parser.add_argument("--only", help=f"comma-separated extractors (default: all: {','.join(BY_NAME)}); our "
                                       f"trafilatura always runs, as the reference")
    parser.add_argument("--sets", help="comma-separated sets (default: every one configured, and warc)")
    parser.add_argument("--core", default="1", help="the core every worker is pinned to ('' for none)")
    parser.add_argument("--page-limit-s", type=float, default=120.0,
                        help="drop an extractor from a set when one page takes it longer than this (wall)")
    parser.add_argument("--output", type=Path, help="write the markdown tables here")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    parser.add_argument("--render", type=Path, nargs="+", metavar="FILE",
                        help="measure nothing: render the JSON of runs (of different sets: merged)")
    args = parser.parse_args(argv)
    if args.render:
        result = merge([json.loads(path.read_text(encoding="utf-8")) for path in args.render])
        text = render(result, result["meta"])
        print(text)
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(text, encoding="utf-8")
        return
    wanted = [BY_NAME[n] for n in args.only.split(",")] if args.only else [c for c in CANDIDATES if not c.skip]
    sets = dict(configured_sets(args))
    if args.sets:
        sets = {k: v for k, v in sets.items() if k in args.sets.split(",")}
    SCRATCH.mkdir(parents=True, exist_ok=True)
    meta = _meta(args, argv)

    def checkpoint(result: dict) -> None:
        result["meta"] = meta
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")

    result = measure(wanted, sets, args.core or None, args.page_limit_s, checkpoint)
    text = render(result, meta)
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
