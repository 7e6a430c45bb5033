"""Columns of Python objects that the host and a reader of the written file
would count differently are refused before anything runs (a red-team audit:
a key holding 1, 1.0 and True read "k = 3 holds" while the written CSV showed
three cells of 2 records)."""

import io

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust.errors import DataError

RECIPE = {"roles": {"keys": ["sex"]}, "steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}


def _frame(values):
    column = values if isinstance(values, pd.Categorical) else pd.Series(values, dtype=object)
    return pd.DataFrame({"sex": column, "x": np.random.default_rng(0).uniform(0, 10, len(values)).round(2)})


def test_a_key_equal_to_pandas_but_written_apart_is_refused_naming_column_and_values():
    data = _frame([1, 1.0, True, 1, 1.0, True, 2, 2, 2, 2, 2, 2])
    before = data.copy()
    with pytest.raises(DataError, match=r"column 'sex' holds values that are equal as values but written "
                                        r"differently \(1, 1\.0, True\).*astype\(str\)"):
        privclust.run(RECIPE, data, seed=1)
    pd.testing.assert_frame_equal(data, before)


def test_the_refused_key_would_have_been_counted_wrongly():
    """What the check prevents: pandas' codes make one cell of 1, 1.0 and
    True, the CSV three cells of 2 records (below k = 3)."""
    data = _frame([1, 1.0, True, 1, 1.0, True, 2, 2, 2, 2, 2, 2])
    assert pd.factorize(data["sex"])[0].max() + 1 == 2
    buffer = io.StringIO()
    data.to_csv(buffer, index=False)
    written = pd.read_csv(io.StringIO(buffer.getvalue()), dtype=str)["sex"].value_counts()
    assert sorted(written.tolist()) == [2, 2, 2, 6]


@pytest.mark.parametrize("values", [[1, "1", 2, 2, 2, 2], pd.Categorical([1, "1", 2, 2, 2, 2])])
def test_different_values_written_alike_are_refused(values):
    with pytest.raises(DataError, match=r"column 'sex' holds different values written alike \(1 and '1'\)"):
        privclust.run(RECIPE, _frame(values), seed=1)


def test_an_empty_text_beside_a_missing_value_is_refused():
    with pytest.raises(DataError, match="column 'sex' holds both empty texts and missing values"):
        privclust.run(RECIPE, _frame(["a", "", None, "a", "a", "a"]), seed=1)


def test_the_same_column_recoded_to_text_runs_and_the_key_figures_are_the_files():
    data = _frame([1, 1.0, True, 1, 1.0, True, 2, 2, 2, 2, 2, 2])
    data["sex"] = data["sex"].astype(str)
    release = privclust.run(RECIPE, data, seed=1)
    assert "(k = 3 holds)" not in release.verdict  # cells of 2: the key figures now count the file's cells
    assert "6 of 12 in key cells smaller than k = 3" in release.verdict
    assert "expected re-identifications by an intruder who knows who is in the file: 4," in release.verdict


def test_plain_object_columns_still_run():
    data = _frame(["a", "b", None, "a", "b", "a"] * 2)
    release = privclust.run(RECIPE, data, seed=1)
    assert release.data.shape == data.shape


def test_an_empty_text_beside_a_missing_value_in_a_text_column_is_refused():
    data = _frame(["a", "", None, "a", "a", "a"])
    data["sex"] = data["sex"].astype("str")  # pandas' text dtype, not objects
    assert data["sex"].dtype != object
    with pytest.raises(DataError, match="column 'sex' holds both empty texts and missing values"):
        privclust.run(RECIPE, data, seed=1)
