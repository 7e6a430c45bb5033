"""scikit-learn estimators for any registered masker or clusterer.

>>> from privclust import sklearn as pcs                         # doctest: +SKIP
>>> mask = pcs.masker("microaggregation", clusterer={"use": "mdav", "k": 3}, random_state=0)
>>> protected = mask.fit_transform(X)                            # doctest: +SKIP
>>> km = pcs.clusterer("idp-kmeans", n_clusters=3, epsilon=1.0, bounds=..., random_state=0)
>>> labels = km.fit_predict(X)                                   # doctest: +SKIP

Each call builds an estimator whose constructor parameters are the
component's own parameters (under their Python field names, so ``lambda_``
for the recipe key ``lambda``) plus two of the estimator:

``budget``
    the privacy budget of each run: ``None`` (unlimited, everything is still
    recorded), an epsilon, or an ``(epsilon, delta)`` pair.
``random_state``
    an integer seed for reproducible experiments, or ``None`` for entropy
    from the operating system. As everywhere in privclust, the seed never
    appears in the ledger or the report.

Every fit or transform is a full :func:`privclust.run` of a one-step recipe,
so the host's checks, its verification of the released data and its ledger
apply exactly as for a recipe; the :class:`~privclust.Release` of the last
fit is kept as ``release_`` (its ledger as ``ledger_``).

A masker is a transformer without a learned state: ``fit(X)`` protects X and
keeps that release; ``transform(X)`` protects the X it is given (a new
release, which spends again when the masker is differentially private);
``fit_transform(X)`` protects X once. A pickled estimator leaves its release
(which holds the original data) behind. A clusterer gives ``labels_``,
``cluster_centers_`` (when the component has centres) and ``fit_predict``.

The estimators work with :func:`sklearn.base.clone`, ``get_params`` /
``set_params``, :class:`~sklearn.pipeline.Pipeline`, parameter searches and
``set_output(transform="pandas")``. The classes are generated per component
and rebuilt by name when unpickled (``joblib`` workers included), so a
component registered in the session must also be registered in the worker.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import warnings
from collections.abc import Collection, Mapping
from typing import Any

import attrs
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .building import renamed_to
from .errors import DataError, ParameterError, PrivclustError, PrivclustWarning, Problem
from .params import RenamedParameterError, param_name, renamed_problems
from .recipe import Budget
from .registry import get_registry
from .runner import run
from .specs import ComponentSpec, field_kind

__all__ = ["clusterer", "estimator_class", "masker"]

#: The estimator's own parameters (besides the component's).
_OWN = ("budget", "random_state")

_CLASSES: dict[tuple[str, str, type], type] = {}


def _budget(value: Any) -> Budget:
    if value is None:
        return Budget()
    if isinstance(value, tuple | list) and len(value) == 2:
        epsilon, delta = value
    else:
        epsilon, delta = value, 0.0
    for label, number in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(number, bool) or not isinstance(number, int | float | np.integer | np.floating) \
                or not math.isfinite(number) or number < 0:
            raise ParameterError(f"budget: the {label} must be a finite number >= 0; got {number!r} "
                                 "(give budget=None, an epsilon, or an (epsilon, delta) pair)")
    if epsilon == 0:
        raise ParameterError("budget: the epsilon must be > 0; got 0 (budget=None sets no limit)")
    if delta >= 1:
        raise ParameterError(f"budget: the delta must be below 1; got {delta!r} (give an (epsilon, delta) pair with "
                             "a small delta, e.g. (1.0, 1e-6), or an epsilon alone for delta = 0)")
    return Budget(epsilon=float(epsilon), delta=float(delta))


def _frame(estimator: BaseEstimator, X: Any, *, reset: bool) -> pd.DataFrame:
    """X as a DataFrame with string column names, after scikit-learn's checks.

    A DataFrame keeps its column names (as strings, also when they are not
    strings, which scikit-learn does not record as ``feature_names_in_``);
    the columns of an array are ``x0``, ``x1``, ... A NaN or an infinite
    value is refused naming its column(s)."""
    names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else None
    index = X.index if isinstance(X, pd.DataFrame) else None
    if isinstance(X, pd.DataFrame):
        _numeric_or_refuse(estimator, X)
    array = validate_data(estimator, X, reset=reset, dtype="numeric", ensure_min_samples=1,
                          ensure_all_finite=False)
    if names is None:
        names = [f"x{j}" for j in range(array.shape[1])]
    bad = ~np.isfinite(array)
    if bad.any():
        nan = np.isnan(array).sum(axis=0)
        inf = (bad.sum(axis=0) - nan)
        def what(j: int) -> str:
            return ", ".join(t for t in (f"{nan[j]} NaN" if nan[j] else "", f"{inf[j]} inf" if inf[j] else "") if t)
        found = [f"{names[j]} ({what(j)})" for j in np.flatnonzero(bad.any(axis=0)).tolist()]
        raise DataError(f"{type(estimator).__name__}: the input has NaN or inf values in column(s) "
                        f"{', '.join(found)}; the estimators take complete, finite data: drop or impute those "
                        "records first (privclust.run with a recipe keeps missing values where the step "
                        "supports them, see the missing-values page)")
    if reset:
        estimator._privclust_columns = tuple(names)
    return pd.DataFrame(array, columns=names, index=index)


def _numeric_or_refuse(estimator: BaseEstimator, X: pd.DataFrame) -> None:
    """A DataFrame's columns that are not numbers are refused by name (not
    with scikit-learn's message, which quotes a value of the data and names
    no column)."""
    bad = []
    for position in range(X.shape[1]):
        column = X.iloc[:, position]
        if pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype):
            continue
        if pd.api.types.is_datetime64_any_dtype(column.dtype) or pd.api.types.is_timedelta64_dtype(column.dtype) \
                or isinstance(column.dtype, pd.PeriodDtype | pd.IntervalDtype):
            bad.append(str(X.columns[position]))  # dates and spans: numbers only once the user says in what unit
            continue
        try:
            pd.to_numeric(column.astype(object) if isinstance(column.dtype, pd.CategoricalDtype) else column,
                          errors="raise")
        except (TypeError, ValueError):
            bad.append(str(X.columns[position]))
    if bad:
        raise DataError(f"{type(estimator).__name__}: column(s) {', '.join(bad)} hold values that are not numbers; "
                        "the estimators take numeric columns only: select them (e.g. X.select_dtypes('number')) "
                        "or encode the categories as numbers first")


class _PrivclustEstimator(BaseEstimator):
    """What every generated estimator shares; see the module docstring."""

    _privclust_kind: str = ""
    _privclust_name: str = ""
    _privclust_fields: tuple[str, ...] = ()
    _privclust_component: type | None = None

    def set_params(self, **params: Any) -> Any:
        """scikit-learn's ``set_params`` (what ``GridSearchCV`` and ``Pipeline`` call), answering a renamed
        parameter with the message a recipe and the component's constructor give, not "Invalid parameter"."""
        if self._privclust_component is not None:
            own = {key: value for key, value in params.items() if "__" not in key}
            given = {key for key in params if "__" in key}
            top = renamed_problems(self._privclust_component, [k for k in own if k not in self.get_params()])
            params = self._nested_specs(params)
            _raise_renamed(top + _nested_renames(self._privclust_component, params, given))
        return super().set_params(**params)

    def _nested_specs(self, params: dict[str, Any]) -> dict[str, Any]:
        """scikit-learn's nested keys (``clusterer__k=5``, as ``GridSearchCV`` grids write them) for a nested
        component, which these estimators hold as its name or spec (``"mdav"``, ``{"use": "mdav", "k": 3}``), not
        as an estimator: set in a copy of the spec (``{"use": "mdav", "k": 5}``). scikit-learn's own handling called
        ``set_params`` on the string: a bare AttributeError (a red-team audit)."""
        current = self.get_params(deep=False)
        out = {key: value for key, value in params.items() if "__" not in key}
        for key, value in params.items():
            if "__" not in key:
                continue
            outer, inner = key.split("__", 1)
            spec = out.get(outer, current.get(outer))
            if outer not in current or hasattr(spec, "set_params"):
                out[key] = value  # scikit-learn's own answer (an unknown parameter, a nested estimator)
                continue
            if "__" in inner:
                raise ParameterError(f"{type(self).__name__}.set_params: {key}: one level of nesting is set this way; "
                                     f"give {outer} as a whole spec instead, with its own nested spec inside")
            if not (isinstance(spec, str) or isinstance(spec, Mapping) and "use" in spec):
                raise ParameterError(f"{type(self).__name__}.set_params: {key}: {outer} is {spec!r}, not a nested "
                                     f"component's name or spec; give the whole spec instead, e.g. "
                                     f"{outer}={{'use': <name>, {inner!r}: {value!r}}}")
            out[outer] = {**({"use": spec} if isinstance(spec, str) else dict(spec)), inner: value}
        return out

    def _component_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"use": self._privclust_name}
        for field in self._privclust_fields:
            value = getattr(self, field)
            if value is not None:
                spec[param_name(field)] = value
        return spec

    def _run(self, frame: pd.DataFrame) -> Any:
        step = {**self._component_spec(), "columns": list(frame.columns)}
        recipe: dict[str, Any] = {"name": f"sklearn:{self._privclust_name}", "steps": [step]}
        budget = _budget(self.budget)
        if budget.limited:
            recipe["privacy"] = {"epsilon": budget.epsilon, "delta": budget.delta}
        seed = self.random_state
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0):
            raise ParameterError(f"random_state: must be None or an integer >= 0; got {seed!r} (privclust draws "
                                 "from a seed sequence of its own, so a numpy RandomState or Generator is not "
                                 "accepted; leave random_state=None for a release to publish)")
        release = run(recipe, frame, seed=None if seed is None else int(seed))
        if seed is not None and release.random_steps:
            drawn = self.__dict__.setdefault("_privclust_seeds_drawn", set())
            mark = self._seed_mark(int(seed))
            if mark in drawn:
                warnings.warn(PrivclustWarning(
                    f"{type(self).__name__}: this run drew its randomness (noise included) from the same stream as "
                    "an earlier run of this estimator, since random_state is a fixed seed it used before; on "
                    "different data, two such releases can cancel each other's noise, so their privacy statements "
                    "do not hold together. Publish at most one release per seed; leave random_state=None for "
                    "releases."),
                    stacklevel=3)
            drawn.add(mark)
        return release

    def _seed_mark(self, seed: int) -> bytes:
        """A keyed hash of a seed this estimator drew from: every seed a run
        used is remembered this way (not the seed itself, which the object
        would otherwise keep after ``random_state`` changes), so a seed used
        again after others still warns (a red-team audit: seeds 0, 1, 0 gave
        no warning). The key is drawn once per estimator."""
        key = self.__dict__.setdefault("_privclust_seed_key", os.urandom(16))
        return hashlib.blake2b(str(seed).encode(), key=key, digest_size=16).digest()

    def __reduce__(self) -> tuple[Any, ...]:
        # The release holds the original data: it stays out of the pickle. So do the marks of the seeds earlier
        # runs drew from (kept to warn when one is used again): a copy keeps only whether its current random_state
        # was among them, which the pickle shows anyway.
        hidden = ("release_", "ledger_", "_privclust_seeds_drawn", "_privclust_seed_key")
        state = {k: v for k, v in self.__dict__.items() if k not in hidden}
        seed = self.random_state
        if seed is not None and isinstance(seed, int | np.integer) and not isinstance(seed, bool) and seed >= 0:
            state["_privclust_state_drawn"] = self._seed_mark(int(seed)) in self.__dict__.get(
                "_privclust_seeds_drawn", set())
        return (_rebuild, (self._privclust_kind, self._privclust_name, self.get_params(deep=False), state))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True  # the same data give another release without a seed
        tags.input_tags.allow_nan = False
        return tags


