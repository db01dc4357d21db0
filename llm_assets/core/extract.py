"""HTML -> main text, title and date, with three extractors selectable by name.

* ``"trafilatura"`` (the default) runs with the options of a preset (``PRESETS``): by default FineWeb's,
  ``favor_precision=True``, ``include_comments=False``, tables kept; ``"trafilatura"`` is trafilatura's own
  defaults (comments kept), ``"recall"`` its ``favor_recall``. ``deduplicate=False`` always (deduplication is a
  later stage). The title and the date are those of ``with_metadata=True``, read with the title, URL and date steps of
  trafilatura's metadata extraction only: the others (author, site name, categories, tags, licence) cost about
  a quarter of trafilatura's CPU time and nothing here keeps them; text, title and date are unchanged (checked on
  every page of the shared WARC files and of three public extraction benchmarks, BENCHMARKS.md). The date is
  searched with htmldate's *fast* search only (``extensive_search=False``): the extensive search scans the whole
  page text and can load dateparser, whose cold start costs seconds once per process; the main text is the same
  either way (checked on every HTML page of the shared WARC files).
* ``"trafilatura_fast"``: the same with ``fast=True``, which skips trafilatura's comparison of its result with
  its readability and justext fallbacks (about a third of its time): 1.4-1.7x the pages per CPU-second of
  ``"trafilatura"``, for 0.014-0.028 less F1 on the public benchmarks (BENCHMARKS.md). Not the default: it misses
  the issue's bar (5x at most 0.005 F1 less), as does every other path measured there.
* ``"resiliparse"`` is resiliparse's ``extract_plain_text(main_content=True)`` (DCLM-style), with alt texts,
  comment sections, links and form fields left out; the title comes from the parsed tree, the date from a
  ``<meta property="article:published_time">`` or the first ``<time datetime>``, when present.

Guards for a worker that must not hang on one page:

* ``timeout_s``: a per-document limit in **CPU seconds** of the extracting thread, so that the same page meets
  the same limit whatever else the machine runs (a wall-clock limit let pages needing 1-2 CPU-s pass a 5 s limit
  under load, and the same partition held different rows at different loads). In the main thread, ``SIGPROF``
  and ``setitimer(ITIMER_PROF)`` wake a handler every few milliseconds of the process's CPU time; the handler
  reads the main thread's own CPU time (``time.thread_time()``: it runs in the main thread), so CPU used by
  other threads or processes never counts, and raises ``ExtractionTimeout`` once the page has used more than
  ``timeout_s``. After that it keeps raising at every tick until the extraction stops, so a library that
  swallows the exception cannot escape the limit. The previous SIGPROF handler and ``ITIMER_PROF`` timer (a
  sampling profiler's) are restored afterwards, always; SIGALRM and ``ITIMER_REAL`` (pytest-timeout's) are not
  touched. Limits of this mechanism: a Python signal handler runs between bytecodes, so a single long call into
  C code (lxml's parser, resiliparse's C++ extractor) finishes before the exception is raised; ``max_chars``
  bounds those calls. CPU time is steadier than wall time but not exact: on these shared virtual machines a
  page's CPU time grew up to ~2x when the other core was busy (caches and memory shared), so keep the limit
  far from real pages' costs. Outside the main thread (signals can only be handled there) and on platforms
  without ``setitimer`` the extraction runs **without** a limit; run extraction in worker processes, not
  threads, to keep it.
* resiliparse only: HTML whose ``<div>``/``<article>`` nesting would cost resiliparse more than ~0.1 s (its
  cost grows with elements x depth, inside C++ code the time limit cannot interrupt) is cut at the tag where that
  budget runs out; no shared real page comes near it (see ``_NESTING_BUDGET``).
* ``max_chars``: HTML longer than this is cut to its first ``max_chars`` characters before parsing (both
  parsers are lenient and close the open elements). trafilatura's own ``MAX_TREE_SIZE`` setting is not used: it
  only caps the size of the *extracted* tree, after all the parsing work has been done.

Any other failure of an extractor on a malformed page is logged and returns ``None``; only ``ExtractionTimeout``,
``ValueError``/``TypeError`` for bad arguments and store or machine errors (``errors.is_store_error``) are
raised.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import Field

from llm_assets.core import route_model
from llm_assets.core.config import Section
from llm_assets.core.errors import is_store_error

if TYPE_CHECKING:
    from trafilatura.settings import Document

LOGGER = logging.getLogger(__name__)

EXTRACTORS = ("trafilatura", "resiliparse", "trafilatura_fast")
DEFAULT_EXTRACTOR = "trafilatura"


@dataclass(frozen=True)
class TrafilaturaOptions:
    """The arguments of trafilatura's `extract` that change which text a page gives (the others change its format,
    or keep images and links that plain text drops). `deduplicate` is always off: deduplication is a later stage."""

    favor_precision: bool = False
    favor_recall: bool = False
    include_comments: bool = True
    include_tables: bool = True


# Named sets of TrafilaturaOptions (`documents.trafilatura_preset`): FineWeb's (datatrove's Trafilatura block as
# FineWeb ran it: precision favoured, comments left out), trafilatura's own defaults, and its recall mode.
PRESETS: dict[str, TrafilaturaOptions] = {
    "fineweb": TrafilaturaOptions(favor_precision=True, include_comments=False),
    "trafilatura": TrafilaturaOptions(),
    "recall": TrafilaturaOptions(favor_recall=True),
}
Preset = Literal["fineweb", "trafilatura", "recall"]
DEFAULT_PRESET: Preset = "fineweb"
# the library each extractor runs, whose version is recorded with the documents
_PACKAGE = {"trafilatura": "trafilatura", "resiliparse": "resiliparse", "trafilatura_fast": "trafilatura"}


def _check_extractor(name: str, preset: str = DEFAULT_PRESET) -> None:
    if name not in EXTRACTORS:
        raise ValueError(f"unknown extractor {name!r}; valid extractors: {', '.join(EXTRACTORS)}")
    if preset not in PRESETS:
        raise ValueError(f"unknown trafilatura preset {preset!r}; valid presets: {', '.join(PRESETS)}")


def extractor_version(name: str, preset: str = DEFAULT_PRESET) -> str:
    """Name and installed version of an extractor, e.g. "trafilatura 2.3.1", "trafilatura_fast (trafilatura
    2.3.1)" or, with a preset other than FineWeb's, "trafilatura 2.3.1 [recall]", recorded with each document."""
    _check_extractor(name, preset)
    made_by = f"{name} {version(name)}" if _PACKAGE[name] == name else \
        f"{name} ({_PACKAGE[name]} {version(_PACKAGE[name])})"
    if _PACKAGE[name] == "trafilatura" and preset != DEFAULT_PRESET:
        return f"{made_by} [{preset}]"
    return made_by


