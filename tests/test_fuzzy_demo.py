"""``privclust demo`` (the main job) and the example recipes in docs/examples/recipes/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset

import privclust
import privclust.datasets as ds
from privclust.cli import demo_recipe_path, main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples" / "recipes"


def test_demo_protects_table1_with_the_rule(capsys, tmp_path):
    target = tmp_path / "protected.csv"
    assert main(["demo", "--seed", "7", "--output", str(target)]) == 0
    out = capsys.readouterr().out
    original, rest = out.split("Original data (Torra, Table 1)", 1)[1].split("Centres of step", 1)
    assert original.count("VIOLATED") == 1 and "3.48  VIOLATED" in original
    centres, protected = rest.split("Protected data", 1)
    assert "VIOLATED" not in centres and "expected size" in centres and "drawn by" in centres
    protected_table = protected.split("Rule check:", 1)[0]
    assert "VIOLATED" not in protected_table and protected_table.count(" ok ") == 12
    assert "original 1 of 12 records violate it; protected 0 of 12" in " ".join(out.split())
    for name in ("sse-sst", "il1s", "dbrl", "group-sizes", "transparency-risk", "edit-violations"):
        assert f"  {name} " in out
    assert "This is not k-anonymity" in " ".join(out.split())
    released = pd.read_csv(target)
    residual = released["total"] - 1.16 * released["exp16"] - 1.07 * released["exp7"]
    assert residual.abs().max() < 1e-9
    assert np.unique(released.to_numpy(), axis=0).shape[0] <= 4


def test_the_demo_opens_with_the_verdict(capsys):
    """Every release opens with the host's verdict, the demo's too (it printed none: issue 27)."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    banner_end = out.index("=" * 78, out.index("=" * 78) + 1)
    first = out[banner_end:].split("\n\n")
    assert first[1] == "Verdict (the host's, on the released file):"
    verdict = " ".join(first[2].split())
    assert verdict.startswith("No differential-privacy guarantee: no step is differentially private.")
    assert out.index("Verdict (the host's") < out.index("Recipe (") < out.index("Ledger:")


def test_demo_is_reproducible_under_a_seed(capsys):
    main(["demo", "--seed", "3"])
    first = capsys.readouterr().out
    main(["demo", "--seed", "3"])
    assert capsys.readouterr().out.split("Ledger:")[0] == first.split("Ledger:")[0]


def test_the_docs_copy_of_the_demo_recipe_is_the_demo():
    assert (EXAMPLES / "table1.toml").read_text() == demo_recipe_path().read_text()


@pytest.mark.parametrize("name", ["table1.toml", "table1-efcm.toml"])
def test_table1_example_recipes(name):
    release = privclust.run(str(EXAMPLES / name), ds.table1(), seed=1)
    out = release.data
    assert (out["total"] - 1.16 * out["exp16"] - 1.07 * out["exp7"]).abs().max() < 1e-9
    assert (out[["exp16", "exp7"]] >= 0).all().all()
    violations = release.evaluations.query("evaluator == 'edit-violations'")
    assert violations.empty or violations[violations.metric.str.endswith("share violated")]["value"].max() == 0


def test_census_example_recipe():
    require_dataset("casc_census.csv")
    census = ds.load("casc_census")
    release = privclust.run(str(EXAMPLES / "census.toml"), census, seed=1)
    out = release.data
    assert (out.PTOTVAL - out.POTHVAL - out.PEARNVAL).abs().max() < 1e-6 * out.PTOTVAL.max()
    assert (out.to_numpy() >= -1e-9).all()
    ev = release.evaluations.set_index("metric")["value"]
    assert ev["sse_sst"] < 20  # the literature's figure for k = 5 on Census is about 5-10 (MDAV)
    step = release.outcomes[0].diagnostics
    assert step["m1"] == pytest.approx(1 + 1 / 52) and step["m2"] == 1.1 and step["c_initial"] == 216
    assert step["c"] <= 216 and step["expected_size_min"] >= 5 and step["verbatim_records"] == 0
    assert not (out.to_numpy() == census.to_numpy()).all(axis=1).any()


def test_census_two_groups_example_recipe():
    require_dataset("casc_census.csv")
    census = ds.load("casc_census")
    release = privclust.run(str(EXAMPLES / "census-two-groups.toml"), census, seed=2)
    out = release.data
    assert (out.PTOTVAL - out.POTHVAL - out.PEARNVAL).abs().max() < 1e-6 * out.PTOTVAL.max()
    assert out.groupby(["FEDTAX", "STATETAX", "FICA"]).size().min() >= 5
    untouched = [c for c in census.columns if c not in
                 ("PTOTVAL", "POTHVAL", "PEARNVAL", "FEDTAX", "STATETAX", "FICA")]
    pd.testing.assert_frame_equal(out[untouched], census[untouched])
    assert [e.mechanism for e in release.ledger if e.kind == "guarantee"][:2] == [
        "probabilistic k-anonymity", "k-anonymity"]


def test_the_docs_page_runs(tmp_path):
    from _docblocks import run_page

    assert run_page("microaggregation.md", tmp_path) >= 5
