"""The Feistel permutation: a bijection of [0, n) for every n, reproducible from its seed, invertible, the same
whether computed at once or in chunks, and well shuffled."""

from __future__ import annotations

import numpy as np
import pytest

from llm_assets.core.shuffle import FeistelPermutation

SIZES = [0, 1, 2, 3, 7, 100, 1000, 2**16 + 3, 1_000_003]


@pytest.mark.parametrize("n", SIZES)
def test_is_a_permutation_and_inverts(n):
    perm = FeistelPermutation(n, seed=12345)
    assert len(perm) == n
    out = perm(np.arange(n))
    assert out.dtype == np.int64 and out.shape == (n,)
    assert np.array_equal(np.sort(out), np.arange(n))
    assert np.array_equal(perm.inverse(out), np.arange(n))
    assert np.array_equal(perm(perm.inverse(np.arange(n))), np.arange(n))


@pytest.mark.parametrize("n", SIZES)
def test_same_seed_same_permutation(n):
    assert np.array_equal(FeistelPermutation(n, seed=7)(np.arange(n)), FeistelPermutation(n, seed=7)(np.arange(n)))


@pytest.mark.parametrize("n", [100, 1000, 2**16 + 3, 1_000_003])
def test_different_seed_different_permutation(n):
    # Only for n large enough that two seeds picking the same permutation is out of the question (n = 2 has two).
    assert not np.array_equal(FeistelPermutation(n, seed=1)(np.arange(n)), FeistelPermutation(n, seed=2)(np.arange(n)))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("chunk", [997, 65536])
def test_chunked_equals_whole(n, chunk):
    perm = FeistelPermutation(n, seed=99)
    pieces = [perm(np.arange(start, min(n, start + chunk))) for start in range(0, n, chunk)]
    assert np.array_equal(np.concatenate(pieces or [np.zeros(0, np.int64)]), perm(np.arange(n)))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1000])
def test_one_index_at_a_time_equals_whole(n):
    perm = FeistelPermutation(n, seed=99)
    assert [perm(i) for i in range(n)] == perm(np.arange(n)).tolist()
    assert [perm.inverse(j) for j in range(n)] == perm.inverse(np.arange(n)).tolist()


def test_looks_shuffled():
    n = 10_000
    i = np.arange(n)
    for seed in range(5):
        out = FeistelPermutation(n, seed=seed)(i)
        assert not np.array_equal(out, i)
        assert np.count_nonzero(out == i) < n // 100
        # The values are their own ranks, so Pearson on them is Spearman's rank correlation.
        assert abs(np.corrcoef(i, out)[0, 1]) < 0.05
        # Neighbours are scattered: consecutive indices do not land next to each other.
        assert np.median(np.abs(np.diff(out))) > n / 10


def test_scalars_and_shapes():
    perm = FeistelPermutation(1000, seed=3)
    whole = perm(np.arange(1000))
    assert isinstance(perm(5), int) and perm(5) == whole[5]
    assert isinstance(perm.inverse(whole[5]), int) and perm.inverse(int(whole[5])) == 5
    grid = np.arange(1000).reshape(10, 100)
    assert np.array_equal(perm(grid), whole.reshape(10, 100))
    assert np.array_equal(perm(np.arange(1000, dtype=np.uint32)), whole)


def test_huge_n_needs_no_index():
    """n beyond any in-memory index: a sample of positions maps injectively into [0, n) and back."""
    n = 2**40 + 7
    perm = FeistelPermutation(n, seed=5)
    i = np.random.default_rng(0).integers(0, n, size=200_000)
    i = np.unique(np.concatenate([i, [0, n - 1]]))
    out = perm(i)
    assert out.min() >= 0 and out.max() < n
    assert len(np.unique(out)) == len(i)
    assert np.array_equal(perm.inverse(out), i)


@pytest.mark.parametrize("n", [0, 1, 10])
def test_out_of_range_indices_are_refused(n):
    perm = FeistelPermutation(n, seed=0)
    with pytest.raises(IndexError):
        perm(np.array([n]))
    with pytest.raises(IndexError):
        perm.inverse(-1)


def test_bad_arguments():
    with pytest.raises(ValueError):
        FeistelPermutation(-1, seed=0)
    with pytest.raises(ValueError):
        FeistelPermutation(10, seed=0, rounds=0)
