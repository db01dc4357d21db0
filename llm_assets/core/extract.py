"""HTML -> main text, with trafilatura configured as FineWeb configures it."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version

import trafilatura

EXTRACTOR_VERSION = f"trafilatura {version('trafilatura')}"


@dataclass(frozen=True)
class Extracted:
    text: str
    title: str | None
    date: str | None


def extract_html(html: str, url: str | None) -> Extracted | None:
    """Main text, title and date of a page, or None when the page has no main text."""
    doc = trafilatura.bare_extraction(
        html,
        url=url or None,
        favor_precision=True,
        include_comments=False,
        include_tables=True,
        deduplicate=False,
        with_metadata=True,
    )
    if doc is None or not doc.text:
        return None
    return Extracted(text=doc.text, title=doc.title, date=doc.date)
