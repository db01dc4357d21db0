"""HTML -> main text, title and date, with two extractors selectable by name.

* ``"trafilatura"`` (the default) is configured as FineWeb configures it: ``favor_precision=True``,
  ``include_comments=False``, tables kept, and ``deduplicate=False`` here (deduplication is a later stage).
  ``with_metadata=True`` keeps the title and the date. The date is searched with htmldate's *fast* search only
  (``extensive_search=False``): the extensive search scans the whole page text and can load dateparser, whose
  cold start costs seconds once per process; the main text is the same either way (checked on every HTML page of
  the shared WARC files).
* ``"resiliparse"`` is resiliparse's ``extract_plain_text(main_content=True)`` (DCLM-style), with alt texts,
  comment sections, links and form fields left out; the title comes from the parsed tree, the date from a
  ``<meta property="article:published_time">`` or the first ``<time datetime>``, when present.

Guards for a worker that must not hang on one page:

* ``timeout_s``: a per-document time limit. In the main thread it is enforced with ``SIGALRM`` and
  ``setitimer(ITIMER_REAL)``; when the limit passes, ``ExtractionTimeout`` is raised. The previous SIGALRM
  handler and any running ``ITIMER_REAL`` timer (for example pytest-timeout's) are restored afterwards, always.
  Limits of this mechanism: a Python signal handler runs between bytecodes, so a single long call into C code
  (lxml's parser, resiliparse's C++ extractor) finishes before the exception is raised; ``max_chars`` bounds
  those calls. Outside the main thread (signals can only be handled there) and on platforms without
  ``setitimer`` the extraction runs **without** a time limit; run extraction in worker processes, not threads,
  to keep it.
* resiliparse only: HTML whose ``<div>``/``<article>`` nesting would cost resiliparse more than ~0.1 s (its
  cost grows with elements x depth, inside C++ code the time limit cannot interrupt) is cut at the tag where that
  budget runs out; no shared real page comes near it (see ``_NESTING_BUDGET``).
* ``max_chars``: HTML longer than this is cut to its first ``max_chars`` characters before parsing (both
  parsers are lenient and close the open elements). trafilatura's own ``MAX_TREE_SIZE`` setting is not used: it
  only caps the size of the *extracted* tree, after all the parsing work has been done.

Any other failure of an extractor on a malformed page is logged and returns ``None``; only ``ExtractionTimeout``
and ``ValueError``/``TypeError`` for bad arguments are raised.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from typing import Any

import trafilatura

LOGGER = logging.getLogger(__name__)

EXTRACTORS = ("trafilatura", "resiliparse")
DEFAULT_EXTRACTOR = "trafilatura"


def _check_extractor(name: str) -> None:
    if name not in EXTRACTORS:
        raise ValueError(f"unknown extractor {name!r}; valid extractors: {', '.join(EXTRACTORS)}")


def extractor_version(name: str) -> str:
    """Name and installed version of an extractor, e.g. "trafilatura 2.3.1", recorded with each document."""
    _check_extractor(name)
    return f"{name} {version(name)}"


# Kept for callers that predate the choice of extractor: the version of the default one.
EXTRACTOR_VERSION = extractor_version(DEFAULT_EXTRACTOR)


class ExtractionTimeout(TimeoutError):
    """The extraction of one document took longer than its `timeout_s`."""


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
) -> Extracted | None:
    """Main text, title and date of a page, or None when the page has no main text.

    extractor: "trafilatura" (default) or "resiliparse"; anything else is a ValueError.
    timeout_s: raise ExtractionTimeout when the extraction takes longer (main thread only, see the module doc).
    max_chars: cut longer HTML to this many characters before parsing.
    """
    _check_extractor(extractor)
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
    alarm = _TimeLimit(timeout_s)
    try:
        return alarm.call(_EXTRACT[extractor], html, url or None)
    except ExtractionTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - one malformed page must not end a shard
        if err is alarm.outer_error:  # raised by an outer SIGALRM handler, not by the extractor
            raise
        LOGGER.warning("%s failed on %s: %s: %s", extractor, url, type(err).__name__, err)
        return None


# --- trafilatura -----------------------------------------------------------------------------------------------


def _trafilatura(html: str, url: str | None) -> Extracted | None:
    doc = trafilatura.bare_extraction(
        html,
        url=url,
        favor_precision=True,
        include_comments=False,
        include_tables=True,
        deduplicate=False,
        with_metadata=True,
        date_extraction_params=_date_params(),
    )
    if doc is None or not doc.text:
        return None
    return Extracted(text=doc.text, title=doc.title, date=doc.date)


def _date_params() -> dict[str, Any]:
    """trafilatura's default htmldate parameters (settings.set_date_params) without the extensive search."""
    return {
        "original_date": True,
        "extensive_search": False,
        "max_date": datetime.now().astimezone().strftime("%Y-%m-%d"),
    }


