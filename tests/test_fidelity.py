"""Data fidelity of what is read and written (issue 24, item 7, data side).

Columns released as in the original keep their cells' text (``00037``,
``1e3``); integers beyond 2^53 are never rounded silently; headers pandas
would rename are refused, with or without a byte-order mark; dtypes that
broke a run (nullable booleans with missing values, list cells) work or fail
cleanly; verbatim records are counted by content, not by position.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import sys
import types
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import DataError, Masked, PrivclustError, Registry, hookimpl
from privclust._io import frame_writer, keep_text, read_frame
from privclust.cli import main
from privclust.verify import values_equal as _equal

RECIPE = '[[steps]]\nuse = "microaggregation"\nk = 3\ncolumns = ["x"]\n'

#: An input whose untouched columns pandas would rewrite: leading zeros, exponents, a missing-value token,
#: spaces, a quoted cell, a float written without its trailing zero.
SOURCE = ('id,x,e,note,f\n'
          '00037,1,1e3,NA,1.\n'
          '00038,2,2E3,"a, b",2.50\n'
          '00039,3,3e3, padded ,-0\n'
          '00040,4,4e3,,0x\n'
          '00041,5,5e3,n/a,7\n'
          '00042,6,6e3,x,8\n')


def _cells(text: str) -> dict[str, list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    return {name: [row[j] for row in rows[1:]] for j, name in enumerate(rows[0])}


def _run(tmp_path, source: str, recipe: str = RECIPE, output: str = "out.csv", *extra: str) -> int:
    (tmp_path / "in.csv").write_text(source)
    (tmp_path / "recipe.toml").write_text(recipe)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(["run", str(tmp_path / "recipe.toml"), "-i", str(tmp_path / "in.csv"), "-o",
                     str(tmp_path / output), "--seed", "1", "-q", "--keep-order", *extra])


# ---------------------------------------------------------------------------
# Original text of columns released as in the original
# ---------------------------------------------------------------------------


def test_columns_released_as_in_the_original_keep_their_cells_text(tmp_path):
    assert _run(tmp_path, SOURCE) == 0
    written = (tmp_path / "out.csv").read_text()
    before, after = _cells(SOURCE), _cells(written)
    for column in ("id", "e", "f"):
        assert after[column] == before[column], column
    assert after["x"] != before["x"]  # the masked column is written as released
    # a missing value spelled three ways (NA, an empty field, n/a) is one value to the host's figures: written so
    assert after["note"] == ["", "a, b", " padded ", "", "", "x"]
    # byte-identical cells otherwise: every line is the input's line with its x and note cells replaced
    for old, new in zip(SOURCE.splitlines()[1:], written.splitlines()[1:], strict=True):
        assert new.split(",", 2)[0] == old.split(",", 2)[0] and new.rsplit(",", 1)[1] == old.rsplit(",", 1)[1]


def test_a_column_whose_value_has_two_spellings_is_written_as_the_host_counted_it(tmp_path):
    # red-team audit: the keys' k was counted on the values read ("" = NA = null = N/A, 30 = 30.0) while the file
    # kept each cell's text, so the published file had key cells smaller than the k it stated
    na = ["", "NA", "null", "N/A"]
    rows = [f"{'clerk' if i < 8 else na[i % 4]},{30 if i % 2 else '30.0'},{1000 + 37 * i}.5" for i in range(16)]
    recipe = '[roles]\nkeys = ["job", "age"]\n[[steps]]\nuse = "microaggregation"\nk = 4\ncolumns = ["income"]\n'
    assert _run(tmp_path, "job,age,income\n" + "\n".join(rows) + "\n", recipe, "out.csv",
                "--report", str(tmp_path / "r.json")) == 0
    written = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    cells = written.groupby(["job", "age"]).size()
    assert cells.min() >= 4 and len(cells) == 2  # the 2 key cells of k = 4 the report states, in the bytes
    report = (tmp_path / "r.json").read_text()
    assert "k = 4 holds" in report
    # a column whose every value keeps one spelling keeps its text (the rule is per column, not per cell)
    path = tmp_path / "one.csv"
    path.write_text("id,note\n007,NA\n008,NA\n")
    frame = read_frame(path)
    out = tmp_path / "one_out.csv"
    frame_writer(frame, out)(out)
    assert out.read_text() == "id,note\n007,NA\n008,NA\n"


def test_standard_input_to_standard_output_keeps_the_text(tmp_path, monkeypatch, capsys):
    (tmp_path / "recipe.toml").write_text(RECIPE)
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(SOURCE.encode())))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(tmp_path / "recipe.toml"), "-i", "-", "-o", "-", "--seed", "1", "-q",
                     "--keep-order"]) == 0
    after = _cells(capsys.readouterr().out)
    assert after["id"][0] == "00037" and after["e"][1] == "2E3" and after["f"][0] == "1."


def test_a_dp_release_keeps_the_text_of_the_columns_no_step_wrote(tmp_path):
    recipe = ('[privacy]\nepsilon = 1.0\n\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["x"]\n'
              'bounds = { x = [0, 10] }\n')
    assert _run(tmp_path, SOURCE, recipe) == 0
    after = _cells((tmp_path / "out.csv").read_text())
    assert after["id"] == _cells(SOURCE)["id"] and after["e"] == _cells(SOURCE)["e"]


def test_text_is_written_only_where_the_values_are_exactly_the_originals(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("id,e\n00037,1e3\n00038,2e3\n")
    original = read_frame(path)
    released = original.copy()
    keep_text(original, released, ["id", "e"])
    released.loc[0, "id"] = 38  # changed after keep_text: that column is written as it now is
    out = tmp_path / "out.csv"
    frame_writer(released, out)(out)
    assert out.read_text().splitlines() == ["id,e", "38,1e3", "38,2e3"]
    # a frame not read from a file (or not named by keep_text) is written as pandas writes it
    frame_writer(original.copy(), out)(out)
    assert out.read_text().splitlines() == ["id,e", "37,1000.0", "38,2000.0"]
    frame_writer(original, out)(out)  # the frame read_frame returned: its own text
    assert out.read_text() == "id,e\n00037,1e3\n00038,2e3\n"


def test_the_text_never_travels_into_the_frame(tmp_path):
    """The cells' text is kept beside the frame, never in it: not in ``attrs`` (they reach Parquet metadata
    and every derived frame), so a released file never carries the original text of a protected column."""
    pytest.importorskip("pyarrow")
    path = tmp_path / "in.csv"
    path.write_text(SOURCE)
    frame = read_frame(path)
    assert frame.attrs == {}
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}, frame, seed=1)
    assert release.data.attrs == {}
    out = tmp_path / "out.parquet"
    frame_writer(release.data, out)(out)
    assert b"00037" not in out.read_bytes()
    assert read_frame(out)["id"].tolist() == [37, 38, 39, 40, 41, 42]


# ---------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "message"), [
    (b"\xef\xbb\xbfa,b,a\n1,2,3\n4,5,6\n", "'a' .columns 1, 3."),
    (b"a,b,a\n1,2,3\n4,5,6\n", "'a' .columns 1, 3."),
    (b"\n\na,b,a\n1,2,3\n", "'a' .columns 1, 3."),
    (b"a,,b\n1,2,3\n4,5,6\n", "no name to column.s. 2 .of 3."),
    (b"\xef\xbb\xbfa, ,b\n1,2,3\n4,5,6\n", "no name to column.s. 2 .of 3."),
    (b",a\n1,2\n", "no name to column.s. 1 .of 2."),
])
@pytest.mark.parametrize("where", ["file", "gzip", "stdin"])
def test_headers_pandas_would_rename_are_refused(tmp_path, monkeypatch, raw, message, where):
    if where == "stdin":
        monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(raw)))
        path = "-"
    elif where == "gzip":
        import gzip

        path = tmp_path / "in.csv.gz"
        path.write_bytes(gzip.compress(raw))
    else:
        path = tmp_path / "in.csv"
        path.write_bytes(raw)
    with pytest.raises(DataError, match=message):
        read_frame(path)


def test_a_bom_is_not_part_of_the_first_name(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n")
    assert list(read_frame(path).columns) == ["a", "b"]


# ---------------------------------------------------------------------------
# Dtypes: each works or fails cleanly
# ---------------------------------------------------------------------------

N = 12
OTHER = {
    "boolean with NA": pd.array([True, False, None] * 4, dtype="boolean"),
    "Int64 with NA": pd.array([1, None, 3] * 4, dtype="Int64"),
    "Float64 with NA": pd.array([1.5, None, 3.0] * 4, dtype="Float64"),
    "category": pd.Categorical(["a", "b", "c"] * 4),
    "datetime": pd.date_range("2020", periods=N),
    "datetime tz": pd.date_range("2020", periods=N, tz="UTC"),
    "timedelta": pd.to_timedelta(np.arange(N), unit="s"),
    "string": pd.array(["a", None, "c"] * 4, dtype="string"),
    "mixed object": pd.Series([1, "a", 2.5, None] * 3, dtype=object),
    "period": pd.period_range("2020", periods=N, freq="D"),
    "bool": np.array([True, False] * 6),
    "complex": np.arange(N) * 1j,
    "uint64": np.array([2**64 - 1 - i for i in range(N)], dtype=np.uint64),
    "int64 near its minimum": np.array([-(2**63) + i for i in range(N)], dtype=np.int64),
}
if importlib.util.find_spec("pyarrow") is not None:
    OTHER["string[pyarrow]"] = pd.array(["a", None, "c"] * 4, dtype="string[pyarrow]")


@pytest.mark.parametrize("kind", list(OTHER))
@pytest.mark.parametrize("use", ["left alone", "named by the step", "default columns"])
def test_every_dtype_works_or_is_refused_cleanly(tmp_path, kind, use):
    frame = pd.DataFrame({"x": np.arange(N, dtype=float), "y": np.arange(N, dtype=float)[::-1], "other": OTHER[kind]})
    step = {"use": "microaggregation", "k": 3}
    if use != "default columns":
        step["columns"] = ["x", "y"] if use == "left alone" else ["x", "other"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release = privclust.run({"steps": [step]}, frame, seed=1)
    except PrivclustError as err:
        assert "'other'" in str(err)
        return
    if use == "left alone" or "other" not in release.verification["changed_columns"]:
        assert release.data["other"].equals(frame["other"])  # released as in the original, dtype and all
        assert release.data["other"].dtype == frame["other"].dtype
    if kind in ("Int64 with NA", "Float64 with NA"):  # changed by the step: the input's nullable dtype kept
        assert release.data["other"].dtype == frame["other"].dtype
    for name in ("out.csv", "out.parquet"):
        try:
            frame_writer(release.data, tmp_path / name)(tmp_path / name)
        except PrivclustError as err:  # Parquet cannot hold every column: said cleanly, naming it
            assert "other" in str(err) and name.endswith(".parquet")


def test_a_nullable_boolean_column_with_missing_values_is_released_as_it_is():
    frame = pd.DataFrame({"x": np.arange(N, dtype=float), "flag": pd.array([True, None, False] * 4, dtype="boolean")})
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}, frame, seed=1)
    assert release.data["flag"].equals(frame["flag"]) and "flag" in release.verification["unchanged_columns"]


@pytest.mark.parametrize("cells", [[[1, 2], [3], []] * 4, [np.array([1.0, 2.0])] * N, [{"a": 1}] * N])
def test_list_or_array_cells_are_refused_by_name(tmp_path, cells):
    frame = pd.DataFrame({"x": np.arange(N, dtype=float), "tags": pd.Series(cells, dtype=object)})
    with pytest.raises(DataError, match="'tags' .record 0 holds a value of type (list|ndarray|dict).*astype.str."):
        privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}, frame, seed=1)
    mixed = frame.assign(tags=pd.Series([1, "a", [2]] * 4, dtype=object))  # a list among single values
    with pytest.raises(DataError, match="'tags' .record 2 holds a value of type list"):
        privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}, mixed, seed=1)


def test_list_cells_of_a_parquet_file_are_a_clean_error(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    path = tmp_path / "in.parquet"
    pd.DataFrame({"x": np.arange(N, dtype=float), "tags": [[1, 2]] * N}).to_parquet(path)
    (tmp_path / "recipe.toml").write_text(RECIPE)
    code = main(["run", str(tmp_path / "recipe.toml"), "-i", str(path), "-o", str(tmp_path / "o.csv"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "'tags'" in err and "Traceback" not in err and not (tmp_path / "o.csv").exists()


def test_a_column_parquet_cannot_hold_is_named_when_writing(tmp_path):
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"x": [1.0, 2.0], "mixed": pd.Series([1, "a"], dtype=object)})
    with pytest.raises(PrivclustError, match="mixed.*one type"):
        frame_writer(frame, tmp_path / "o.parquet")(tmp_path / "o.parquet")


# ---------------------------------------------------------------------------
# Integers beyond 2^53
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "uint64", "Int64"])
def test_a_masker_on_integers_beyond_2_53_is_refused_before_it_runs(dtype):
    top = 2**64 - 1 if dtype == "uint64" else 2**63 - 1
    frame = pd.DataFrame({"x": np.arange(6, dtype=float),
                          "id": pd.array([top - i for i in range(6)], dtype=dtype)})
    with pytest.raises(DataError, match=f"column 'id' holds integers beyond 2\\^53 \\(up to {top - 0} in magnitude"):
        privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["x", "id"]}]}, frame, seed=1)
    # as an identifier (a role), it is released exactly as it is
    release = privclust.run({"roles": {"ids": "id"}, "steps": [{"use": "microaggregation", "k": 3}]}, frame, seed=1)
    assert release.data["id"].equals(frame["id"])


def test_integers_near_the_int64_minimum_are_seen_as_beyond_2_53():
    frame = pd.DataFrame({"x": np.arange(6, dtype=float), "id": np.array([-(2**63)] * 6, dtype=np.int64)})
    with pytest.raises(DataError, match="up to 9223372036854775808 in magnitude"):
        privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["x", "id"]}]}, frame, seed=1)


@attrs.frozen(kw_only=True)
class Doubles:
    """A third-party noise step that returns its integer columns as doubles, unchanged."""

    name: ClassVar[str] = "doubles"

    def release(self, values, **kwargs):  # pragma: no cover - not called
        raise NotImplementedError

    def perturb(self, data, context):
        return Masked(data=data.astype(float))


class DoublesPlugin:
    @hookimpl
    def privclust_register_noise_mechanisms(self, register):
        register(Doubles)


def test_integers_beyond_2_53_a_step_released_as_doubles_are_refused_not_rounded():
    frame = pd.DataFrame({"n": np.array([2**63 - 1, 2**63 - 2, 2**63 - 3], dtype=np.int64)})
    registry = Registry(plugins=[DoublesPlugin()], use_env=False)
    with pytest.raises(DataError, match="'n' holds integers beyond 2\\^53.*released it as float64"):
        privclust.run({"steps": [{"use": "doubles", "columns": ["n"]}]}, frame, seed=1, registry=registry)


def test_equality_of_integers_and_doubles_is_exact():
    big = np.array([2**63 - 1, 2**53 + 1, 5], dtype=np.int64)
    assert _equal(big, big.astype(float)).tolist() == [False, False, True]
    assert _equal(big, big.astype(np.uint64)).tolist() == [True, True, True]
    assert _equal(pd.array([True, None], dtype="boolean"), pd.array([True, None], dtype="boolean")).all()
    assert _equal(pd.array([1, None], dtype="Int64"), np.array([1.0, np.nan])).tolist() == [True, True]


# ---------------------------------------------------------------------------
# Verbatim records by content
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Swap:
    """A masker that releases every original record, in reverse order."""

    name: ClassVar[str] = "swap"

    def mask(self, data, context):
        return Masked(data=pd.DataFrame(data.to_numpy()[::-1].copy(), index=data.index, columns=data.columns))


class SwapPlugin:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(Swap)


def test_verbatim_records_are_counted_by_content_not_by_position():
    frame = pd.DataFrame({"a": np.arange(12, dtype=float), "b": np.arange(12, dtype=float) ** 2})
    registry = Registry(plugins=[SwapPlugin()], use_env=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "swap"}]}, frame, seed=1, registry=registry)
    checks = release.verification
    assert checks["verbatim_records"] == 12  # by position: 0 of 12
    assert checks["steps"][0]["verbatim_by_step"] == checks["steps"][0]["verbatim_released"] == 12
    assert "12 of 12 records" in release.verdict + " ".join(e.statement for e in release.ledger.entries)


def test_the_text_is_read_again_only_from_the_unchanged_file(tmp_path):
    """The cells' text is not held in memory: it is read again from the file when a column is written, and only
    while the file is the one read (changed or gone: written as pandas writes the values)."""
    path = tmp_path / "in.csv"
    path.write_text("id,e\n00037,1e3\n00038,2e3\n")
    frame = read_frame(path)
    out = tmp_path / "out.csv"
    path.write_text("id,e\n00037,1000\n00038,2000\n")  # the same values, other text
    frame_writer(frame, out)(out)
    assert out.read_text() == "id,e\n37,1000.0\n38,2000.0\n"
    path.unlink()
    frame_writer(frame, out)(out)
    assert out.read_text() == "id,e\n37,1000.0\n38,2000.0\n"


def test_a_named_parquet_index_is_read_as_columns_not_dropped(tmp_path):
    """pandas stores ``set_index("pid")`` as the file's index: it was read as the frame's index, and the release,
    written without an index, dropped the column unseen."""
    pytest.importorskip("pyarrow")
    path = tmp_path / "in.parquet"
    pd.DataFrame({"pid": ["00037", "00038", "00039", "00040", "00041", "00042"],
                  "x": np.arange(6.0)}).set_index("pid").to_parquet(path)
    (tmp_path / "recipe.toml").write_text(RECIPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(tmp_path / "recipe.toml"), "-i", str(path), "-o", str(tmp_path / "o.csv"), "-q",
                     "--keep-order"]) == 0
    assert _cells((tmp_path / "o.csv").read_text())["pid"][0] == "00037"
    pd.DataFrame({"x": np.arange(6.0)}, index=np.arange(6) * 2).to_parquet(path)  # row labels only: not a column
    assert list(read_frame(path).columns) == ["x"]


def test_a_negative_zero_is_written_as_the_zero_the_host_counted(tmp_path):
    """Red-team audit: -0.0 and 0.0 are one key value to the host's codes, but the file wrote "-0.0" beside "0.0",
    so a cell the verdict counted as 3 records was a unique record and a cell of 2 in the bytes."""
    rows = ([f"{v},f" for v in ("0.0", "0.0", "-0.0", "1.0", "1.0", "1.0")]
            + [f"{v},m" for v in ("0.0",) * 3 + ("1.0",) * 3])
    recipe = ('[roles]\nkeys = ["delta", "sex"]\n[[steps]]\nuse = "local-suppression"\nk = 3\n'
              'columns = ["delta", "sex"]\n')
    assert _run(tmp_path, "delta,sex\n" + "\n".join(rows) + "\n", recipe, "out.csv") == 0
    written = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    assert written.groupby(["delta", "sex"]).size().min() >= 3
    assert "-0.0" not in (tmp_path / "out.csv").read_text()
    assert _run(tmp_path, "delta,sex\n" + "\n".join(rows) + "\n", recipe, "out.parquet") == 0
    assert not np.signbit(pd.read_parquet(tmp_path / "out.parquet")["delta"].to_numpy()).any()
