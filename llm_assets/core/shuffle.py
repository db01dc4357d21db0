"""A keyed pseudo-random permutation of [0, n), computed element by element: a global shuffle with no index.

Shuffling a dataset of a billion sequences with `rng.permutation(n)` holds an 8 GB index in memory. A Feistel
network is a bijection built from any function, however non-invertible: split a 2h-bit value into halves (L, R),
and each round maps it to (R, L xor F(R, key)). Over the 2^(2h) values that is a permutation, and a few rounds
of a well-mixing F make it look random (Luby & Rackoff). To permute [0, n) rather than [0, 2^(2h)), cycle
walking applies the network again to any value ≥ n until it falls below n: following the permutation's cycle
from an index < n must come back below n, and since 2^(2h) < 4n, it takes fewer than four steps on average. The
result is a bijection of [0, n), and so is the inverse.

Any position maps independently, so a writer asks for its output order in chunks of positions,
`perm(np.arange(start, stop))`, and memory is the size of a chunk, never of the dataset.
"""

from __future__ import annotations

from typing import overload

import numpy as np


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer (uint64, wrapping): every output bit depends on every input bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class FeistelPermutation:
    """A keyed bijection of [0, n): the same (n, seed, rounds) give the same permutation."""

    def __init__(self, n: int, seed: int, rounds: int = 6):
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        if n > 1 << 62:
            raise ValueError(f"n must be at most 2**62, got {n}")
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        self.n = n
        self.rounds = rounds
        # Halves of h bits, the smallest with 2^(2h) ≥ n, at least one bit each so a tiny n has room to walk.
        self.half_bits = max(1, (max(n - 1, 1).bit_length() + 1) // 2)
        self._h = np.uint64(self.half_bits)
        self._half_mask = np.uint64((1 << self.half_bits) - 1)
        self._keys = np.random.default_rng(seed).integers(0, 1 << 64, size=rounds, dtype=np.uint64, endpoint=False)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"FeistelPermutation(n={self.n}, rounds={self.rounds}, bits={2 * self.half_bits})"

    @overload
    def __call__(self, i: int) -> int: ...
    @overload
    def __call__(self, i: np.ndarray) -> np.ndarray: ...

    def __call__(self, i: np.ndarray | int) -> np.ndarray | int:
        """The position each index moves to; an int for an int, else an int64 array of the same shape."""
        return self._walk(i, self._forward)

    @overload
    def inverse(self, j: int) -> int: ...
    @overload
    def inverse(self, j: np.ndarray) -> np.ndarray: ...

    def inverse(self, j: np.ndarray | int) -> np.ndarray | int:
        """The index that moves to each position: inverse(perm(i)) == i."""
        return self._walk(j, self._backward)

    def _round(self, half: np.ndarray, r: int) -> np.ndarray:
        return _splitmix64(half ^ self._keys[r]) & self._half_mask

    def _forward(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._h, x & self._half_mask
        for r in range(self.rounds):
            left, right = right, left ^ self._round(right, r)
        return (left << self._h) | right

    def _backward(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._h, x & self._half_mask
        for r in reversed(range(self.rounds)):
            left, right = right ^ self._round(left, r), left
        return (left << self._h) | right

    def _walk(self, values: np.ndarray | int, network) -> np.ndarray | int:
        """Apply the network, then again to only the values still ≥ n, until every value is below n."""
        scalar = np.ndim(values) == 0
        x = np.array(values, dtype=np.int64, ndmin=1)
        if x.size and (x.min() < 0 or x.max() >= self.n):
            # Not only a contract: from a value ≥ n the walk may never come back below n.
            raise IndexError(f"indices must lie in [0, {self.n})")
        y = network(x.ravel().astype(np.uint64))
        n = np.uint64(self.n)
        pending = np.flatnonzero(y >= n)
        while pending.size:
            y[pending] = network(y[pending])
            pending = pending[y[pending] >= n]
        out = y.astype(np.int64).reshape(x.shape)
        return int(out[0]) if scalar else out
