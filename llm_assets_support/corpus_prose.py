"""Real prose in two dozen languages and eight scripts for the per-language parity tests: text nobody tuned the
word split on, with the names, figures, dates, abbreviations, quotes, commands and URLs the UDHR lacks.

Sources (Debian 12 packages, fetched with `apt-get download` into `debian_docs.DEBS` and never committed):
- the Debian Administrator's Handbook (`debian-handbook`, GPL-2.0+ or CC-BY-SA-3.0): a book translated into 26
  languages, its chapters cut into sections of at least 150 words: Debian's history with its people and dates,
  package versions, commands, URLs, quoted titles, footnotes;
- LibreOffice's help (`libreoffice-help-<lang>`, MPL-2.0): one document per help page: menu paths in quotes,
  keyboard shortcuts, figures, formulas, product names.

A document is one section or page, its blocks (headings, paragraphs, list items) one per line, labelled with its
package's language. Translations are partial (the Danish, Greek, Croatian, Korean and Romanian handbooks are almost
all English), so a document counts only if lid.176 names its package's language; each language takes up to half its
documents from each source. Vietnamese is left out: datatrove splits it with spaCy's Vietnamese, which needs pyvi.
Deterministic: the same documents for the same packages.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import polars as pl

from llm_assets_support.debian_docs import DEBS, Package, SourceText, cached_texts, fetch, unpack

HELP_LANGUAGES = ("cs", "da", "de", "el", "es", "fr", "hi", "hu", "it", "ko", "nl", "pl", "sv", "tr")
PACKAGES = (Package("debian-handbook", "handbook"),
            *(Package(f"libreoffice-help-{lang}", "lo_help") for lang in HELP_LANGUAGES))
LEFT_OUT = {"vi": "datatrove's Vietnamese tokenizer (spaCy's) needs pyvi, which is not installed",
            "en": "the handbook's original, FineWeb's English: the parity test of the English chain covers it"}
DOCS_PER_LANGUAGE = 120
MIN_CHARS = 200  # a help page of a line or two is no prose
MIN_DOCS = 100  # a language with fewer documents in it is left out


@cache
def prose_documents(per_language: int = DOCS_PER_LANGUAGE) -> dict[str, pl.DataFrame]:
    """lid.176 label -> doc_id (package and path), text: up to `per_language` documents, spread evenly over the
    language's sections and pages in the packages' order."""
    from llm_assets.core.filters.language import language_model

    model = language_model()
    debs = fetch(PACKAGES, DEBS)
    found: dict[str, dict[str, list[SourceText]]] = defaultdict(lambda: defaultdict(list))
    for package in PACKAGES:
        root = unpack(debs[package.name], DEBS / "unpacked")
        for text in cached_texts(package, root, debs[package.name]):
            if text.language in LEFT_OUT or text.chars < MIN_CHARS:
                continue
            label = model.predict(" ".join(b.text for b in text.blocks))[0][0].removeprefix("__label__")
            if label == text.language:
                found[text.language][package.layout].append(text)
    out = {}
    for language, by_source in sorted(found.items()):
        chosen: list[SourceText] = []
        for n, texts in enumerate(sorted(by_source.values(), key=len)):  # the smaller source first, the other fills
            want = (per_language - len(chosen)) // (len(by_source) - n)
            step = max(1, len(texts) // want) if want else 1
            chosen += texts[::step][:want]
        if len(chosen) >= MIN_DOCS:
            out[language] = pl.DataFrame({"doc_id": [f"{t.package}:{t.path}" for t in chosen],
                                          "text": ["\n".join(b.text for b in t.blocks) for t in chosen]})
    return out
