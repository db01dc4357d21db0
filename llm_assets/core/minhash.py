"""MinHash signatures of word 5-gram shingles, for a whole batch of documents at once, and their LSH bands.

Classic MinHash takes, for each of k hash functions, the minimum over every shingle: k × n hash evaluations per
document, which is what makes datasketch slow. This is one-permutation hashing (Li, Owen & Zhang 2012) with
optimal densification (Shrivastava 2017): every shingle is hashed once, its hash picks one of k bins and the bin
keeps its minimum; a bin no shingle fell into borrows the value of a non-empty bin chosen by a fixed random
sequence, the same for every document. Two documents then agree on a signature row with probability equal to the
Jaccard similarity of their shingle sets, as with k independent permutations, at a k-th of the cost; the work is a
handful of NumPy passes over the batch's shingles, never a Python loop over documents or shingles.

Text is simplified first as FineWeb's deduplication does: lowercase, and words are what punctuation, symbols and
whitespace separate, or, in languages written without spaces, the words of the language's segmenter (`segment`:
else a Chinese page would be a handful of sentence-long "words"). A document with fewer words than the n-gram size
is one shingle; a
document with no words gets the empty signature (all rows `EMPTY`) and matches no other.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import regex

from llm_assets.core.segment import segmented, words_by_language

EMPTY = np.uint32(0xFFFFFFFF)
_SENTINEL = np.uint64(1 << 32)  # above every 32-bit value: a bin no shingle fell into
# A word: a run of anything but whitespace, punctuation and symbols (letters of every script, digits, marks).
_WORD = r"[^\s\pP\pS]+"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_DENSIFY_ROUNDS = 32
_DENSE_ROUNDS = 6  # densification rounds over whole signatures before the rest go bin by bin


def _mix(x: np.ndarray) -> np.ndarray:
    """A multiply–xorshift finalizer (in place): every output bit depends on every input bit."""
    x ^= x >> np.uint64(29)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(32)
    return x


def words(texts: pl.Series, languages: pl.Series | None = None) -> pl.Series:
    """The simplified words of each text (in `languages`, lid.176 labels, when given): a list column."""
    if languages is not None and len(rows := segmented(texts, languages).arg_true()):
        split = words_by_language(texts.gather(rows), languages.gather(rows)).list.join(" ")
        texts = texts.scatter(rows, split)
    return texts.str.to_lowercase().str.extract_all(_WORD)


def shingle_hashes(texts: pl.Series, ngram: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """-> (hashes, counts): the 64-bit hash of every word n-gram of every text, flat, and each text's count."""
    return word_shingle_hashes(words(texts.fill_null("")), ngram, seed)


