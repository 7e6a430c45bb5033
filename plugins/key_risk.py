"""Built-in risk measures on the categorical key variables (quasi-identifiers),
besides ``key-frequencies``, ``individual-risk`` and ``key-linkage``.

=================  ===========================================================
name               figures
=================  ===========================================================
``l-diversity``    distinct and entropy l-diversity of a sensitive variable
                   within the key cells; records in cells below ``l``
``suda2``          minimal sample uniques (MSUs), SUDA and DIS-SUDA scores
                   (sdcMicro's ``suda2``)
``household-risk`` each household's risk ``1 - prod(1 - r_i)`` over its
                   members (sdcMicro's ``measure_risk`` with ``hid``)
``global-risk``    expected re-identifications and their share of the
                   records, for records and (with households) households
=================  ===========================================================

Every figure is computed on the released (protected) file's keys: the
evaluator's ``keys``, else the recipe's ``[roles] keys``, with the recipe's
``[roles] strata`` added (public by declaration; ``with_strata = false``
leaves them out). A missing key value matches any category (sdcMicro's
convention): two records share a key cell when they agree on every key both
observe. Sampling weights are the original file's (``[roles] weight`` by
default). See ``docs/microdata-evaluators.md``.

>>> import pandas as pd, privclust
>>> from privclust_plugins.key_risk import LDiversity
>>> x = pd.DataFrame({"sex": [1, 1, 2, 2], "ill": ["a", "b", "a", "a"]})
>>> inputs = privclust.EvaluationInputs(original=x, protected=x, columns=(), labels=pd.DataFrame(index=x.index))
>>> LDiversity(keys=("sex",), sensitive="ill").evaluate(inputs)["min_distinct_l"]
1.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import DataError, EvaluationInputs, ParameterError, param

from . import _key_risk as kr
from . import _microdata_metrics as mm

__version__ = "0.1.0"

#: Above this many key subsets (sum of C(M, k) for k up to max_size) SUDA2 is refused: name a smaller max_size.
MAX_SUDA_SUBSETS = 1 << 16
#: More keys than this are refused: the score of an MSU of one key, (M - 1)!, overflows a float above 171.
MAX_SUDA_KEYS = 171


def _keys_param() -> Any:
    return param(tuple, default=(), doc="the categorical key variables (quasi-identifiers; default: the recipe's "
                                        "[roles] keys)")


def _codes(inputs: EvaluationInputs, keys: tuple[str, ...], with_strata: bool, who: str) -> np.ndarray:
    """The released file's keys (and strata) as integer codes, ``-1`` for a missing value."""
    return kr.encode(mm.key_frame(inputs.protected, mm.key_role(keys, inputs, with_strata), who, "protected"))


def _household(household: str | None, inputs: EvaluationInputs, who: str, *, required: bool) -> str | None:
    """The household-id column: ``household``, else the recipe's ``[roles] ids``
    when it names one column. ``required``: refuse when there is none."""
    if household is not None:
        return household
    roles = getattr(inputs, "roles", None)
    ids = tuple(roles.ids) if roles is not None else ()
    if len(ids) == 1:
        return ids[0]
    if not required:
        return None
    if ids:
        raise DataError(f"{who}: the recipe's [roles] ids names {len(ids)} columns ({', '.join(ids)}); say which "
                        f"one identifies the household: {{ use = \"{who}\", household = \"{ids[0]}\" }}")
    raise DataError(f"{who} needs the household of each record: give the recipe a [roles] ids = [\"hid\"] (the "
                    f"household identifier) or name it: {{ use = \"{who}\", household = \"hid\" }}")


def _household_codes(inputs: EvaluationInputs, column: str, who: str) -> np.ndarray:
    frame = inputs.protected if column in inputs.protected.columns else inputs.original
    if column not in frame.columns:
        raise DataError(f"{who}: the household column {column!r} is not in the data; the columns are "
                        f"{', '.join(map(str, inputs.protected.columns))}")
    codes = pd.factorize(frame[column], use_na_sentinel=True)[0]
    if (codes < 0).any():
        raise DataError(f"{who}: the household column {column!r} has {int((codes < 0).sum())} missing value(s); "
                        "every record needs its household (fill them, e.g. a household of its own)")
    return codes


def _household_figures(risks: np.ndarray, households: np.ndarray, threshold: float) -> dict[str, float]:
    per_household, per_record = kr.household_risks(households, risks)
    return {  # a risk first: a risk-utility map without a named risk figure takes the first "...risk..." one
        "mean_household_risk": float(per_household.mean()),
        "max_household_risk": float(per_household.max()),
        "expected_households_reidentified": float(per_household.sum()),
        "household_expected_reidentifications": float(per_record.sum()),
        "household_global_risk": float(per_record.mean()),
        "households_above_threshold": float(np.sum(per_household > threshold)),
        "households": float(per_household.size),
    }


