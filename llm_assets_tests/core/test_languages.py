"""Languages: the table of FineWeb-2's per-language thresholds, how a language's blocks are resolved (the chain, then
the table, then the settings' overrides), the chain run per language, the code version, and scripts lid.176 does not
know."""

from __future__ import annotations

import json
import zipfile

import polars as pl
import pytest

from llm_assets.core.filtered import FilteredSettings, filter_batch
from llm_assets.core.filters import DEFAULT_LANGUAGES, GopherQuality, LanguageFilter, apply_filters, language_model
from llm_assets.core.languages import TABLE, UNKNOWN, known_scripts, language_table, table_version
from llm_assets.core.languages.generate import MIRROR, Source, overrides
from llm_assets.core.languages.scripts import unknown_scripts
from llm_assets_support.shared_data import shared

pytestmark = pytest.mark.core


def udhr(name: str, chars: int = 3000) -> str:
    """The start of the Universal Declaration of Human Rights in one language (udhr2/<name>.txt), lines trimmed."""
    with zipfile.ZipFile(shared("text", "nltk-data__udhr2.zip")) as z:
        text = z.read(f"udhr2/{name}.txt").decode("utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and line.strip() != "[??]"]
    out = []
    for line in lines:
        if sum(len(x) for x in out) > chars:
            break
        out.append(line)
    return "\n".join(out)


def docs(*texts: str) -> pl.DataFrame:
    n = len(texts)
    return pl.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "url": [f"https://example.org/{i}" for i in range(n)],
                         "domain": ["example.org"] * n, "text": list(texts)})


# The table


def test_the_table_names_every_label_of_the_identifier_and_its_source():
    table = language_table()
    labels = {label.removeprefix("__label__") for label in language_model().get_labels()}
    assert set(table) == labels and len(labels) == 176
    meta = json.loads(TABLE.read_text())
    assert meta["source"]["repository"] == "https://github.com/huggingface/fineweb-2"
    assert meta["source"]["license"] == "Apache-2.0" and len(meta["source"]["commit"]) == 40
    assert meta["generator"] == "python -m llm_assets.core.languages.generate"
    # English keeps FineWeb's thresholds (FineWeb-2 has no eng_Latn); each label without a config says why
    assert table["en"].fineweb2 is None and not table["en"].overrides
    assert {c for c, lang in table.items() if lang.fineweb2 is None} == set(meta["without_config"]) == {"en", "sh"}
    assert (table["als"].fineweb2, table["sq"].fineweb2) == ("gsw_Latn", "als_Latn")  # Wikipedia's als: Alemannic
    assert {table[c].script for c in ("de", "ru", "zh", "ja", "ko", "th", "hi", "ar")} == {
        "Latn", "Cyrl", "Hani", "Jpan", "Hang", "Thai", "Deva", "Arab"}
    assert known_scripts() >= {"Latn", "Cyrl", "Hani", "Jpan", "Hang", "Thai", "Deva", "Arab", "Grek", "Hebr"}
    assert len(table_version()) == 20


def test_the_table_rows_are_fineweb2s_values():
    """Values copied from FineWeb-2's configs (d0defb2): deu_Latn, cmn_Hani, jpn_Jpan; and, where the fineweb-2
    mirror is on this machine, the whole rows against the YAML files."""
    table = language_table()
    de, zh, ja = table["de"].overrides, table["zh"].overrides, table["ja"].overrides
    assert (table["de"].fineweb2, table["zh"].fineweb2, table["ja"].fineweb2) == ("deu_Latn", "cmn_Hani", "jpn_Jpan")
    assert de["language"]["threshold"] == 0.821 and zh["language"]["threshold"] == 0.692
    assert ja["language"]["threshold"] == 0.886
    assert de["gopher_repetition"]["dup_line_frac"] == 0.263
    assert de["gopher_repetition"]["top_n_grams"] == [[2, 0.169], [3, 0.153], [4, 0.137]]
    assert de["gopher_repetition"]["dup_n_grams"][0] == [5, 0.141]
    stop_words = de["gopher_quality"]["stop_words"]
    assert stop_words[:3] == ["der", "und", "die"] and "für" in stop_words
    assert (de["gopher_quality"]["min_avg_word_length"], de["gopher_quality"]["max_avg_word_length"]) == (0, 15)
    assert de["gopher_quality"]["min_alpha_words_ratio"] == 0.774  # FineWeb-2's max_non_alpha_words_ratio
    assert (de["fineweb_quality"]["line_punct_thr"], de["fineweb_quality"]["new_line_ratio"]) == (0.0, 0.152)
    assert (zh["gopher_quality"]["max_avg_word_length"], zh["fineweb_quality"]["line_punct_thr"]) == (5, 0.106)
    assert ja["gopher_quality"]["stop_words"][:2] == ["の", "に"] and ja["fineweb_quality"]["new_line_ratio"] == 0.13
    # the constants fineweb-2-pipeline.py passes to every language (0 is datatrove's "off": null here)
    for row in (de, zh, ja):
        repetition, fineweb = row["gopher_repetition"], row["fineweb_quality"]
        assert repetition["dup_para_frac"] is None and repetition["dup_line_char_frac"] is None
        assert fineweb["short_line_thr"] == 999 and fineweb["char_duplicates_ratio"] == 0.1
        assert row["gopher_quality"]["min_stop_words"] == 2 and row["c4_quality"] == {"enabled": False}
    if MIRROR.is_dir():
        source = Source(MIRROR, "HEAD", None)
        for code in ("de", "zh", "ja", "ru", "fr", "th", "ko", "hi", "ar"):
            row = table[code]
            assert row.overrides == overrides(source.config(row.fineweb2)), code


