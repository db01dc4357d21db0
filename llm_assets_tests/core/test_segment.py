"""Word segmentation per language (core/segment) against datatrove 0.10.1's word tokenizers, the ones FineWeb-2's
thresholds were measured with, on real text: the Universal Declaration of Human Rights in each language (one
document per paragraph) and the Chinese pages of the shared CC-MAIN-2020-34 WARC."""

from __future__ import annotations

import collections
import subprocess
import sys
import zipfile
from functools import cache
from typing import Callable

import polars as pl
import pytest

from llm_assets.core import segment
from llm_assets.core.minhash import MinHasher, words
from llm_assets_support.shared_data import shared

# lid.176 label -> (UDHR file, datatrove's tokenizer key, agreement floor). datatrove is asked by language_script
# (FineWeb-2's keys): its bare ISO 639-1 keys are overwritten by other rows of its table ("zh" gets a tokenizer that
# keeps a sentence whole, "hi" one that needs Stanza).
UDHR = {
    # the same segmenters as datatrove's (jieba as spaCy's zh runs it, Sudachi split mode A, Kiwi's skip-bigram
    # model, newmm-safe): every word equal
    "zh": ("cmn_hans", "cmn_Hani", 1.0),
    "ja": ("jpn", "jpn_Jpan", 1.0),
    "ko": ("kor", "kor_Hang", 1.0),
    "th": ("tha", "tha_Thai", 1.0),
    # spaCy's tokenizers, as datatrove's blank pipelines run them
    "ru": ("rus", "rus_Cyrl", 1.0),
    "de": ("deu", "deu_Latn", 1.0),
    "fr": ("fra", "fra_Latn", 1.0),
    "it": ("ita", "ita_Latn", 1.0),
    "es": ("spa", "spa_Latn", 1.0),
    "en": ("eng", "eng_Latn", 1.0),
    "ar": ("arb", "arb_Arab", 1.0),
    # IndicNLP's punctuation rules, as datatrove runs them
    "hi": ("hin", "hin_Deva", 1.0),
    "bn": ("ben", "ben_Beng", 1.0),
    "ta": ("tam", "tam_Taml", 1.0),
    "ur": ("urd", "urd_Arab", 1.0),
}


@cache
def _paragraphs(name: str) -> tuple[str, ...]:
    with zipfile.ZipFile(shared("text", "nltk-data__udhr2.zip")) as z:
        text = z.read(f"udhr2/{name}.txt").decode()
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def _agreement(ours: list[list[str]], theirs: list[list[str]]) -> tuple[float, collections.Counter]:
    """Dice agreement of the two word multisets, over all documents, and the words only one side has."""
    same = total = 0
    diff: collections.Counter = collections.Counter()
    for a, b in zip(ours, theirs, strict=True):
        ca, cb = collections.Counter(a), collections.Counter(b)
        same += sum((ca & cb).values())
        total += len(a) + len(b)
        diff.update({f"+{w}": n for w, n in (ca - cb).items()})
        diff.update({f"-{w}": n for w, n in (cb - ca).items()})
    return (2 * same / total if total else 1.0), diff


def _datatrove(key: str, texts: list[str]) -> list[list[str]]:
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    tokenizer = load_word_tokenizer(key)
    return [tokenizer.word_tokenize(t) for t in texts]


@pytest.mark.corpus  # against datatrove's word tokenizers
@pytest.mark.parametrize("language", list(UDHR))
def test_words_agree_with_datatrove_on_udhr(language):
    name, key, floor = UDHR[language]
    texts = list(_paragraphs(name))
    assert len(texts) >= 80
    ours = segment.words_column(pl.Series(texts), language).to_list()
    agreement, diff = _agreement(ours, _datatrove(key, texts))
    assert agreement >= floor, (language, agreement, diff.most_common(10))