@attrs.frozen(kw_only=True)
class LDiversity:
    """l-diversity of a sensitive variable within the key cells
    (Machanavajjhala et al. 2007; sdcMicro's ``ldiversity``): for each
    record, the number of distinct values of ``sensitive`` among the records
    of its key cell (distinct l-diversity) and ``exp`` of the entropy of
    their frequencies (entropy l-diversity); the file's l is the smallest
    over the records. A missing key value matches any category, a missing
    sensitive value is no value (left out of the counts); unweighted."""

    name: ClassVar[str] = "l-diversity"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "min_distinct_l": ("smallest number of distinct sensitive values in a record's key cell (the file's "
                           "distinct l-diversity; higher is better, 1 = some cell discloses the value)", "values"),
        "records_below_l": ("records whose key cell holds fewer than l distinct sensitive values", "records"),
        "share_below_l": ("share of records whose key cell holds fewer than l distinct sensitive values (of the "
                          "records whose cell holds a sensitive value at all)", "share (0-1)"),
        "min_entropy_l": ("smallest exp(entropy) of the sensitive values' frequencies in a record's key cell (the "
                          "file's entropy l-diversity; higher is better)", "values"),
        "records_below_entropy_l": ("records whose key cell has exp(entropy) below l", "records"),
    }

    sensitive: str = param(str, doc="the sensitive column whose values the key cells should not disclose")
    keys: tuple[str, ...] = _keys_param()
    with_strata: bool = mm.strata_param()
    l: int = param(int, default=2, ge=2,  # noqa: E741 - sdcMicro's and the literature's name
                   doc="a record's cell should hold at least l distinct sensitive values")

    def _checked(self, inputs: EvaluationInputs) -> tuple[str, ...]:
        keys = mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name)
        if self.sensitive in keys:
            where = "a stratum of the recipe's [roles] strata" if self.sensitive not in (self.keys or (
                inputs.roles.keys if getattr(inputs, "roles", None) is not None else ())) else "a key"
            raise ParameterError(f"{self.name}: the sensitive variable {self.sensitive!r} is also {where}, which an "
                                 "intruder knows already; name a sensitive column that is not a key (or leave it "
                                 "out of the keys" + (", or set with_strata = false" if "strat" in where else "")
                                 + ")")
        return keys

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return {"columns": [*self._checked(inputs), self.sensitive]}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        self._checked(inputs)
        if self.sensitive not in inputs.protected.columns:
            raise DataError(f"{self.name}: the sensitive column {self.sensitive!r} is not in the protected data; "
                            f"the columns are {', '.join(map(str, inputs.protected.columns))}")
        codes = _codes(inputs, self.keys, self.with_strata, self.name)
        sensitive = pd.factorize(inputs.protected[self.sensitive], use_na_sentinel=True)[0]
        if not (sensitive >= 0).any():
            raise DataError(f"{self.name}: the sensitive column {self.sensitive!r} has no value (all missing)")
        distinct, entropy_l = kr.l_diversity(codes, sensitive)
        judged = distinct > 0  # a record whose cell observes no sensitive value has no l
        entropy_l = np.where(distinct == 1, 1.0, entropy_l)  # exp(0) exactly, whatever the rounding
        return {
            "min_distinct_l": float(distinct[judged].min()),
            "records_below_l": float(np.sum(distinct[judged] < self.l)),
            "share_below_l": float(np.mean(distinct[judged] < self.l)),
            "min_entropy_l": float(entropy_l[judged].min()),
            "records_below_entropy_l": float(np.sum(entropy_l[judged] < self.l * (1 - 1e-12))),
        }


def _suda2(frame: pd.DataFrame, keys: tuple[str, ...], max_size: int | None,
           dis_fraction: float) -> tuple[pd.DataFrame, dict[str, Any]]:
    missing = [k for k in keys if k not in frame.columns]
    if missing or not keys:
        raise DataError(f"suda2: key column(s) {', '.join(map(repr, missing)) or '(none)'} not in the data; "
                        f"the columns are {', '.join(map(str, frame.columns))}")
    _check_subsets(len(keys), max_size)
    found = kr.suda2(kr.encode(frame.loc[:, list(keys)]), max_size, dis_fraction)
    by_size = found["msus_by_size"]
    out = pd.DataFrame({f"msu_{k + 1}": by_size[:, k] for k in range(by_size.shape[1])}, index=frame.index)  # type: ignore[index, union-attr]
    return out.assign(score=found["scores"], dis_score=found["dis_scores"]), found


