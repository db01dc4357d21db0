"""Packing tokenized documents into fixed-length training sequences, as a plan of token ranges.

A training step reads sequences of exactly `context` tokens. Documents are shorter or longer than that, so they
are packed, in one of two ways:

- concatenate-and-chunk (`pack_concat`): the token stream is cut into consecutive windows of `context` tokens.
  No padding at all, but documents cross sequence boundaries and the last partial window is dropped.
- best-fit-decreasing (`pack_bfd`): whole documents go into sequences, longest first, each into the open sequence
  it fills the most; the room left is padding. A document longer than `context` is first cut into chunks of
  `context` tokens, each a sequence of its own, and its remainder is packed like a short document. Nothing is
  dropped and no document shorter than `context` is split, at the cost of a little padding (under 1% on
  WikiText-2 lines at a 2048-token context, since the many short documents fill the gaps the long ones leave).

The input is the token stream of a set of documents, flat: `tokens` (every document ends with its EOS token) and
`doc_offsets` (document i is tokens[doc_offsets[i]:doc_offsets[i+1]]). The output is a `Plan`: which ranges of
`tokens` make each sequence, never a copy of the tokens, so a plan for a billion tokens is a few arrays of
piece boundaries, and a writer can assemble any sequence on demand, in any (e.g. shuffled) order.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

import numpy as np

SEQ, START, LENGTH = 0, 1, 2  # the columns of Plan.pieces


@dataclass(frozen=True)
class PackingStats:
    sequences: int
    context: int
    tokens_in: int
    tokens_out: int  # real tokens placed in sequences
    padding_tokens: int
    truncated_tokens: int  # input tokens in no sequence

    @property
    def padding_pct(self) -> float:
        """Padding as a percent of the output tokens."""
        out = self.sequences * self.context
        return 100.0 * self.padding_tokens / out if out else 0.0

    @property
    def truncated_pct(self) -> float:
        """Dropped tokens as a percent of the input tokens."""
        return 100.0 * self.truncated_tokens / self.tokens_in if self.tokens_in else 0.0


# eq=False: the generated __eq__ would compare the pieces arrays as a tuple member, which NumPy refuses.
@dataclass(frozen=True, eq=False)
class Plan:
    """Which token ranges make each sequence. `pieces` rows are (sequence, start in `tokens`, length), sorted by
    sequence, then by position in the sequence; a sequence's pieces fill it from the front, the rest is padding."""

    pieces: np.ndarray
    sequences: int
    context: int
    stats: PackingStats

    def sequence(self, i: int, tokens: np.ndarray, pad_id: int) -> np.ndarray:
        """Sequence i: `context` tokens, padded at the end with pad_id where the plan leaves room."""
        if not 0 <= i < self.sequences:
            raise IndexError(f"sequence {i} out of range [0, {self.sequences})")
        # Binary search, not a scan: a shuffled writer asks for sequences in random order.
        lo, hi = np.searchsorted(self.pieces[:, SEQ], [i, i + 1])
        starts, lengths = self.pieces[lo:hi, START], self.pieces[lo:hi, LENGTH]
        out = np.full(self.context, pad_id, dtype=tokens.dtype)
        out[: lengths.sum()] = tokens[gather_index(starts, lengths)]
        return out

    def materialize(self, tokens: np.ndarray, pad_id: int) -> np.ndarray:
        """Every sequence at once, shape (sequences, context): for small inputs and tests."""
        out = np.full(self.sequences * self.context, pad_id, dtype=tokens.dtype)
        seq, starts, lengths = self.pieces[:, SEQ], self.pieces[:, START], self.pieces[:, LENGTH]
        ends_before = np.cumsum(lengths) - lengths
        # A piece's position in its sequence: the tokens of the pieces before it in the same sequence.
        first_of_seq = np.searchsorted(seq, seq, side="left")
        position = ends_before - ends_before[first_of_seq]
        out[gather_index(seq * self.context + position, lengths)] = tokens[gather_index(starts, lengths)]
        return out.reshape(self.sequences, self.context)


