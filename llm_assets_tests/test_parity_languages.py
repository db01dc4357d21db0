"""Parity per language with datatrove 0.10.1's FineWeb-2 filtering: for each language, each of FineWeb-2's blocks
(gopher_repetition, fineweb_quality, gopher_quality) with that language's thresholds from our table
(`FilteredSettings().chain_for(language)`) keeps and drops the documents datatrove's block drops, constructed as
`fineweb-2-pipeline.py` constructs it, with `language=<lang_Script>` (so with the word tokenizer datatrove assigns
to the language): >= 99.5 % equal decisions per block per language, the same reason codes, and every differing
document listed in EXPLAINED with why. The language block's per-language thresholds are checked the same way
against FineWeb-2's rule (datatrove's lid.176 label, kept at or above that language's `language_score`).

The corpus (corpus_languages.py): the UDHR in each language recombined into 200 web-page-like documents per language
(both sides of every rule), plus the shared WARC pages in these languages. datatrove's decisions are computed once
per module (its spaCy tokenizers cost ~20 ms per page).

Agreement per block per language (equal keep/drop, %; `pytest -s` prints the table), measured 2026-11-26 with
datatrove 0.10.1 (4,015 documents; the reason codes differ on three, all in EXPLAINED):

          docs  gopher_repetition    fineweb_quality     gopher_quality
    ja     200             100.0%             100.0%             100.0%
    zh     209             100.0%             100.0%             100.0%
    ko     200             100.0%             100.0%             100.0%
    th     200             100.0%             100.0%             100.0%
    hi     200             100.0%             100.0%             100.0%
    ar     200             100.0%             100.0%             100.0%
    fa     200             100.0%             100.0%             100.0%
    he     200             100.0%             100.0%             100.0%
    ru     201             100.0%             100.0%             100.0%
    uk     200             100.0%             100.0%             100.0%
    el     200             100.0%             100.0%             100.0%
    de     202             100.0%             100.0%             100.0%
    fr     200             100.0%             100.0%              99.5%
    es     201             100.0%             100.0%             100.0%
    it     201             100.0%             100.0%             100.0%
    pt     200             100.0%             100.0%             100.0%
    nl     201             100.0%             100.0%             100.0%
    pl     200             100.0%             100.0%             100.0%
    tr     200             100.0%             100.0%             100.0%
    sv     200             100.0%             100.0%             100.0%

The language block, with each language's own threshold, keeps exactly the documents FineWeb-2's rule keeps on all
4,015 documents, for the keep lists `all`, the twenty languages and four of them.

The same bar holds on real prose nobody tuned the split on (corpus_prose.py: sections of the Debian Administrator's
Handbook and pages of LibreOffice's help in the language, 120 documents in each of 23 languages, eight scripts;
names, figures, dates, abbreviations, quoted menu paths, commands and URLs): measured 2026-11-29, 100.0% equal
decisions for every block in every language (2,760 documents; datatrove drops 0 to 19 per language for
gopher_repetition, 2 to 36 for fineweb_quality, 10 to 52 for gopher_quality). The regex stand-in for spaCy that
split words before (f596cba) is under the bar there in 15 of the 23 languages, down to 88.3% (ca), 91.7% (no) and
94.2% (ar) for gopher_quality.
"""

from __future__ import annotations

from collections import defaultdict

import polars as pl
import pytest

from llm_assets.core.filtered import FilteredSettings
from llm_assets.core.filters import LanguageFilter
from llm_assets.core.filters.language import table_threshold
from llm_assets.core.languages import UNKNOWN, language_table
from llm_assets.core.segment import with_words
from llm_assets_support import datatrove_oracle as oracle
from llm_assets_support.corpus_languages import crawl_documents, udhr_documents, unknown_script_documents
from llm_assets_support.corpus_prose import prose_documents
from llm_assets_support.shared_data import shared

pytestmark = pytest.mark.corpus  # datatrove's blocks and ours over real text in twenty languages
pytest.importorskip("datatrove")
pytest.importorskip("spacy")

# lid.176 labels; Vietnamese is left out: datatrove's vi tokenizer (spaCy's) needs pyvi, which is not installed
LANGUAGES = ("ja", "zh", "ko", "th", "hi", "ar", "fa", "he", "ru", "uk", "el", "de", "fr", "es", "it", "pt", "nl",
             "pl", "tr", "sv")
BLOCKS = ("gopher_repetition", "fineweb_quality", "gopher_quality")
PROSE_LANGUAGES = ("ar", "ca", "cs", "da", "de", "el", "es", "fa", "fr", "hi", "hu", "id", "it", "ja", "ko", "nl",
                   "no", "pl", "pt", "ru", "sv", "tr", "zh")
MIN_AGREEMENT = 0.995