# --- resiliparse -----------------------------------------------------------------------------------------------

_ISO_DATE = re.compile(r"\s*(\d{4}-\d{2}-\d{2})")


def _resiliparse(html: str, url: str | None) -> Extracted | None:
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
# nesting depth), inside C++ code that SIGALRM cannot interrupt: 10,000 nested <div> take ~2 s, 20,000 ~8 s,
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


_EXTRACT: dict[str, Callable[[str, str | None], Extracted | None]] = {
    "trafilatura": _trafilatura,
    "resiliparse": _resiliparse,
}


# --- time limit ------------------------------------------------------------------------------------------------

# After the limit passes, SIGALRM keeps firing at this interval until the extraction stops: a library that
# catches Exception (trafilatura does, around its fallbacks and JSON-LD parsing) cannot swallow the timeout.
_REFIRE_S = 0.005


def _can_use_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


class _TimeLimit:
    """Run a function with SIGALRM raising ExtractionTimeout after `seconds`; restore the previous SIGALRM
    handler and ITIMER_REAL timer afterwards, always.

    A timer already running (pytest-timeout's, a caller's own) keeps its schedule: when it is due before our
    limit its handler is called from ours on time (SIG_DFL/SIG_IGN: the signal is re-delivered, with that
    disposition, as soon as we are done); when it is due later it is re-armed afterwards with the time it had left.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.armed = False
        self.fired = False
        self.outer_error: BaseException | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.seconds is None or not _can_use_alarm():
            return fn(*args)
        seconds = self.seconds
        start = time.monotonic()
        self.deadline = start + seconds
        self.previous = signal.getsignal(signal.SIGALRM)
        outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
        self.outer_deadline = start + outer_delay if outer_delay > 0 else None
        self.outer_done = False
        try:
            self.armed = True
            signal.signal(signal.SIGALRM, self._on_alarm)
            first = seconds
            if self.outer_deadline is not None and self.outer_deadline < self.deadline:
                first = max(outer_delay, 1e-6)
            signal.setitimer(signal.ITIMER_REAL, first, _REFIRE_S)
            try:
                result = fn(*args)
            except ExtractionTimeout:
                raise
            except Exception as err:
                if self.fired:  # the library turned our timeout into another error
                    raise ExtractionTimeout(f"HTML extraction took longer than {seconds} s") from err
                raise
            if self.fired:  # raised once, but swallowed by the library
                raise ExtractionTimeout(f"HTML extraction took longer than {seconds} s")
            return result
        finally:
            # A signal already pending may run our handler at any bytecode from here on: the loop makes sure the
            # handler is disarmed and the timer stopped before the old handler is put back.
            while True:
                try:
                    self.armed = False
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    break
                except ExtractionTimeout:
                    continue
            previous = self.previous
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
            if self.outer_deadline is not None:
                if not self.outer_done:
                    remaining = self.outer_deadline - time.monotonic()
                    signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-6), outer_interval)
                elif outer_interval > 0:  # delivered through our handler; a periodic timer goes on
                    signal.setitimer(signal.ITIMER_REAL, outer_interval, outer_interval)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if not self.armed:
            return
        now = time.monotonic()
        if now >= self.deadline:
            self.fired = True
            raise ExtractionTimeout(f"HTML extraction took longer than {self.seconds} s")
        # Woken early: the outer timer is due before our limit. Re-arm ours, then deliver the outer one.
        signal.setitimer(signal.ITIMER_REAL, max(self.deadline - now, 1e-6), _REFIRE_S)
        if self.outer_deadline is None or now < self.outer_deadline or self.outer_done:
            return
        if callable(self.previous):
            self.outer_done = True
            try:
                self.previous(signum, frame)
            except BaseException as err:
                self.outer_error = err
                raise
