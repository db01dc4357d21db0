"""The filter blocks on hand-made edge cases, one rule at a time, and the whole chain on the real shared documents."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import polars as pl
import pytest

from llm_assets.core.filters import (
    C4BadWords,
    C4Quality,
    DomainVocabulary,
    FineWebQuality,
    GopherQuality,
    GopherRepetition,
    LanguageFilter,
    ProfanityFilter,
    URLFilter,
    apply_filters,
)
from llm_assets.core.segment import words_column
from llm_assets.settings import FilteredSettings
from llm_assets_support.shared_data import shared

ENGLISH = ("The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden porch, "
           "wondering whether the rain will come before the harvest is finished this year.")
FRENCH = ("Le renard brun rapide saute par-dessus le chien paresseux pendant que le fermier regarde depuis le "
          "vieux porche en bois, en se demandant si la pluie viendra avant la fin de la récolte.")
GERMAN = ("Der schnelle braune Fuchs springt über den faulen Hund, während der Bauer von der alten hölzernen "
          "Veranda aus zusieht und sich fragt, ob der Regen vor dem Ende der Ernte kommt.")
CHINESE = "敏捷的棕色狐狸跳过了懒惰的狗，农夫在旧木门廊上看着，想知道雨是否会在收获结束之前到来。"

# Six distinct prose sentences, each ending with a period: a page every rule keeps.
SENTENCES = [
    "The committee met on Tuesday to review the budget for the new library building.",
    "Several members argued that the reading rooms should stay open later in the evening.",
    "Others pointed out that the heating costs had already risen sharply over the winter.",
    "After a long discussion they agreed to ask the city council for a modest increase.",
    "The chair thanked the volunteers who had organised the book sale in the spring.",
    "A final decision is expected at the next meeting, which will be held in March.",
]
PROSE = "\n".join(SENTENCES)


def reasons(block, texts: list[str], **cols) -> list[str | None]:
    return block.apply(pl.DataFrame({"text": texts, **cols}))[1].to_list()


# apply_filters


def test_apply_filters_records_block_and_reason_and_keeps_order():
    """Each block sees only what the previous ones kept; drops carry the block's name and its reason code."""
    df = pl.DataFrame({"text": [PROSE, "too short", FRENCH * 5], "url": ["https://a.org/x", "https://b.org",
                                                                           "https://xxx.example/p"]})
    kept, dropped = apply_filters(df, [URLFilter(), GopherQuality()])
    assert kept["text"].to_list() == [PROSE]
    assert dropped.select("filter", "reason").rows() == [("url", "hard_blacklisted"), ("gopher_quality",
                                                                                        "gopher_short_doc")]
    assert "_words" not in kept.columns and "_words" not in dropped.columns


def test_disabled_blocks_do_not_run_and_the_chain_follows_fineweb():
    chain = [b.name for b in FilteredSettings().blocks()]
    assert chain == ["normalize", "url", "language", "gopher_repetition", "gopher_quality", "c4_quality",
                     "fineweb_quality", "pii", "decontaminate"]
    assert FilteredSettings().block("c4_quality").filter_no_terminal_punct is False  # as FineWeb runs C4
    kept, dropped = apply_filters(pl.DataFrame({"text": ["x"]}), [GopherQuality(enabled=False)])
    assert kept.height == 1 and dropped.height == 0


def test_the_chain_runs_as_listed_with_repeats_and_without_omitted_blocks():
    from llm_assets.settings import FilteredSettings

    s = FilteredSettings.model_validate({"chain": [{"block": "gopher_quality", "min_doc_words": 3}, {"block": "url"},
                                                   {"block": "gopher_quality", "min_doc_words": 10}]})
    assert [b.name for b in s.blocks()] == ["gopher_quality", "url", "gopher_quality"]
    docs = pl.DataFrame({"text": ["these gardens have the lovely flowers"], "url": ["https://example.org/a"]})
    kept, dropped = apply_filters(docs, s.blocks())
    assert kept.height == 0 and dropped.select("filter", "reason").rows() == [("gopher_quality", "gopher_short_doc")]


# URL filter