# "<block> <doc_id>" -> why our decision (or reason) differs from datatrove's. All three are pages of the `glued`
# shape, lines with their spaces taken out, where a line becomes one very long word: spaCy's French and Arabic
# tokenizers still split such a run inside (after an elided article, at a period between two letters), our pattern
# splits only at the start of a word. The long words move the mean word length or the top n-gram.
_GLUED_FR = ("spaCy's French infix splits after every elided article inside a run of letters "
             "('del’hommecommel’idéal' -> 'del’', 'hommecommel’', 'idéal'); ours only at a word's start")
EXPLAINED: dict[str, str] = {
    "gopher_quality udhr/fr/50-glued": _GLUED_FR + ": 104 non-symbol words with a mean length above 11 for us, "
                                       "114 shorter ones for datatrove; dropped for us only (above_avg_threshold)",
    "gopher_repetition udhr/fr/120-glued": _GLUED_FR + ": both drop it, we for top_2_gram, datatrove for top_3_gram",
    "gopher_repetition udhr/ar/120-glued": ("spaCy's Arabic tokenizer splits a period between two letters "
                                            "('والدين.ويشمل'), ours not: 5 words against 9, both drop it, "
                                            "we for top_2_gram, datatrove for top_3_gram"),
}


@pytest.fixture(scope="module")
def corpus() -> dict[str, pl.DataFrame]:
    shared("text", "nltk-data__udhr2.zip")
    shared("warc")
    return build_corpus(LANGUAGES)


@pytest.fixture(scope="module")
def decisions(corpus) -> dict[str, dict[str, tuple[list[str | None], list[str | None]]]]:
    return decide(corpus)


@pytest.fixture(scope="module")
def prose() -> dict[str, pl.DataFrame]:
    return prose_documents()


@pytest.fixture(scope="module")
def prose_decisions(prose) -> dict[str, dict[str, tuple[list[str | None], list[str | None]]]]:
    return decide(prose)


