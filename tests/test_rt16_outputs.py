"""Red-team audit rt16: what third-party plugins return and what the host then says about it (float32 and complex
outputs, cluster labels, a handler's rounding, a noise mechanism's process entry, a plugin's print with ``-o -``,
nested sklearn parameters and renamed keys)."""

from __future__ import annotations

import io
import warnings
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust


def _data(n: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": np.round(rng.uniform(0, 100, n), 1), "b": np.round(rng.uniform(0, 10, n), 2)})


@attrs.frozen(kw_only=True)
class Narrow:
    """Returns the step's values in another dtype, unchanged otherwise (a float32 'compression' masker)."""

    name: ClassVar[str] = "narrow"
    how: str = privclust.param(str, default="float32", doc="the dtype to return")

    def mask(self, data: pd.DataFrame, context: Any) -> privclust.Masked:
        return privclust.Masked(data=data.astype(self.how))


@attrs.frozen(kw_only=True)
class Labels:
    """Returns labels of one value for every record."""

    name: ClassVar[str] = "const-labels"
    value: float = privclust.param(float, default=0.0, doc="the label")

    def fit(self, data: pd.DataFrame, context: Any) -> privclust.Partition:
        return privclust.Partition(labels=np.full(len(data), self.value))


class _Plugin:
    @staticmethod
    @privclust.hookimpl
    def privclust_register_maskers(register: Any) -> None:
        register(Narrow)

    @staticmethod
    @privclust.hookimpl
    def privclust_register_clusterers(register: Any) -> None:
        register(Labels)


def _registry() -> privclust.Registry:
    return privclust.Registry(plugins=[_Plugin])


@pytest.mark.parametrize("how", ["float32", "float16", "Float32"])
def test_narrow_float_output_is_released_as_the_values_the_host_compared(how, tmp_path):
    """rt16 F2: a masker returning float32 values was called changed ("2 of 20 records are released verbatim",
    columns a, b changed) while the file, written from the float32 column, was byte-identical to the input: the host
    compared in float64, the writer printed float32's shortest text. The release now holds the float64 values the
    host compared, so the file and the verdict agree."""
    frame = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "narrow", "how": how}]}, frame, registry=_registry(), seed=1)
    assert all(np.dtype(getattr(t, "numpy_dtype", t)) == np.float64 for t in release.data.dtypes)
    source = tmp_path / "in.csv"
    frame.to_csv(source, index=False)
    path = tmp_path / "out.csv"
    release.write(path, keep_order=True)
    assert path.read_bytes() != source.read_bytes()
    written = pd.read_csv(path)
    verbatim_in_file = int((written[["a", "b"]].to_numpy() == frame[["a", "b"]].to_numpy()).all(axis=1).sum())
    assert release.verification["verbatim_records"] == verbatim_in_file
    changed = [c for c in ("a", "b") if not np.array_equal(written[c].to_numpy(), frame[c].to_numpy())]
    assert list(release.verification["changed_columns"]) == changed


def test_float32_input_column_stays_float32():
    """A float32 column of the input that a step returns as float32 is compared and written in float32 alike: not
    widened."""
    frame = _data().astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "narrow", "how": "float32"}]}, frame, registry=_registry())
    assert list(release.data.dtypes) == [np.dtype("float32")] * 2
    assert release.verification["verbatim_records"] == len(frame)


def test_complex_output_is_refused_naming_the_step_and_column():
    """rt16 F2: complex outputs were accepted (the imaginary part dropped under a ComplexWarning in the host's check)
    and written as ``(63.7+0j)``."""
    with pytest.raises(privclust.PrivclustError, match=r"step 0 \('narrow', narrow\) returned complex values "
                                                        r"\(complex128\) in column 'a'"):
        privclust.run({"steps": [{"use": "narrow", "how": "complex128"}]}, _data(), registry=_registry())


@pytest.mark.parametrize("value", [1e300, 2.0**40, -2.0])
def test_labels_outside_the_label_range_are_refused(value):
    """rt16 m4: cluster labels of 1e300 were accepted and written as ``1e+300``."""
    with pytest.raises(privclust.PrivclustError, match=r"step 0 \('const-labels', const-labels\) released 20 "
                                                        r"label\(s\) outside -1 \(unassigned\) to 2147483647"):
        privclust.run({"steps": [{"use": "const-labels", "value": value}]}, _data(), registry=_registry())


def test_whole_float_labels_are_written_as_integers(tmp_path):
    release = privclust.run({"steps": [{"use": "const-labels", "value": 7.0}]}, _data(), registry=_registry())
    assert release.data["cluster"].dtype == np.int64
    path = tmp_path / "out.csv"
    release.write(path, keep_order=True)
    assert path.read_text().splitlines()[1].endswith(",7")