def test_url_filter_reasons():
    block = URLFilter(blocked_domains=("spam.co.uk", "ads.example.org"), blocked_urls=("https://ok.org/bad",),
                      banned_words=("casino",))
    urls = ["https://news.spam.co.uk/a", "https://ads.example.org/x", "https://www.example.org/x",
            "https://ok.org/bad", "https://ok.org/good", "https://ok.org/online-casino/", "https://ok.org/casinos",
            "https://ok.org/sexy-nude-pics", "https://ok.org/sexy", "https://www.pornhubclips.net/", ""]
    assert reasons(block, [""] * len(urls), url=urls) == [
        "domain", "subdomain", None, "url", None, "hard_blacklisted", None, "soft_blacklisted", None,
        "blacklisted_subword", None]


def test_url_filter_lists_from_files(tmp_path):
    (tmp_path / "domains.txt").write_text("# blocked\nexample.net\n")
    block = URLFilter(use_builtin=False, blocked_domains_file=str(tmp_path / "domains.txt"))
    assert reasons(block, ["", ""], url=["http://a.example.net/", "http://porn.example.com/"]) == ["domain", None]
    with pytest.raises(ValueError, match="missing.txt"):
        URLFilter(banned_words_file=str(tmp_path / "missing.txt")).apply(pl.DataFrame({"text": [""], "url": [""]}))


# Language


def test_language_filter_keeps_english_and_drops_the_rest():
    """Only the configured language is kept; the others get reason `language`; scores are added to all."""
    src = pl.DataFrame({"text": [ENGLISH, FRENCH, GERMAN, CHINESE]})
    df, reasons = LanguageFilter(languages=("en",), threshold=0.65).apply(src)
    assert df["language"].to_list() == ["en", "fr", "de", "zh"]
    assert reasons.to_list() == [None, "language", "language", "language"]
    assert df.schema["language_score"] == pl.Float32
    assert df["language_score"].null_count() == 0
    assert (df["language_score"] > 0.65).all()  # confident labels, so `language` here means "not English"


def test_language_filter_accepts_several_languages():
    """languages=('en', 'fr') keeps English and French and still drops German."""
    src = pl.DataFrame({"text": [ENGLISH, FRENCH, GERMAN]})
    _, reasons = LanguageFilter(languages=("en", "fr"), threshold=0.5).apply(src)
    assert reasons.to_list() == [None, None, "language"]


def test_language_threshold_is_inclusive():
    """A document scoring exactly the threshold is kept; raise the threshold above its score and it is dropped."""
    src = pl.DataFrame({"text": [ENGLISH]})
    df, _ = LanguageFilter().apply(src)
    score = float(df["language_score"][0]) - 1e-6  # stored as float32
    assert LanguageFilter(threshold=score).apply(src)[1].to_list() == [None]
    assert LanguageFilter(threshold=min(1.0, score + 1e-4)).apply(src)[1].to_list() == ["language"]


def test_language_filter_handles_newlines_and_empty_text():
    """Multi-line text (fastText rejects raw newlines) and empty text are labelled, not an error."""
    src = pl.DataFrame({"text": [ENGLISH.replace(", ", ",\n"), "", "\n\n"]})
    df, reasons = LanguageFilter().apply(src)
    assert df["language"].to_list()[0] == "en"
    assert reasons.to_list() == [None, "language", "language"]
    assert df["text"].to_list() == src["text"].to_list()


def test_language_filter_on_an_empty_frame():
    """An empty batch gives empty columns of the right types."""
    df, reasons = LanguageFilter().apply(pl.DataFrame({"text": []}, schema={"text": pl.String}))
    assert df.height == 0 and len(reasons) == 0
    assert df.schema["language"] == pl.String and df.schema["language_score"] == pl.Float32



def test_all_languages_keeps_every_language_with_its_label():
    """`languages: all` keeps every language at its own threshold; `multilingual: true` is its earlier spelling."""
    src = pl.DataFrame({"text": [ENGLISH, FRENCH, GERMAN, "zzzz qqqq"]})
    df, r = LanguageFilter(languages="all").apply(src)
    assert df["language"].to_list()[:3] == ["en", "fr", "de"]
    assert r.to_list()[:3] == [None, None, None]
    assert LanguageFilter(multilingual=True) == LanguageFilter(languages="all")
    assert LanguageFilter(multilingual=False) == LanguageFilter()