# Kept for callers that predate the choice of extractor: the version of the default one.
EXTRACTOR_VERSION = extractor_version(DEFAULT_EXTRACTOR)


class ExtractionTimeout(Exception):
    """The extraction of one document used more than its `timeout_s` CPU seconds.

    Not a TimeoutError: that is what a timed-out connection raises, an infrastructure error, while this one is
    the page's own fault."""


@dataclass(frozen=True)
class Extracted:
    text: str
    title: str | None
    date: str | None


def extract_html(
    html: str,
    url: str | None,
    extractor: str = DEFAULT_EXTRACTOR,
    timeout_s: float | None = None,
    max_chars: int | None = None,
    preset: str = DEFAULT_PRESET,
) -> Extracted | None:
    """Main text, title and date of a page, or None when the page has no main text.

    extractor: "trafilatura" (default), "resiliparse" or "trafilatura_fast"; anything else is a ValueError.
    preset: trafilatura's options (a name in PRESETS; resiliparse ignores it).
    timeout_s: raise ExtractionTimeout when the extraction uses more CPU seconds (main thread only, see the
        module doc).
    max_chars: cut longer HTML to this many characters before parsing.
    """
    _check_extractor(extractor, preset)
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive or None, not {timeout_s!r}")
    if max_chars is not None and max_chars <= 0:
        raise ValueError(f"max_chars must be positive or None, not {max_chars!r}")
    if isinstance(html, (bytes, bytearray)):
        html = bytes(html).decode("utf-8", errors="replace")
    if not isinstance(html, str):
        raise TypeError(f"html must be str, not {type(html).__name__}")
    if max_chars is not None and len(html) > max_chars:
        html = html[:max_chars]
    if not html or html.isspace():
        return None
    try:
        if timeout_s is None:
            return _EXTRACT[extractor](html, url or None, PRESETS[preset])
        warm_up(extractor)  # the limit is the page's: not the process's first import of the extractor
        return _CPULimit(timeout_s).call(_EXTRACT[extractor], html, url or None, PRESETS[preset])
    except ExtractionTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - one malformed page must not end a shard
        if is_store_error(err):
            raise
        LOGGER.warning("%s failed on %s: %s: %s", extractor, url, type(err).__name__, err)
        return None


