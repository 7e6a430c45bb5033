"""Random streams without the seed.

A :class:`SeedStream` derives exactly the streams a
:class:`numpy.random.SeedSequence` would, keeping only numpy's mixed entropy
pool: the context (:mod:`privclust.context`) holds one per run and never a
copy of the seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import PrivclustError

__all__ = ["SeedStream"]

_M32 = 0xFFFFFFFF
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _XSHIFT = 0xCA01F9DD, 0x4973F715, 16


def _hashmix(value: int, const: list[int]) -> int:
    value = (value ^ const[0]) & _M32
    const[0] = (const[0] * _MULT_A) & _M32
    value = (value * const[0]) & _M32
    return value ^ (value >> _XSHIFT)


def _mix(x: int, y: int) -> int:
    result = (_MIX_L * x - _MIX_R * y) & _M32
    return result ^ (result >> _XSHIFT)


def _words(value: Any) -> list[int]:
    """numpy's coercion of entropy and spawn keys to 32-bit words."""
    if isinstance(value, list | tuple | np.ndarray):
        return [w for v in value for w in _words(v)]
    n = int(value)
    if n < 0:
        raise PrivclustError(f"a seed must be a non-negative integer; got {n}")
    if n == 0:
        return [0]
    out = []
    while n:
        out.append(n & _M32)
        n >>= 32
    return out


class SeedStream(np.random.bit_generator.ISpawnableSeedSequence):
    """The streams of a :class:`numpy.random.SeedSequence`, without its seed.

    numpy mixes a seed sequence's entropy words into a pool, then its spawn
    key words. This object keeps only the pool state after the entropy (and
    the spawn key, which is not secret), so it derives exactly the states and
    children the original sequence would (seeded runs are reproducible and
    identical to earlier versions) while holding no copy of the seed. The
    mixing is numpy's, not a cryptographic hash: it hides the seed from
    anyone reading the context's attributes, not from an analyst who inverts
    numpy's mixing function on a live process.
    """

    def __init__(self, mixer: tuple[int, ...], const: int, spawn_key: tuple[int, ...] = (),
                 n_children_spawned: int = 0):
        self._mixer = tuple(mixer)
        self._const = const
        self.spawn_key = tuple(spawn_key)
        self.pool_size = len(self._mixer)
        self.n_children_spawned = n_children_spawned

    @classmethod
    def of(cls, seq: np.random.SeedSequence) -> SeedStream:
        entropy = _words(seq.entropy)
        const = [_INIT_A]
        size = seq.pool_size
        mixer = [_hashmix(entropy[i] if i < len(entropy) else 0, const) for i in range(size)]
        for src in range(size):
            for dst in range(size):
                if src != dst:
                    mixer[dst] = _mix(mixer[dst], _hashmix(mixer[src], const))
        for word in entropy[size:]:
            for dst in range(size):
                mixer[dst] = _mix(mixer[dst], _hashmix(word, const))
        return cls(tuple(mixer), const[0], tuple(seq.spawn_key), seq.n_children_spawned)

    @property
    def pool(self) -> np.ndarray:
        mixer, const = list(self._mixer), [self._const]
        for word in _words(self.spawn_key):
            for dst in range(len(mixer)):
                mixer[dst] = _mix(mixer[dst], _hashmix(word, const))
        return np.array(mixer, dtype=np.uint32)

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        out_dtype = np.dtype(dtype)
        if out_dtype == np.dtype(np.uint64):
            n = 2 * n_words
        elif out_dtype == np.dtype(np.uint32):
            n = n_words
        else:
            raise ValueError("only support uint32 or uint64")
        pool = [int(v) for v in self.pool]
        const = _INIT_B
        state = np.empty(n, dtype=np.uint32)
        for i in range(n):
            value = pool[i % len(pool)] ^ const
            const = (const * _MULT_B) & _M32
            value = (value * const) & _M32
            state[i] = value ^ (value >> _XSHIFT)
        if out_dtype == np.dtype(np.uint64):
            return state.astype("<u4").view("<u8").astype(np.uint64)
        return state

    def spawn(self, n_children: int) -> list[SeedStream]:
        start = self.n_children_spawned
        self.n_children_spawned += n_children
        return [SeedStream(self._mixer, self._const, (*self.spawn_key, i)) for i in range(start, start + n_children)]

    def __repr__(self) -> str:
        return f"<seed stream spawn_key={self.spawn_key}>"
