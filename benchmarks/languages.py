"""The per-language inputs of `make bench-compare --only languages`: page-sized documents per language and the
thresholds both sides apply to them.

Documents: the Universal Declaration of Human Rights of `../shared/data/text/nltk-data__udhr2.zip` in each
language, its lines recombined into pages (each page a run of consecutive lines from a seeded start, 6 to 30 lines,
wrapping around the text: no line twice in a page, so the pages look like prose rather than the repetition the
Gopher blocks drop), plus the shared WARC files' pages that lid.176 labels with one of the languages (extracted
as the documents stage does). Deterministic: the same pages on every run and machine.

Thresholds: our chain resolved for the language (`FilteredSettings.chain_for`: the chain's values, FineWeb-2's
row of the table, the settings' overrides), written for the anchor as the keyword arguments of datatrove's
GopherRepetitionFilter, FineWebQualityFilter and GopherQualityFilter, with `language` its FineWeb-2 name
(`deu_Latn`, which picks datatrove's word tokenizer for it), as `fineweb-2-pipeline.py` builds them.
"""

from __future__ import annotations

import json
import random
import zipfile
from pathlib import Path

# lid.176 label -> (script family, the UDHR file of the language)
LANGUAGES = {
    "de": ("Latin", "deu"), "fr": ("Latin", "fra"), "ru": ("Cyrillic", "rus"), "ar": ("Arabic", "arb"),
    "hi": ("Devanagari", "hin"), "zh": ("CJK", "cmn_hans"), "ja": ("CJK", "jpn"), "ko": ("CJK", "kor"),
    "th": ("Thai", "tha"),
}
# The blocks FineWeb-2 runs per language, in its order; our field name -> datatrove's where they differ.
FINEWEB2_BLOCKS = ("gopher_repetition", "fineweb_quality", "gopher_quality")
RENAMED = {("gopher_quality", "min_alpha_words_ratio"): "max_non_alpha_words_ratio"}
MIN_LINES, MAX_LINES = 6, 30


def udhr_lines(udhr: Path, name: str) -> list[str]:
    with zipfile.ZipFile(udhr) as z:
        text = z.read(f"udhr2/{name}.txt").decode("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def udhr_pages(lines: list[str], n: int, seed: str) -> list[str]:
    """`n` pages of consecutive lines, each from its own seeded start and length."""
    pages = []
    for k in range(n):
        rng = random.Random(f"{seed}/{k}")
        size = min(rng.randint(MIN_LINES, MAX_LINES), len(lines))
        start = rng.randrange(len(lines))
        pages.append("\n".join(lines[(start + i) % len(lines)] for i in range(size)))
    return pages


def warc_pages(docs_parquet: Path) -> dict[str, list[dict]]:
    """The extracted WARC documents lid.176 labels with one of LANGUAGES (its top label), by language."""
    import polars as pl

    from llm_assets.core.filters.language import language_model

    df = pl.read_parquet(docs_parquet, columns=["doc_id", "url", "text"])
    labels, _ = language_model().predict(df["text"].str.replace_all("\n", " ", literal=True).to_list(), k=1)
    out: dict[str, list[dict]] = {}
    for row, label in zip(df.iter_rows(named=True), labels, strict=True):
        lang = label[0].removeprefix("__label__") if len(label) else ""
        if lang in LANGUAGES:
            out.setdefault(lang, []).append({"id": f"warc/{row['doc_id']}", "url": row["url"] or "",
                                             "text": row["text"]})
    return out


def anchor_config(language: str) -> dict:
    """datatrove's three FineWeb-2 blocks for `language`, as keyword arguments: our resolved thresholds."""
    from llm_assets.core.languages import language_table
    from llm_assets.settings import FilteredSettings

    blocks = {b.name: b for b in FilteredSettings().chain_for(language) if b.name in FINEWEB2_BLOCKS}
    kwargs = {}
    for name in FINEWEB2_BLOCKS:
        fields = blocks[name].model_dump(exclude={"block", "enabled"})
        kwargs[name] = {RENAMED.get((name, k), k): list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    return {"language": language_table()[language].fineweb2, "blocks": kwargs}


def write_inputs(folder: Path, udhr: Path, docs_parquet: Path | None, per_language: int) -> dict:
    """docs-<lang>.jsonl (id, url, text) and anchor-config.json in `folder`; -> what each language holds."""
    folder.mkdir(parents=True, exist_ok=True)
    from_warc = warc_pages(docs_parquet) if docs_parquet is not None else {}
    made, configs = {}, {}
    for lang, (family, name) in LANGUAGES.items():
        rows = [{"id": f"udhr/{name}/{k}", "url": f"https://udhr.example/{name}/{k}", "text": text}
                for k, text in enumerate(udhr_pages(udhr_lines(udhr, name), per_language, name))]
        rows += from_warc.get(lang, [])
        with open(folder / f"docs-{lang}.jsonl", "w") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        configs[lang] = anchor_config(lang)
        made[lang] = {"family": family, "udhr": name, "udhr_pages": per_language,
                      "warc_pages": len(from_warc.get(lang, [])), "docs": len(rows),
                      "chars": sum(len(r["text"]) for r in rows), "fineweb2": configs[lang]["language"]}
    (folder / "anchor-config.json").write_text(json.dumps(configs, ensure_ascii=False, indent=1))
    return made
