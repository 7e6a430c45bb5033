"""A private basis for ``dp-density`` in many columns (issue 26, item 2).

Above ``project_above`` columns (4 by default) ``dp-density`` does not grow
its tree in the full space (a leaf there touches up to ``3^d`` others, and at
5-10 columns the map found one cluster). It first releases a **private
basis** with a share ``basis_share`` of epsilon, then runs its usual
pipeline (noisy count, PrivTree, leaf counts, map) with the rest of the
budget on the records projected onto the basis's top ``m`` directions:

1. Each record, scaled to the unit cube by the public bounds and centred on
   the cube's middle, is ``y`` in ``[-1/2, 1/2]^d``. One Laplace release of
   the vector ``(n, sum y, the upper triangle (diagonal included) of sum y
   y^T)``: adding or removing one record changes it by ``(1, y, y_i y_j for
   i <= j)``, whose L1 norm is at most ``1 + d / 2 + d (d + 1) / 8``
   (:func:`sensitivity`: ``|y_i| <= 1/2``, and ``sum_{i <= j} |y_i y_j| =
   ((sum |y_i|)^2 + sum y_i^2) / 2``). Clipping onto the bounds comes first,
   so the bound holds for every record. The sums are accumulated over
   blocks of :data:`BLOCK` records: no array of ``n x d^2`` (nor a second
   ``n x d`` one) is made.
2. Post-processing of that release only: the noisy mean and covariance, its
   top eigenvectors ``V`` (2 to 4: where their noisy variances drop most,
   :func:`dimensions`), and the public box
   of the projections ``p = V^T y``: the projection of the public cube,
   ``+- sum_j |V_jk| / 2`` along direction ``k`` (every record's projection
   lies in it).
3. ``dp-density`` itself on the ``m`` projected columns with the box as
   their bounds and epsilon ``(1 - basis_share) epsilon``. A record's label
   is the cluster of the leaf its projection falls in; the centres are
   mapped back to the columns (``mean + V (p - V^T mean)``, the noisy mean
   in the directions left out). Projecting, like the sums, goes block by
   block.

The releases compose sequentially: the basis (``basis_share epsilon``), the
noisy count, the tree and the leaf counts (the rest, shared as in the
columns' own pipeline) sum to the step's epsilon under add/remove-one, as
the rest of ``dp-density``; the ledger holds one entry for each.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import DataError, ParameterError, Partition, PrivacyContext, at_least

#: Columns above which ``dp-density`` builds its map on the basis (its ``project_above`` default): up to 4 columns
#: the tree in the full space keeps its second, coarse pass and stays cheap (3^4 = 81 neighbours a leaf).
PROJECT_ABOVE = 4
#: The share of epsilon spent on the basis (``basis_share`` default); the map gets the rest.
BASIS_SHARE = 0.2
#: Records per block when the sums are accumulated and the records projected (a bound on the memory).
BLOCK = 1 << 15
#: Largest number of columns the basis takes (its release holds ``d (d + 3) / 2 + 1`` values).
MAX_COLUMNS = 64
#: The most directions the map is built on (:func:`dimensions`).
MAX_DIMENSIONS = 4
#: The map on the projections never projects again (``dp-density``'s largest ``project_above``).
INNER_PROJECT_ABOVE = 12
#: The names of the projected columns handed to the map (``basis0``, ``basis1``, ...).
PREFIX = "basis"


def sensitivity(d: int) -> float:
    """L1 sensitivity of ``(n, sum y, upper triangle of sum y y^T)`` under
    add/remove-one with ``y`` in ``[-1/2, 1/2]^d``: ``1 + d / 2 + d (d + 1) / 8``."""
    return 1.0 + d / 2.0 + d * (d + 1) / 8.0


def statistic(y: np.ndarray) -> np.ndarray:
    """The released statistic of the records ``y`` (rows), unnoised: ``(n, sum y, upper triangle of sum y y^T)``.
    The products go through ``einsum``, not BLAS: a multithreaded BLAS on a busy machine took 36 s for 1e6 records
    in 20 columns (1.2 s a block) where ``einsum`` takes 0.3 s, and its rounding does not depend on the threads."""
    d = y.shape[1]
    iu = np.triu_indices(d)
    return np.concatenate([[float(y.shape[0])], y.sum(axis=0), np.einsum("ij,ik->jk", y, y)[iu]])


def dimensions(variances: np.ndarray) -> int:
    """The number of directions the map is built on: where the noisy
    variances drop most (the ``k`` of smallest ratio ``lambda_{k+1} /
    lambda_k``, an eigengap), at least 2 and at most :data:`MAX_DIMENSIONS`
    (fewer when there are fewer columns). Post-processing of the basis
    release only. A mixture of ``c`` clusters has ``c - 1`` directions of
    spread between clusters and a floor of within-cluster noise below them:
    the gap keeps them. Where the variances decay smoothly (wine: 1, 0.47,
    0.28, 0.20 of the first) it keeps 2: a flat direction adds a column to the
    map (fewer records a cell, a wider kernel) without separating much, and on
    wine the map in 3 or 4 directions merged two classes that the map in 2
    separated."""
    top = min(MAX_DIMENSIONS, variances.size)
    if top <= 2:
        return int(top)
    lam = np.maximum(np.asarray(variances, dtype=float)[:top + 1], 1e-300)
    ratio = lam[1:] / lam[:-1]  # ratio[k - 1]: the drop after k directions
    return int(min(max(int(np.argmin(ratio)) + 1, 2), top))


def _blocks(data: pd.DataFrame, unit_of: Any) -> Any:
    """The records in unit coordinates, centred on the cube's middle, block by block (every check of the step's
    own ``_unit`` runs on each block)."""
    for start in range(0, data.shape[0], BLOCK):
        unit, low, high = unit_of(data.iloc[start:start + BLOCK])
        yield unit - 0.5, low, high


@attrs.frozen
class Basis:
    """What the basis release gives: the noisy count, mean and covariance of ``y``, the kept directions (columns
    of ``vectors``) with their noisy variances, and the public box of the projections."""

    n_noisy: float
    mean: np.ndarray
    covariance: np.ndarray
    vectors: np.ndarray
    variances: np.ndarray
    box_low: np.ndarray
    box_high: np.ndarray


def basis_of(released: np.ndarray, d: int) -> Basis:
    """Post-processing of the released statistic only: the noisy mean and
    covariance (symmetric), its top eigenvectors (:func:`dimensions` of them,
    each signed so that its largest entry is positive: a function of the
    release alone) and the box of the projections, the public cube's own
    projection (see the module docstring)."""
    n_noisy = float(released[0])
    n = max(n_noisy, 1.0)
    mean = np.clip(released[1:1 + d] / n, -0.5, 0.5)
    second = np.zeros((d, d))
    second[np.triu_indices(d)] = released[1 + d:] / n
    second = second + np.triu(second, 1).T
    covariance = second - np.outer(mean, mean)
    values, vectors = np.linalg.eigh(covariance)
    top = np.argsort(-values, kind="stable")[:MAX_DIMENSIONS + 1]
    m = dimensions(values[top])
    vectors, variances = vectors[:, top[:m]], values[top[:m]]
    vectors = vectors * np.where(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(m)] < 0, -1.0, 1.0)
    reach = 0.5 * np.abs(vectors).sum(axis=0)  # every projection of a record in the cube lies within +- reach
    return Basis(n_noisy=n_noisy, mean=mean, covariance=covariance, vectors=vectors, variances=variances,
                 box_low=-reach, box_high=reach)


class _Statements:
    """The context handed to the map's pipeline: everything goes to the step's own context, except the map's
    closing statement (its record), kept here and folded into the one statement of the whole step."""

    def __init__(self, context: PrivacyContext):
        self._context = context
        self.kept: list[tuple[str, dict[str, Any]]] = []

    def record(self, statement: str = "", **kwargs: Any) -> None:
        self.kept.append((statement, kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def sums_of(data: pd.DataFrame, unit_of: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The statistic of the basis release, unnoised (:func:`statistic`),
    accumulated over blocks of :data:`BLOCK` records, and the public bounds
    (``unit_of`` is the step's own ``_unit``: every check and the clipping
    onto the bounds run on each block)."""
    d = data.shape[1]
    if data.shape[0] == 0:
        raise DataError("dp-density: the data have no records")
    sums = np.zeros(1 + d + d * (d + 1) // 2)
    bounds: tuple[np.ndarray, np.ndarray] = (np.zeros(d), np.ones(d))
    for y, *found in _blocks(data, unit_of):
        sums += statistic(y)
        bounds = (found[0], found[1])
    return sums, *bounds


def fit_projected(component: Any, data: pd.DataFrame, context: PrivacyContext) -> Partition:
    """``dp-density`` above ``project_above`` columns: the basis release,
    then the step's own pipeline on the projected records (see the module
    docstring)."""
    from . import dp_density as host  # the step's own release helper and ledger words (imported when it runs)

    d = data.shape[1]
    eps_basis = component.epsilon * component.basis_share
    eps_map = component.epsilon - eps_basis
    names = [f"{PREFIX}{k}" for k in range(min(d, MAX_DIMENSIONS))]
    # the map's own checks (shares, the sampler's range) before any noise is drawn
    inner = attrs.evolve(component, epsilon=eps_map, bounds={c: [-1.0, 1.0] for c in names},
                         project_above=INNER_PROJECT_ABOVE)
    sums, low, high = sums_of(data, component._unit)
    problems = inner.step_problems()
    if problems:
        raise ParameterError(problems[0])
    # the four releases asked about together, under their relation, before the first
    context.check_spend(component.epsilon, relation=host.RELATION, mechanism="dp-density's four releases",
                        covers="the private basis and the cluster map")
    mech = context.mechanism(component.noise)
    if mech.name not in host.PURE_MECHANISMS:
        raise ParameterError(host._noise_refused(mech.name) + " Nothing was recorded and no noise was drawn.")
    s = sensitivity(d)
    relation = host.RELATION
    released = np.asarray(host._release(
        mech, f"the private basis of the {d} columns", "basis_share", sums, sensitivity=s, epsilon=eps_basis,
        context=context, relation=relation,
        covers=(f"the number of records, the sums of the {d} columns and the sums of their {d * (d + 1) // 2} "
                "pairwise products (squares included), each record first clipped to the public bounds and scaled "
                f"to [-1/2, 1/2]: L1 sensitivity 1 + d/2 + d(d+1)/8 = {s:g} under add/remove-one; the mean, "
                "covariance, projection directions and box are computed from them alone"),
        not_covered=host.NOT_COVERED,
        details={"release": "basis", "columns": d, "values": int(sums.size), "noise_scale": s / eps_basis}),
        dtype=float)
    del sums
    basis = basis_of(released, d)
    m = basis.vectors.shape[1]
    names = names[:m]
    projected = np.empty((data.shape[0], m))
    row = 0
    for y, _, _ in _blocks(data, component._unit):
        onto = np.einsum("ij,jk->ik", y, basis.vectors)  # not BLAS: see statistic()
        projected[row:row + y.shape[0]] = np.clip(onto, basis.box_low, basis.box_high)  # the rounding only
        row += y.shape[0]
    frame = pd.DataFrame(projected, columns=names)
    del projected
    inner = attrs.evolve(inner, bounds={c: [float(lo), float(hi)] for c, lo, hi in
                                        zip(names, basis.box_low, basis.box_high, strict=True)})
    statements = _Statements(context)
    part = inner.fit(frame, statements)  # type: ignore[arg-type]
    del frame
    # the centres back in the columns' units: the mean in the directions left out
    p = np.asarray(part.centres, dtype=float)
    y_c = p @ basis.vectors.T + (basis.mean - basis.vectors @ (basis.vectors.T @ basis.mean))
    centres = low + np.clip(y_c + 0.5, 0.0, 1.0) * (high - low)
    _, kept = statements.kept[-1]
    details = dict(kept.get("details") or {})
    details.update({"epsilon": component.epsilon, "epsilon_basis": eps_basis, "basis_dimensions": m})
    eps_n, eps_tree, eps_leaf = (details["epsilon_count"], details["epsilon_tree"], details["epsilon_leaves"])
    context.record(
        f"dp-density: the cluster map (a private basis of the {d} columns: noisy number of records, column sums "
        f"and pairwise products; the noisy number of records, PrivTree partition of {details.get('leaves')} leaves "
        f"and their noisy counts in the {m} projected directions; and the directions, densities, peaks, cluster "
        f"ids and centres computed from them alone) is {at_least(component.epsilon)}-DP under {relation}, by "
        f"sequential composition of four {mech.name} releases (epsilon {at_least(eps_basis, 4)} + "
        f"{at_least(eps_n, 4)} + {at_least(eps_tree, 4)} + {at_least(eps_leaf, 4)}). Each record's label is the "
        "cluster id of the leaf its projection falls in: a function of that record and the DP map, covered only in "
        "the joint-DP (billboard) sense, not as a DP release. Under add/remove the exact number of records is "
        "itself private: this step releases it only as the two noisy counts above; wherever the exact number is "
        "published (the per-record file has one row per record), the map holds as "
        f"{at_least(2 * component.epsilon)}-DP under replace-one (n public), not as "
        f"{at_least(component.epsilon)}-DP under add/remove.",
        claim=kept.get("claim"), details=details)
    diagnostics = dict(part.diagnostics)
    effective = dict(diagnostics.get(privclust.EFFECTIVE_PARAMS) or {})
    effective.update({"epsilon_basis": eps_basis, "basis_dimensions": m})
    diagnostics[privclust.EFFECTIVE_PARAMS] = effective
    diagnostics.update({
        "epsilon_basis": eps_basis,
        "basis_dimensions": m,
        "basis_n_noisy": basis.n_noisy,
        "basis_directions": basis.vectors,
        "basis_variances": basis.variances,
        "basis_box": [basis.box_low, basis.box_high],
        "basis_columns": list(names),
        "map_space": ("leaf_low, leaf_high, leaf_density, bandwidth_units: in the projected coordinates "
                      "p = V^T ((x - low) / (high - low) - 1/2), V = basis_directions"),
    })
    return Partition(labels=part.labels, centres=centres, columns=tuple(str(c) for c in data.columns),
                     diagnostics=diagnostics)