@functools.cache
def warm_up(extractor: str) -> None:
    """Import the extractor and run it once on a small page, outside any CPU limit: a process's first extraction
    pays for imports and lazily compiled patterns (0.1 CPU-s and more), which would otherwise count against the
    first page's limit, and make whether that page times out (or, routed, goes over its budget) depend on how
    loaded the machine is. For trafilatura this includes justext's stop words of every language, which it builds
    the first time a page falls back on justext (~0.4 CPU-s, once per process), and justext's lower-cased set of
    them, which it builds (and caches) on the first page it classifies (~0.1 CPU-s: iana's `/dnssec`, 6 KB, took
    0.17 CPU-s where it takes 0.015 afterwards, and crossed a 0.05 CPU-s limit in one run and not in another)."""
    page = ("<html><head><title>t</title></head><body><article><p>" + "Warm words here. " * 40
            + "</p></article></body></html>")
    _EXTRACT[extractor](page, "https://example.org/warm-up", PRESETS[DEFAULT_PRESET])
    if _PACKAGE[extractor] == "trafilatura":
        from justext.core import define_stoplist
        from trafilatura import external

        define_stoplist(external.JT_STOPLIST or external.jt_stoplist_init())


# --- routed extraction ---------------------------------------------------------------------------------------

# The setting that routes each page to `Routing.primary` or `Routing.fast` (the documents stage's default).
ROUTED = "routed"
# Why a page's document was not made by the primary extractor: its HTML was too long, it had too many tags, its host
# had gone over budget earlier in the unit, the primary extractor used up its CPU budget on it, the routing model
# kept the fast extractor's text (`quality_model`), or it was one of many pages of its host that collapsed to one
# text and went to the other extractor (`documents.collapse`).
ROUTE_REASONS = ("size", "tags", "host", "budget", "model", "collapse")


