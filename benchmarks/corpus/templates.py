"""Page templates cut from the real HTML pages of the shared WARC files: each page with its main content taken out
(a marker in its place), so that a text put there sits among the page's real navigation, sidebars, footers,
scripts and styles; and a pool of those pages' boilerplate fragments (navigation, sidebars, footers, comments,
inline scripts and styles) that makes a page as large as the crawl's size distribution asks.

The main content is found by paragraph text: the smallest element that still holds most of the text of the page's
`<p>` elements (or, on a page without any, most of its text outside links).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from llm_assets.core.charset import decode_html

MARKER = "LLMASSETSMAINCONTENT"
_CONTAINERS = frozenset({"article", "main", "div", "section", "td", "body"})
_KEPT = frozenset({"script", "style", "noscript", "form", "iframe"})  # kept in place when the content is taken out
_BOILERPLATE = re.compile(r"nav|menu|sidebar|footer|header|comment|related|cookie|banner|widget|breadcrumb|share|"
                          r"social|advert|\bads?\b|promo|toolbar|masthead", re.I)
# HTTP headers of the captured response that describe its payload as it was sent: the corpus sets its own.
_PAYLOAD_HEADERS = frozenset({"content-length", "content-type", "content-encoding", "transfer-encoding",
                              "content-md5", "etag", "last-modified", "x-crawler-content-encoding",
                              "x-crawler-content-length", "x-crawler-transfer-encoding"})


@dataclass(frozen=True)
class Template:
    """A real page around a hole: `head` + main content + `tail`."""

    source: str  # the shared WARC file and the record's target URI
    host: str
    head: str
    tail: str
    headers: tuple[tuple[str, str], ...]  # the captured response's other HTTP headers (Server, Set-Cookie, ...)

    @property
    def size(self) -> int:
        return len(self.head.encode()) + len(self.tail.encode())


@dataclass(frozen=True)
class Captured:
    """One real HTML response of a shared WARC file."""

    file: str
    url: str
    payload: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...]


def captured_pages(warc_dir: Path) -> Iterator[Captured]:
    """Every 200 HTML response of the WARC files in `warc_dir`, in file and record order."""
    from warcio.archiveiterator import ArchiveIterator

    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                content_type = record.http_headers.get_header("Content-Type") or ""
                if "html" not in content_type or record.http_headers.get_statuscode() != "200":
                    continue
                headers = tuple((k, v) for k, v in record.http_headers.headers if k.lower() not in _PAYLOAD_HEADERS)
                yield Captured(path.name, record.rec_headers.get_header("WARC-Target-URI") or "",
                               record.content_stream().read(), content_type, headers)


def cc_page_sizes(warc_dir: Path) -> list[int]:
    """Payload bytes of the HTML responses of the shared Common Crawl WARC (CC-MAIN-2020-34): the size
    distribution the corpus's pages follow."""
    return sorted(len(c.payload) for c in captured_pages(warc_dir) if "CC-MAIN-2020-34" in c.file)


@dataclass(frozen=True)
class SizeModel:
    """A log-normal fitted to a sample of page sizes: the corpus draws each page's size from it."""

    mu: float
    sigma: float
    sample: tuple[int, ...]

    @classmethod
    def fit(cls, sizes: list[int]) -> SizeModel:
        logs = [math.log(s) for s in sizes]
        return cls(statistics.fmean(logs), statistics.stdev(logs), tuple(sizes))

    def draw(self, rng) -> int:
        return int(rng.lognormvariate(self.mu, self.sigma))


def cut(page: Captured) -> tuple[Template, list[str]] | None:
    """The page as a template, and its boilerplate fragments; None when it has no body to hold a text."""
    import lxml.html

    text, _ = decode_html(page.payload, page.content_type)
    try:
        doc = lxml.html.document_fromstring(text)
    except (ValueError, lxml.etree.ParserError):
        return None
    body = doc.find("body")
    if body is None:
        return None
    fragments = [lxml.html.tostring(el, encoding="unicode") for el in _boilerplate(body)]
    _hollow(_main(body))
    html = lxml.html.tostring(doc, encoding="unicode", doctype="<!DOCTYPE html>")
    if html.count(MARKER) != 1:
        return None
    head, tail = html.split(MARKER)
    host = re.sub(r"^[a-z]+://([^/:]+).*$", r"\1", page.url) or "example.org"
    return Template(f"{page.file} {page.url}", host, head, tail, page.headers), fragments


def _main(body):
    """The smallest container still holding 80 % of the page's paragraph text."""

    def score(el) -> int:
        paragraphs = el.findall(".//p")
        if paragraphs:
            return sum(len(p.text_content().strip()) for p in paragraphs)
        links = sum(len(a.text_content()) for a in el.iter("a"))
        return max(0, len(el.text_content().strip()) - links)

    best = body
    best_score = score(body)
    if best_score == 0:
        return body
    while True:
        children = [c for c in best if isinstance(c.tag, str) and c.tag in _CONTAINERS and not _is_boilerplate(c)]
        scored = [(score(c), c) for c in children]
        top = max(scored, key=lambda sc: sc[0], default=(0, None))
        if top[1] is None or top[0] < 0.8 * best_score:
            return best
        best = top[1]


def _hollow(main) -> None:
    """Takes the content out of the main container, keeping its furniture (a body or a layout cell often holds the
    navigation beside the text), and leaves the marker where the first piece of content was."""
    import lxml.html

    marker = lxml.html.fromstring(f"<div>{MARKER}</div>")
    content = [c for c in main if not (isinstance(c.tag, str) and (_is_boilerplate(c) or c.tag in _KEPT))]
    at = main.index(content[0]) if content else len(main)
    for child in content:
        main.remove(child)
    if not content:
        main.text = None
    main.insert(at, marker)


def _is_boilerplate(el) -> bool:
    return el.tag in ("nav", "header", "footer", "aside") or bool(
        _BOILERPLATE.search(f"{el.get('id') or ''} {el.get('class') or ''}"))


def _boilerplate(body) -> Iterator:
    """Elements of the page that are its furniture (outermost only), inline scripts and styles, 200 B – 64 KB."""
    import lxml.html

    for el in body.iter():
        if not isinstance(el.tag, str):
            continue
        inline_code = el.tag in ("script", "style") and not el.get("src") and (el.text or "").strip()
        furniture = _is_boilerplate(el) and not any(_is_boilerplate(a) for a in el.iterancestors())
        if inline_code or furniture:
            size = len(lxml.html.tostring(el))
            if 200 <= size <= 64 * 1024:
                yield el


def load(warc_dir: Path) -> tuple[list[Template], list[str]]:
    """The templates of every real HTML page of `warc_dir` (in file order), and the pool of fragments."""
    templates, pool = [], []
    for page in captured_pages(warc_dir):
        result = cut(page)
        if result is None:
            continue
        template, fragments = result
        templates.append(template)
        pool.extend(fragments)
    return templates, pool
