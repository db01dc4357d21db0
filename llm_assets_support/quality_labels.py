"""Labelled examples for the quality classifier, built deterministically from real text: WikiText-2 paragraphs are
"hq"; "lq" are the same paragraphs made into what a crawl's spam looks like (their words shuffled, or a keyword
list repeated), so the two classes share a vocabulary and only the quality differs."""

import random

from llm_assets_support.shared_data import shared


def wikitext_paragraphs(min_words: int = 40, split: str = "valid") -> list[str]:
    lines = shared("text", f"pytorch-examples__wikitext-2-v1.{split}.txt").read_text(encoding="utf-8").splitlines()
    return [" ".join(w for w in line.split() if w != "<unk>") for line in lines
            if len(line.split()) >= min_words and not line.strip().startswith("=")]


def spam(paragraph: str, seed: int) -> str:
    rng = random.Random(seed)
    words = paragraph.split()
    if seed % 2:
        rng.shuffle(words)
        return " ".join(words)
    keywords = sorted({w for w in words if w[:1].isupper()}) or words[:5]
    return " ".join(rng.choice(keywords) for _ in range(len(words))) + " click here buy now best price"


def labelled(n: int = 600) -> list[dict]:
    """n // 2 high-quality and n // 2 low-quality examples, interleaved."""
    paragraphs = wikitext_paragraphs()[: n // 2]
    rows = []
    for i, p in enumerate(paragraphs):
        rows += [{"text": p, "label": "hq"}, {"text": spam(paragraphs[-1 - i], i), "label": "lq"}]
    return rows
