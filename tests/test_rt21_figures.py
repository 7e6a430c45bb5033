"""rt21 F4 and F2.

F4: the non-disclosive report (the form meant for publication) of a mixed release (``laplace`` on ``a``,
microaggregation on ``b``: rightly no DP guarantee) kept every evaluator figure, and ``moments`` on ``a`` with the
released mean gave back the original mean of ``a`` to every digit, beside a ledger line that still says every released
value of ``a`` is 1-DP. Every figure that reads the original values of a column a DP step released is now withheld.

F2: the input's ``DataFrame.attrs`` travelled into ``release.data`` and into the metadata of every written Parquet
file (the pandas metadata's ``attributes`` and a ``PANDAS_ATTRS`` key); ``pd.read_parquet`` restores an input file's,
so ``privclust run`` Parquet to Parquet passed them on with nothing done by the user.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust.cli import main
from privclust.dp_figures import DP_COLUMNS_EVALUATIONS_NOTE, figure_columns

# -- F4 -----------------------------------------------------------------------------------------------------------

NOTE_HEAD = DP_COLUMNS_EVALUATIONS_NOTE.split("{")[0]


@pytest.fixture(scope="module")
def mixed():
    """/work/rt21/r2.py, with figures on b alone and one on a and b together."""
    rng = np.random.default_rng(0)
    n = 200
    df = pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n)})
    recipe = {"name": "laplace + MDAV",
              "evaluate": [{"use": "moments", "columns": ["a"]}, {"use": "interval-disclosure", "columns": ["a"]},
                           {"use": "dbrl", "columns": ["a"]}, {"use": "moments", "columns": ["b"]},
                           {"use": "dbrl", "columns": ["b"]}, {"use": "sse-sst", "columns": ["a", "b"]}],
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 10]}, "columns": ["a"]},
                        {"use": "microaggregation", "columns": ["b"], "clusterer": {"use": "mdav", "k": 3}}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, df, seed=1), df


def test_the_non_disclosive_report_has_no_figure_on_the_dp_column(mixed):
    release, df = mixed
    # rightly no DP guarantee; the ledger still says every released value of a is 1-DP
    assert not release.dp_guarantee and release.verdict.startswith("No differential-privacy guarantee")
    public = release.report(non_disclosive=True)
    assert any(e["kind"] == "dp" and "column(s) a" in e["statement"] for e in public["ledger"])
    assert public["evaluations"], "the figures on b alone stay"
    assert {e["columns"] for e in public["evaluations"]} == {"b"}
    assert {(e["evaluator"], e["metric"]) for e in public["evaluations"]} >= {("moments", "mean_rel_change"),
                                                                             ("dbrl", "dbrl")}
    # the original mean of a is nowhere to be derived: no relative change of a's mean is published
    text = json.dumps(public)
    assert repr(float(df["a"].mean()))[:10] not in text
    notes = [x for x in public["left_out"] if x.startswith(NOTE_HEAD)]
    assert len(notes) == 1
    note = notes[0]
    assert "released (a)" in note
    for figure in ("moments on a (mean_rel_change, var_rel_change", "interval-disclosure on a (drisk",
                   "dbrl on a (dbrl, dbrl_linked_records)", "sse-sst on a, b (sse_sst"):
        assert figure in note, figure
    assert "on b" not in note


def test_the_html_non_disclosive_report_shows_the_same(mixed):
    release, _ = mixed
    page = release.to_html(non_disclosive=True, plots=False)
    assert "Every figure is computed on the columns b." in page  # the figures on b alone stay
    assert "<small>on a</small>" not in page and "<small>on a, b</small>" not in page
    assert NOTE_HEAD in page and "moments on a (mean_rel_change" in page


def test_the_disclosive_report_is_unchanged(mixed):
    """A guard (passes before and after the fix): the full report keeps every figure."""
    release, _ = mixed
    full = release.report()
    assert "left_out" not in full
    assert len(full["evaluations"]) == len(release.evaluations)
    assert {e["columns"] for e in full["evaluations"]} == {"a", "b", "a, b"}
    page = release.to_html(plots=False)
    assert "<small>on a</small>" in page and "<small>on b</small>" in page and NOTE_HEAD not in page


def test_a_release_without_a_dp_step_keeps_its_figures():
    """A guard (passes before and after the fix): no DP step, nothing more withheld."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"a": rng.uniform(0, 10, 60), "b": rng.uniform(0, 10, 60)})
    release = privclust.run({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}],
                             "evaluate": ["moments", "dbrl"]}, df, seed=1)
    public = release.report(non_disclosive=True)
    assert len(public["evaluations"]) == len(release.evaluations)
    assert not any(x.startswith(NOTE_HEAD) for x in public["left_out"])


def test_the_columns_of_a_figure_are_read_against_the_known_names():
    names = {"a", "b", "w", "x, y", "x", "y"}
    assert figure_columns("a", names) == {"a"}
    assert figure_columns("a, b; weighted by w", names) == {"a", "b", "w"}
    # a name holding ", " splits two ways: every name either way may be read
    assert figure_columns("x, y", names) == {"x, y", "x", "y"}
    assert figure_columns("x, y", names - {"y"}) == {"x, y"}
    assert figure_columns("a, x, y", names) == {"a", "x, y", "x", "y"}
    # not known: nothing, a name not in the data, text that does not split into names
    for unknown in ("", None, "z", "a, z", "a; weighted by z", "a,b", 3.0):
        assert figure_columns(unknown, names) is None, unknown