class _MaskerEstimator(TransformerMixin, _PrivclustEstimator):
    def fit(self, X: Any, y: Any = None) -> _MaskerEstimator:
        """Protect ``X`` and keep the release as ``release_``."""
        frame = _frame(self, X, reset=True)
        self.release_ = self._run(frame)
        self.ledger_ = self.release_.ledger
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Protect ``X`` (a new release)."""
        check_is_fitted(self, "n_features_in_")
        frame = _frame(self, X, reset=False)
        return self._run(frame).data.loc[:, list(frame.columns)].to_numpy()

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> np.ndarray:
        """Protect ``X`` once and return the protected values."""
        self.fit(X, y)
        return self.release_.data.loc[:, list(self.feature_names_out_)].to_numpy()

    @property
    def feature_names_out_(self) -> list[str]:
        check_is_fitted(self, "n_features_in_")
        names = getattr(self, "_privclust_columns", None)
        if names is None:  # unpickled from an earlier version
            names = getattr(self, "feature_names_in_", None)
        return [str(c) for c in names] if names is not None else [f"x{j}" for j in range(self.n_features_in_)]

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.asarray(self.feature_names_out_, dtype=object)


class _ClustererEstimator(ClusterMixin, _PrivclustEstimator):
    def fit(self, X: Any, y: Any = None) -> _ClustererEstimator:
        """Cluster ``X``: ``labels_``, ``cluster_centers_`` and ``release_``."""
        frame = _frame(self, X, reset=True)
        release = self._run(frame)
        self.release_ = release
        self.ledger_ = release.ledger
        self.labels_ = release.labels.iloc[:, 0].to_numpy()
        partition = release.outcomes[0].partition
        centres = None if partition is None else partition.centres
        self.cluster_centers_ = None if centres is None else np.array(centres)
        iterations = None if partition is None else partition.diagnostics.get("iterations")
        if isinstance(iterations, int | np.integer):
            self.n_iter_ = int(iterations)
        return self


def _raise_renamed(problems: list[Problem]) -> None:
    """Raise :class:`~privclust.params.RenamedParameterError` with the one "renamed" message
    (:func:`~privclust.params.renamed_problem`: a recipe's, Registry.create's, the CLI's), each named by its place:
    ``c`` (the component's own parameter), ``clusterer.c`` (in a nested spec), ``clusterer__c`` (as ``set_params``
    was given it)."""
    if problems:
        raise RenamedParameterError("; ".join(map(str, problems)))


def _nested_renames(cls: type, params: Mapping[str, Any], given: Collection[str] = ()) -> list[Problem]:
    """The renamed-parameter problems of the nested components' specs among ``params`` (the estimator's parameters
    for component class ``cls``: ``clusterer={"use": "fcm", "c": 3}``, or what ``set_params(clusterer__c=3)`` makes
    of it; ``given``: the nested keys ``set_params`` was given, named as given), at any depth: the message and the
    moment of a renamed top-level parameter, where the run refused it only at ``fit``. Anything else wrong with a
    nested spec (an unknown name or parameter, a bad value) is still the run's to report, at ``fit``."""
    fields = {f.name: f for f in attrs.fields(cls) if f.init} if attrs.has(cls) else {}
    problems: list[Problem] = []
    for key, value in params.items():
        field = fields.get(key)
        kind = field_kind(field) if field is not None else None
        if kind is not None:
            problems += _renamed_in_spec(kind, value, key, given)
    return problems