@attrs.frozen
class _NonNegative:
    """Bound rules ``c >= 0`` for some columns, stating their linear form; ``round_integers`` as the test asks."""

    columns: tuple[str, ...]
    rules: tuple[str, ...]
    index: np.ndarray
    how: str

    def project(self, points: Any, *, scale: Any = None) -> np.ndarray:
        out = np.array(points, dtype=float, copy=True)
        out[:, self.index] = np.maximum(out[:, self.index], 0.0)
        return out

    def violations(self, points: Any) -> np.ndarray:
        return np.maximum(-np.asarray(points, dtype=float)[:, self.index], 0.0)

    def linear_form(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m = np.zeros((len(self.rules), len(self.columns)))
        m[np.arange(len(self.rules)), self.index] = -1.0
        return m, np.zeros(len(self.rules)), np.zeros(len(self.rules), dtype=bool)

    def round_integers(self, values: Any, integer: Any, fixed: Any) -> np.ndarray:
        out = np.array(values, dtype=float, copy=True)
        rows = np.arange(len(out))
        for j in range(out.shape[1]):
            if fixed[j]:
                continue
            if integer[j]:
                out[:, j] = np.floor(out[:, j]) + (1000 * (rows % 2) if self.how == "far" else 0)
            elif self.how == "flatten":
                out[:, j] = np.where(np.isnan(out[:, j]), np.nan, 7.0)
        return out


@attrs.frozen(kw_only=True)
class NonNegative:
    name: ClassVar[str] = "nonneg"
    names: tuple = privclust.param(tuple, doc="the columns")
    how: str = privclust.param(str, default="floor", doc="floor, far or flatten")

    def variables(self) -> tuple[frozenset[str], ...]:
        return tuple(frozenset([c]) for c in self.names)

    def describe(self) -> tuple[str, ...]:
        return tuple(f"{c} >= 0" for c in self.names)

    def check(self, columns: Any) -> list[str]:
        return []

    def bind(self, columns: Any, rules: Any = None) -> _NonNegative:
        chosen = [self.names[r] for r in (range(len(self.names)) if rules is None else rules)]
        index = np.array([list(columns).index(c) for c in chosen], dtype=np.intp)
        return _NonNegative(tuple(columns), tuple(f"{c} >= 0" for c in chosen), index, self.how)


class _HandlerPlugin:
    @staticmethod
    @privclust.hookimpl
    def privclust_register_constraint_handlers(register: Any) -> None:
        register(NonNegative)


def _rounded(how: str) -> privclust.Release:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"n": rng.integers(0, 50, 24), "x": np.round(rng.uniform(0, 10, 24), 2)})
    recipe = {"constraints": [{"use": "nonneg", "names": ["n", "x"], "how": how}],
              "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}, "columns": ["n", "x"]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, registry=privclust.Registry(plugins=[_HandlerPlugin]), seed=1)


@pytest.mark.parametrize(("how", "message"), [
    ("far", r"constraint handler 'nonneg': round_integers moved 12 value\(s\) of the integer column 'n' by 1 or "
            r"more \(up to 1000\)"),
    ("flatten", r"constraint handler 'nonneg': round_integers changed 24 value\(s\) of column 'x' \(by up to "),
])
def test_a_handlers_rounding_that_is_no_rounding_is_refused(how, message):
    """rt16 F3: a handler whose round_integers moved integers by 1000 and set a non-integer column to 7 was described
    as the host's controlled rounding ("x adjusted to keep an equality with rounded integers", no equality rule)."""
    with pytest.raises(privclust.PrivclustError, match=message):
        _rounded(how)


def test_a_plugin_handlers_rounding_is_stated_as_its_own_with_the_change_the_host_measured():
    """rt16 F3: the built-in linear handler's method text was stated for a plugin's round_integers."""
    release = _rounded("floor")
    entry = next(e for e in release.ledger.entries if e.mechanism == "integer rounding")
    assert "rounded by constraint handler 'nonneg''s own round_integers (its method, not the host's" in entry.statement
    assert "inequalities and bounds broken by rounding" not in entry.statement
    assert "adjusted to keep an equality" not in entry.statement
    largest = entry.details["handlers_own_rounding"]["nonneg"]
    assert set(largest) == {"n"} and 0 < largest["n"] < 1
    assert f"largest change per column: n {largest['n']:.6g})" in entry.statement


def test_the_builtin_linear_handlers_rounding_keeps_its_method_wording():
    frame = pd.DataFrame({"a": np.arange(12), "b": np.arange(12) * 2, "total": np.arange(12) * 3})
    release = privclust.run({"constraints": [{"use": "linear", "rules": ["total == a + b", "a >= 0"]}],
                             "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]},
                            frame, seed=1)
    entry = next(e for e in release.ledger.entries if e.mechanism == "integer rounding")
    assert "Columns in edit rules were rounded by controlled rounding (linear: equalities over integer" \
        in entry.statement
    assert "own round_integers" not in entry.statement and "handlers_own_rounding" not in entry.details


@attrs.frozen(kw_only=True)
class NoNoise:
    """A noise mechanism that returns its input (spends nothing)."""

    name: ClassVar[str] = "no-noise"
    uses_constraints: ClassVar[bool] = False

    def release(self, values: Any, **kw: Any) -> Any:
        return values

    def perturb(self, data: pd.DataFrame, context: Any) -> privclust.Masked:
        return privclust.Masked(data=data.copy())


class _NoNoisePlugin:
    @staticmethod
    @privclust.hookimpl
    def privclust_register_noise_mechanisms(register: Any) -> None:
        register(NoNoise)


def test_a_noise_steps_process_entry_does_not_say_noise_was_added():
    """rt16 F5: the host's process entry said "noise mechanism 'no-noise' added noise to columns a, b of 20 records"
    beside its own check that the release changes no column."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "no-noise"}]}, _data(),
                                registry=privclust.Registry(plugins=[_NoNoisePlugin]))
    said = next(e.statement for e in release.ledger.entries if e.kind == "process" and e.step == 0)
    assert "added noise" not in said
    assert said.startswith("noise mechanism 'no-noise' was run on columns a, b of 20 records (what noise it adds "
                           "is the mechanism's own statement")
    assert release.verification["verbatim_records"] == 20


@attrs.frozen(kw_only=True)
class Chatty:
    """Rounds, and prints the records it got (debug output left in), through print and through descriptor 1."""

    name: ClassVar[str] = "chatty"

    def mask(self, data: pd.DataFrame, context: Any) -> privclust.Masked:
        print(data.head(3).to_csv(index=False), end="")
        import os
        os.write(1, b"fd-level chatter\n")
        return privclust.Masked(data=data.round(-1))


class _ChattyPlugin:
    @staticmethod
    @privclust.hookimpl
    def privclust_register_maskers(register: Any) -> None:
        register(Chatty)


def test_a_plugins_print_does_not_go_into_the_release_on_standard_output(tmp_path, capfd):
    """rt16 F6: with ``-o -`` a masker's print() went into the released CSV: 25 lines for 20 records, a header and
    3 original rows first."""
    from privclust.cli import main

    privclust.get_registry().register(_ChattyPlugin, "rt16-chatty")
    source = tmp_path / "in.csv"
    _data().to_csv(source, index=False)
    recipe = tmp_path / "chatty.toml"
    recipe.write_text('[[steps]]\nuse = "chatty"\n', encoding="utf-8")
    assert main(["run", str(recipe), "-i", str(source), "-o", "-", "--seed", "1", "--keep-order"]) == 0
    captured = capfd.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 21 and lines[0] == "a,b"
    assert (pd.read_csv(io.StringIO(captured.out)) % 10 == 0).all().all()
    assert "63.7,0.28" in captured.err and "fd-level chatter" in captured.err
    assert "warning: a component wrote" in captured.err and "standard output holds only the released CSV" \
        in captured.err


def test_sklearn_nested_parameters_set_the_nested_components_spec():
    """rt16 m2: ``set_params(clusterer__k=5)`` (scikit-learn's nested syntax, as GridSearchCV grids write it) raised a
    bare ``AttributeError: 'str' object has no attribute 'set_params'``."""
    from privclust import sklearn as pcs

    masker = pcs.masker("microaggregation").set_params(clusterer__k=5)
    assert masker.get_params()["clusterer"] == {"use": "mdav", "k": 5}
    X = np.random.default_rng(0).normal(size=(30, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        released = masker.fit_transform(X)
    assert np.unique(released, axis=0).shape[0] == 6  # groups of 5
    with pytest.raises(privclust.PrivclustError, match="parameter 'c' was renamed 'n_clusters'"):
        pcs.masker("microaggregation", clusterer="fcm").set_params(clusterer__c=3).fit_transform(X)
    with pytest.raises(privclust.ParameterError, match=r"clusterer__k__m: one level of nesting"):
        pcs.masker("microaggregation").set_params(clusterer__k__m=3)
