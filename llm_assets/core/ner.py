"""Named-entity recognition with spaCy's small English pipeline (`en_core_web_sm` 3.8.0, installed from its PyPI
wheel: nothing is downloaded at run time), shared by enrichment and PII masking."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache

MAX_CHARS = 1_000_000  # spaCy's own limit per text; a longer text is read in pieces of this size


@cache
def spacy_pipeline(model: str):
    """The pipeline with only what NER needs, loaded once per process: the ner component embeds its own token
    vectors, so the shared tok2vec (which fed the tagger and parser) goes too: the same entities, 1.3-1.6x faster
    and half the memory on long documents (benchmarks/results/enrich.md)."""
    import importlib

    try:
        package = importlib.import_module(model)
    except ImportError as e:
        raise ValueError(f"the spaCy pipeline package {model!r} is not installed") from e
    return package.load(exclude=["tok2vec", "parser", "tagger", "lemmatizer", "attribute_ruler", "senter"])


def entity_spans(texts: Iterable[str], model: str, labels: frozenset[str], batch_size: int = 16
                 ) -> Iterator[list[tuple[int, int, str]]]:
    """Per text, its entities of these labels as (start, end, label) character spans, in order: spaCy's own
    batching; a text over spaCy's limit is read in pieces."""
    nlp = spacy_pipeline(model)
    pieces: list[tuple[int, int]] = []  # (text index, offset) of each piece sent to spaCy
    flat: list[str] = []
    count = 0
    for i, text in enumerate(texts):
        count += 1
        for offset in range(0, max(len(text), 1), MAX_CHARS):
            pieces.append((i, offset))
            flat.append(text[offset:offset + MAX_CHARS])
    spans: list[list[tuple[int, int, str]]] = [[] for _ in range(count)]
    for (i, offset), doc in zip(pieces, nlp.pipe(flat, batch_size=batch_size), strict=True):
        spans[i] += [(offset + e.start_char, offset + e.end_char, e.label_) for e in doc.ents if e.label_ in labels]
    yield from spans
