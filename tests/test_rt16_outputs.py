"""Red-team audit rt16: what third-party plugins return and what the host then says about it (float32 and complex
outputs, cluster labels, a handler's rounding, a noise mechanism's process entry, a plugin's print with ``-o -``,
nested sklearn parameters and renamed keys)."""

from __future__ import annotations

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