# Gopher quality


def test_gopher_quality_keeps_prose():
    assert reasons(GopherQuality(), [PROSE]) == [None]


@pytest.mark.parametrize(("text", "reason"), [
    ("One short line with the words of it.", "gopher_short_doc"),
    (" ".join(["extraordinarily"] * 60) + " the and", "gopher_above_avg_threshold"),
    (" ".join(["a", "an", "of", "the", "to"] * 12), "gopher_below_avg_threshold"),
    (PROSE + " #tag" * 12, "gopher_too_many_hashes"),
    (PROSE + " wait..." * 12, "gopher_too_many_ellipsis"),
    ("\n".join("- " + s for s in SENTENCES), "gopher_too_many_bullets"),
    ("\n".join(s[:-1] + "..." for s in SENTENCES), "gopher_too_many_end_ellipsis"),
    (PROSE + " 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25", "gopher_below_alpha_threshold"),
    (" ".join(f"Word{i} apple" for i in range(40)), "gopher_enough_stop_words"),
])
def test_gopher_quality_rules(text, reason):
    assert reasons(GopherQuality(), [text]) == [reason]


def test_gopher_quality_counts_words_not_punctuation():
    """Punctuation marks are words for the ratios but not for the length: 49 words and 49 commas are short."""
    text = " ".join(["house,"] * 49) + " the of"
    df, r = GopherQuality(min_alpha_words_ratio=0).apply(pl.DataFrame({"text": [text]}))
    assert df["n_words"].to_list() == [51] and r.to_list() == [None]
    assert reasons(GopherQuality(min_doc_words=52, min_alpha_words_ratio=0), [text]) == ["gopher_short_doc"]


# Gopher repetition


@pytest.mark.parametrize(("text", "reason"), [
    ("\n\n".join([SENTENCES[0]] * 3 + SENTENCES[1:3]), "dup_para_frac"),
    ("\n".join([SENTENCES[0]] * 3 + SENTENCES[1:4]), "dup_line_frac"),
    ("\n".join(SENTENCES + [SENTENCES[0] + " " + SENTENCES[1]] * 3), "dup_line_char_frac"),
    (" ".join(["buy now"] * 30) + " " + PROSE, "top_2_gram"),
    (PROSE + " " + " ".join(["alpha beta gamma delta epsilon zeta eta theta"] * 4), "duplicated_6_n_grams"),
])
def test_gopher_repetition_rules(text, reason):
    assert reasons(GopherRepetition(), [text]) == [reason]


def test_gopher_repetition_keeps_prose_and_drops_empty():
    assert reasons(GopherRepetition(), [PROSE, ""]) == [None, "empty"]


# C4


def test_c4_line_cleanup_rewrites_the_text():
    text = "\n".join(SENTENCES[:3] + ["Please enable JavaScript to view this page.", "Read our privacy policy.",
                                      "Menu", "Home | About", "Cited claim here and there.[1][citation needed]"]
                     + SENTENCES[3:])
    df, r = C4Quality().apply(pl.DataFrame({"text": [text]}))
    assert r.to_list() == [None]
    assert df["text"][0] == "\n".join(SENTENCES[:3] + ["Cited claim here and there."] + SENTENCES[3:])


@pytest.mark.parametrize(("lines", "reason"), [
    (SENTENCES + ["Lorem ipsum dolor sit amet."], "lorem_ipsum"),
    (SENTENCES + ["function f() { return 1; }."], "curly_bracket"),
    (["Short {", "Lorem ipsum dolor sit amet.", "A line with { in it."], "lorem_ipsum"),  # the first one met wins
    (SENTENCES[:2], "too_few_sentences"),
    (["{ a b c }"] + SENTENCES, None),  # no terminal punctuation: the line is dropped before the bracket counts
])
def test_c4_page_rules(lines, reason):
    assert reasons(C4Quality(), ["\n".join(lines)]) == [reason]


def test_c4_counts_sentences_not_lines():
    """Five sentences on one line are enough; "e.g." and "3.5" do not end sentences."""
    one_line = " ".join(SENTENCES[:5])
    assert reasons(C4Quality(), [one_line]) == [None]
    assert reasons(C4Quality(), ["We use e.g. tools. Version 3.5 is out. It works well. Try it now."]) == [
        "too_few_sentences"]