# Resolution: the chain, then the table, then the overrides


def _block(settings: FilteredSettings, language: str, name: str):
    return next(b for b in settings.chain_for(language) if b.name == name)


def test_a_languages_blocks_are_the_chains_then_the_tables_then_the_overrides():
    s = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3, "language.threshold": 0.7}})
    # English: the chain's (FineWeb's) values; its language threshold FineWeb's 0.65
    assert _block(s, "en", "gopher_quality") == GopherQuality()
    assert _block(s, "en", "language").threshold == 0.65
    assert "c4_quality" in [b.name for b in s.chain_for("en")]
    # French: the table's row over the chain; what the row does not name stays the chain's
    fr = _block(s, "fr", "gopher_quality")
    assert fr.stop_words[:3] == ("de", "la", "le") and fr.min_alpha_words_ratio == 0.812
    assert fr.min_doc_words == GopherQuality().min_doc_words
    # its language score FineWeb-2's 0.824 re-derived for lid.176's scores (languages/lid176.json), or as published
    assert _block(s, "fr", "language").threshold == 0.608 and s.threshold_sources("fr")["language"]["threshold"] == (
        "lid176")
    published = FilteredSettings.default_with(language={"thresholds": "fineweb2"})
    assert _block(published, "fr", "language").threshold == 0.824
    assert published.threshold_sources("fr")["language"]["threshold"] == "fineweb2"
    assert "c4_quality" not in [b.name for b in s.chain_for("fr")]  # FineWeb-2 runs no C4 rules
    # German: the overrides over the row
    de = _block(s, "de", "gopher_quality")
    assert de.min_stop_words == 3 and de.stop_words[0] == "der"
    assert _block(s, "de", "language").threshold == 0.7
    assert s.applied_thresholds("de")["gopher_quality"]["min_stop_words"] == 3
    assert s.threshold_sources("de")["gopher_quality"]["min_stop_words"] == "override"
    assert s.threshold_sources("de")["gopher_quality"]["stop_words"] == "fineweb2"
    assert "gopher_quality" not in s.threshold_sources("en")
    assert s == FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3, "language.threshold": 0.7}})
    # the blocks before the language block are everyone's
    assert s.chain_for("de")[:2] == s.chain_for("en")[:2]
    # without the table every language has the chain's values; a chain threshold is every language's
    assert _block(FilteredSettings(language_table="none"), "de", "gopher_quality") == GopherQuality()
    fixed = FilteredSettings.default_with(language={"threshold": 0.5})
    assert {_block(fixed, c, "language").threshold for c in ("en", "de", "ja")} == {0.5}


@pytest.mark.parametrize("overrides, fragment", [
    ({"xx": {"language.threshold": 0.5}}, "unknown language 'xx'"),
    ({"de": {"gopher_qualty.min_stop_words": 3}}, "'gopher_qualty' of 'gopher_qualty.min_stop_words' is not in"),
    ({"de": {"gopher_quality.min_stop_word": 3}}, "gopher_quality has no field 'min_stop_word'"),
    ({"de": {"url.soft_word_threshold": 3}}, "runs before the language block"),
    ({"de": {"language.threshold": 2}}, "threshold"),
    ({"de": {"gopher_quality.min_stop_words": "many"}}, "min_stop_words"),
])
def test_overrides_are_checked_and_the_error_names_them(overrides, fragment):
    with pytest.raises(ValueError) as e:
        FilteredSettings(overrides=overrides)
    assert fragment in str(e.value) and "filtered.overrides" in str(e.value)


def test_the_keep_list_names_lid176_labels():
    with pytest.raises(ValueError, match="unknown language 'english'"):
        LanguageFilter(languages=("en", "english"))
    assert FilteredSettings().block("language").languages == DEFAULT_LANGUAGES
    assert {"en", "de", "fr", "zh", "ja", "ru"} <= set(DEFAULT_LANGUAGES)


# The code version


