"""Decontamination on the GSM8K test set and the real shared documents: every planted passage is found, whole or
lightly edited; the untouched documents are not flagged."""

import json
import random

import polars as pl
import pytest
import regex

from llm_assets.core.decontamination import EvalIndex, build_index, contamination, eval_texts
from llm_assets_tests.conftest import shared
from llm_assets_tests.corpus import lightly_edited, planted, shared_documents

GSM8K = "openai-grade-school-math__gsm8k_test.jsonl"


@pytest.fixture(scope="module")
def gsm8k() -> list[str]:
    with open(shared("evals", GSM8K), "rb") as fh:
        return list(eval_texts(fh, ("question", "answer"), GSM8K))


@pytest.fixture(scope="module")
def index(gsm8k) -> EvalIndex:
    return build_index({"gsm8k": gsm8k})


@pytest.mark.corpus
def test_every_planted_passage_is_found_and_no_clean_document_is_flagged(gsm8k, index):
    rng = random.Random(7)
    docs = shared_documents()["text"].to_list()
    clean = contamination(index, pl.Series(docs))
    assert clean["contaminated_ngrams"].sum() == 0 and clean["benchmark"].null_count() == len(docs)

    hosts = [docs[rng.randrange(len(docs))] for _ in range(200)]
    passages = rng.sample(gsm8k, 200)
    whole = contamination(index, pl.Series(planted(hosts, passages, rng)))
    assert (whole["contaminated_ngrams"] > 0).all() and set(whole["benchmark"]) == {"gsm8k"}
    edited = contamination(index, pl.Series(planted(hosts, [lightly_edited(p, rng) for p in passages], rng)))
    assert (edited["contaminated_ngrams"] > 0).all()
    assert edited["contaminated_ngrams"].sum() < whole["contaminated_ngrams"].sum()  # the edits cost n-grams


def test_the_span_points_at_the_quoted_words(gsm8k, index):
    question = gsm8k[0].split("\n")[0]
    text = "Some unrelated words come first here. " + question + " And the end."
    (row,) = contamination(index, pl.Series([text])).to_dicts()
    assert row["benchmark"] == "gsm8k" and row["contaminated_ngrams"] > 0
    quoted = text[row["match_start"]:row["match_end"]]
    assert quoted in question and len(regex.findall(r"[^\s\pP\pS]+", quoted)) == index.ngram  # "Janet’s": 2 words


def test_a_short_item_is_one_ngram_and_counts_when_quoted_whole():
    index = build_index({"tiny": ["What is two plus two?"], "other": ["a b c d e f g h i j k l m n o"]})
    found = contamination(index, pl.Series(["Q: what is two plus two? A: four", "what is two plus three"]))
    assert found["benchmark"].to_list() == ["tiny", None]


def test_the_index_round_trips_and_costs_ten_bytes_per_ngram(index):
    again = EvalIndex.from_bytes(index.to_bytes())
    assert again.benchmarks == ("gsm8k",) and again.ngram == 13
    assert (again.hashes == index.hashes).all() and (again.owners == index.owners).all()
    assert index.nbytes == 10 * len(index.hashes)


def test_a_line_that_is_not_a_json_object_names_the_set_and_the_line():
    with pytest.raises(ValueError, match="eval set x.jsonl, line 2: not JSON"):
        list(eval_texts([b'{"question": "a"}', b"{broken"], ("question",), "x.jsonl"))
    assert list(eval_texts([b'{"question": "a", "answer": "b", "id": 3}', b""], ("question", "answer"), "x")) == [
        "a\nb"]


def test_the_block_drops_or_flags_with_the_benchmark_and_must_run_last(gsm8k, index, tmp_path):
    from llm_assets.core.filtered import FilteredSettings
    from llm_assets.core.filters import Decontaminate, PIIMasker, apply_filters

    path = tmp_path / "index.npz"
    path.write_bytes(index.to_bytes())
    docs = pl.DataFrame({"doc_id": ["clean", "quoting"],
                         "text": ["Nothing to see here at all.", "Intro. " + gsm8k[3] + " Outro."]})
    kept, dropped = apply_filters(docs, [Decontaminate(index_path=str(path))])
    assert kept["doc_id"].to_list() == ["clean"] and dropped["reason"].to_list() == ["contaminated"]
    assert json.loads(dropped["detail"][0])["benchmark"] == "gsm8k"
    kept, dropped = apply_filters(docs, [Decontaminate(index_path=str(path), mode="flag")])
    assert dropped.is_empty() and kept["contamination"].struct.field("benchmark").to_list() == [None, "gsm8k"]
    kept, _ = apply_filters(docs, [Decontaminate()])  # no eval set dropped: nothing to check against
    assert kept.height == 2
    with pytest.raises(ValueError, match="decontaminate must be the last"):
        FilteredSettings(chain=(Decontaminate(), PIIMasker()))