class Routing(Section):
    """Which extractor makes each page's document under `extractor: routed`: `primary` (trafilatura with FineWeb's
    settings), unless what is known before extracting says the page is one of the few that cost most of its time,
    or it uses up `budget_s` CPU seconds, in which case `fast` extracts it (every page gets extracted; none is
    dropped for its cost, as datatrove's 1 s kill drops them). `null` turns a rule off.

    The defaults were chosen by `make bench-extraction-quality`'s sweep (max_chars none/100k/200k/300k/500k x
    max_tags none/2k/5k/10k/20k x budget none/0.1/0.25/0.5/1 s x host_overruns none/1/2, simulated from each page's
    measured trafilatura and resiliparse text and CPU; `extraction_quality.best_routing` picks): of the settings
    whose main-text F1 stays within 0.005 of pure trafilatura on each public set and whose agreement with it on
    the shared WARC pages stays >= 0.98, those within 2 % of the fastest on the WARC pages, then the best F1, the
    largest budget, the fewest rules. Measured: scrapinghub 0.964 -> 0.964, readability 0.931 -> 0.930,
    trafilatura's set 0.922 -> 0.922; on the shared WARC pages trafilatura's CPU / 3.0, 7 % of pages routed away
    (agreement 0.987). The tag count alone catches the expensive pages, exactly, whatever the load; the budget
    (1 s: no sweep setting told 0.25 s from 1 s, and the larger one leaves fewer pages to CPU time, which varies
    with load) bounds what a page it misses can cost. The size rule lost F1 on news pages for nothing more; the
    host rule is off: on a single-host crawl (the archive.org WARC) one overrun sent 58 % of its pages to
    resiliparse (agreement 0.88), which the public sets, one page per host, cannot judge."""

    primary: Literal["trafilatura", "trafilatura_fast"] = Field(default="trafilatura", description=(
        "The extractor of most pages: `trafilatura` (FineWeb's settings) or `trafilatura_fast`."))
    fast: Literal["resiliparse"] = Field(default="resiliparse", description="The extractor of the pages routed away.")
    max_chars: int | None = Field(default=None, gt=0, description=(
        "Characters: HTML longer than this (after `max_html_chars`) goes to `fast` (reason `size`); null: off."))
    max_tags: int | None = Field(default=5_000, gt=0, description=(
        "HTML with more tags than this (counted as `<`) goes to `fast` (reason `tags`); null: off. Measured by `make "
        "bench-extraction-quality`."))
    # CPU seconds `primary` may spend on a page; past them `fast` extracts it instead (reason `budget`). CPU time
    # is steadier than wall time but not exact (up to ~2x with the other core busy): keep it far from most pages'
    # cost so the size and tag rules, which are exact, decide the expensive pages.
    budget_s: float | None = Field(default=1.0, gt=0, description=(
        "CPU seconds `primary` may spend on a page; past them `fast` extracts it (reason `budget`); null: no budget. "
        "Kept far from most pages' cost so that the exact size and tag rules decide."))
    host_overruns: int | None = Field(default=None, ge=1, description=(
        "After this many budget overruns of a host in one work unit, its later pages go straight to `fast` (reason "
        "`host`); null: off (on a one-host crawl one overrun would route most pages away)."))
    quality_model: bool = Field(default=False, description=(
        "`fast` reads every page first, and `primary` only the pages where the routing model "
        "(`llm_assets/core/route_model.json`) predicts it gives more F1 than its threshold; the others keep `fast`'s "
        "text (reason `model`). Off by default: trained on four public extraction sets and judged on the fifth, in "
        "turn, the model ranks pages barely better than chance (area under the ROC curve 0.49-0.72) and, at the "
        "threshold that keeps its training sets' F1, sends 50-100 % of pages to `primary`, so it is no faster than "
        "`primary` alone (`python -m benchmarks.routing_model`, benchmarks/results/extraction-quality.md)."))


@dataclass(frozen=True)
class Routed:
    """A page's extraction under routing: the result, the extractor that made it and, when that is the fast one,
    why (one of ROUTE_REASONS)."""

    result: Extracted | None
    extractor: str
    reason: str | None = None
    preset: str = DEFAULT_PRESET

    @property
    def label(self) -> str:
        """What the documents' `extractor` column says, e.g. "trafilatura 2.3.1" or "resiliparse 2.0.0 (routed:
        budget)"."""
        made_by = extractor_version(self.extractor, self.preset)
        return f"{made_by} (routed: {self.reason})" if self.reason else made_by