def suda2_scores(frame: pd.DataFrame, keys: tuple[str, ...] | list[str], *, max_size: int | None = None,
                 dis_fraction: float = 0.01) -> pd.DataFrame:
    """Each record's SUDA2 result on the ``keys`` of ``frame``: its number of
    MSUs of each size (``msu_1``, ``msu_2``...), its SUDA ``score`` and its
    ``dis_score`` (see :class:`Suda2`). Index: ``frame``'s."""
    return _suda2(frame, tuple(keys), max_size, dis_fraction)[0]


def _check_subsets(m: int, max_size: int | None) -> None:
    if m > MAX_SUDA_KEYS:  # the weight (M - k)! of an MSU of one key is beyond the largest float
        raise ParameterError(f"suda2: {m} keys; SUDA scores are defined here for at most {MAX_SUDA_KEYS} keys "
                             "((M - 1)! overflows a float beyond): name fewer keys")
    top = m if max_size is None else min(max_size, m)
    subsets = sum(math.comb(m, k) for k in range(1, top + 1))
    if subsets > MAX_SUDA_SUBSETS:
        fits = max(k for k in range(1, m + 1) if sum(math.comb(m, j) for j in range(1, k + 1)) <= MAX_SUDA_SUBSETS)
        raise ParameterError(f"suda2: {m} keys give {subsets:,} key subsets up to size {top}, more than the "
                             f"{MAX_SUDA_SUBSETS:,} searched; set max_size = {fits} (or fewer keys)")