def _renamed_in_spec(kind: str, value: Any, where: str, given: Collection[str] = ()) -> list[Problem]:
    if isinstance(value, ComponentSpec):
        use, params = value.use, dict(value.params)
    elif isinstance(value, Mapping) and isinstance(value.get("use"), str):
        use, params = value["use"], {k: v for k, v in value.items() if k != "use"}
    else:
        return []  # a name alone, an instance (built, so checked by its constructor) or None
    try:
        cls = get_registry().get(kind, use)
    except PrivclustError:
        return []  # an unknown component: the run names it with the close names
    fields = {param_name(f.name): f for f in attrs.fields(cls) if f.init} if attrs.has(cls) else {}
    problems: list[Problem] = []
    for key in params:
        if key not in fields:
            problems += renamed_problems(cls, [key], f"{where}__" if f"{where}__{key}" in given else f"{where}.")
    for key, nested in params.items():
        kind_of_field = field_kind(fields[key]) if key in fields else None
        if kind_of_field is not None:
            problems += _renamed_in_spec(kind_of_field, nested, f"{where}.{key}")
    return problems


def _signature(base: type, fields: list[attrs.Attribute]) -> inspect.Signature:
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for field in fields:
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = None
        if default is attrs.NOTHING:
            default = None  # required: the component says so when it runs
        params.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=_plain(default)))
    params.append(inspect.Parameter("budget", inspect.Parameter.KEYWORD_ONLY, default=None))
    params.append(inspect.Parameter("random_state", inspect.Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def _plain(value: Any) -> Any:
    """A default as scikit-learn accepts it: a nested component given by
    name alone becomes that name; one with parameters of its own becomes
    ``None`` (the component's default applies)."""
    to_dict = getattr(value, "to_dict", None)
    spec = to_dict() if callable(to_dict) else value
    if isinstance(spec, Mapping):
        return spec.get("use") if set(spec) == {"use"} else None
    return value


def estimator_class(kind: str, name: str) -> type:
    """The estimator class of a registered masker (``kind="maskers"``) or
    clusterer (``kind="clusterers"``), generated once per component class."""
    if kind not in ("maskers", "clusterers"):
        raise ParameterError(f"estimator_class: kind must be 'maskers' or 'clusterers'; got {kind!r}")
    registry = get_registry()
    other = [k for k in registry.kind_of(name) if k != kind]
    if name not in registry.tables[kind] and other:
        factory = {"maskers": "masker", "clusterers": "clusterer"}.get(other[0])
        fix = f"use privclust.sklearn.{factory}({name!r}, ...)" if factory else "it has no scikit-learn estimator"
        raise ParameterError(f"{name!r} is not one of the {kind} but one of the {other[0].replace('_', ' ')}: {fix}")
    cls = registry.get(kind, name)
    key = (kind, name, cls)
    if key in _CLASSES:
        return _CLASSES[key]
    fields = [f for f in attrs.fields(cls) if f.init]
    clash = [f.name for f in fields if f.name in _OWN]
    if clash:
        raise ParameterError(f"{name}: parameter(s) {', '.join(clash)} clash with the estimator's own "
                             f"{' and '.join(_OWN)}; rename them in the component")
    base = _MaskerEstimator if kind == "maskers" else _ClustererEstimator
    signature = _signature(base, fields)
    names = tuple(p.name for p in signature.parameters.values())[1:]

    def __init__(self: Any, **params: Any) -> None:
        unknown = sorted(set(params) - set(names))
        # the one "renamed" message, as in a recipe: for the component's own parameter (c=3) and in a nested
        # component's spec (clusterer={"use": "fcm", "c": 3})
        _raise_renamed(renamed_problems(cls, unknown) + _nested_renames(cls, params))
        if unknown:
            moved = [f"{old!r} was renamed {renamed_to(cls, old)!r}" for old in unknown if renamed_to(cls, old)]
            raise TypeError(f"{name}: unexpected parameter(s) {', '.join(unknown)}; "
                            + (f"{'; '.join(moved)}; " if moved else "") + f"the parameters are {', '.join(names)}")
        for p in names:
            setattr(self, p, params.get(p, signature.parameters[p].default))

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    title = "".join(part.capitalize() for part in name.replace("_", "-").split("-"))
    suffix = "Masker" if kind == "maskers" else "Clusterer"
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    new = type(f"{title}{suffix}", (base,), {
        "__init__": __init__,
        "__doc__": f"scikit-learn {suffix.lower()} for the privclust component {name!r}.\n\n{doc}",
        "__module__": __name__,
        "_privclust_kind": kind,
        "_privclust_name": name,
        "_privclust_fields": tuple(f.name for f in fields),
        "_privclust_component": cls,
    })
    _CLASSES[key] = new
    return new


def _rebuild(kind: str, name: str, params: dict[str, Any], state: dict[str, Any]) -> Any:
    estimator = estimator_class(kind, name)(**params)
    state = dict(state)
    if state.pop("_privclust_state_drawn", False):  # its random_state was drawn from before it was copied
        estimator.__dict__.setdefault("_privclust_seeds_drawn", set()).add(
            estimator._seed_mark(int(params["random_state"])))
    estimator.__dict__.update(state)
    return estimator


def masker(name: str, **params: Any) -> Any:
    """A scikit-learn transformer for the registered masker ``name``.

    :param params: the masker's parameters, ``budget`` and ``random_state``.
    """
    return estimator_class("maskers", name)(**params)


def clusterer(name: str, **params: Any) -> Any:
    """A scikit-learn clusterer for the registered clusterer ``name``.

    :param params: the clusterer's parameters, ``budget`` and ``random_state``.
    """
    return estimator_class("clusterers", name)(**params)
