"""Packing documents into fixed-length sequences: both modes keep every token they promise to keep, exactly once
and in the right place, on WikiText-2 tokenized with the GPT-2 tokenizer and on small hand-made streams; best-fit
decreasing agrees with a naive reference and packs at least as tightly as first-fit and next-fit there."""

from __future__ import annotations

import numpy as np
import pytest

from llm_assets.core.packing import Plan, bucket_by_length, pack_bfd, pack_concat
from llm_assets.core.tokenize import load_tokenizer
from llm_assets_support.shared_data import shared

EOS = 50256
PAD = 65535  # no GPT-2 id: a padded position can never pass for a real token
MODES = {"concat": pack_concat, "bfd": pack_bfd}


@pytest.fixture(scope="module")
def wikitext() -> tuple[np.ndarray, np.ndarray]:
    """(tokens, doc_offsets): every line of the WikiText-2 validation split a document, EOS appended."""
    lines = shared("text", "pytorch-examples__wikitext-2-v1.valid.txt").read_text(encoding="utf-8").splitlines()
    tok = load_tokenizer(str(shared("tokenizers", "gpt2")))
    ids = [e.ids + [EOS] for e in tok.encode_batch(lines, add_special_tokens=False)]
    lengths = np.array([len(d) for d in ids], dtype=np.int64)
    tokens = np.fromiter((t for d in ids for t in d), dtype=np.uint16, count=int(lengths.sum()))
    return tokens, np.concatenate([[0], np.cumsum(lengths)])