# FineWeb


@pytest.mark.parametrize(("text", "reason"), [
    (PROSE, None),
    ("\n".join(s.rstrip(".") for s in SENTENCES * 2), "line_punct_ratio"),
    ("\n".join(["Home.", "About us.", "Contact.", SENTENCES[0]]), "short_line_ratio"),
    ("\n".join(SENTENCES + [SENTENCES[0]]), "char_dup_ratio"),
    ("\n".join(f"Internationalization considerations{i}." for i in range(30)), "list_ratio"),
    ("\n \n", "empty"),
])
def test_fineweb_rules(text, reason):
    assert reasons(FineWebQuality(), [text]) == [reason]


# Optional blocks


def test_c4_badwords_matches_whole_words_only():
    block = C4BadWords(enabled=True, use_builtin=False, words=("ass",))
    assert reasons(block, ["a class act", "kick ass!", "Ass.", "assistant"]) == [None, "badwords", "badwords", None]
    assert reasons(block, ["kick ass", "kick ass"], language=["en", "de"]) == ["badwords", None]


def test_domain_vocabulary_selects_medical_pages():
    medical = ("The patient was diagnosed with a chronic infection and the physician changed the medication "
               "dosage after the clinical trial.")
    block = DomainVocabulary(enabled=True)
    df, r = block.apply(pl.DataFrame({"text": [medical, ENGLISH, "patient patient patient"]}))
    assert r.to_list() == [None, "off_domain", "off_domain"]  # one repeated term is not a domain
    assert df["domain_density"][0] > 0.2
    code = DomainVocabulary(enabled=True, vocabulary="code")
    assert reasons(code, ["Import the module, call the function and return a JSON string from the API."]) == [None]


# Details: what a rule measured and the threshold it failed, kept with every rejection


def details(block, texts: list[str], **cols) -> list[dict | None]:
    df, reasons = block.apply(pl.DataFrame({"text": texts, **cols}))
    found = [json.loads(d) if d is not None else None for d in df["detail"]]
    assert [d is None for d in found] == [r is None for r in reasons.to_list()]  # dropped rows only
    return found


def significant_digits(x: float) -> int:
    return len(f"{x:.15g}".lstrip("-0.").replace(".", "").rstrip("0").split("e")[0])


def test_gopher_details_carry_the_measured_value_and_the_threshold():
    hashed = PROSE + " #tag" * 12
    found = details(GopherQuality(), [PROSE, "One short line with the words of it.", hashed])
    assert found[0] is None
    assert found[1] == {"measured": 8, "threshold": "n_words < 50"}  # words, not the final period
    ratio = 12 / len(words_column(pl.Series([hashed]))[0])  # hashes per word, punctuation marks included
    assert found[2]["threshold"] == "hash_ratio > 0.1" and found[2]["measured"] == pytest.approx(ratio, rel=1e-3)
    assert significant_digits(found[2]["measured"]) <= 4 and significant_digits(ratio) > 4

    assert details(GopherRepetition(), ["\n\n".join([SENTENCES[0]] * 3 + SENTENCES[1:3]), PROSE, ""]) == [
        {"measured": 0.4, "threshold": "dup_para_frac > 0.3"}, None, {"measured": 0, "threshold": "chars == 0"}]


def test_c4_and_fineweb_details():
    assert details(C4Quality(), ["\n".join(SENTENCES + ["Lorem ipsum dolor sit amet."]), "\n".join(SENTENCES[:2])]) == [
        {"measured": "Lorem ipsum dolor sit amet.", "threshold": 'a kept line contains "lorem ipsum"'},
        {"measured": 2, "threshold": "sentences < 5"}]
    long_line = "Lorem ipsum " + "dolor sit amet " * 20 + "end."
    assert details(C4Quality(), ["\n".join(SENTENCES + [long_line])])[0]["measured"] == long_line[:100] + "…"
    assert details(FineWebQuality(), ["\n".join(s.rstrip(".") for s in SENTENCES * 2), "\n \n"]) == [
        {"measured": 0.0, "threshold": "line_punct_ratio < 0.12"}, {"measured": 0, "threshold": "non_blank_lines == 0"}]
    assert details(C4BadWords(enabled=True, use_builtin=False, words=("ass",)), ["kick ass!", "a class act"]) == [
        {"measured": "ass", "threshold": "contains a listed bad word"}, None]


