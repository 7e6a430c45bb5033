"""The search over the lattice of generalisation levels used by ``recode``
with automatic levels (ARX's "full-domain generalisation" with a
suppression limit).

A *node* gives one level per hierarchy key. A node *reaches* k when at most
``budget`` records match fewer than ``k`` records on the recoded keys (a
missing value matching any value, sdcMicro's convention); those records are
suppressed. Its *loss* is the mean, over the records and the hierarchy keys,
of Iyengar's loss metric (LM; ARX's "Loss"): a value generalised to a group
of ``m`` of the ``D`` leaves of its hierarchy loses ``(m - 1) / (D - 1)``,
an interval ``[a, b)`` of a numeric key loses ``(b - a) / (range of the
finest breaks)``, a suppressed record loses 1 on every key.

Pruning: (1) monotonicity: with tree hierarchies a more general node merges
groups, so the count of records below k never grows; a node below a node
that fails (less general on every key) fails too and is not evaluated.
(2) a bound: the loss of a node is at least its loss without suppression,
which is additive over keys and grows with the levels; nodes are visited in
order of that bound and the search stops when the bound reaches the best
loss found. The result is the optimum of the stated loss (ties: the node
visited first, i.e. the smaller bound, then the more general node).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import _suppress

#: A lattice with more nodes than this is refused (give some keys' levels instead).
MAX_NODES = 1_000_000


@dataclass
class Dimension:
    """One hierarchy key: per allowed level, the records' group codes (-1:
    missing), the number of groups, and each record's loss (0 where missing)."""

    levels: list[int]
    codes: list[np.ndarray]
    sizes: list[int]
    losses: list[np.ndarray]
    totals: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.totals = [float(np.sum(loss)) for loss in self.losses]


@dataclass
class Outcome:
    """A node's evaluation: its records below k and its loss."""

    node: tuple[int, ...]
    below: np.ndarray
    loss: float | None


@dataclass
class Result:
    """The chosen node and how the search went."""

    best: Outcome | None
    nodes: int
    evaluated: int
    pruned_by_monotonicity: int
    skipped_by_bound: int


class Lattice:
    """The nodes of the hierarchy keys' levels over fixed columns."""

    def __init__(self, dimensions: Sequence[Dimension], fixed: np.ndarray, fixed_sizes: Sequence[int], k: int):
        self.dimensions = list(dimensions)
        self.fixed = fixed
        self.fixed_sizes = list(fixed_sizes)
        self.k = k
        self.n = fixed.shape[0]
        self.shape = tuple(len(d.levels) for d in self.dimensions)

    def size(self) -> int:
        return int(np.prod([float(s) for s in self.shape])) if self.shape else 1

    def codes(self, node: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The records' codes on every column at ``node`` (positions in each
        dimension's levels) and the radix for :func:`_suppress.match_counts`."""
        parts = [self.fixed] + [d.codes[i][:, None] for d, i in zip(self.dimensions, node, strict=True)]
        sizes = self.fixed_sizes + [d.sizes[i] for d, i in zip(self.dimensions, node, strict=True)]
        return np.hstack(parts), np.asarray([s + 1 for s in sizes], dtype=np.int64)

    def bound(self, node: Sequence[int]) -> float:
        """The loss without suppression (a lower bound of the loss)."""
        if not self.dimensions:
            return 0.0
        return sum(d.totals[i] for d, i in zip(self.dimensions, node, strict=True)) / (self.n * len(self.dimensions))

    def evaluate(self, node: Sequence[int]) -> Outcome:
        codes, radix = self.codes(node)
        below = _suppress.match_counts(codes, codes, radix) < self.k
        if not self.dimensions:
            return Outcome(tuple(node), below, None)
        d = len(self.dimensions)
        kept = sum(float(np.sum(dim.losses[i][~below])) for dim, i in zip(self.dimensions, node, strict=True))
        return Outcome(tuple(node), below, (kept + d * int(below.sum())) / (self.n * d))

    def search(self, budget: int) -> Result:
        """The node of least loss with at most ``budget`` records below k."""
        nodes = list(itertools.product(*(range(s) for s in self.shape)))
        bounds = [self.bound(node) for node in nodes]
        order = sorted(range(len(nodes)), key=lambda t: (bounds[t], -sum(nodes[t]), nodes[t]))
        failing = np.zeros((0, len(self.shape)), dtype=np.int64)
        best: Outcome | None = None
        evaluated = pruned = 0
        for rank, t in enumerate(order):
            node = nodes[t]
            if best is not None and best.loss is not None and bounds[t] >= best.loss - 1e-12:
                return Result(best, len(nodes), evaluated, pruned, len(order) - rank)
            if len(failing) and np.all(failing >= np.asarray(node), axis=1).any():
                pruned += 1
                continue
            outcome = self.evaluate(node)
            evaluated += 1
            if int(outcome.below.sum()) > budget:
                failing = np.vstack([failing, np.asarray(node)[None, :]])
                continue
            if best is None or (outcome.loss is not None and best.loss is not None
                                and outcome.loss < best.loss - 1e-12):
                best = outcome
                if outcome.loss is None:  # no hierarchy key: a single node
                    break
        return Result(best, len(nodes), evaluated, pruned, 0)