def word_shingle_hashes(words: pl.Series, ngram: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The same from the texts' words (a list column)."""
    lens = words.list.len().to_numpy().astype(np.int64)
    h = words.explode().drop_nulls().hash(seed=seed).to_numpy()
    counts = np.where(lens > 0, np.maximum(lens - ngram + 1, 1), 0)
    # The n-gram starting at word i folds words i .. i+n-1 in order, ((w_i·φ + w_i+1)·φ + ...), over the flat
    # words of the whole batch at once; the last n-1 positions of each text are not n-gram starts.
    g = h.copy()
    for k in range(1, ngram):
        g[:-k] *= _GOLDEN
        g[:-k] += h[k:]
    starts = np.cumsum(lens) - lens
    tail = np.zeros(len(h) + 1, np.int8)
    np.add.at(tail, starts + counts, 1)
    np.add.at(tail, starts + lens, -1)
    g = g[np.cumsum(tail[:-1], dtype=np.int8) == 0]
    # A text shorter than n words has one shingle, its words only (the fold above ran into the next text's).
    short = np.nonzero((lens > 0) & (lens < ngram))[0]
    if len(short):
        folded = np.zeros(len(short), np.uint64)
        for k in range(ngram - 1):
            inside = k < lens[short]
            folded = np.where(inside, folded * _GOLDEN + h[np.minimum(starts[short] + k, len(h) - 1)], folded)
        g[(np.cumsum(counts) - counts)[short]] = folded
    return _mix(g), counts


class MinHasher:
    """Signatures of `bands × rows` values (FineWeb: 14 × 8) over word `ngram`-shingles (FineWeb: 5)."""

    def __init__(self, bands: int = 14, rows: int = 8, ngram: int = 5, seed: int = 1):
        self.bands, self.rows, self.ngram, self.seed = bands, rows, ngram, seed
        self.k = bands * rows
        rng = np.random.default_rng(seed)
        # Where empty bin j looks in round t: the same sequence for every document, and never bin j itself.
        borrow = (np.arange(self.k)[:, None] + rng.integers(1, self.k, (self.k, _DENSIFY_ROUNDS))) % self.k
        self._borrow_rounds = np.ascontiguousarray(borrow.T)  # round t: where each bin looks
        self._band_seeds = _mix(rng.integers(1, 2**63, bands, dtype=np.uint64))

    def signatures(self, texts: pl.Series | list[str], languages: pl.Series | None = None) -> np.ndarray:
        """-> (documents, k) uint32."""
        texts = texts if isinstance(texts, pl.Series) else pl.Series(texts, dtype=pl.String)
        return self.signatures_of_words(words(texts.fill_null(""), languages))

    def signatures_of_words(self, words: pl.Series) -> np.ndarray:
        """The same from the texts' words (`words(texts)`), for callers that also need the words."""
        hashes, counts = word_shingle_hashes(words, self.ngram, self.seed)
        n = len(counts)
        # High 32 bits choose the bin (Lemire's multiply-shift range reduction), low 32 bits are the value.
        cells = (hashes >> np.uint64(32)) * np.uint64(self.k)
        cells >>= np.uint64(32)
        cells += np.repeat(np.arange(0, n * self.k, self.k, dtype=np.uint64), counts)
        sig = np.full(n * self.k, _SENTINEL, np.uint64)
        hashes &= np.uint64(0xFFFFFFFF)
        np.minimum.at(sig, cells.astype(np.intp), hashes)
        return self._densify(sig.reshape(n, self.k))

    def _densify(self, sig: np.ndarray) -> np.ndarray:
        """Fill the empty bins of (documents, k) uint64 bin minima -> (documents, k) uint32: an empty bin takes the
        value of the first bin of its borrow sequence that was not empty itself (filled values never chain)."""
        empty = sig == _SENTINEL
        partial = empty.any(axis=1) & ~empty.all(axis=1)
        if partial.any():
            part = sig[partial]
            out = part.copy()
            # The first rounds over whole rows (most empty bins are filled by then), the rest over the bins left.
            for t in range(_DENSE_ROUNDS):
                np.copyto(out, part.take(self._borrow_rounds[t], axis=1), where=out == _SENTINEL)
            todo = np.flatnonzero(out == _SENTINEL)
            cols = todo % self.k
            base = todo - cols
            values, filled = part.ravel(), out.ravel()
            for t in range(_DENSE_ROUNDS, _DENSIFY_ROUNDS):
                if not len(todo):
                    break
                value = values[base + self._borrow_rounds[t][cols]]
                found = value != _SENTINEL
                filled[todo[found]] = value[found]
                left = ~found
                todo, base, cols = todo[left], base[left], cols[left]
            if len(todo):  # a document with very few shingles: the smallest value it has
                filled[todo] = part.min(axis=1)[todo // self.k]
            sig[partial] = out
        # Still empty: a document without shingles, whose bins all become EMPTY (the sentinel is above it).
        return np.minimum(sig, np.uint64(EMPTY)).astype(np.uint32)

    def band_hashes(self, sig: np.ndarray) -> np.ndarray:
        """-> (documents, bands) uint64: one hash per band of `rows` signature values; equal bands, equal hash.
        An empty signature's bands are 0, which the clustering ignores."""
        n = sig.shape[0]
        out = np.empty((n, self.bands), np.uint64)
        wide = sig.astype(np.uint64)
        for b in range(self.bands):
            h = np.full(n, self._band_seeds[b], np.uint64)
            for r in range(b * self.rows, (b + 1) * self.rows):
                h = _mix(h ^ wide[:, r])
            out[:, b] = h
        out[(sig == EMPTY).all(axis=1)] = 0
        return out


def jaccard_estimate(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b))


def shingle_set(text: str, ngram: int = 5) -> set[str]:
    """The shingles of one text as strings, the same ones `shingle_hashes` hashes: for reference implementations."""
    w = regex.findall(_WORD, text.lower())
    if not w:
        return set()
    return {" ".join(w[i:i + ngram]) for i in range(max(len(w) - ngram + 1, 1))}