def pack_concat(doc_offsets: np.ndarray, context: int) -> Plan:
    """Concatenate-and-chunk: consecutive windows of exactly `context` tokens of the stream; the final partial
    window is dropped. Pieces are cut at document boundaries too, so a piece never spans two documents."""
    offsets = _checked_offsets(doc_offsets, context)
    base, total = int(offsets[0]), int(offsets[-1] - offsets[0])
    sequences = total // context
    end = base + sequences * context
    window_starts = base + context * np.arange(sequences, dtype=np.int64)
    inner_doc_starts = offsets[(offsets > base) & (offsets < end)]
    cuts = np.sort(np.concatenate([window_starts, inner_doc_starts]))
    cuts = cuts[np.diff(cuts, prepend=-1) > 0]  # distinct cuts: no empty piece
    lengths = np.diff(np.append(cuts, end))
    pieces = np.column_stack([(cuts - base) // context, cuts, lengths]).astype(np.int64)
    stats = PackingStats(sequences=sequences, context=context, tokens_in=total, tokens_out=sequences * context,
                         padding_tokens=0, truncated_tokens=total - sequences * context)
    return _plan(pieces, sequences, context, stats)


def pack_bfd(doc_offsets: np.ndarray, context: int) -> Plan:
    """Best-fit-decreasing packing of whole documents; documents longer than `context` are cut into chunks of
    `context` tokens first (a full chunk is a sequence of its own, the remainder is packed). Deterministic."""
    offsets = _checked_offsets(doc_offsets, context)
    doc, starts, lengths = _chunks(offsets, context)
    full = lengths == context
    n_full = int(full.sum())
    rest = np.flatnonzero(~full)
    order = rest[np.lexsort((doc[rest], -lengths[rest]))]  # longest first; ties by document
    rest_seq, n_packed = _best_fit(lengths[order], context)
    seq = np.empty(len(lengths), dtype=np.int64)
    # Full chunks would each open a sequence of their own anyway: they are the first sequences, in stream order.
    seq[full] = np.arange(n_full, dtype=np.int64)
    seq[order] = n_full + rest_seq
    sequences = n_full + n_packed
    total = int(offsets[-1] - offsets[0])
    # Inside a sequence, pieces follow the stream order: start offsets increase with (document, chunk).
    by_seq = np.lexsort((starts, seq))
    pieces = np.column_stack([seq[by_seq], starts[by_seq], lengths[by_seq]])
    stats = PackingStats(sequences=sequences, context=context, tokens_in=total, tokens_out=total,
                         padding_tokens=sequences * context - total, truncated_tokens=0)
    return _plan(pieces, sequences, context, stats)


def bucket_by_length(doc_offsets: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """Each document's length bucket: the index of the first boundary ≥ its token count, or len(boundaries) for
    a document longer than every boundary. Boundaries ascend, e.g. the context lengths of a curriculum."""
    lengths = np.diff(np.asarray(doc_offsets, dtype=np.int64))
    return np.searchsorted(np.asarray(boundaries), lengths, side="left").astype(np.int64)


def _best_fit(lengths: np.ndarray, context: int) -> tuple[np.ndarray, int]:
    """-> (sequence of each piece, number of sequences): each piece, in the given order, goes into the open
    sequence with the least room that still fits it, else into a new sequence.

    Open sequences are kept by their exact room: `open_by_room[r]` is a stack of the sequences with r tokens of
    room, and `rooms` the sorted distinct rooms that have at least one. The best fit is then one bisect, and
    moving a sequence to its new room a stack pop and push; `rooms` holds at most `context` values, so keeping
    it sorted is a short memmove. Full sequences (room 0) are never looked at again, so they are not kept.
    """
    open_by_room: list[list[int]] = [[] for _ in range(context)]
    rooms: list[int] = []
    assigned: list[int] = []
    sequences = 0
    for length in lengths.tolist():
        k = bisect_left(rooms, length)
        if k < len(rooms):
            room = rooms[k]
            stack = open_by_room[room]
            s = stack.pop()
            if not stack:
                del rooms[k]
        else:
            room, s = context, sequences
            sequences += 1
        assigned.append(s)
        left = room - length
        if left:
            stack = open_by_room[left]
            if not stack:
                insort(rooms, left)
            stack.append(s)
    return np.asarray(assigned, dtype=np.int64), sequences


def _chunks(offsets: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (document, start, length) of every chunk: each document cut into pieces of `context` tokens, its last
    piece the remainder. A document of at most `context` tokens is one chunk; an empty one has none."""
    doc_lengths = np.diff(offsets)
    n_chunks = -(-doc_lengths // context)
    doc = np.repeat(np.arange(len(doc_lengths), dtype=np.int64), n_chunks)
    first_chunk = np.cumsum(n_chunks) - n_chunks
    chunk_in_doc = np.arange(len(doc), dtype=np.int64) - np.repeat(first_chunk, n_chunks)
    starts = offsets[:-1][doc] + chunk_in_doc * context
    lengths = np.minimum(context, offsets[1:][doc] - starts)
    return doc, starts, lengths


def gather_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(start, start + length) over the ranges, without a loop over them."""
    ends_before = np.cumsum(lengths) - lengths
    return np.repeat(starts - ends_before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def _checked_offsets(doc_offsets: np.ndarray, context: int) -> np.ndarray:
    if context < 1:
        raise ValueError(f"context must be at least 1, got {context}")
    offsets = np.asarray(doc_offsets, dtype=np.int64)
    if offsets.ndim != 1 or len(offsets) < 1:
        raise ValueError("doc_offsets must be 1-D with n_docs + 1 entries")
    if np.any(np.diff(offsets) < 0) or offsets[0] < 0:
        raise ValueError("doc_offsets must be non-negative and non-decreasing")
    return offsets


def _plan(pieces: np.ndarray, sequences: int, context: int, stats: PackingStats) -> Plan:
    pieces = np.ascontiguousarray(pieces, dtype=np.int64).reshape(-1, 3)
    pieces.setflags(write=False)  # the plan is frozen, its arrays too
    return Plan(pieces=pieces, sequences=sequences, context=context, stats=stats)
