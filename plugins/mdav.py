"""Built-in clusterer ``mdav``: MDAV, the crisp k-anonymous baseline of
microaggregation (Domingo-Ferrer & Mateo-Sanz 2002), as sdcMicro and
mu-Argus users know it.

Groups of ``k`` to ``2k - 1`` records are formed on the standardised
variables (each column centred and divided by its population standard
deviation; a constant column is left at zero, so it plays no part in the
grouping and its centre value is the constant). Deterministic: ties go to
the lowest record index. The centres are the group means in the data's
units, projected onto the step's edit rules when it has any (in the
standardised metric, as the clustering itself).

>>> import privclust.datasets
>>> from privclust_plugins.mdav import MDAV
>>> frame = privclust.datasets.table1()
>>> part = MDAV(k=3).fit(frame, privclust.PrivacyContext(seed=0))
>>> sorted(int(s) for s in part.diagnostics["group_sizes"])
[3, 3, 3, 3]
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import DataError, Partition, PrivacyContext, param

from . import _mdav

__version__ = "0.1.0"

#: The values of the ``missing`` parameter, the same in every built-in that accepts missing values.
MISSING_CHOICES = ("observed", "refuse")

#: What ``mdav`` (and ``microaggregation`` on its groups) does with missing values.
MISSING_POLICY = ("groups formed with sdcMicro's MDAV distance: squared standardised differences over the variables "
                  "observed on both records, the variable's squared standardised range where one of the two misses "
                  "it, nothing where both do; standardisation and group means over the observed values of each "
                  "column; missing values released missing")


@attrs.frozen(kw_only=True)
class MDAV:
    """MDAV microaggregation groups: every group has between ``k`` and
    ``2k - 1`` records; centres are the (projected) group means."""

    name: ClassVar[str] = "mdav"

    k: int = param(int, default=3, ge=2, doc="minimum group size (k-anonymity level), k >= 2")
    missing: str = param(str, default="observed", choices=MISSING_CHOICES,
                         doc='missing values (NaN): "observed" groups records on the variables they have (sdcMicro\'s '
                             'rule) and centres are means of the observed values; "refuse" refuses them')

    def missing_values(self) -> str | None:
        """The missing-value policy (``None``: refused), see :data:`MISSING_POLICY`."""
        return MISSING_POLICY if self.missing == "observed" else None

    def min_records(self, n_columns: int) -> int:
        """MDAV needs at least ``2k`` records (with fewer, one group would
        replace every record by the mean)."""
        return 2 * self.k

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        """Fewer than ``2k`` records, said with the largest ``k`` that fits."""
        if n_records >= 2 * self.k:
            return []
        fix = (f"lower k to at most {n_records // 2}" if n_records >= 4 else
               "add records: no k fits fewer than 4 records (k is at least 2)")
        return [f"mdav: k = {self.k} needs at least 2k = {2 * self.k} records; the data have N = {n_records} (with "
                f"fewer, one group would replace every record by the mean); {fix}"]

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        columns = tuple(str(c) for c in data.columns)
        X = privclust.data_matrix(data, "mdav", missing=self.missing == "observed")
        missing = np.isnan(X)
        n = X.shape[0]
        for problem in self.size_problems(n, X.shape[1]):
            raise DataError(problem)
        Z, mean, scale, constant = _mdav.standardise(X)
        labels = _mdav.mdav(Z, self.k, progress=lambda done, total: context.progress(int(done), int(total)))
        n_groups = int(labels.max()) + 1
        centres, sizes = _mdav.group_means(X, labels, n_groups)
        rules = context.constraints
        projected = False
        if rules:
            centres = _mdav.project_centres(rules, centres, scale, mean)
            projected = True
        constant_columns = [c for c, flag in zip(columns, constant, strict=True) if flag]
        counts = {int(s): int(c) for s, c in zip(*np.unique(sizes, return_counts=True), strict=True)}
        context.record(
            f"mdav formed {n_groups} groups of {sizes.min()} to {sizes.max()} records (k = {self.k}) on "
            f"{', '.join(columns)}. When a masker replaces every record by its group's centre, each released "
            f"combination of these columns is shared by at least {self.k} records (k-anonymity for the aggregated "
            "variables only: other columns, and the labels on their own, are not covered; k-anonymity does not "
            "bound what can be learnt about a group's members, and an intruder who knows the method can narrow a "
            "record to its group).",
            claim=privclust.KAnonymity(self.k, list(columns)),
            details={"k": self.k, "groups": n_groups, "min_group_size": int(sizes.min()),
                     "max_group_size": int(sizes.max()), "columns": list(columns),
                     "centres_projected_on_rules": projected,
                     **({"missing": "records with missing values are grouped on the variables they have; a group "
                                    "releases its centre on each record's observed columns and leaves its missing "
                                    "values missing"} if missing.any() else {})},
        )
        return Partition(
            labels=labels,
            centres=centres,
            memberships=None,
            columns=columns,
            diagnostics={
                "k": self.k,
                "n_groups": n_groups,
                "group_sizes": sizes,
                "size_counts": counts,
                "standardised": "each column centred and divided by its population standard deviation",
                "constant_columns": constant_columns,
                "centres_projected": projected,
                "missing_values": int(missing.sum()),
                "records_with_missing_values": int(missing.any(axis=1).sum()),
            },
        )


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(MDAV)
