"""The real documents of ../shared/data, extracted the way the `documents` stage extracts them: every HTML page of
the WARC files (trafilatura, the default settings), every WET conversion record and every JSON Lines text.
Filter tests and the parity test run on these."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import polars as pl

from llm_assets.core.documents import doc_id, reader_settings
from llm_assets.core.extract import extract_html
from llm_assets.core.readers import ReadReport, read_records
from llm_assets.settings import DocumentsSettings
from llm_assets_support.shared_data import SHARED_DATA

FILES = ("warc/*.warc.gz", "wet/*.wet.gz", "text/*.jsonl.gz")


@cache
def shared_documents(data: Path = SHARED_DATA) -> pl.DataFrame:
    """doc_id, url, domain, source, text: one row per document with text, in file order."""
    settings = DocumentsSettings()
    reader = reader_settings(settings)
    rows = []
    for pattern in FILES:
        for path in sorted(data.glob(pattern)):
            source = f"raw/SHARED/{path.name}"
            with open(path, "rb") as fh:
                for rec in read_records(fh, source, reader, ReadReport()):
                    text = rec.text
                    if rec.html is not None:
                        extracted = extract_html(rec.html, rec.url, max_chars=settings.max_html_chars)
                        text = extracted.text if extracted else None
                    if text:
                        rows.append({"doc_id": doc_id(source, rec.record_id, rec.offset, rec.skip),
                                     "url": rec.url or "", "source": path.name, "text": text})
    return pl.DataFrame(rows, schema={"doc_id": pl.String, "url": pl.String, "source": pl.String, "text": pl.String})


def lightly_edited(text: str, rng, every: int = 15) -> str:
    """A light paraphrase: one word in every `every` replaced."""
    words = text.split(" ")
    for i in range(rng.randrange(every), len(words), every):
        words[i] = rng.choice(["quickly", "indeed", "maybe", "also"])
    return " ".join(words)


def planted(docs: list[str], passages: list[str], rng) -> list[str]:
    """Each passage inserted into a real document, at a paragraph boundary."""
    out = []
    for doc, passage in zip(docs, passages, strict=True):
        paragraphs = doc.split("\n")
        at = rng.randrange(len(paragraphs) + 1)
        out.append("\n".join(paragraphs[:at] + [passage] + paragraphs[at:]))
    return out