def stream(lengths: list[int], dtype=np.uint16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic token stream with documents of the given lengths, each ending with EOS."""
    offsets = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(np.int64)
    tokens = np.random.default_rng(seed).integers(0, EOS, size=int(offsets[-1])).astype(dtype)
    tokens[offsets[1:][np.diff(offsets) > 0] - 1] = EOS
    return tokens, offsets


def fills(plan: Plan) -> np.ndarray:
    """Real tokens in each sequence."""
    return np.bincount(plan.pieces[:, 0], weights=plan.pieces[:, 2], minlength=plan.sequences).astype(np.int64)


def piece_tokens(plan: Plan, tokens: np.ndarray) -> np.ndarray:
    return np.concatenate([tokens[s : s + n] for _, s, n in plan.pieces.tolist()] or [tokens[:0]])


def check_plan(plan: Plan, tokens: np.ndarray, offsets: np.ndarray, context: int) -> np.ndarray:
    """The invariants of both modes; returns the materialized sequences."""
    seq, start, length = plan.pieces.T
    base, total = int(offsets[0]), int(offsets[-1] - offsets[0])
    assert plan.pieces.dtype == np.int64 and plan.pieces.shape == (len(plan.pieces), 3)
    assert plan.context == context
    assert np.all(length >= 1) and np.all((seq >= 0) & (seq < plan.sequences))
    assert np.array_equal(np.lexsort((start, seq)), np.arange(len(seq))), "sorted by sequence, then position"
    fill = fills(plan)
    assert np.all(fill >= 1) and np.all(fill <= context)

    # Each document piece appears once: sorted by start, the pieces tile a prefix of the stream, no gap, no overlap.
    by_start = np.sort(start)
    ends = by_start + length[np.argsort(start)]
    if len(by_start):
        assert by_start[0] == base and np.array_equal(by_start[1:], ends[:-1])
    kept = int(ends[-1] - base) if len(ends) else 0
    # ...and a piece never spans two documents.
    doc_of = lambda x: np.searchsorted(offsets, x, side="right") - 1  # noqa: E731
    assert np.array_equal(doc_of(start), doc_of(start + length - 1))

    s = plan.stats
    assert (s.sequences, s.context, s.tokens_in) == (plan.sequences, context, total)
    assert s.tokens_out == int(length.sum()) == kept
    assert s.tokens_out + s.truncated_tokens == s.tokens_in
    assert s.padding_tokens == plan.sequences * context - s.tokens_out

    rows = plan.materialize(tokens, PAD)
    assert rows.shape == (plan.sequences, context) and rows.dtype == tokens.dtype
    real = np.arange(context) < fill[:, None]  # padding only at the end of a sequence
    assert np.all(rows[~real] == PAD)
    assert np.array_equal(rows[real], piece_tokens(plan, tokens))
    for i in range(plan.sequences):
        assert np.array_equal(plan.sequence(i, tokens, PAD), rows[i])
    return rows


def check_concat(plan: Plan, tokens: np.ndarray, offsets: np.ndarray, context: int) -> None:
    rows = check_plan(plan, tokens, offsets, context)
    base, total = int(offsets[0]), int(offsets[-1] - offsets[0])
    assert plan.sequences == total // context
    # The output is the stream's prefix, in order; no padding; only the final partial window is dropped.
    assert np.array_equal(rows.ravel(), tokens[base : base + plan.sequences * context])
    assert plan.stats.padding_tokens == 0 and plan.stats.truncated_tokens == total % context


def check_bfd(plan: Plan, tokens: np.ndarray, offsets: np.ndarray, context: int) -> None:
    rows = check_plan(plan, tokens, offsets, context)
    base, end = int(offsets[0]), int(offsets[-1])
    assert plan.stats.truncated_tokens == 0
    real = np.arange(context) < fills(plan)[:, None]
    assert np.array_equal(np.sort(rows[real]), np.sort(tokens[base:end])), "the same tokens, none lost or added"

    seq, start, length = plan.pieces.T
    piece_at = dict(zip(start.tolist(), length.tolist(), strict=True))
    doc_lengths = np.diff(offsets)
    for d in np.flatnonzero((doc_lengths >= 1) & (doc_lengths <= context)):
        assert piece_at.get(int(offsets[d])) == doc_lengths[d], f"document {d} is split"
    # A longer document is cut every `context` tokens: full chunks, then one remainder.
    doc = np.searchsorted(offsets, start, side="right") - 1
    assert np.all((start - offsets[doc]) % context == 0)
    assert np.all((length == context) | (start + length == offsets[doc + 1]))
    if plan.sequences >= 2:
        # Any-fit: a sequence is opened only when the piece fits no open one, so no two sequences could merge,
        # which also bounds the count by 2 * tokens / context + 1.
        least = np.sort(fills(plan))[:2]
        assert least.sum() > context
    assert np.ceil((end - base) / context) <= plan.sequences <= 2 * (end - base) / context + 1


def chunk_lengths(offsets: np.ndarray, context: int) -> list[tuple[int, int]]:
    """(length, document) of every chunk, documents cut every `context` tokens, in document order."""
    return [(min(context, n - k), d) for d, n in enumerate(np.diff(offsets).tolist()) for k in range(0, n, context)]


def reference_fills(offsets: np.ndarray, context: int, rule: str) -> list[int]:
    """Sequence fills of a naive packer that scans every sequence for every piece: 'best' or 'first' fit
    decreasing, or 'next' fit in document order."""
    pieces = chunk_lengths(offsets, context)
    if rule != "next":
        pieces.sort(key=lambda p: (-p[0], p[1]))
    bins = np.zeros(len(pieces), dtype=np.int64)
    used = 0
    for n, _ in pieces:
        fits = np.flatnonzero(bins[:used] + n <= context)
        if rule == "next":
            fits = fits[fits == used - 1]
        if not len(fits):
            bins[used] = n
            used += 1
            continue
        i = fits[np.argmax(bins[fits])] if rule == "best" else fits[0]
        bins[i] += n
    return sorted(bins[:used].tolist())


@pytest.mark.parametrize("context", [64, 512, 2048])
def test_concat_on_wikitext(wikitext, context):
    tokens, offsets = wikitext
    check_concat(pack_concat(offsets, context), tokens, offsets, context)


@pytest.mark.parametrize("context", [64, 512, 2048])
def test_bfd_on_wikitext(wikitext, context):
    tokens, offsets = wikitext
    plan = pack_bfd(offsets, context)
    check_bfd(plan, tokens, offsets, context)
    # Best fit decides by room only, so the fills do not depend on which of two equally full sequences it picks.
    assert sorted(fills(plan).tolist()) == reference_fills(offsets, context, "best")
    assert plan.sequences <= len(reference_fills(offsets, context, "first"))
    assert plan.sequences <= len(reference_fills(offsets, context, "next"))


def test_bfd_pads_little_on_wikitext(wikitext):
    """Thousands of short lines fill the gaps: under 1% padding at a 2048-token context."""
    _, offsets = wikitext
    assert pack_bfd(offsets, 2048).stats.padding_pct < 1.0


@pytest.mark.parametrize("mode", MODES)
def test_deterministic(wikitext, mode):
    _, offsets = wikitext
    a, b = MODES[mode](offsets, 512), MODES[mode](offsets.copy(), 512)
    assert np.array_equal(a.pieces, b.pieces) and a.stats == b.stats and a.sequences == b.sequences


@pytest.mark.parametrize("mode", MODES)
def test_empty_input(mode):
    tokens, offsets = stream([])
    plan = MODES[mode](offsets, 16)
    assert plan.sequences == 0 and plan.pieces.shape == (0, 3)
    assert plan.materialize(tokens, PAD).shape == (0, 16)
    assert plan.stats.padding_pct == 0.0 and plan.stats.truncated_pct == 0.0
    with pytest.raises(IndexError):
        plan.sequence(0, tokens, PAD)


@pytest.mark.parametrize("mode", MODES)
def test_one_document_of_exactly_context(mode):
    tokens, offsets = stream([16])
    plan = MODES[mode](offsets, 16)
    assert plan.sequences == 1 and plan.pieces.tolist() == [[0, 0, 16]]
    assert np.array_equal(plan.sequence(0, tokens, PAD), tokens)
    assert plan.stats.padding_tokens == plan.stats.truncated_tokens == 0


def test_one_document_longer_than_several_contexts():
    tokens, offsets = stream([3 * 16 + 5])
    concat = pack_concat(offsets, 16)
    check_concat(concat, tokens, offsets, 16)
    assert concat.sequences == 3 and concat.stats.truncated_tokens == 5
    bfd = pack_bfd(offsets, 16)
    check_bfd(bfd, tokens, offsets, 16)
    assert bfd.pieces.tolist() == [[0, 0, 16], [1, 16, 16], [2, 32, 16], [3, 48, 5]]
    assert bfd.stats.padding_tokens == 11 and bfd.stats.truncated_tokens == 0


def test_long_documents_among_short_ones():
    """A long document's remainder is packed with the short ones; its full chunks stay alone."""
    tokens, offsets = stream([3, 40, 5, 9, 2, 16, 7])
    check_bfd(pack_bfd(offsets, 16), tokens, offsets, 16)
    check_concat(pack_concat(offsets, 16), tokens, offsets, 16)
    assert sorted(fills(pack_bfd(offsets, 16)).tolist()) == reference_fills(offsets, 16, "best")


def test_many_tiny_documents():
    lengths = np.random.default_rng(1).integers(1, 4, size=2000).tolist()
    tokens, offsets = stream(lengths)
    bfd = pack_bfd(offsets, 16)
    check_bfd(bfd, tokens, offsets, 16)
    assert sorted(fills(bfd).tolist()) == reference_fills(offsets, 16, "best")
    assert bfd.sequences == -(-sum(lengths) // 16)  # pieces of 1-3 tokens leave at most the last one short
    check_concat(pack_concat(offsets, 16), tokens, offsets, 16)


@pytest.mark.parametrize("mode", MODES)
def test_context_one(mode):
    tokens, offsets = stream([1, 3, 2])
    plan = MODES[mode](offsets, 1)
    (check_concat if mode == "concat" else check_bfd)(plan, tokens, offsets, 1)
    assert plan.sequences == 6 and plan.stats.padding_tokens == 0
    assert np.array_equal(plan.materialize(tokens, PAD)[:, 0], tokens)


@pytest.mark.parametrize("mode", MODES)
def test_uint32_tokens_offset_stream_and_empty_documents(mode):
    """Documents need not start at token 0, a zero-length entry is tolerated, and the token type is kept."""
    tokens, offsets = stream([4, 7, 0, 5, 12, 1, 9], dtype=np.uint32)
    tokens = np.concatenate([np.full(3, 7, np.uint32), tokens])
    offsets = offsets + 3
    (check_concat if mode == "concat" else check_bfd)(MODES[mode](offsets, 8), tokens, offsets, 8)


@pytest.mark.parametrize("mode", MODES)
def test_rejects_bad_arguments(mode):
    with pytest.raises(ValueError):
        MODES[mode](np.array([0, 4]), 0)
    with pytest.raises(ValueError):
        MODES[mode](np.array([0, 4, 2]), 8)


def test_plan_is_read_only():
    plan = pack_bfd(np.array([0, 3, 5]), 8)
    with pytest.raises(ValueError):
        plan.pieces[0, 0] = 1


def test_bucket_by_length():
    offsets = np.concatenate([[0], np.cumsum([1, 512, 513, 2048, 5000])])
    assert bucket_by_length(offsets, np.array([512, 1024, 2048])).tolist() == [0, 0, 1, 2, 3]