def test_a_figure_whose_columns_are_not_known_is_withheld_beside_a_dp_column(mixed):
    release, _ = mixed
    evaluations = release.evaluations.copy()
    evaluations.loc[evaluations["columns"] == "b", "columns"] = "somewhere"
    odd = privclust.Release(**{**{f: getattr(release, f) for f in ("data", "original", "labels", "outcomes",
                                                                     "ledger", "recipe", "seeded", "budget",
                                                                     "accountant", "registry", "verdict",
                                                                     "verification", "snapshot", "random_steps",
                                                                     "before", "publication_order")},
                               "evaluations": evaluations})
    public = odd.report(non_disclosive=True)
    assert public["evaluations"] == []
    assert "moments on somewhere (mean_rel_change" in next(x for x in public["left_out"] if x.startswith(NOTE_HEAD))


# -- F2 -----------------------------------------------------------------------------------------------------------

SECRET = {"source": "/secure/census_2024_full.csv", "max_income": 987654.0}
LAPLACE = {"steps": [{"use": "laplace", "epsilon": 1, "bounds": {"a": [0, 10], "b": [0, 10]}, "columns": ["a", "b"]}]}


def _frame(n: int = 30, strata: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n)})
    if strata:
        df.insert(0, "r", rng.choice(["n", "s"], n))
    df.attrs = copy.deepcopy(SECRET)
    return df


def _no_attrs(path: Path) -> None:
    """The file's metadata carries no attrs: the pandas metadata's ``attributes`` empty, no ``PANDAS_ATTRS``."""
    pq = pytest.importorskip("pyarrow.parquet")
    metadata = pq.read_schema(path).metadata or {}
    assert b"PANDAS_ATTRS" not in metadata
    assert not json.loads(metadata.get(b"pandas", b"{}")).get("attributes")
    assert b"census_2024" not in path.read_bytes() and not pd.read_parquet(path).attrs


def test_the_release_carries_no_attrs_and_the_input_keeps_its_own():
    df = _frame()
    release = privclust.run(LAPLACE, df, seed=1)
    assert release.data.attrs == {} and release.labels.attrs == {}
    assert df.attrs == SECRET  # the caller's frame is left as it was


def test_release_write_writes_no_attrs(tmp_path):
    pytest.importorskip("pyarrow")
    release = privclust.run(LAPLACE, _frame(), seed=1)
    release.write(tmp_path / "out.parquet")
    _no_attrs(tmp_path / "out.parquet")
    release.write(tmp_path / "kept.parquet", keep_order=True)
    _no_attrs(tmp_path / "kept.parquet")
    # CSV has no metadata: attrs were never written there, and are not now
    release.write(tmp_path / "out.csv")
    assert "census" not in (tmp_path / "out.csv").read_text()


def test_the_parquet_writer_writes_no_attrs_of_any_frame(tmp_path):
    """The second guard: whatever frame it is given."""
    pytest.importorskip("pyarrow")
    from privclust._io import frame_writer
    frame = _frame()
    for order in (None, np.arange(frame.shape[0])[::-1]):
        target = tmp_path / "f.parquet"
        frame_writer(frame, target, order)(target)
        _no_attrs(target)
    assert frame.attrs == SECRET


def test_the_parquet_writer_keeps_the_hosts_own_attrs(tmp_path):
    """A comparison table's own entry (its parameters and the DP selection note) is still written; nothing else."""
    pytest.importorskip("pyarrow")
    from privclust._io import frame_writer
    frame = _frame()
    frame.attrs["privclust"] = {"note": "choosing among DP runs"}
    target = tmp_path / "table.parquet"
    frame_writer(frame, target)(target)
    assert pd.read_parquet(target).attrs == {"privclust": {"note": "choosing among DP runs"}}
    assert b"census_2024" not in target.read_bytes()


def test_cli_parquet_to_parquet_passes_no_attrs_on(tmp_path):
    pytest.importorskip("pyarrow")
    _frame().to_parquet(tmp_path / "in.parquet")
    assert pd.read_parquet(tmp_path / "in.parquet").attrs == SECRET  # pandas restores them on reading
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = 1\nbounds = { a = [0, 10], b = [0, 10] }\n')
    assert main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.parquet"), "-o",
                 str(tmp_path / "out.parquet"), "-q"]) == 0
    _no_attrs(tmp_path / "out.parquet")
    assert main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.parquet"), "-o",
                 str(tmp_path / "out.csv"), "-q"]) == 0
    assert "census" not in (tmp_path / "out.csv").read_text()  # CSV: no metadata at all


def test_run_dataset_parts_carry_no_attrs(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "in").mkdir()
    _frame(60, strata=True).to_parquet(tmp_path / "in" / "part.parquet")
    release = privclust.run_dataset({"roles": {"strata": "r"}, **LAPLACE}, tmp_path / "in", tmp_path / "out",
                                    seed=1, processes=1)
    parts = sorted((tmp_path / "out").rglob("*.parquet"))
    assert len(parts) == 2 and release.path
    for part in parts:
        _no_attrs(part)