def test_language_details_name_the_language_or_the_score():
    assert details(LanguageFilter(), [ENGLISH, FRENCH]) == [None, {"measured": "fr", "threshold": "language not en"}]
    # only the top label counts (FineWeb-2's rule), whatever the threshold
    german = details(LanguageFilter(languages=("en", "fr"), threshold=0.3), [GERMAN])[0]
    assert german == {"measured": "de", "threshold": "language not en/fr"}
    score = LanguageFilter().apply(pl.DataFrame({"text": [ENGLISH]}))[0]["language_score"][0]
    strict = details(LanguageFilter(threshold=1.0), [ENGLISH])[0]
    assert strict == {"measured": pytest.approx(score, rel=1e-3), "threshold": "language_score < 1"}
    assert details(LanguageFilter(languages="all", threshold=1.0), [ENGLISH])[0]["threshold"] == "language_score < 1"


def test_url_and_word_list_details_name_what_matched():
    block = URLFilter(blocked_domains=("spam.co.uk",), banned_words=("casino",))
    urls = ["https://news.spam.co.uk/a", "https://ok.org/online-casino/", "https://ok.org/sexy-nude-pics",
            "https://www.pornhubclips.net/", "https://ok.org/good"]
    found = details(block, [""] * len(urls), url=urls)
    assert found[:3] == [{"measured": "spam.co.uk", "threshold": "registered domain is listed"},
                         {"measured": "casino", "threshold": "a URL word is a banned word"},
                         {"measured": 2, "threshold": "soft_banned_words >= 2"}]
    assert found[3]["threshold"] == "the URL contains a banned subword" and found[3]["measured"] in "wwwpornhubclipsnet"
    assert found[4] is None

    medical = DomainVocabulary(enabled=True)
    assert details(medical, [ENGLISH, "patient patient patient"]) == [
        {"measured": 0.0, "threshold": "domain_density < 0.01"}, {"measured": 1, "threshold": "distinct_terms < 3"}]
    profane = ProfanityFilter(enabled=True, use_builtin=False, words=("darn",), max_density=0.1)
    assert details(profane, ["darn darn fine", PROSE]) == [
        {"measured": 0.6667, "threshold": "profanity_density > 0.1"}, None]


def test_apply_filters_keeps_each_blocks_detail_with_its_rejections():
    df = pl.DataFrame({"text": [PROSE, "too short", FRENCH * 5], "url": ["https://a.org/x", "https://b.org",
                                                                           "https://xxx.example/p"]})
    kept, dropped = apply_filters(df, [URLFilter(), LanguageFilter(), GopherQuality()])
    assert "detail" not in kept.columns
    assert [(f, json.loads(d)["threshold"]) for f, d in dropped.select("filter", "detail").iter_rows()] == [
        ("url", "a URL word is a banned word"), ("gopher_quality", "n_words < 50")]


def test_a_real_page_made_short_or_repetitive_is_dropped_with_its_measure():
    """filter_batch, the stage's core, on a real CCNet page (../shared/data) that the default chain keeps: cut to its
    first 30 words it is too short for Gopher, tripled it repeats its paragraphs; each rejected row says by how much."""
    from llm_assets.core.filtered import filter_batch

    path = shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz")
    pages = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    docs = pl.DataFrame({"doc_id": [p["id"] for p in pages], "url": [p["id"] for p in pages],
                         "domain": [""] * len(pages), "text": [p["text"] for p in pages]})
    kept, _ = filter_batch(docs, FilteredSettings())
    page = next(t for t in kept["text"] if "\n\n" not in t)  # one paragraph, several distinct lines
    short = " ".join(page.split()[:30])
    made = pl.DataFrame({"doc_id": ["short", "tripled"], "url": ["https://example.org/a", "https://example.org/b"],
                         "domain": ["example.org"] * 2, "text": [short, "\n\n".join([page] * 3)]})
    kept, rejected = filter_batch(made, FilteredSettings())
    assert kept.height == 0
    rows = {r["doc_id"]: r for r in rejected.iter_rows(named=True)}
    assert (rows["short"]["filter"], rows["short"]["reason"]) == ("gopher_quality", "gopher_short_doc")
    assert json.loads(rows["short"]["detail"]) == {"measured": rows["short"]["n_words"], "threshold": "n_words < 50"}
    assert 0 < rows["short"]["n_words"] <= 30
    assert (rows["tripled"]["filter"], rows["tripled"]["reason"]) == ("gopher_repetition", "dup_para_frac")
    assert json.loads(rows["tripled"]["detail"]) == {"measured": 0.6667, "threshold": "dup_para_frac > 0.3"}


