"""datatrove 0.10.1's filters as the reference implementation of the published rules (a test dependency only).

Each oracle takes the same settings as our block and returns datatrove's reason code per document (None = kept).
datatrove would download lid.176.bin, the LDNOOBW word lists and the Public Suffix List; here its language model is
our local lid.176, its bad-word list is our list, and its tldextract uses the snapshot in the wheel.
"""

from __future__ import annotations

import polars as pl


def _run(block, df: pl.DataFrame) -> list[str | None]:
    from datatrove.data import Document

    out = []
    for row in df.iter_rows(named=True):
        doc = Document(text=row["text"], id=row.get("doc_id") or "x", metadata={"url": row.get("url") or ""})
        result = block.filter(doc)
        if isinstance(result, tuple):
            out.append(None if result[0] else result[1])
        else:
            out.append(None if result else "dropped")
    return out


def gopher_quality(cfg, df):
    from datatrove.pipeline.filters import GopherQualityFilter

    return _run(GopherQualityFilter(
        min_doc_words=cfg.min_doc_words, max_doc_words=cfg.max_doc_words, min_avg_word_length=cfg.min_avg_word_length,
        max_avg_word_length=cfg.max_avg_word_length, max_symbol_word_ratio=cfg.max_symbol_word_ratio,
        max_bullet_lines_ratio=cfg.max_bullet_lines_ratio, max_ellipsis_lines_ratio=cfg.max_ellipsis_lines_ratio,
        max_non_alpha_words_ratio=cfg.min_alpha_words_ratio, min_stop_words=cfg.min_stop_words,
        stop_words=list(cfg.stop_words)), df)


def gopher_repetition(cfg, df):
    from datatrove.pipeline.filters import GopherRepetitionFilter

    return _run(GopherRepetitionFilter(
        dup_line_frac=cfg.dup_line_frac, dup_para_frac=cfg.dup_para_frac, dup_line_char_frac=cfg.dup_line_char_frac,
        dup_para_char_frac=cfg.dup_para_char_frac, top_n_grams=cfg.top_n_grams, dup_n_grams=cfg.dup_n_grams), df)


def c4_quality(cfg, df):
    from datatrove.pipeline.filters import C4QualityFilter

    return _run(C4QualityFilter(
        split_paragraph=cfg.split_paragraph, remove_citations=cfg.remove_citations,
        filter_no_terminal_punct=cfg.filter_no_terminal_punct, min_num_sentences=cfg.min_num_sentences,
        min_words_per_line=cfg.min_words_per_line, max_word_length=cfg.max_word_length,
        filter_lorem_ipsum=cfg.filter_lorem_ipsum, filter_javascript=cfg.filter_javascript,
        filter_curly_bracket=cfg.filter_curly_bracket, filter_policy=cfg.filter_policy), df)


def c4_quality_text(cfg, df) -> list[str | None]:
    """The text datatrove's C4 block leaves in a kept document (None when dropped)."""
    from datatrove.data import Document
    from datatrove.pipeline.filters import C4QualityFilter

    block = C4QualityFilter(filter_no_terminal_punct=cfg.filter_no_terminal_punct)
    out = []
    for text in df["text"]:
        doc = Document(text=text, id="x")
        out.append(doc.text if block.filter(doc) is True else None)
    return out


def fineweb_quality(cfg, df):
    from datatrove.pipeline.filters import FineWebQualityFilter

    return _run(FineWebQualityFilter(
        line_punct_thr=cfg.line_punct_thr, line_punct_exclude_zero=cfg.line_punct_exclude_zero,
        short_line_thr=cfg.short_line_thr, short_line_length=cfg.short_line_length,
        char_duplicates_ratio=cfg.char_duplicates_ratio, new_line_ratio=cfg.new_line_ratio), df)


def language(cfg, df):
    import datatrove.pipeline.base as base
    from datatrove.pipeline.filters import LanguageFilter

    from llm_assets.core.filters.language import language_model

    # Its dependency check wants the distribution "fasttext-numpy2-wheel"; ours is "fasttext-numpy2", same module.
    check = base.check_required_dependencies
    base.check_required_dependencies = lambda name, deps: check(name, [d for d in deps if d[0:1] != ("fasttext",)])
    if cfg.languages == "all" and cfg.threshold is None:
        raise NotImplementedError("datatrove's block has one threshold for every language")
    # datatrove's block has one threshold: one block per threshold of the listed languages, a document kept by any
    by_threshold: dict[float, list[str]] = {}
    for lang in ([] if cfg.languages == "all" else cfg.languages):
        by_threshold.setdefault(cfg.threshold_for(lang), []).append(lang)
    try:
        blocks = [LanguageFilter(languages=langs, language_threshold=t) for t, langs in by_threshold.items()] or [
            LanguageFilter(languages=None, language_threshold=cfg.threshold)]
    finally:
        base.check_required_dependencies = check
    verdicts = []
    for block in blocks:
        block.model._model = language_model()  # the same lid.176 (the .ftz build), no download
        verdicts.append(_run(block, df))
    return [None if any(v[i] is None for v in verdicts) else "language" for i in range(df.height)]