class Router:
    """Routes the pages of one work unit (see `Routing`); it remembers the hosts whose pages went over budget, so
    the same unit gives the same routing whatever the runner."""

    def __init__(self, routing: Routing, preset: str = DEFAULT_PRESET) -> None:
        self.routing, self.preset = routing, preset
        self.overruns: Counter[str] = Counter()

    def route(self, html: str, host: str) -> str | None:
        """Why the page goes to the fast extractor without trying the primary one, or None."""
        r = self.routing
        if r.max_chars is not None and len(html) > r.max_chars:
            return "size"
        if r.max_tags is not None and html.count("<") > r.max_tags:
            return "tags"
        if r.host_overruns is not None and host and self.overruns[host] >= r.host_overruns:
            return "host"
        return None

    def extract(self, html: str, url: str | None, timeout_s: float | None = None,
                max_chars: int | None = None) -> Routed:
        """Like `extract_html`, routed. `timeout_s` is the page's outer limit: the primary extractor gets at most
        `budget_s` of it, the fast one all of it, and ExtractionTimeout is raised only when the fast extractor
        goes over it too."""
        if isinstance(html, (bytes, bytearray)):
            html = bytes(html).decode("utf-8", errors="replace")
        if max_chars is not None and len(html) > max_chars:
            html = html[:max_chars]
        r = self.routing
        host = host_of(url)
        reason = self.route(html, host)
        fast: Routed | None = None
        if reason is None and r.quality_model:
            fast = Routed(extract_html(html, url, r.fast, timeout_s=timeout_s), r.fast, "model", self.preset)
            if not route_model.load().wants_primary(html, fast.result.text if fast.result else ""):
                return fast
        if reason is None:
            budget = min(x for x in (r.budget_s, timeout_s) if x is not None) if (r.budget_s or timeout_s) else None
            try:
                return Routed(extract_html(html, url, r.primary, timeout_s=budget, preset=self.preset), r.primary,
                              preset=self.preset)
            except ExtractionTimeout:
                reason = "budget"
                if host:
                    self.overruns[host] += 1
        if fast is not None:
            return Routed(fast.result, r.fast, reason, self.preset)
        return Routed(extract_html(html, url, r.fast, timeout_s=timeout_s, preset=self.preset), r.fast, reason,
                      self.preset)


def host_of(url: str | None) -> str:
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url).hostname or "").lower() if url else ""
    except ValueError:
        return ""


# --- trafilatura -----------------------------------------------------------------------------------------------


def _trafilatura(html: str, url: str | None, options: TrafilaturaOptions) -> Extracted | None:
    return _trafilatura_with(html, url, options, fast=False)


def _trafilatura_fast(html: str, url: str | None, options: TrafilaturaOptions) -> Extracted | None:
    return _trafilatura_with(html, url, options, fast=True)


def _trafilatura_with(html: str, url: str | None, options: TrafilaturaOptions, fast: bool) -> Extracted | None:
    """trafilatura with `options`; `fast` skips its comparison with its readability and justext fallbacks. The
    title and date are read as `with_metadata=True` reads them, without the rest of trafilatura's metadata
    (author, site name, categories, tags, licence: ~15 % of its CPU time, and not kept here)."""
    from trafilatura import bare_extraction  # here: a process that only reads the settings does not pay for it
    from trafilatura.utils import load_html

    tree = load_html(html, _TRAFILATURA_MAX_FILE_SIZE)
    if tree is None:
        return None
    meta = _title_and_date(tree, url)
    # as_dict=False (the default) makes it a Document, but trafilatura's signature does not tell the two apart
    doc = cast("Document | None", bare_extraction(
        tree,  # copied by trafilatura: the tree is parsed once for the metadata and the text
        url=url or meta.url,  # with_metadata=True passes the page's canonical URL on when there is no url
        fast=fast,
        favor_precision=options.favor_precision,
        favor_recall=options.favor_recall,
        include_comments=options.include_comments,
        include_tables=options.include_tables,
        deduplicate=False,
        with_metadata=False,
    ))
    if doc is None or not doc.text:
        return None
    return Extracted(text=doc.text, title=meta.title, date=meta.date)


# trafilatura's own limit on the HTML it parses (settings.cfg MAX_FILE_SIZE), checked by `load_html`
_TRAFILATURA_MAX_FILE_SIZE = 20_000_000


def _title_and_date(tree: Any, url: str | None) -> Document:
    """The title, URL and date steps of trafilatura's `extract_metadata`, in its order (so that the title and date
    are the same as with `with_metadata=True`, checked on every page of the shared WARC files and of the public
    extraction benchmarks)."""
    from htmldate import find_date
    from trafilatura.metadata import examine_meta, extract_meta_json, extract_title, extract_url
    from trafilatura.settings import Document

    metadata = examine_meta(tree)
    try:
        metadata = extract_meta_json(tree, metadata)
    except Exception as err:  # noqa: BLE001 - as trafilatura: bugs in its JSON-LD parsing cost the metadata only
        LOGGER.debug("error in JSON metadata extraction: %s", err)
    if not metadata.title:
        metadata.title = extract_title(tree)
    if not metadata.url:
        metadata.url = extract_url(tree, url)
    metadata.date = find_date(tree, **_date_params(), url=metadata.url)
    result = Document()
    result.title, result.url, result.date = metadata.title, metadata.url, metadata.date
    result.clean_and_trim()
    return result


