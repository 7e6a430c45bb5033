"""run_dataset on a plain folder of Parquet files, not Hive-partitioned (red-team audit rt20, F5): it crashed with
pyarrow's "Unable to merge: ... large_string vs string". It is read as one dataset whose stratum column comes from the
files, as the same data in one Parquet file is; a folder pyarrow cannot read as one dataset is a PrivclustError naming
the file or the column at fault."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import DataError
from privclust.cli import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

RECIPE = {"roles": {"strata": "region", "small_strata": "merge"},
          "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]}], "evaluate": ["sse-sst"]}
TOML = """[roles]
strata = "region"
[[steps]]
use = "microaggregation"
k = 3
columns = ["a", "b"]
"""


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"region": ["n"] * (n // 2) + ["s"] * (n - n // 2 - 3) + ["w"] * 3,
                          "a": rng.normal(50, 10, n).round(2), "b": rng.normal(20, 5, n).round(2)})
    return frame.sample(frac=1, random_state=1).reset_index(drop=True)


def _dataset(recipe, source, out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run_dataset(recipe, source, out, seed=1, processes=1)


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_plain_folder_releases_as_the_same_data_in_one_file(tmp_path):
    """Three files directly in the folder, strata split across them, the text written by pandas (large_string) in
    two and by pyarrow (string) in the third, plus files pyarrow skips (_SUCCESS, .crc): the same verdict, ledger,
    strata and released records as the data in one Parquet file, with the seed fixed."""
    frame = _frame()
    frame.to_parquet(tmp_path / "one.parquet", index=False)
    flat = tmp_path / "flat"
    flat.mkdir()
    frame.iloc[:20].to_parquet(flat / "p0.parquet", index=False)
    frame.iloc[20:45].to_parquet(flat / "p1.parquet", index=False)
    pq.write_table(pa.Table.from_pandas(frame.iloc[45:], preserve_index=False).cast(
        pa.schema([("region", pa.string()), ("a", pa.float64()), ("b", pa.float64())])), flat / "p2.parquet")
    assert pq.read_schema(flat / "p0.parquet").field("region").type != pq.read_schema(flat / "p2.parquet").field(
        "region").type
    (flat / "_SUCCESS").write_text("")
    (flat / ".p0.parquet.crc").write_text("not parquet")
    one = _dataset(RECIPE, tmp_path / "one.parquet", tmp_path / "out1")
    folder = _dataset(RECIPE, flat, tmp_path / "out2")
    assert folder.verdict == one.verdict
    assert folder.strata == one.strata == {"n": 30, "s + w": 30} and folder.merged == one.merged
    assert [e.statement for e in folder.ledger] == [e.statement for e in one.ledger]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out2"), pd.read_parquet(tmp_path / "out1"))
    assert len(pd.read_parquet(tmp_path / "out2")) == 60


def test_a_plain_folder_on_the_command_line(tmp_path, capsys):
    """The finding's repro: ``privclust run --input FOLDER`` on one pandas-written file in a folder."""
    (tmp_path / "flat").mkdir()
    pd.DataFrame({"region": ["n"] * 10 + ["s"] * 10, "a": [float(i) for i in range(20)],
                  "b": [float(i) for i in range(20)]}).to_parquet(tmp_path / "flat" / "x.parquet")
    (tmp_path / "r.toml").write_text(TOML)
    assert main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "flat"), "-o", str(tmp_path / "out"),
                 "-q"]) == 0
    back = pd.read_parquet(tmp_path / "out")
    assert len(back) == 20 and sorted(back["region"].astype(str).unique()) == ["n", "s"]