def url(cfg, df):
    import datatrove.pipeline.filters.url_filter as url_filter

    from llm_assets.core.filters.url import _tld_extractor

    lists = cfg.lists()
    import tldextract

    original = tldextract.TLDExtract
    tldextract.TLDExtract = lambda *a, **k: _tld_extractor()
    try:
        block = url_filter.URLFilter(
            soft_word_threshold=cfg.soft_word_threshold, extra_domains=sorted(lists["domains"]) or None,
            extra_urls=sorted(lists["urls"]) or None, banned_words=sorted(lists["banned_words"]) or None,
            banned_subwords=sorted(lists["banned_subwords"]) or None,
            soft_banned_words=sorted(lists["soft_banned_words"]) or None, use_integrated_lists=False)
    finally:
        tldextract.TLDExtract = original
    return _run(block, df)


def c4_badwords(cfg, df, words_path):
    import datatrove.pipeline.filters.c4_filters as c4

    original = c4.cached_asset_path_or_download
    c4.cached_asset_path_or_download = lambda *a, **k: str(words_path)
    try:
        block = c4.C4BadWordsFilter(keep_fraction=0.0, default_language="en")
        return [None if r is None else "badwords" for r in _run(block, df)]
    finally:
        c4.cached_asset_path_or_download = original


def fineweb2(language_script: str, repetition, quality, gopher, df) -> dict[str, list[str | None]]:
    """datatrove's three FineWeb-2 blocks for one language, constructed as `fineweb-2-pipeline.py` does (its
    constants written out, the per-language values taken from our blocks), with `language=language_script` (the
    word tokenizer datatrove assigns to that language): block name -> reason per document. Each document goes
    through the three blocks in turn, so datatrove's own cache of the last words split serves all three."""
    from datatrove.data import Document
    from datatrove.pipeline.filters import FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter

    blocks = {
        "gopher_repetition": GopherRepetitionFilter(
            language=language_script, dup_para_frac=0, dup_line_char_frac=0, dup_para_char_frac=0,
            dup_line_frac=repetition.dup_line_frac, top_n_grams=[list(t) for t in repetition.top_n_grams],
            dup_n_grams=[list(t) for t in repetition.dup_n_grams]),
        "fineweb_quality": FineWebQualityFilter(
            language=language_script, short_line_thr=999, char_duplicates_ratio=0.1,
            line_punct_thr=quality.line_punct_thr, new_line_ratio=quality.new_line_ratio),
        "gopher_quality": GopherQualityFilter(
            language=language_script, max_avg_word_length=gopher.max_avg_word_length,
            min_avg_word_length=gopher.min_avg_word_length, stop_words=list(gopher.stop_words),
            max_non_alpha_words_ratio=gopher.min_alpha_words_ratio, min_stop_words=2),
    }
    out: dict[str, list[str | None]] = {name: [] for name in blocks}
    for text in df["text"]:
        for name, block in blocks.items():
            result = block.filter(Document(text=text, id="x"))
            out[name].append(None if result is True else result[1])
    return out


def language_labels(df) -> list[tuple[str, float]]:
    """datatrove's lid.176 label and score per document (`LanguageFilter(label_only=True)`, as FineWeb-2 labels
    before it keeps a language above its own `language_score`)."""
    import datatrove.pipeline.base as base
    from datatrove.data import Document
    from datatrove.pipeline.filters import LanguageFilter

    from llm_assets.core.filters.language import language_model

    check = base.check_required_dependencies
    base.check_required_dependencies = lambda name, deps: check(name, [d for d in deps if d[0:1] != ("fasttext",)])
    try:
        block = LanguageFilter(label_only=True)
    finally:
        base.check_required_dependencies = check
    block.model._model = language_model()
    out = []
    for text in df["text"]:
        doc = Document(text=text, id="x")
        block.filter(doc)
        out.append((doc.metadata["language"], doc.metadata["language_score"]))
    return out
