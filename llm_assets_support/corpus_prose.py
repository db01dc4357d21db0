"""Real prose in two dozen languages and eight scripts for the per-language parity tests: text nobody tuned the
word split on, with the names, figures, dates, abbreviations, quotes, commands and URLs the UDHR lacks.

Sources (Debian 12 packages, fetched with `apt-get download` into `debian_docs.DEBS` and never committed):
- the Debian Administrator's Handbook (`debian-handbook`, GPL-2.0+ or CC-BY-SA-3.0): a book translated into 26
  languages, its chapters cut into sections of at least 150 words — Debian's history with its people and dates,
  package versions, commands, URLs, quoted titles, footnotes;
- LibreOffice's help in Hindi (`libreoffice-help-hi`, MPL-2.0), for Devanagari: one document per help page.

A document is one section or page, its blocks (headings, paragraphs, list items) one per line, labelled with its
package's language. Vietnamese is left out: datatrove splits it with spaCy's Vietnamese, which needs pyvi.
Deterministic: the same documents for the same packages."""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import polars as pl

from llm_assets_support.debian_docs import DEBS, Package, SourceText, cached_texts, fetch, unpack

PACKAGES = (Package("debian-handbook", "handbook"), Package("libreoffice-help-hi", "lo_help"))
LEFT_OUT = {"vi": "datatrove's Vietnamese tokenizer (spaCy's) needs pyvi, which is not installed",
            "en": "the handbook's original, FineWeb's English: the parity test of the English chain covers it"}
DOCS_PER_LANGUAGE = 120
MIN_CHARS = 200  # a help page of a line or two is no prose


@cache
def prose_documents(per_language: int = DOCS_PER_LANGUAGE) -> dict[str, pl.DataFrame]:
    """lid.176 label -> doc_id (package path), text: up to `per_language` documents, spread evenly over the
    language's sections in the packages' order."""
    debs = fetch(PACKAGES, DEBS)
    found: dict[str, list[SourceText]] = defaultdict(list)
    for package in PACKAGES:
        root = unpack(debs[package.name], DEBS / "unpacked")
        for text in cached_texts(package, root, debs[package.name]):
            if text.language not in LEFT_OUT and text.chars >= MIN_CHARS:
                found[text.language].append(text)
    out = {}
    for language, texts in sorted(found.items()):
        step = max(1, len(texts) // per_language)
        chosen = texts[::step][:per_language]
        out[language] = pl.DataFrame({"doc_id": [f"{t.package}:{t.path}" for t in chosen],
                                      "text": ["\n".join(b.text for b in t.blocks) for t in chosen]})
    return out