# The chain on the real documents of ../shared/data


@pytest.mark.corpus
def test_chain_on_the_real_documents():
    shared("warc")
    from llm_assets.core.filtered import filter_batch
    from llm_assets_support.corpus import shared_documents

    docs = shared_documents().with_columns(domain=pl.lit(""))
    kept, rejected = filter_batch(docs, FilteredSettings.default_with(language={"languages": ("en",)}))  # FineWeb's
    assert kept.height + rejected.height == docs.height
    assert 20 <= kept.height < docs.height
    assert (kept["language"] == "en").all() and (kept["language_score"] >= 0.65).all()
    assert rejected["filter"].null_count() == 0 and rejected["reason"].null_count() == 0
    # every non-English document is dropped by the language block (none is lost earlier: the URL lists are clean)
    assert set(rejected.filter(pl.col("filter") == "language")["language"]) >= {"zh", "de", "ru"}
    assert {"gopher_quality", "gopher_repetition", "language", "fineweb_quality"} <= set(rejected["filter"])
    assert (kept["n_words"] >= 50).all()  # Gopher's minimum, and C4's cleanup only removes lines


def _top_ngram_chars(ws: list[str], n: int) -> int:
    """Gopher's top n-gram measure, written out as the reference does it: the characters of the most frequent n-gram
    (joined by spaces; the first seen on a tie) times its count."""
    grams = [" ".join(ws[i:i + n]) for i in range(len(ws) - n + 1)]
    if not grams:
        return 0
    gram, count = Counter(grams).most_common(1)[0]
    return len(gram) * count


def _duplicate_ngram_chars(ws: list[str], n: int) -> int:
    """Gopher's duplicated n-gram measure, written out: scan left to right, and where an n-gram was seen before count
    its characters and jump over it."""
    seen: set[tuple[str, ...]] = set()
    total, i = 0, 0
    while i < len(ws) - n + 1:
        gram = tuple(ws[i:i + n])
        if gram in seen:
            total += sum(map(len, gram))
            i += n
        else:
            seen.add(gram)
            i += 1
    return total


@pytest.mark.corpus
def test_batch_word_split_and_ngram_measures_equal_the_per_document_definitions():
    """The batch paths (distinct chunks split once, n-grams hashed and sorted in NumPy with early exits) give, on every
    real document, the words spaCy's English tokenizer gives that document alone (as datatrove takes them) and the
    n-gram measures of the rules' per-document definitions."""
    shared("warc")
    from llm_assets.core.filters.gopher import _FlatWords, _ngram_chars
    from llm_assets_support.corpus import shared_documents

    texts = shared_documents()["text"]
    column = words_column(texts)
    import spacy

    nlp = spacy.blank("en")
    per_doc = [[w for w in (t.text.strip() for t in nlp(text)) if w] for text in texts.to_list()]
    assert column.to_list() == per_doc
    flat = _FlatWords.of(column)
    chars = texts.str.len_chars().cast(pl.Float64).to_numpy()
    for n in range(2, 11):
        # a threshold no document exceeds keeps every document in; a negative one scans every document exactly
        top = _ngram_chars(flat, chars, ((n, 2.0),), ())[f"top_{n}_gram_frac"]
        dup = _ngram_chars(flat, chars, (), ((n, -1.0),))[f"dup_{n}_gram_frac"]
        assert top.tolist() == [_top_ngram_chars(ws, n) for ws in per_doc], n
        assert dup.tolist() == [_duplicate_ngram_chars(ws, n) for ws in per_doc], n