def _date_params() -> dict[str, Any]:
    """trafilatura's default htmldate parameters (settings.set_date_params) without the extensive search."""
    return {
        "original_date": True,
        "extensive_search": False,
        "max_date": datetime.now().astimezone().strftime("%Y-%m-%d"),
    }


# --- resiliparse -----------------------------------------------------------------------------------------------

_ISO_DATE = re.compile(r"\s*(\d{4}-\d{2}-\d{2})")


def _resiliparse(html: str, url: str | None, options: TrafilaturaOptions) -> Extracted | None:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    html = _cap_nesting(html)
    tree = HTMLTree.parse(html)
    text = extract_plain_text(
        tree,
        main_content=True,
        alt_texts=False,
        comments=False,
        links=False,
        form_fields=False,
        noscript=False,
    ).strip()
    if not text:
        return None
    title = (tree.title or "").strip() or None
    return Extracted(text=text, title=title, date=_resiliparse_date(tree))


# resiliparse's parser and main-content heuristics cost about (number of <div>/<article> elements) x (their
# nesting depth), inside C++ code that a signal cannot interrupt: 10,000 nested <div> take ~2 s, 20,000 ~8 s,
# 100 nested levels holding 100,000 sibling <div> ~0.8 s. The sum of the depths of all opening <div>/<article>
# tags measures that cost; past this budget (~0.1 s of resiliparse time) the HTML is cut at that tag. The
# shared WARC pages stay under 3,000 (FAQ and home pages with a few hundred <div>), so real pages are not cut.
_NESTING_BUDGET = 2_000_000
_NESTING_TAG = re.compile(r"<(/?)(?:div|article)(?=[\s>/])", re.IGNORECASE)


def _cap_nesting(html: str) -> str:
    """The HTML, cut before the <div>/<article> tag at which the nesting cost passes _NESTING_BUDGET."""
    depth = cost = 0
    for match in _NESTING_TAG.finditer(html):
        if match.group(1):
            depth = depth - 1 if depth else 0
            continue
        depth += 1
        cost += depth
        if cost > _NESTING_BUDGET:
            LOGGER.debug("deeply nested HTML cut at %d of %d characters", match.start(), len(html))
            return html[: match.start()]
    return html


def _resiliparse_date(tree: Any) -> str | None:
    """YYYY-MM-DD from article:published_time or the first <time datetime>, as trafilatura formats dates."""
    candidates = []
    if tree.head is not None:
        meta = tree.head.query_selector('meta[property="article:published_time"]')
        if meta is not None:
            candidates.append(meta.getattr("content"))
    if tree.body is not None:
        node = tree.body.query_selector("time[datetime]")
        if node is not None:
            candidates.append(node.getattr("datetime"))
    for value in candidates:
        match = _ISO_DATE.match(value or "")
        if match:
            return match.group(1)
    return None


_EXTRACT: dict[str, Callable[[str, str | None, TrafilaturaOptions], Extracted | None]] = {
    "trafilatura": _trafilatura,
    "resiliparse": _resiliparse,
    "trafilatura_fast": _trafilatura_fast,
}


# --- CPU time limit --------------------------------------------------------------------------------------------

# ITIMER_PROF counts the CPU time of the whole process: the handler is woken at the limit, then at this interval
# (of process CPU time), and compares the main thread's own CPU time with the limit each time. The interval is
# also how often a timeout that a library swallowed is raised again (trafilatura catches Exception around its
# fallbacks and JSON-LD parsing).
_CHECK_EVERY_S = 0.005


def _can_use_timer() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _can_use_watchdog() -> bool:
    return hasattr(time, "pthread_getcpuclockid")