@attrs.frozen(kw_only=True)
class Suda2:
    """Special uniques (SUDA2: Elliot et al. 2002; Manning, Haglin & Keane
    2008; sdcMicro's ``suda2``). A record is unique on a set of keys when no
    other record shares its values there; a minimal sample unique (MSU) is
    such a set none of whose proper subsets makes it unique. With ``M`` keys,
    each MSU of size ``k`` adds ``(M - k)!`` to the record's SUDA score
    (sdcMicro's ``original_scores = TRUE``); the DIS-SUDA score spreads the
    file's probability that a sample unique is a population unique, ``dis =
    U f / (U f + P (1 - f))`` (``U`` sample uniques, ``P`` records in pairs,
    ``f = dis_fraction``), over the records in proportion to ``score^Q``,
    ``Q = 1 + (8 - M) / 20``, as sdcMicro computes it."""

    name: ClassVar[str] = "suda2"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "msus": ("minimal sample uniques found (sets of keys on which a record is unique and on no smaller "
                 "subset), over all records", "MSUs"),
        "records_with_msu": ("records with at least one MSU up to max_size (records of positive SUDA score)",
                             "records"),
        "records_with_msu_of_one_key": ("records unique on a single key's value", "records"),
        "mean_score": ("mean SUDA score (sum over a record's MSUs of (M - size)!, M the number of keys)", "score"),
        "max_score": ("largest SUDA score", "score"),
        "dis": ("the file's DIS probability that a sample unique is a population unique (U f / (U f + P (1 - f)))",
                "probability"),
        "mean_dis_score": ("mean DIS-SUDA score", "probability"),
        "max_dis_score": ("largest DIS-SUDA score", "probability"),
        "records_dis_above_threshold": ("records whose DIS-SUDA score exceeds the evaluator's threshold (its "
                                        "parameter)", "records"),
    }

    keys: tuple[str, ...] = _keys_param()
    with_strata: bool = mm.strata_param()
    max_size: int | None = param(int, default=None, ge=1, optional=True,
                                 doc="the largest MSU searched, in keys (default: every key, as sdcMicro)")
    dis_fraction: float = param(float, role="plain", default=0.01, gt=0, lt=1,
                                doc="the sampling fraction of the DIS score (sdcMicro's DisFraction)")
    threshold: float = param(float, role="plain", default=0.05, ge=0, le=1,
                             doc="a record is at risk above this DIS-SUDA score")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        keys = mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name)
        _check_subsets(len(keys), self.max_size)
        return {"columns": list(keys)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        keys = mm.key_role(self.keys, inputs, self.with_strata)
        scores, found = _suda2(mm.key_frame(inputs.protected, keys, self.name, "protected"), keys, self.max_size,
                               self.dis_fraction)
        msus = scores.filter(like="msu_").to_numpy()
        return {
            "msus": float(msus.sum()),
            "records_with_msu": float(np.sum(scores["score"] > 0)),
            "records_with_msu_of_one_key": float(np.sum(msus[:, 0] > 0)),
            "mean_score": float(scores["score"].mean()),
            "max_score": float(scores["score"].max()),
            "dis": found["dis"],
            "mean_dis_score": float(scores["dis_score"].mean()),
            "max_dis_score": float(scores["dis_score"].max()),
            "records_dis_above_threshold": float(np.sum(scores["dis_score"] > self.threshold)),
        }


def _household_param() -> Any:
    return param(str, default=None, optional=True,
                 doc="the household-id column (default: the recipe's [roles] ids when it names one column)")


def _risk_weight_param() -> Any:
    return param(str, default=None, optional=True,
                 doc="the sampling-weight column, read from the original file (default: the recipe's [roles] "
                     "weight, else the file is the population)")


@attrs.frozen(kw_only=True)
class HouseholdRisk:
    """Household risk (sdcMicro's ``measure_risk`` with ``hid``): a household
    is re-identified when any of its members is, so its risk is ``1 -
    prod(1 - r_i)`` over its members, ``r_i`` each member's individual risk
    (as ``individual-risk``: Benedetti & Franconi from the original file's
    weights, with a missing key value matching any category)."""

    name: ClassVar[str] = "household-risk"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "mean_household_risk": ("mean household risk 1 - prod(1 - r_i) over the households", "probability"),
        "max_household_risk": ("largest household risk", "probability"),
        "expected_households_reidentified": ("expected number of households re-identified (sum of the household "
                                             "risks)", "households"),
        "household_expected_reidentifications": ("expected number of records re-identified through their household "
                                                 "(each record counts its household's risk: sdcMicro's "
                                                 "hier_risk_ER)", "records"),
        "household_global_risk": ("household_expected_reidentifications as a share of the records (sdcMicro's "
                                  "hier_risk)", "share (0-1)"),
        "households_above_threshold": ("households whose risk exceeds the evaluator's threshold (its parameter)",
                                       "households"),
        "households": ("households in the released file", "households"),
    }

    keys: tuple[str, ...] = _keys_param()
    with_strata: bool = mm.strata_param()
    weight: str | None = _risk_weight_param()
    household: str | None = _household_param()
    threshold: float = param(float, role="plain", default=0.1, gt=0, le=1, doc="a household is at risk above this risk")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        keys = mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name)
        hid = _household(self.household, inputs, self.name, required=True)
        return {"columns": [*keys, hid], "weight": mm.weight_role(self.weight, inputs)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        hid = _household(self.household, inputs, self.name, required=True)
        households = _household_codes(inputs, str(hid), self.name)
        risks = mm.record_risks(inputs, self.keys, self.with_strata, self.weight, self.name)
        return _household_figures(risks, households, self.threshold)


@attrs.frozen(kw_only=True)
class GlobalRisk:
    """The global risk as sdcMicro's ``measure_risk`` prints it: the expected
    number of re-identifications (the sum of the individual risks, a missing
    key value matching any category) and its share of the records; with
    households (``household``, or a recipe's ``[roles] ids`` of one column)
    the household-level figures too."""

    name: ClassVar[str] = "global-risk"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "expected_reidentifications": ("expected number of re-identifications (sum of the individual risks; a "
                                       "missing key value matches any category)", "records"),
        "global_risk": ("expected re-identifications as a share of the records (sdcMicro's global_risk)",
                        "share (0-1)"),
        **{k: v for k, v in HouseholdRisk.metric_descriptions.items()
           if k in ("households", "expected_households_reidentified", "household_expected_reidentifications",
                    "household_global_risk")},
    }

    keys: tuple[str, ...] = _keys_param()
    with_strata: bool = mm.strata_param()
    weight: str | None = _risk_weight_param()
    household: str | None = _household_param()

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        keys = mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name)
        hid = _household(self.household, inputs, self.name, required=False)
        return {"columns": [*keys, *([hid] if hid else [])], "weight": mm.weight_role(self.weight, inputs)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        risks = mm.record_risks(inputs, self.keys, self.with_strata, self.weight, self.name)
        out = {"expected_reidentifications": float(risks.sum()), "global_risk": float(risks.mean())}
        hid = _household(self.household, inputs, self.name, required=False)
        if hid is not None:
            figures = _household_figures(risks, _household_codes(inputs, hid, self.name), 1.0)
            out.update({k: figures[k] for k in self.metric_descriptions if k in figures})
        return out


@privclust.hookimpl
def privclust_register_evaluators(register):
    for cls in (LDiversity, Suda2, HouseholdRisk, GlobalRisk):
        register(cls)
