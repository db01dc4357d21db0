"""Pages that collapse: many distinct pages of one host whose extraction gave one identical text (a shop's product
pages all reduced to its sidebar, a site's pages to its navigation bar), caught within one work unit.

`CollapseWindow` sees a unit's documents in order and holds the latest back, so that pages found to have collapsed
can still be extracted again before they are written. It only decides; the documents stage re-extracts."""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import Field

from llm_assets.core.config import Section

T = TypeVar("T")


class Collapse(Section):
    """When at least `min_pages` distinct URLs of one host in a work unit extract to one identical text of
    `min_chars` or more, those pages are extracted again by the other extractor (trafilatura's pages by resiliparse,
    resiliparse's by `routing.primary`, or trafilatura when not routed): reason `collapse` in the `extractor` column
    and in `pages_routed_by_reason`. A page whose second extraction gives no text keeps its first.

    Pages are held back in a window (`window_pages`, `window_chars`) until they are written; a group is known over
    the whole unit. When a group reaches `min_pages`, its pages still in the window and all its later ones are
    extracted again; those that left the window before are written as they were (their HTML is no longer held), and
    deduplication deals with their identical texts later. Texts made by the second extraction are not checked
    again. The outcome depends on the unit's pages and their order only, never on timing."""

    enabled: bool = Field(default=True, description=(
        "Look for collapsed pages; `false` writes every page as its first extraction made it."))
    min_pages: int = Field(default=3, ge=2, description=(
        "Distinct URLs of one host with one identical text that make a collapse. 3, not 2: one page under two URLs "
        "(http and https, a trailing slash, a tracking parameter) rightly gives one text twice; real collapses are "
        "far larger (29 product pages of one shop; in archive.org's 2008 crawl, 11 pages reduced to its navigation "
        "bar)."))
    min_chars: int = Field(default=100, ge=1, description=(
        "Characters: shorter identical texts (\"404 Not Found\", \"Please enable JavaScript\", a login wall) are what "
        "those pages say, not a collapse, and are left alone. Navigation bars and sidebars that pages collapse to "
        "are longer (archive.org's: 273)."))
    window_pages: int = Field(default=1_000, ge=1, description=(
        "Documents held back, in order, before they are written, so that a group's first pages can still be "
        "extracted again when it collapses later. Groups are counted over the whole unit: when one reaches "
        "`min_pages`, its pages still held and all its later ones are extracted again, while those written before "
        "stay as first extracted (their HTML is no longer held; deduplication meets their identical texts later). "
        "A collapse is caught whole when its first `min_pages` pages come within this many documents."))
    window_chars: int = Field(default=50_000_000, ge=1, description=(
        "Characters of HTML held in the window at most, its memory (1 to 4 bytes a character: 50 to 200 MB by "
        "default): past them the oldest documents are written before `window_pages` is reached."))


@dataclass
class _Held(Generic[T]):
    item: T
    group: tuple[str, bytes] | None
    html_chars: int
    collapsed: bool


class CollapseWindow(Generic[T]):
    """One work unit's documents in order, each given back once it leaves the window with whether its page
    collapsed (see `Collapse`). Memory: the window, and per text group of the unit its key and, until it collapses,
    its distinct URLs (fewer than `min_pages`)."""

    def __init__(self, settings: Collapse) -> None:
        self.settings = settings
        self.window: deque[_Held[T]] = deque()
        self.html_chars = 0
        self.urls: dict[tuple[str, bytes], set[str]] = {}  # groups not collapsed (yet): their distinct URLs
        self.collapsed: set[tuple[str, bytes]] = set()

    def add(self, item: T, host: str = "", url: str = "", text: str | None = None,
            html_chars: int = 0) -> list[tuple[T, bool]]:
        """Hold `item`, a document of `host` and `url` whose extraction gave `text` (None: nothing was extracted,
        never a collapse) from `html_chars` characters of HTML, and give back the documents that leave the window,
        oldest first, each with whether it collapsed."""
        group = self._group(host, text)
        collapsed = group is not None and self._joins(group, url)
        self.window.append(_Held(item, group, html_chars, collapsed))
        self.html_chars += html_chars
        s = self.settings
        return self._release(s.window_pages if s.enabled else 0, s.window_chars)

    def flush(self) -> list[tuple[T, bool]]:
        """Every document still held, at the unit's end."""
        return self._release(0, 0)

    def _group(self, host: str, text: str | None) -> tuple[str, bytes] | None:
        if not self.settings.enabled or not host or text is None or len(text) < self.settings.min_chars:
            return None
        return host, hashlib.blake2b(text.encode(), digest_size=16).digest()

    def _joins(self, group: tuple[str, bytes], url: str) -> bool:
        """Whether `group` has collapsed once `url` is one of its pages; the pages of it still held are marked."""
        if group in self.collapsed:
            return True
        urls = self.urls.setdefault(group, set())
        urls.add(url)
        if len(urls) < self.settings.min_pages:
            return False
        del self.urls[group]
        self.collapsed.add(group)
        for held in self.window:
            held.collapsed = held.collapsed or held.group == group
        return True

    def _release(self, pages: int, html_chars: int) -> list[tuple[T, bool]]:
        released = []
        while self.window and (len(self.window) > pages or self.html_chars > html_chars):
            held = self.window.popleft()
            self.html_chars -= held.html_chars
            released.append((held.item, held.collapsed))
        return released