def test_per_language_values_leave_the_code_version_and_change_only_their_languages_fingerprint():
    base = FilteredSettings()
    override = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3}})
    no_table = FilteredSettings(language_table="none")
    more = FilteredSettings.default_with(language={"languages": (*DEFAULT_LANGUAGES, "sv")})
    assert base.fingerprint() == override.fingerprint() == no_table.fingerprint() == more.fingerprint()
    assert override.language_fingerprint("de") != base.language_fingerprint("de")
    assert override.language_fingerprint("en") == base.language_fingerprint("en")
    assert override.language_fingerprint("fr") == base.language_fingerprint("fr")
    assert more.language_fingerprint("sv") != base.language_fingerprint("sv")  # now kept
    assert more.language_fingerprint("de") == base.language_fingerprint("de")
    assert no_table.language_fingerprint("de") != base.language_fingerprint("de")
    assert no_table.language_fingerprint("en") == base.language_fingerprint("en")  # English has no row
    # the chain itself: a default threshold, or the order, changes the code version
    stricter = FilteredSettings.default_with(gopher_quality=GopherQuality(min_doc_words=80))
    *blocks, last = base.chain
    assert len({base.fingerprint(), stricter.fingerprint(), FilteredSettings(chain=(blocks[1], blocks[0], *blocks[2:],
                                                                                     last)).fingerprint()}) == 3


# The chain per language


def test_each_language_is_judged_by_its_own_thresholds_in_one_batch():
    """German and English pages in one batch: each kept by its language's blocks (German has none of English's
    stop words, English none of German's), in the batch's order; an override for German drops only the German
    page, with German's threshold in the detail."""
    english, german = udhr("eng"), udhr("deu")
    english_2 = udhr("eng", 6000)[len(english):].strip()
    batch = docs(english, german, english_2)
    kept, rejected = filter_batch(batch, FilteredSettings())
    assert rejected.height == 0 and kept["doc_id"].to_list() == ["d0", "d1", "d2"]
    assert kept["language"].to_list() == ["en", "de", "en"]
    # with English's values for every language, the German page fails English's stop words
    _, rejected = filter_batch(batch, FilteredSettings(language_table="none"))
    assert rejected.select("doc_id", "reason").rows() == [("d1", "gopher_enough_stop_words")]
    strict = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 50}})
    kept, rejected = filter_batch(batch, strict)
    assert kept["doc_id"].to_list() == ["d0", "d2"]
    assert rejected.select("doc_id", "language", "filter", "reason").rows() == [
        ("d1", "de", "gopher_quality", "gopher_enough_stop_words")]
    assert json.loads(rejected["detail"][0])["threshold"] == "stop_words < 50"


def test_rows_keep_their_order_across_language_groups():
    """Many pages of three languages interleaved: kept and rejected rows come back in the batch's order, each
    language's blocks seeing only its rows."""
    pages = [udhr(name, 1500 + 300 * i) for i in range(3) for name in ("eng", "deu", "fra")] + ["too short", "kurz"]
    batch = docs(*pages)
    seen: dict[str, set[str]] = {}

    class Spy(GopherQuality):
        def apply(self, df):
            seen.setdefault(str(self.stop_words[0]), set()).update(df["language"].to_list())
            return super().apply(df)

    s = FilteredSettings()
    kept, dropped = apply_filters(batch, s.blocks(), lambda code: [
        Spy(**b.model_dump(exclude={"block"})) if b.name == "gopher_quality" else b for b in s.chain_for(code)])
    ids = batch["doc_id"].to_list()
    assert kept["doc_id"].to_list() == [i for i in ids if i in set(kept["doc_id"])]
    assert dropped["doc_id"].to_list() == [i for i in ids if i in set(dropped["doc_id"])]
    assert kept.height + dropped.height == batch.height and kept.height >= 3 and dropped.height >= 3
    assert seen["the"] <= {"en"} and seen["der"] == {"de"} and seen["de"] == {"fr"}


# Scripts lid.176 does not know


def test_scripts_the_identifier_does_not_know_are_und_not_guessed():
    cherokee, tifinagh = udhr("chr"), udhr("tzm_tfng")
    batch = docs(udhr("eng"), cherokee, tifinagh, udhr("jpn"), "12345 67890")
    assert unknown_scripts(batch["text"]).to_list() == [None, "Cher", "Tfng", None, None]
    kept, rejected = filter_batch(batch, FilteredSettings.default_with(language={"languages": "all"}))
    unknown = rejected.filter(pl.col("reason") == "unknown_script")
    assert unknown.select("doc_id", "language", "filter").rows() == [("d1", UNKNOWN, "language"),
                                                                      ("d2", UNKNOWN, "language")]
    assert unknown["language_score"].null_count() == 2
    assert [json.loads(d)["measured"] for d in unknown["detail"]] == ["Cher", "Tfng"]
    assert set(kept["language"]) <= {"en", "ja"}