def _warc_pages(script: str, limit: int = 40) -> list[str]:
    """Main texts of the shared CC-MAIN-2020-34 WARC's HTML pages that are mostly in `script`."""
    import re

    from warcio.archiveiterator import ArchiveIterator

    from llm_assets.core.extract import extract_html

    pages = []
    with open(shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"), "rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type != "response":
                continue
            html = record.content_stream().read().decode("utf-8", "replace")
            extracted = extract_html(html, record.rec_headers.get_header("WARC-Target-URI"), "resiliparse")
            if extracted is None:
                continue
            text = extracted.text
            letters = sum(c.isalpha() for c in text)
            if letters and len(re.findall(script, text)) > letters / 2:
                pages.append(text)
            if len(pages) == limit:
                break
    return pages


def _spacy_words(code: str, text: str) -> list[str]:
    """datatrove's `SpaCyTokenizer(code).word_tokenize`: a blank pipeline's tokens, stripped, the empty ones
    dropped."""
    import spacy

    return [w for w in (t.text.strip() for t in spacy.blank(code)(text)) if w]


# Where a pattern standing in for spaCy split differently on news text (hyphenated names, inverted clitics, figures
# with attached punctuation, Greek abbreviations), and spaCy's exceptions that join two chunks.
HARD = {
    "fr": ["Pré-sous-la-Ferme, Saint-Michel et Grande-rue : ai-je tort ? +8,1 % en 2023, 3. 70% [2]. 3-1 "
           "l’homme qu'aujourd'hui https://example.fr/a?b=1 «Oui» (p. 12) M. Dupont", "Contents" + "." * 5000 + " 7"],
    "el": ["Στις 5 μ.μ. ο κ. Παπαδόπουλος είπε: «Όχι!» π.μ. Αγ. Γρ. Λ 3,5% (2021)"],
    "es": ["Los EE. UU. y el Sr. Pérez (p. ej. 3,5%) dijeron «no».", "EE.\nUU. EE.  UU."],
    "ru": ["в н.в. т.е. 1990-х гг. «Да» — сказал он.", "в\nн.в."],
    "en": ["Don't stop. U.S. e.g. it's 12:30pm (see https://a.b/c). :) Mr. Smith's $899.00 501(c)(3) dont",
           "emoji 😀 ok, 😀! a \x00 b. c\x00d \x1c a\x1fb\u3000c ⅷ² Ⅻ ①… 中文，字。"],
    "id": ["IDRETRY Rp5.000 IDR100 harga"],
    "ms": ["RMB RM5 RMZ"],
    "ar": ["في عام 1948. تعسفاً. (ب. م) «نعم»"],
}


@pytest.mark.corpus  # spaCy's tokenizers of eight languages, each seconds to load
@pytest.mark.parametrize("language", list(HARD))
def test_spaced_languages_split_exactly_as_spacy(language):
    """A spaced language's words are its spaCy tokenizer's, as datatrove runs it: a batch's distinct chunks
    tokenized in one call give each text's words, also where an exception spans two chunks."""
    code = segment.segmenter_of(language).removeprefix("spacy:")
    texts = HARD[language] + ["", "   "]
    ours = segment.words_column(pl.Series([*texts, None]), language).to_list()
    assert ours == [_spacy_words(code, t) for t in texts] + [[]]


@pytest.mark.corpus  # every spaCy language over the UDHR's words
def test_letters_stay_whole_outside_the_languages_with_letter_affixes():
    """The split tokenizes only chunks that are not letters alone: in every spaCy language of the table but
    `_LETTER_AFFIXES`, the letter-only words of the UDHR in every language stay one token (or are exceptions).
    (Those languages' currency codes split such words: "IDRETRY", "RMB", in `HARD`.)"""
    with zipfile.ZipFile(shared("text", "nltk-data__udhr2.zip")) as z:
        words = sorted({w for name in z.namelist() if name.endswith(".txt")
                        for w in z.read(name).decode("utf-8", "replace").split()})
    letters = pl.Series(words).filter(pl.Series(words).str.contains(segment._LETTERS)).gather_every(3)
    codes = {segment.segmenter_of(x) for x in segment.language_table()} | {segment.ENGLISH}
    split = {}
    for code in sorted(c.removeprefix("spacy:") for c in codes if c.startswith("spacy:")):
        nlp = segment._spacy(code)
        candidates = letters.filter(~letters.is_in(segment._exceptions(code).implode()))
        owner, _ = segment._tokenize_chunks(nlp, candidates)
        if (counts := collections.Counter(owner.tolist())) and max(counts.values()) > 1:
            split[code] = [candidates[i] for i, n in counts.items() if n > 1][:5]
    assert set(split) <= segment._LETTER_AFFIXES, split


def test_chinese_web_pages_agree_with_datatrove():
    pages = _warc_pages(r"[\u4e00-\u9fff]")
    assert len(pages) >= 3  # the WARC's README: zh is its most frequent language
    ours = segment.words_column(pl.Series(pages), "zh").to_list()
    agreement, diff = _agreement(ours, _datatrove("cmn_Hani", pages))
    assert agreement == 1.0, diff.most_common(10)
    # and not sentence-long "words": the pattern alone would give a handful per page
    assert sum(map(len, ours)) > 3 * sum(len(p.split()) for p in pages)


def test_script_fallback_for_languages_without_a_segmenter():
    """`und` is split by its text's dominant script: Han by jieba, kana by Sudachi, Thai by newmm,
    Lao/Khmer/Myanmar/Tibetan into grapheme clusters; spaced scripts by spaCy's multi-language tokenizer."""
    texts = pl.Series(["我们是中国人民的朋友。", "人間は生まれながらにして自由である。", "มนุษย์ทั้งหลายเกิดมามีอิสระ",
                       "ຂ້ອຍຮັກເຈົ້າ", "Alle Menschen sind frei.", None])
    words = segment.words_column(texts, "und").to_list()
    assert words[0] == ["我们", "是", "中国", "人民", "的", "朋友", "。"]
    assert words[1][:4] == ["人間", "は", "生まれ", "ながら"]
    assert words[2] == ["มนุษย์", "ทั้งหลาย", "เกิด", "มา", "มีอิสระ"]
    assert "".join(words[3]) == "ຂ້ອຍຮັກເຈົ້າ" and "ຂ້" in words[3]  # a consonant keeps its marks
    assert words[4] == ["Alle", "Menschen", "sind", "frei", "."]
    assert words[5] == []
    # a page in a spaced language that quotes a few Chinese words is split by its language's tokenizer
    assert segment.words_column(pl.Series(["Das Wort 中国 heißt China."]), "de").to_list() == [
        ["Das", "Wort", "中国", "heißt", "China", "."]]
    # no language: English rules, as before
    assert segment.words_column(pl.Series(["don't 中国人民"])).to_list() == [["do", "n't", "中国人民"]]


def test_a_mixed_frame_is_split_per_language_in_its_order():
    df = pl.DataFrame({
        "text": ["我们是中国人民的朋友", "L'homme est né libre.", "모든 인간은", "It's free.", "Es geht's.", "x"],
        "language": ["zh", "fr", "ko", "en", "de", None],
    })
    words = segment.with_words(df)["_words"].to_list()
    assert words == [["我们", "是", "中国", "人民", "的", "朋友"], ["L'", "homme", "est", "né", "libre", "."],
                     ["모든", "인간", "은"], ["It", "'s", "free", "."], ["Es", "geht's", "."], ["x"]]
    counts = segment.word_counts(df["text"], df["language"]).to_list()
    # a segmenter's words without punctuation (Korean's particle 은 is one of Kiwi's), else whitespace runs
    assert counts == [6, 4, 3, 2, 2, 1]
    # no rows, or no language known: nothing to split by a segmenter
    empty = pl.DataFrame({"text": [], "language": []}, schema={"text": pl.String, "language": pl.String})
    assert segment.with_words(empty)["_words"].to_list() == []
    assert segment.word_counts(empty["text"], empty["language"]).len() == 0
    unknown = pl.DataFrame({"text": ["don't"], "language": [None]})
    assert segment.with_words(unknown)["_words"].to_list() == [["do", "n't"]]
    assert segment.word_counts(unknown["text"], unknown["language"]).to_list() == [1]


def test_near_duplicate_chinese_pages_are_caught():
    """Chinese has no spaces: without a segmenter, words are whole clauses between punctuation marks, and one
    changed character breaks five clause-long shingles. Here one Han character in a hundred is replaced (a typo,
    a variant form) in each of the WARC's mostly-Chinese pages of running text (at least 1,000 words, at least twice
    as many as the clauses)."""
    pages = [p for p in _warc_pages(r"[\u4e00-\u9fff]")
             if (n := len(words(pl.Series([p]), pl.Series(["zh"]))[0])) >= 1000
             and n >= 2 * len(words(pl.Series([p]))[0])]
    assert len(pages) >= 2
    hasher = MinHasher()  # FineWeb's 14 bands x 8 rows of 5-grams
    for page in pages:
        edited, n = [], 0
        for c in page:
            if "\u4e00" <= c <= "\u9fff":
                n += 1
                if n % 100 == 0:
                    c = "之" if c != "之" else "乎"
            edited.append(c)
        texts = pl.Series([page, "".join(edited)])
        segmented = hasher.signatures(texts, pl.Series(["zh", "zh"]))
        spaced = hasher.signatures(texts)
        bands = hasher.band_hashes(segmented)
        # an edge of the duplicate graph: a shared band and an estimated Jaccard similarity of at least 0.8
        assert (bands[0] == bands[1]).any() and (segmented[0] == segmented[1]).mean() >= 0.8
        assert (spaced[0] == spaced[1]).mean() < 0.8  # as before: missed


@pytest.mark.corpus  # every segmenter's dictionaries loaded in a fresh process
def test_segmenters_load_offline(tmp_path):
    """Every segmenter ships its dictionary: loading and using them in a fresh process with every socket refused."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network refused')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
        "from llm_assets.core import segment\n"
        "segment.warm('jieba,sudachi,kiwi,newmm,graphemes,spacy:fr,spacy:el')\n"
        "import polars as pl\n"
        "for lang, text in [('zh', '我们是朋友'), ('ja', '自由である'), ('ko', '모든 인간은'), ('th', 'มนุษย์ทั้งหลาย')]:\n"
        "    assert len(segment.words_column(pl.Series([text]), lang)[0]) > 1, lang\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_c4_counts_the_words_of_a_chinese_line_with_the_segmenter():
    """C4 drops lines of fewer than 3 words: with whitespace-separated words, every line of a Chinese page is one
    "word", and the whole page went."""
    from llm_assets.core.filters.c4 import C4Quality

    page = "\n".join(p for p in _paragraphs("cmn_hans")[5:25] if p.endswith("。"))
    assert page.count("\n") >= 5
    block = C4Quality(filter_no_terminal_punct=False)  # C4's terminal punctuation is ASCII; FineWeb turns it off
    assert block.apply(pl.DataFrame({"text": [page], "language": ["zh"]}))[0]["text"][0] == page
    assert block.apply(pl.DataFrame({"text": [page]}))[0]["text"][0] == ""  # before


def test_the_filter_pool_warms_the_segmenters_of_the_kept_languages():
    from llm_assets.core.filtered import FilteredSettings, FilterUnit
    from llm_assets.core.filters.language import LanguageFilter

    settings = FilteredSettings()
    keeping = settings.replaced("language", LanguageFilter(languages=("en", "de", "zh", "ja")))
    unit = FilterUnit(store=None, settings=keeping, source="s", unit="u",  # type: ignore[arg-type]
                      part="p", rejected_part="r")
    assert unit.warmup.function == "llm_assets.core.segment:warm"
    assert unit.warmup.argument == "jieba,spacy:de,spacy:en,sudachi"
    # every dedicated segmenter, English's and the multi-language tokenizer; the other spaCy languages load on use
    assert segment.segmenters_for("all") == "graphemes,jieba,kiwi,newmm,spacy:en,spacy:xx,sudachi"


def test_a_text_split_before_is_taken_from_memory():
    calls: list[str] = []

    def split(text: str) -> list[str]:
        calls.append(text)
        return text.split()

    memo = segment._Memo(chars=18)
    assert memo.words("x", "a b c", split) == ["a", "b", "c"] and memo.words("x", "a b c", split) == ["a", "b", "c"]
    assert calls == ["a b c"]
    assert memo.words("x", "", split) == [] and memo.words("x", "", split) == [] and calls == ["a b c", ""]
    assert memo.words("y", "a b c", split) == ["a", "b", "c"] and len(calls) == 3  # per segmenter
    memo.words("x", "012345678", split)  # 19 characters held, over 18: the oldest go first
    assert memo.chars == 14 and ("x", "a b c") not in memo.held and ("x", "012345678") in memo.held
    memo.words("x", "a\0b", split)
    memo.words("x", "over half!", split)
    assert ("x", "a\0b") not in memo.held and len(memo.held) == 3 and memo.chars == 14  # neither is held
    memo.clear()
    assert memo.held == {} and memo.chars == 0


def test_a_kept_korean_page_is_segmented_once(monkeypatch):
    """Kiwi costs tens of milliseconds a page: the chain's blocks share its words, and the stage's word count of
    the kept page takes them from memory rather than segmenting the page again."""
    from llm_assets.core.filtered import FilteredSettings, filter_batch

    kiwi, calls = segment._LOADERS["kiwi"](), []

    def counted() -> Callable[[str], list[str]]:
        return lambda text: calls.append(text) or kiwi(text)

    monkeypatch.setitem(segment._LOADERS, "kiwi", counted)
    segment.forget()
    page = "\n".join(_paragraphs("kor")[3:40])
    batch = pl.DataFrame({"doc_id": ["d0"], "url": ["https://example.org/0"], "domain": ["example.org"],
                          "text": [page]})
    kept, rejected = filter_batch(batch, FilteredSettings.default_with(language={"languages": ("ko",)}))
    assert rejected.height == 0 and kept["language"].to_list() == ["ko"] and kept["n_words"][0] > 200
    assert calls == [page]
    segment.forget()
    assert filter_batch(batch, FilteredSettings.default_with(language={"languages": ("ko",)}))[0].equals(kept)
    assert calls == [page, page]  # forgotten: segmented again, to the same words