def build_corpus(languages: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """language -> doc_id, text."""
    crawl: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for language, doc, text in crawl_documents(set(languages)):
        crawl[language].append((doc, text))
    settings = FilteredSettings()
    out = {}
    for language in languages:
        gopher = next(b for b in settings.chain_for(language) if b.name == "gopher_quality")
        udhr = udhr_documents(language, gopher.stop_words).select("doc_id", "text")
        pages = pl.DataFrame(crawl[language], schema={"doc_id": pl.String, "text": pl.String}, orient="row")
        out[language] = pl.concat([udhr, pages])
    return out


def decide(corpus: dict[str, pl.DataFrame]) -> dict[str, dict[str, tuple[list[str | None], list[str | None]]]]:
    """language -> block -> (our reasons, datatrove's), per document of the language's corpus."""
    settings = FilteredSettings()
    out = {}
    for language, docs in corpus.items():
        blocks = {b.name: b for b in settings.chain_for(language)}
        theirs = oracle.fineweb2(language_table()[language].fineweb2, blocks["gopher_repetition"],
                                 blocks["fineweb_quality"], blocks["gopher_quality"], docs)
        # split once and shared by the three blocks, as the chain shares it
        framed = with_words(docs.with_columns(language=pl.lit(language)))
        out[language] = {name: (blocks[name].apply(framed)[1].to_list(), theirs[name]) for name in BLOCKS}
    return out


@pytest.fixture(scope="module")
def labels(corpus) -> tuple[pl.DataFrame, list[tuple[str, float]]]:
    """Every document of the corpus, and datatrove's lid.176 label and score for each."""
    docs = pl.concat(list(corpus.values()))
    return docs, oracle.language_labels(docs)


def agreement(ours: list, theirs: list) -> float:
    return sum((a is None) == (b is None) for a, b in zip(ours, theirs, strict=True)) / len(ours)


def test_agreement_table(corpus, decisions):
    """The table in this module's docstring; the corpus spans at least eight languages in four scripts."""
    lines = [f"{'':4}{'docs':>6}" + "".join(f"{b:>19}" for b in BLOCKS)]
    for language, per_block in decisions.items():
        lines.append(f"{language:4}{corpus[language].height:>6}"
                     + "".join(f"{100 * agreement(*per_block[b]):>18.1f}%" for b in BLOCKS))
    print("\n" + "\n".join(lines))
    assert len({language_table()[lang].script for lang in decisions}) >= 4 and len(decisions) >= 8


@pytest.mark.parametrize("language", LANGUAGES)
def test_blocks_match_datatrove(language, corpus, decisions):
    docs = corpus[language]["doc_id"].to_list()
    problems = []
    for block in BLOCKS:
        ours, theirs = decisions[language][block]
        differ = [f"{block} {d}" for d, a, b in zip(docs, ours, theirs, strict=True) if a != b]
        unexplained = [(d, a, b) for d, a, b in zip(docs, ours, theirs, strict=True)
                       if a != b and f"{block} {d}" not in EXPLAINED]
        if agreement(ours, theirs) < MIN_AGREEMENT or unexplained:
            problems.append(f"{block}: {len(differ)} differ, {len(unexplained)} unexplained (doc, ours, datatrove's): "
                            f"{unexplained[:8]}")
        # the corpus puts documents on both sides of the block's rules
        if all(r is None for r in theirs) or all(r is not None for r in theirs):
            problems.append(f"{block}: datatrove keeps or drops every document")
    assert not problems, "\n".join(problems)


def test_the_prose_corpus_spans_twenty_languages_in_eight_scripts(prose):
    assert sorted(prose) == list(PROSE_LANGUAGES)
    assert len(prose) >= 20 and len({language_table()[language].script for language in prose}) >= 8
    assert all(docs.height >= 100 for docs in prose.values())


@pytest.mark.parametrize("language", PROSE_LANGUAGES)
def test_blocks_match_datatrove_on_real_prose(language, prose, prose_decisions):
    """Real prose: every block decides every document as datatrove's does, in every language (no difference to
    explain)."""
    docs = prose[language]["doc_id"].to_list()
    for block in BLOCKS:
        ours, theirs = prose_decisions[language][block]
        differ = [(d, a, b) for d, a, b in zip(docs, ours, theirs, strict=True) if a != b]
        assert agreement(ours, theirs) >= MIN_AGREEMENT and not differ, f"{block}: {differ[:8]}"


# Every rule FineWeb-2 leaves on, except gopher_long_doc (100,000 words): the corpus makes datatrove drop documents
# for each of them somewhere.
RULES = {
    "gopher_repetition": {"dup_line_frac", "top_2_gram", "top_3_gram", "top_4_gram", "duplicated_5_n_grams"},
    "fineweb_quality": {"line_punct_ratio", "char_dup_ratio", "list_ratio"},
    "gopher_quality": {"gopher_short_doc", "gopher_below_avg_threshold", "gopher_above_avg_threshold",
                       "gopher_too_many_hashes", "gopher_too_many_ellipsis", "gopher_too_many_bullets",
                       "gopher_too_many_end_ellipsis", "gopher_below_alpha_threshold", "gopher_enough_stop_words"},
}


def test_every_rule_is_exercised(decisions):
    for block, rules in RULES.items():
        seen = {r for per_block in decisions.values() for r in per_block[block][1]}
        assert rules <= seen, f"{block}: no document for {rules - seen}"


def _fineweb2_keeps(labels: list[tuple[str, float]], languages: tuple[str, ...] | None,
                    thresholds: str) -> list[bool]:
    """FineWeb-2's rule over datatrove's labels: a kept language at or above its own minimum (`table_threshold`:
    FineWeb-2's `language_score`, or that value re-derived for lid.176; 0.65, FineWeb's, where FineWeb-2 has no
    config)."""
    def minimum(language: str) -> float:
        found = table_threshold(language, thresholds)  # type: ignore[arg-type]
        return 0.65 if found is None else found

    return [(languages is None or label in languages) and score >= minimum(label) for label, score in labels]


@pytest.mark.parametrize("thresholds", ["fineweb2", "lid176"])
@pytest.mark.parametrize("languages", [None, LANGUAGES, ("de", "zh", "ja", "ar")], ids=["all", "twenty", "four"])
def test_language_thresholds_match_fineweb2(languages, thresholds, labels):
    """Each document kept at its own language's minimum score: the same documents as FineWeb-2's rule on datatrove's
    lid.176 labels, with FineWeb-2's values as published and with them re-derived for lid.176."""
    docs, found = labels
    block = LanguageFilter(languages="all" if languages is None else languages, threshold=None, thresholds=thresholds)
    out, reasons = block.apply(docs)
    theirs = _fineweb2_keeps(found, languages, thresholds)
    differ = [(d, r) for d, r, keep in zip(docs["doc_id"], reasons.to_list(), theirs, strict=True)
              if (r is None) != keep]
    assert not differ


def test_unknown_scripts_are_reported_not_guessed():
    """A text in a script no lid.176 language is written in: datatrove's lid.176 still answers with a label; ours is
    `und`, dropped as `unknown_script`, whichever languages are kept."""
    shared("text", "nltk-data__udhr2.zip")
    docs = unknown_script_documents()
    out, reasons = LanguageFilter(languages="all", threshold=0.0).apply(docs)
    labels = oracle.language_labels(docs)
    assert all(label != UNKNOWN for label, _ in labels)  # datatrove guesses
    unknown = out["language"] == UNKNOWN
    assert unknown.mean() >= 0.9, out.filter(~unknown).select("doc_id", "language", "text")
    assert (reasons.filter(unknown) == "unknown_script").all()