def test_integer_widths_and_an_all_missing_column_make_one_dataset(tmp_path):
    """Types of one kind (int32 beside int64) are read as the widest, and a file whose column is all missing
    (type null) takes the others' type."""
    flat = tmp_path / "flat"
    flat.mkdir()
    frame = _frame(40)
    frame["c"] = np.arange(40)
    frame["t"] = ["x"] * 40
    pq.write_table(pa.Table.from_pandas(frame.iloc[:20], preserve_index=False).cast(pa.schema(
        [("region", pa.string()), ("a", pa.float64()), ("b", pa.float64()), ("c", pa.int32()),
         ("t", pa.string())])), flat / "p0.parquet")
    rest = pa.Table.from_pandas(frame.iloc[20:], preserve_index=False)
    rest = rest.set_column(4, pa.field("t", pa.null()), pa.nulls(20))
    pq.write_table(rest, flat / "p1.parquet")
    release = _dataset({"roles": {"strata": "region", "small_strata": "merge"},
                        "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]}]}, flat, tmp_path / "o")
    assert release.records == 40
    back = pq.read_table(tmp_path / "o")
    assert back.schema.field("c").type == pa.int64()


def _mixed_types(folder: Path) -> None:
    pd.DataFrame({"region": ["n"] * 6, "a": [1.0] * 6, "b": [2.0] * 6}).to_parquet(folder / "p0.parquet")
    pd.DataFrame({"region": ["s"] * 6, "a": ["1"] * 6, "b": [2.0] * 6}).to_parquet(folder / "p1.parquet")


def _not_parquet(folder: Path) -> None:
    pd.DataFrame({"region": ["n"] * 6, "a": [1.0] * 6, "b": [2.0] * 6}).to_parquet(folder / "p0.parquet")
    (folder / "notes.txt").write_text("region,a,b\n")


def _missing_column(folder: Path) -> None:
    pd.DataFrame({"region": ["n"] * 6, "a": [1.0] * 6, "b": [2.0] * 6}).to_parquet(folder / "p0.parquet")
    pd.DataFrame({"region": ["s"] * 6, "a": [1.0] * 6}).to_parquet(folder / "p1.parquet")


def _two_layouts(folder: Path) -> None:
    pd.DataFrame({"region": ["n"] * 6, "a": [1.0] * 6, "b": [2.0] * 6}).to_parquet(folder / "p0.parquet")
    (folder / "region=s").mkdir()
    pd.DataFrame({"a": [1.0] * 6, "b": [2.0] * 6}).to_parquet(folder / "region=s" / "p1.parquet")


def _key_in_files(folder: Path) -> None:
    for value in "ns":
        (folder / f"region={value}").mkdir()
        pd.DataFrame({"region": [value] * 6, "a": [1.0] * 6, "b": [2.0] * 6}).to_parquet(
            folder / f"region={value}" / "p.parquet")


def _categorical_and_text(folder: Path) -> None:
    frame = pd.DataFrame({"region": ["n"] * 6, "a": [1.0] * 6, "b": [2.0] * 6})
    frame.to_parquet(folder / "p0.parquet")
    frame.assign(region=pd.Categorical(["s"] * 6)).to_parquet(folder / "p1.parquet")


def _empty(folder: Path) -> None:
    (folder / "_SUCCESS").write_text("")


@pytest.mark.parametrize(("make", "said"), [
    (_mixed_types, ["the column 'a' is double in p0.parquet but large_string in p1.parquet", "write the column with "
                    "one type in every file"]),
    (_not_parquet, ["the file notes.txt is not a Parquet file pyarrow can read", "remove it from the folder"]),
    (_missing_column, ["the file p1.parquet has no column 'b', which p0.parquet has", "write every file with the "
                       "same columns"]),
    (_two_layouts, ["the files are not all in the same directories", "p0.parquet is in no Hive directory",
                    "in Hive directories of 'region'"]),
    (_key_in_files, ["the column 'region' is both in the files", "write the files without it"]),
    (_categorical_and_text, ["the column 'region' is large_string in p0.parquet but dictionary", "p1.parquet"]),
    (_empty, ["the folder holds no Parquet files"]),
])
def test_a_folder_that_is_not_one_dataset_is_one_error_line(tmp_path, capsys, make, said):
    """Mixed types, a non-Parquet file, a column missing from a file, files in two layouts, a Hive key also in the
    files: one ``privclust: error:`` line naming the folder, the file or column and the fix; status 1; nothing
    written (was: pyarrow's traceback, or a worker's error)."""
    folder = tmp_path / "in"
    folder.mkdir()
    make(folder)
    (tmp_path / "r.toml").write_text(TOML)
    before = _listing(tmp_path)
    code = main(["run", str(tmp_path / "r.toml"), "-i", str(folder), "-o", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(f"privclust: error: {folder}: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for words in said:
        assert words in err, err
    assert _listing(tmp_path) == before


def test_one_file_that_is_not_parquet_is_a_data_error(tmp_path):
    (tmp_path / "data.parquet").write_text("region,a,b\nn,1,2\n")
    with pytest.raises(DataError, match=r"data\.parquet is not a Parquet file pyarrow can read .*give a Parquet file"):
        _dataset(RECIPE, tmp_path / "data.parquet", tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["data.parquet"]
