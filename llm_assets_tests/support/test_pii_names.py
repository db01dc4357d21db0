"""The hand-labelled names of llm_assets_support.pii_names: every passage is found in ../shared/data and hashes as
recorded, its labels are the substrings at their offsets, and the scorer gives the gold spans a perfect score and
an empty predictor no recall."""

from __future__ import annotations

import pytest

from llm_assets_support.pii_names import KINDS, PASSAGES, Passage, passages, score
from llm_assets_support.shared_data import shared

pytestmark = pytest.mark.core


@pytest.fixture(scope="module")
def labelled() -> list[tuple[Passage, str]]:
    for file in sorted({p.file for p in PASSAGES}):
        shared(file)  # skips with the reason where ../shared/data is absent
    return passages()  # raises PassageChanged where a text no longer hashes as recorded


@pytest.fixture(scope="module")
def gold(labelled) -> dict[str, list[tuple[int, int, str]]]:
    """The gold spans of each passage, by its text."""
    return {text: [(m.start, m.end, m.kind) for m in p.mentions] for p, text in labelled}


def test_the_set_is_what_its_doc_says():
    assert len(PASSAGES) == 60
    assert len({p.id for p in PASSAGES}) == len(PASSAGES)
    assert {p.file.split("/")[0] for p in PASSAGES} == {"text", "bench", "warc"}
    per_kind = {kind: sum(m.kind == kind for p in PASSAGES for m in p.mentions) for kind in KINDS}
    assert per_kind == {"person": 160, "location": 144}
    assert sum(not p.mentions for p in PASSAGES) == 4  # no name at all: precision is measured there too
    for p in PASSAGES:
        assert (p.line is None) != (p.uri is None), p.id
        assert (p.uri is not None) == p.file.startswith("warc/"), p.id
        assert len(p.sha256) == 16, p.id


def test_every_passage_locates_and_hashes(labelled):
    assert [p for p, _ in labelled] == list(PASSAGES)
    for p, text in labelled:
        assert len(text) == p.end - p.start, p.id
        assert 200 <= len(text) <= 1500, p.id


def test_offsets_match_the_labelled_substrings(labelled):
    for p, text in labelled:
        previous_end = 0
        for m in p.mentions:
            assert text[m.start:m.end] == m.text, (p.id, m)
            assert m.kind in KINDS, (p.id, m)
            assert m.text == m.text.strip() and m.text, (p.id, m)
            assert m.start >= previous_end, (p.id, m)  # in order, never overlapping
            previous_end = m.end


def test_the_gold_spans_score_one(gold):
    scores = score(lambda text: gold[text])
    for kind in (*KINDS, "any"):
        s = scores[kind]
        assert (s.precision, s.recall, s.f1, s.unmasked_chars) == (1.0, 1.0, 1.0, 0), kind
        assert s.gold == s.predicted == s.found == s.correct
    assert scores.person.gold == 160 and scores.location.gold == 144
    assert scores.misses == () and scores.false_positives == ()


def test_an_empty_predictor_has_no_recall(labelled):
    scores = score(lambda text: [])
    for kind in (*KINDS, "any"):
        s = scores[kind]
        assert (s.recall, s.f1, s.predicted) == (0.0, 0.0, 0), kind
        assert s.unmasked_chars == s.gold_chars > 0
    assert len(scores.misses) == 160 + 144


def test_overlap_matching_partial_masks_and_kinds(labelled):
    """One gold mention: a prediction over part of it matches (characters left unmasked are counted), one of the
    wrong kind does not match but still masks, one elsewhere is a false positive."""
    [(p, text)] = [(p, t) for p, t in labelled if p.id == "ccnet-ice-st-moritz"]
    caspar = next(m for m in p.mentions if m.text == "Caspar Badrutt")

    def predict(t: str) -> list[tuple[int, int, str]]:
        if t != text:
            return []
        return [(caspar.start, caspar.start + len("Caspar"), "person"),  # half the name
                (p.mentions[0].start, p.mentions[0].end, "person"),  # St. Moritz, as the wrong kind
                (0, 2, "location")]  # "In": a false positive

    scores = score(predict)
    assert (scores.person.found, scores.person.correct, scores.person.predicted) == (1, 1, 2)
    assert (scores.location.found, scores.location.correct, scores.location.predicted) == (0, 0, 1)
    assert scores.any.found == 2 and scores.any.correct == 2
    unmasked_person = scores.person.gold_chars - len("Caspar")
    assert scores.person.unmasked_chars == unmasked_person
    assert scores.location.unmasked_chars == scores.location.gold_chars - len("St. Moritz")
    assert ("ccnet-ice-st-moritz", 0, 2, "location", "In") in scores.false_positives


def test_a_predicted_kind_outside_the_set_is_an_error(labelled):
    with pytest.raises(ValueError, match="kind 'ORG'"):
        score(lambda text: [(0, 1, "ORG")])
    with pytest.raises(ValueError, match="outside the text"):
        score(lambda text: [(0, len(text) + 1, "person")])