class _CPULimit:
    """Run a function with ExtractionTimeout raised inside it once its thread has used `seconds` of CPU time.

    The same limit holds in every thread, so a page times out alike in-process, in a pool and on a cluster worker
    (Dask runs tasks in worker threads). In the main thread, SIGPROF does it: the previous SIGPROF handler and
    ITIMER_PROF timer are restored afterwards, always, and a timer already running (a sampling profiler's) pauses
    meanwhile and goes on with the time it had left. Signal handlers run only in the main thread, so elsewhere
    `_Watchdog` reads the thread's CPU clock and raises the error in it; both interrupt between two bytecodes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.armed = False
        self.fired = False

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if _can_use_timer():
            return self._with_signal(fn, *args)
        if _can_use_watchdog():
            return self._with_watchdog(fn, *args)
        return fn(*args)

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            result = fn(*args)
        except ExtractionTimeout:
            raise self._timeout() from None
        except Exception as err:
            if self.fired:  # the library turned our timeout into another error
                raise self._timeout() from err
            raise
        if self.fired:  # raised, but swallowed by the library
            raise self._timeout()
        return result

    def _with_signal(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.start = time.thread_time()
        previous_handler = signal.getsignal(signal.SIGPROF)
        previous_timer = signal.getitimer(signal.ITIMER_PROF)
        try:
            self.armed = True
            signal.signal(signal.SIGPROF, self._on_tick)
            signal.setitimer(signal.ITIMER_PROF, self.seconds, _CHECK_EVERY_S)
            return self._run(fn, *args)
        finally:
            # A signal already pending may run our handler at any bytecode from here on: the loop makes sure the
            # handler is disarmed and the timer stopped before the old ones are put back.
            while True:
                try:
                    self.armed = False
                    signal.setitimer(signal.ITIMER_PROF, 0)
                    break
                except ExtractionTimeout:
                    continue
            signal.signal(signal.SIGPROF, previous_handler if previous_handler is not None else signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_PROF, *previous_timer)

    def _with_watchdog(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.thread = threading.get_ident()
        self.clock = time.pthread_getcpuclockid(self.thread)
        self.start = time.clock_gettime(self.clock)
        try:
            self.armed = True
            _WATCHDOG.watch(self)
            return self._run(fn, *args)
        finally:
            # The watchdog may have sent the error just before it was told to stop: it can surface at any bytecode
            # until `forget` (which also drops an error not yet delivered) has returned.
            while True:
                try:
                    self.armed = False
                    _WATCHDOG.forget(self)
                    break
                except ExtractionTimeout:
                    continue

    def over(self) -> bool:
        return self.armed and time.clock_gettime(self.clock) - self.start >= self.seconds

    def _on_tick(self, signum: int, frame: Any) -> None:
        if self.armed and time.thread_time() - self.start >= self.seconds:
            self.fired = True
            raise self._timeout()

    def _timeout(self) -> ExtractionTimeout:
        return ExtractionTimeout(f"HTML extraction used more than {self.seconds} CPU seconds")


class _Watchdog:
    """One daemon thread that raises ExtractionTimeout in threads over their CPU limit (not the main thread: SIGPROF
    serves it). It checks every `_CHECK_EVERY_S` while a limit is armed, like the signal path, and sends the error
    again at each check until the limited call returns, in case a library swallowed it; it sleeps otherwise."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._limits: dict[int, _CPULimit] = {}
        self._thread: threading.Thread | None = None

    def watch(self, limit: _CPULimit) -> None:
        with self._lock:
            self._limits[limit.thread] = limit
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="extraction-cpu-limit", daemon=True)
                self._thread.start()
            self._lock.notify()

    def forget(self, limit: _CPULimit) -> None:
        with self._lock:
            if self._limits.get(limit.thread) is limit:
                del self._limits[limit.thread]
            _set_async_exc(limit.thread, None)  # an error sent but not yet raised is dropped

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._limits:
                    self._lock.wait()
                for thread, limit in self._limits.items():
                    if limit.over():
                        limit.fired = True
                        _set_async_exc(thread, ExtractionTimeout)
            time.sleep(_CHECK_EVERY_S)


def _set_async_exc(thread: int, exc: type[BaseException] | None) -> None:
    """Raise `exc` in `thread` at its next bytecode (None: cancel one not raised yet)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc) if exc else None)


_WATCHDOG = _Watchdog()
