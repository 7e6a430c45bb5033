"""The neighbouring inputs the empirical auditor (:mod:`privclust.audit`)
runs a component on: a record moved to a corner of the public box
(replace-one) or added there (add/remove), a record added in empty space
(which changes a data-adaptive partition), and the candidates a searching
audit chooses among."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accountants import ADD_REMOVE, relation_kind
from .audit_events import NeighbourPair

__all__ = ["EMPTY_CANDIDATES", "candidate_pairs", "empty_region_pairs", "neighbour_pairs"]


def neighbour_pairs(data: pd.DataFrame, relation: str = "replace-one", *, record: int = 0,
                    bounds: Any = None) -> list[NeighbourPair]:
    """Neighbouring frames the auditor builds from ``data``.

    ``replace-one``: the record at position ``record`` moved to the opposite
    corner of the box (each column's low or high end, whichever is farther
    from the record's value); the box is the public ``bounds``
    (``{column: [low, high]}``) where given, else the data's range.
    ``add/remove``: the data, against the data with that corner added as one
    more record.
    """
    values, low, high = _box(data, bounds)
    row = values[record]
    corner = np.where(np.abs(row - low) >= np.abs(high - row), low, high)
    moved = _placed(data, record, corner)
    corner_text = ", ".join(f"{c} = {v:g}" for c, v in zip(data.columns, corner, strict=True))
    if relation_kind(relation) == ADD_REMOVE:
        extra = moved.iloc[[record]].copy()
        extra.index = [_fresh_label(data.index)]
        bigger = pd.concat([data, extra])
        return [NeighbourPair(first=data, second=bigger,
                              description=f"the data ({len(data)} records) against the data plus one record at "
                                          f"({corner_text}) (add/remove)")]
    return [NeighbourPair(first=data, second=moved,
                          description=f"the data ({len(data)} records) against the same with record {record} "
                                      f"moved to ({corner_text}) (replace-one)")]


#: Largest number of candidate points :func:`empty_region_pairs` scores (corners, then a grid of 5 per column).
EMPTY_CANDIDATES = 4096


def empty_region_pairs(data: pd.DataFrame, bounds: Any = None) -> list[NeighbourPair]:
    """An add/remove neighbour that changes a data-adaptive partition: the
    data against the data plus one record at the point of the box (the
    public ``bounds`` where given, else the data's range) farthest from
    every record, each column scaled by its range (among the box's corners
    and a grid of 5 points per column, at most :data:`EMPTY_CANDIDATES` of
    them). A record there lands in empty space: a tree that splits cells
    holding records (PrivTree, a grid, a k-d tree) splits there only with
    it, so a partition whose structure is not noised differs between the
    two inputs, while a record added among others (the corner of a box the
    data fill) may change no cell's split."""
    values, low, high = _box(data, bounds)
    d = values.shape[1]
    span = np.where(high > low, high - low, 1.0)
    candidates = []
    if 2 ** d <= EMPTY_CANDIDATES:
        candidates.append(np.array(np.meshgrid(*[[0.0, 1.0]] * d, indexing="ij")).reshape(d, -1).T)
    if 5 ** d <= EMPTY_CANDIDATES:
        candidates.append(np.array(np.meshgrid(*[np.linspace(0.0, 1.0, 5)] * d, indexing="ij")).reshape(d, -1).T)
    if not candidates:  # many columns: the corner opposite the data's mean
        mean = np.nanmean((values - low) / span, axis=0)
        candidates.append((mean < 0.5).astype(float)[None, :])
    points = np.unique(np.concatenate(candidates), axis=0)
    X = np.nan_to_num((np.clip(values, low, high) - low) / span, nan=0.5)
    nearest = np.full(points.shape[0], np.inf)
    for start in range(0, X.shape[0], 2048):  # candidates x records in blocks
        block = X[start:start + 2048]
        gaps = np.sqrt(((points[:, None, :] - block[None, :, :]) ** 2).sum(axis=2))
        nearest = np.minimum(nearest, gaps.min(axis=1))
    unit = points[int(np.argmax(nearest))]
    point = np.where(unit == 1.0, high, low + unit * (high - low))  # a corner exactly (low + 1 * span may round)
    extra = _placed(data.iloc[[0]], 0, point)
    extra.index = [_fresh_label(data.index)]
    text = ", ".join(f"{c} = {v:g}" for c, v in zip(data.columns, point, strict=True))
    return [NeighbourPair(first=data, second=pd.concat([data, extra]),
                          description=f"the data ({len(data)} records) against the data plus one record in empty "
                                      f"space at ({text}), the point of the box farthest from every record "
                                      "(add/remove)")]


def _box(data: pd.DataFrame, bounds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data's values and the box records move in: the public ``bounds`` where given, else the data's range."""
    values = data.to_numpy(dtype=float)
    low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    if isinstance(bounds, dict):
        for j, column in enumerate(data.columns):
            if column in bounds:
                low[j], high[j] = float(bounds[column][0]), float(bounds[column][1])
    return values, low, high


def _placed(data: pd.DataFrame, record: int, point: np.ndarray) -> pd.DataFrame:
    """A copy of ``data`` with the record at position ``record`` put at ``point`` (rounded in integer columns)."""
    moved = data.copy(deep=True)
    for j, column in enumerate(data.columns):
        value = point[j]
        if pd.api.types.is_integer_dtype(data[column]):
            value = int(round(value))
        moved.iloc[record, j] = value
    return moved


def _fresh_label(index: pd.Index) -> Any:
    if pd.api.types.is_integer_dtype(index):
        return int(index.max()) + 1 if len(index) else 0
    return "__audit_extra__"


def _central_record(values: np.ndarray, pool: int = 1000) -> int:
    """The record (among the first ``pool``) with the most others close by
    (within the median distance to a record's 5th nearest neighbour, each
    column scaled by its range): a record in the thick of a cluster, or one
    that bridges two, whose move changes how the others cluster."""
    X = np.nan_to_num(values[:pool].astype(float))
    if X.shape[0] < 3:
        return 0
    span = X.max(axis=0) - X.min(axis=0)
    X = X / np.where(span > 0, span, 1.0)
    squares = np.einsum("ij,ij->i", X, X)  # distances without a pool x pool x columns array
    D = np.sqrt(np.maximum(squares[:, None] + squares[None, :] - 2.0 * (X @ X.T), 0.0))
    k = min(5, X.shape[0] - 1)
    radius = float(np.median(np.sort(D, axis=1)[:, k]))
    return int(np.argmax((D <= radius * (1 + 1e-9) + 1e-12).sum(axis=1)))  # ties within rounding count


def candidate_pairs(data: pd.DataFrame, relation: str, bounds: Any) -> list[NeighbourPair]:
    """The neighbouring pairs the auditor tries (it measures the one whose
    selection runs show the most evidence): record 0 moved to the farthest
    corner of the box (:func:`neighbour_pairs`); record 0 at the corner
    nearest to it against the opposite corner (the largest change a record
    can make to a bounded sum, a full range in every column); the most
    central record (:func:`_central_record`) moved to its farthest corner
    (add/remove: the data without it against the data); under add/remove,
    one record added in empty space (:func:`empty_region_pairs`)."""
    pairs = list(neighbour_pairs(data, relation, bounds=bounds))
    if len(data) < 2:
        return pairs
    add_remove = relation_kind(relation) == ADD_REMOVE
    if not add_remove:
        values, low, high = _box(data, bounds)
        row = values[0]
        nearest = np.where(np.abs(row - low) >= np.abs(high - row), high, low)
        if not np.array_equal(nearest, row):
            first = _placed(data, 0, nearest)
            text = ", ".join(f"{c} = {v:g}" for c, v in zip(data.columns, nearest, strict=True))
            pairs.append(NeighbourPair(first=first, second=pairs[0].second,
                                       description=f"the data ({len(data)} records) with record 0 at the corner "
                                                   f"({text}) against the same with it at the opposite corner "
                                                   "(replace-one)"))
    if add_remove:  # a record added where none is: it changes a data-adaptive partition
        pairs += empty_region_pairs(data, bounds)
    central = _central_record(data.to_numpy(dtype=float))
    if central != 0:
        if add_remove:
            without = data.iloc[np.r_[0:central, central + 1:len(data)]]  # by position: labels may repeat
            pairs.append(NeighbourPair(first=without, second=pd.concat([without, data.iloc[[central]]]),
                                       description=f"the data without record {central} (its most central record, "
                                                   f"{len(data) - 1} records) against the data (add/remove)"))
        else:
            (moved,) = neighbour_pairs(data, relation, record=central, bounds=bounds)
            pairs.append(attrs.evolve(moved, description=moved.description.replace(
                f"record {central}", f"record {central} (its most central record)")))
    return pairs
