"""Variable roles (``[roles]``: ids, weight, strata, keys) and strata: what
a step works on by default, what is released unchanged, each step within each
stratum alone, and every bad input refused by name before any step runs."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import DataError, RecipeError
from privclust.cli import main
from privclust.execute import _join_partitions


def _survey(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "hid": np.arange(n) // 3 + 1,
        "region": np.repeat(["north", "south", "east"], n // 3),
        "sex": np.tile(["f", "m"], n // 2),
        "income": rng.gamma(2.0, 1000.0, n),
        "expend": rng.gamma(2.0, 800.0, n),
        "w": rng.uniform(10, 200, n),
    })


MDAV = {"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}
ROLES = {"ids": "hid", "weight": "w", "strata": "region", "keys": ["sex"]}


def test_role_columns_are_not_protected_by_default_and_are_released_unchanged():
    frame = _survey()
    release = privclust.run({"roles": ROLES, "steps": [MDAV]}, frame, seed=1)
    assert release.outcomes[0].columns == ("income", "expend")  # numeric columns without a role
    for c in ("hid", "region", "sex", "w"):
        assert release.data[c].equals(frame[c])
    assert not release.data["income"].equals(frame["income"])
    assert release.data.index.equals(frame.index)


def test_without_roles_every_numeric_column_is_a_step_column():
    frame = _survey()
    release = privclust.run({"steps": [MDAV]}, frame, seed=1)
    assert release.outcomes[0].columns == ("hid", "income", "expend", "w")


def test_each_step_runs_within_each_stratum_and_groups_never_cross_strata():
    frame = _survey(90)
    release = privclust.run({"roles": {"strata": "region"}, "steps": [MDAV]}, frame, seed=2)
    out = release.data
    for region, part in out.groupby("region"):
        sizes = part.groupby(["income", "expend"]).size()
        assert sizes.min() >= 3  # k-anonymity within the stratum
        original = frame[frame["region"] == region]
        # a stratum's centres are means of that stratum's records only: the stratum's mean is kept
        assert np.isclose(part["income"].mean(), original["income"].mean())
    assert release.verification["steps"][0]["min_group_size"] >= 3
    strata = [e for e in release.ledger.of_kind("verified") if e.mechanism == "strata"]
    assert len(strata) == 1 and "3 disjoint strata" in strata[0].statement
    assert strata[0].details["parts"] == {"east": 30, "north": 30, "south": 30}


def test_strata_of_several_columns():
    frame = _survey(120)
    release = privclust.run({"roles": {"strata": ["region", "sex"]}, "steps": [MDAV]}, frame, seed=3)
    entry = next(e for e in release.ledger.of_kind("verified") if e.mechanism == "strata")
    assert len(entry.details["parts"]) == 6 and "north, f" in entry.details["parts"]
    for _, part in release.data.groupby(["region", "sex"]):
        assert part.groupby(["income", "expend"]).size().min() >= 3


def test_weighted_figures_and_key_risk_take_the_roles_by_default():
    frame = _survey()
    recipe = {"roles": ROLES, "steps": [MDAV], "evaluate": ["sse-sst", "individual-risk", "key-frequencies"]}
    release = privclust.run(recipe, frame, seed=1)
    ev = release.evaluations.set_index(["evaluator", "metric"])["value"]
    plain = privclust.run({"roles": ROLES, "steps": [MDAV], "evaluate": [{"use": "sse-sst", "weight": "w"}]},
                          frame, seed=1).evaluations.set_index(["evaluator", "metric"])["value"]
    assert ev[("sse-sst", "sse_sst")] == pytest.approx(plain[("sse-sst", "sse_sst")])
    # the key 'sex' (two categories) within the public strata 'region' (three)
    assert ev[("key-frequencies", "combinations")] == pytest.approx(6.0)
    unweighted = privclust.run({"steps": [{**MDAV, "columns": ["income", "expend"]}], "evaluate": ["sse-sst"]},
                               frame, seed=1).evaluations.set_index("metric")["value"]
    assert unweighted["sse_sst"] != pytest.approx(ev[("sse-sst", "sse_sst")])


def test_small_strata_are_refused_by_name_or_merged_where_asked():
    frame = _survey(60)
    frame.loc[:3, "region"] = "tiny"  # 4 records ...
    frame.loc[0:1, "region"] = "wee"  # ... and 2 records
    with pytest.raises(DataError, match=r"the stratum region = 'wee' has 2.*small_strata"):
        privclust.run({"roles": {"strata": "region"}, "steps": [MDAV]}, frame)
    release = privclust.run({"roles": {"strata": "region", "small_strata": "merge"}, "steps": [MDAV]}, frame, seed=1)
    entry = next(e for e in release.ledger.of_kind("verified") if e.mechanism == "strata")
    # tiny (2) and wee (2) are still below the 6 records MDAV with k = 3 needs: both join the stratum before
    assert entry.details["merged"] == ["south + tiny + wee"]
    assert sum(entry.details["parts"].values()) == len(frame)
    assert min(entry.details["parts"].values()) >= 3
    assert "merged" in entry.statement


@pytest.mark.parametrize("roles, steps, error, message", [
    ({"strata": "regoin"}, [MDAV], DataError, r"\[roles\] strata: column 'regoin' is not in the data \(did you mean "
                                              r"'region'"),
    ({"keys": "sex", "ids": "sex"}, [MDAV], RecipeError, "the column 'sex' also has the role"),
    ({"weight": ["w", "hid"]}, [MDAV], RecipeError, "one sampling-weight column"),
    ({"keys": "income"}, [{**MDAV, "columns": ["income", "expend"]}], RecipeError,
     "names the categorical key 'income'"),
    ({"strata": "region"}, [{**MDAV, "columns": ["region", "income"]}], RecipeError,
     "names the stratum column 'region'"),
    ({"roles_typo": "x"}, [MDAV], RecipeError, "unknown role"),
    ({"small_strata": "drop"}, [MDAV], RecipeError, "small_strata"),
])
def test_bad_roles_are_refused_by_name(roles, steps, error, message):
    if "roles_typo" in roles:
        roles = {"stratum": "region"}
    with pytest.raises(error, match=message):
        privclust.run({"roles": roles, "steps": steps}, _survey())


def test_bad_role_data_are_refused_before_any_step():
    frame = _survey()
    frame.loc[5, "region"] = None
    with pytest.raises(DataError, match=r"stratum column 'region' has 1 missing value"):
        privclust.run({"roles": {"strata": "region"}, "steps": [MDAV]}, frame)
    frame = _survey()
    frame.loc[7, "w"] = 0.0
    with pytest.raises(DataError, match=r"weight column 'w' has 1 value.*not positive \(first at row 7"):
        privclust.run({"roles": {"weight": "w"}, "steps": [MDAV]}, frame)
    frame = _survey().astype({"w": str})
    with pytest.raises(DataError, match="weight column 'w' is not numeric"):
        privclust.run({"roles": {"weight": "w"}, "steps": [MDAV]}, frame)


def test_partition_by_moved_to_the_strata_role():
    with pytest.raises(RecipeError, match=r"write \[roles\] strata = 'region' instead"):
        privclust.Recipe.from_dict({"privacy": {"partition_by": "region"}, "steps": [MDAV]})


def test_roles_round_trip_through_toml():
    recipe = privclust.Recipe.from_dict({"roles": {**ROLES, "small_strata": "merge"}, "steps": [MDAV]})
    again = privclust.Recipe.from_toml(recipe.to_toml())
    assert again == recipe and again.roles.weight_column == "w" and again.roles.keys == ("sex",)
    assert "[roles]" in recipe.to_toml()


def test_dp_steps_compose_in_parallel_over_strata():
    frame = _survey(90)
    recipe = {"privacy": {"epsilon": 1.0}, "roles": {"strata": "region"},
              "steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["income"], "bounds": {"income": [0, 20000]}}]}
    release = privclust.run(recipe, frame, seed=1)
    assert release.spent == (1.0, 0.0)  # three strata of epsilon 1, in parallel
    assert "stratum column(s) region fixed" in release.verdict
    assert "the public stratum column(s) region, their values and the size of each stratum" in release.verdict


def test_cli_flags_mirror_the_roles_table(tmp_path, capsys):
    data = tmp_path / "survey.csv"
    _survey().to_csv(data, index=False)
    recipe = tmp_path / "r.toml"
    recipe.write_text('[[steps]]\nuse = "microaggregation"\nclusterer = { use = "mdav", k = 3 }\n')
    assert main(["check", str(recipe), "-i", str(data), "--ids", "hid", "--weight", "w", "--strata", "region",
                 "--keys", "sex"]) == 0
    out = capsys.readouterr().out
    assert "role strata: region" in out and "role keys: sex" in out
    assert "changes income, expend" in out
    assert "released as in the data: hid (ids), region (strata), sex (keys), w (weight)" in out
    assert "strata: 3 (records per stratum: 20 to 20)" in out
    assert "integer columns" not in out  # income and expend are floats here
    _survey().assign(income=lambda f: f["income"].round().astype("int64")).to_csv(data, index=False)
    assert main(["check", str(recipe), "-i", str(data), "--strata", "region", "--ids", "hid", "--weight", "w",
                 "--keys", "sex"]) == 0
    assert "rounded by the host after the steps and released as integers: income" in capsys.readouterr().out
    _survey().to_csv(data, index=False)
    target = tmp_path / "out.csv"
    assert main(["run", str(recipe), "-i", str(data), "-o", str(target), "-q", "--seed", "1", "--strata", "region",
                 "--ids", "hid", "--weight", "w", "--keys", "sex", "--keep-order"]) == 0
    out = pd.read_csv(target)
    assert out["hid"].equals(_survey()["hid"]) and out["w"].round(6).equals(_survey()["w"].round(6))
    assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o2.csv"), "-q", "--strata", " , "]) == 1
    assert "--strata: name at least one column" in capsys.readouterr().err


def test_strata_on_local_processes_give_the_same_kind_of_release(tmp_path):
    frame = _survey(90)
    recipe = {"privacy": {"epsilon": 1.0}, "roles": {"strata": "region"},
              "steps": [{**MDAV, "columns": ["income", "expend"]},
                        {"use": "laplace", "epsilon": 1.0, "columns": ["w"], "bounds": {"w": [0, 300]}}]}
    one = privclust.run(recipe, frame, seed=4)
    two = privclust.run(recipe, frame, seed=4, processes=2)
    again = privclust.run(recipe, frame, seed=4, processes=1)
    assert two.spent == one.spent == (1.0, 0.0)
    pd.testing.assert_frame_equal(two.data, again.data)  # the same draws whatever the number of processes
    for region, part in two.data.groupby("region"):
        assert part.groupby(["income", "expend"]).size().min() >= 3
        assert np.isclose(part["income"].mean(), frame.loc[frame["region"] == region, "income"].mean())
    assert [e.kind for e in two.ledger] == [e.kind for e in one.ledger]
    assert {e.partition for e in two.ledger.of_kind("dp")} == {("region", r) for r in ("east", "north", "south")}
    assert two.verdict == one.verdict
    assert two.verification["steps"][0]["min_group_size"] >= 3
    with pytest.raises(privclust.ParameterError, match="declare strata"):
        privclust.run({"steps": [MDAV]}, frame, processes=2)


@attrs.frozen(kw_only=True)
class FailsOnOneStratum:
    """A masker that refuses the stratum of 31 records (an in-session plugin: local workers find it)."""

    name: ClassVar[str] = "fails-on-one-stratum"

    def mask(self, data, context):
        if len(data) == 31:
            raise DataError("fails-on-one-stratum: this stratum is refused")
        return privclust.Masked(data=data + 1.0)


class SessionPlugin:
    @privclust.hookimpl
    def privclust_register_maskers(self, register):
        register(FailsOnOneStratum)


def test_a_failing_stratum_stops_the_run_and_names_the_problem():
    frame = _survey(90)
    frame.loc[0, "region"] = "south"  # north 29, south 31, east 30
    registry = privclust.Registry(plugins=[SessionPlugin()], use_env=False)
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "fails-on-one-stratum", "columns": ["income"]}]}
    with pytest.raises(DataError, match="this stratum is refused"):
        privclust.run(recipe, frame, processes=2, registry=registry)
    ok = privclust.run({**recipe, "roles": {"strata": "sex"}}, frame, processes=2, registry=registry)
    assert np.allclose(ok.data["income"], frame["income"] + 1.0)


def test_strata_on_a_dask_local_cluster():
    pytest.importorskip("distributed", reason="the Dask engine needs distributed (privclust[distributed])")
    frame = _survey(60)
    recipe = {"roles": {"strata": "region"}, "steps": [{**MDAV, "columns": ["income", "expend"]}]}
    release = privclust.run(recipe, frame, seed=5, scheduler="local")
    local = privclust.run(recipe, frame, seed=5, processes=2)
    pd.testing.assert_frame_equal(release.data, local.data)  # one stream per stratum, whichever engine
    assert release.verification["steps"][0]["min_group_size"] >= 3


def test_the_evaluation_table_names_what_each_figure_is_computed_on():
    frame = _survey(90)
    recipe = {"roles": ROLES, "steps": [MDAV],
              "evaluate": ["sse-sst", "dbrl", "key-frequencies", "individual-risk", "key-linkage"]}
    release = privclust.run(recipe, frame, seed=1)
    on = release.evaluations.drop_duplicates("evaluator").set_index("evaluator")["columns"]
    assert on["sse-sst"] == "income, expend; weighted by w"
    assert on["dbrl"] == "income, expend, region"  # linked within the strata (rt22: the columns it uses)
    assert on["key-frequencies"] == "sex, region"  # the strata are public: key variables too
    assert on["individual-risk"] == "sex, region; weighted by w"
    assert on["key-linkage"] == "income, expend, sex, region"
    combos = release.evaluations.query("metric == 'combinations'")["value"].iloc[0]
    assert combos == 6.0  # a count, exactly
    page = release.to_html(plots=False)
    assert "Roles of the columns: ids: hid; weight: w; strata: region; keys: sex." in page
    assert "Every figure is computed on the columns" not in page  # the evaluators differ


def test_effective_values_of_a_step_run_per_stratum():
    frame = _survey(90)
    release = privclust.run({"roles": {"strata": "region"}, "steps": [{"use": "fuzzy-microaggregation", "k": 3,
                                                                       "columns": ["income", "expend"]}]},
                            frame, seed=1)
    used = release.report()["steps"][0]["effective_parameters"]
    assert used["k"] == 3 and isinstance(used["m1"], float)  # the same in every stratum: the value itself
    assert used["clusterer"]["use"] == "fcm"
    uneven = frame.assign(region=np.where(np.arange(90) < 60, "big", "small"))  # 60 and 30 records
    release = privclust.run({"roles": {"strata": "region"}, "steps": [{"use": "fuzzy-microaggregation", "k": 3,
                                                                       "columns": ["income", "expend"]}]},
                            uneven, seed=1)
    used = release.report()["steps"][0]["effective_parameters"]
    parts = release.outcomes[0].diagnostics["parts"]
    each = sorted(d["effective_params"]["n_clusters"] for d in parts.values())
    assert each[0] < each[1] and used["n_clusters"] == f"{each[0]:g} to {each[1]:g} across the strata"
    assert used["k"] == 3


def test_the_report_shows_the_hosts_own_processing():
    frame = _survey(90).assign(income=lambda f: f["income"].round().astype("int64"))
    release = privclust.run({"roles": ROLES, "steps": [MDAV]}, frame, seed=1)
    assert release.data["income"].dtype == np.int64
    rounding = [e for e in release.ledger.of_kind("process") if e.mechanism == "integer rounding"]
    assert len(rounding) == 1
    page = release.to_html(plots=False)
    assert "Processing by the host" in page and rounding[0].statement.split(".")[0] in page


def test_a_strata_labels_do_not_depend_on_which_clusters_another_stratums_records_use():
    """Each stratum's labels were offset by the largest label the previous
    strata's *records* used, so moving one record of stratum A onto a cluster
    of A's map that no A record used renumbered every record of B (an
    attacker's neighbouring data sets; B's map and records unchanged). The
    offset is now the number of centres the strata before it formed."""
    view = pd.DataFrame({"x": np.arange(5.0)})
    parts = [("A", np.array([0, 1])), ("B", np.array([2, 3, 4]))]
    centres_a, centres_b = np.zeros((3, 1)), np.ones((2, 1))
    b = privclust.Partition(labels=np.array([1, 0, 1]), centres=centres_b, columns=("x",))
    before = _join_partitions(view, parts, [privclust.Partition(labels=np.array([0, 0]), centres=centres_a,
                                                                columns=("x",)), b], {})
    after = _join_partitions(view, parts, [privclust.Partition(labels=np.array([0, 2]), centres=centres_a,
                                                               columns=("x",)), b], {})
    assert before.labels.tolist() == [0, 0, 4, 3, 4] and after.labels.tolist() == [0, 2, 4, 3, 4]
    assert np.array_equal(before.centres[before.labels], np.r_[centres_a, centres_b][before.labels])


def test_a_stratified_microaggregation_keeps_its_partition_for_the_evaluators():
    """group-sizes said a stratified release had no grouping step: the strata's
    partitions were dropped when the results were combined."""
    rng = np.random.default_rng(7)
    data = pd.DataFrame({"region": rng.choice(["n", "s", "e"], 60), "income": rng.gamma(2, 1500, 60).round(2),
                         "expend": rng.gamma(2, 1100, 60).round(2)})
    release = privclust.run({"roles": {"strata": "region"},
                             "steps": [{"use": "microaggregation", "k": 3, "columns": ["income", "expend"]}],
                             "evaluate": ["group-sizes", "transparency-risk"]}, data, seed=1)
    assert release.evaluation("k") == 3 and release.evaluation("min_size") >= 3
    part = release.outcomes[0].partition
    groups = pd.Series(part.labels).groupby(data["region"].to_numpy()).unique()
    assert not set(groups["n"]) & set(groups["s"])  # no group spans two strata
    assert release.evaluation("max_posterior") <= 1 / 3 + 1e-12


def test_stratum_values_equal_to_pandas_but_written_differently_are_refused():
    data = pd.DataFrame({"region": pd.Series([1, 1.0, True] * 20, dtype=object),
                         "x": np.random.default_rng(0).normal(size=60)})
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}
    with pytest.raises(DataError, match="written differently"):
        privclust.run(recipe, data, seed=1)
    unhashable = pd.DataFrame({"region": pd.Series([[1], [2]] * 30, dtype=object), "x": np.arange(60.0)})
    with pytest.raises(DataError, match="cannot be grouped"):
        privclust.run(recipe, unhashable, seed=1)


def test_the_host_says_its_counts_are_within_strata_and_names_the_stratum_columns_released():
    rng = np.random.default_rng(0)
    income = rng.gamma(2, 1000, 6).round()
    data = pd.DataFrame({"region": ["a"] * 6 + ["b"] * 6, "income": np.r_[income, income]})
    release = privclust.run({"roles": {"strata": "region"},
                             "steps": [{"use": "microaggregation", "k": 3, "columns": ["income"]}]}, data, seed=1)
    check = next(e for e in release.ledger.of_kind("verified") if e.step == 0)
    assert "groups of identical rows within each stratum of region" in check.statement
    assert "Released as in the original: region (a public stratum column)." in release.verdict
