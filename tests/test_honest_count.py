"""The number of records under add/remove (docs/decisions.md, decision 24).

Two data sets that differ by one record added are neighbours under
add/remove, so the exact number of records is private beside releases
stated under that relation. An attacker who reads the non-disclosive reports
of two runs on such neighbours must see them differ only in figures the
steps noised; where the per-record file is released, the number is public
and the verdict states the relation that then holds (replace-one).
"""

from __future__ import annotations

import json
import re
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Registry, hookimpl
from privclust.private_count import NOISY_RECORDS, count_is_private, uncounted

BOUNDS = {"x": [-5, 25], "y": [-5, 25]}
DENSITY = {"privacy": {"epsilon": 2.0}, "steps": [{"use": "dp-density", "epsilon": 1.0, "bounds": BOUNDS}]}
N = 1237  # a count no other figure of these reports is likely to print


def _neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    a = pd.DataFrame(np.vstack([rng.normal(5, 1, (N - N // 2, 2)), rng.normal(15, 1, (N // 2, 2))]),
                     columns=["x", "y"])
    # one record added in empty space, inside the public bounds
    return a, pd.concat([a, pd.DataFrame({"x": [24.0], "y": [-4.0]})], ignore_index=True)


def _run(recipe, frame, registry=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=3, registry=registry)


def _differences(a, b, path=""):
    """The paths at which two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [] if a.keys() == b.keys() else [path + ".keys"]
        for k in a.keys() & b.keys():
            out += _differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [path + ".len"]
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


#: The figures of a dp-density run that are functions of its noisy count (DP post-processing), by path.
NOISED = {".data.records_noisy.value", ".created"} | {
    f".steps[0].effective_parameters.{k}" for k in ("min_mass", "bandwidth", "coarse_bandwidth", "leaves", "peak_z")}


def _leaves_named(report: dict, release) -> dict:
    """The report with the number of leaves of the released (DP) tree in its texts written as 'L', and the
    lattice of the leaf counts' noise (chosen from L) as 'lattice'."""
    leaves = release.outcomes[0].diagnostics["leaves"]
    text = re.sub(rf"\b{leaves} leaves\b", "L leaves", json.dumps(report))
    return json.loads(re.sub(r"lattice 2\^-\d+ Z, calibrated to sensitivity [\d.]+", "lattice", text))


@pytest.mark.parametrize("evaluate", [[], [{"use": "dbrl"}, {"use": "sse-sst"}]])
def test_non_disclosive_reports_of_neighbours_differ_only_in_dp_noised_figures(evaluate):
    """The JSON report read 'records: 1237' against 'records: 1238', and the
    host's measurements and statements ('clustered 1237 records', '1237 of
    1237 records verbatim', '1237 groups') beside a map stated under
    add/remove: an attacker read the added record's presence off them. With
    evaluators (a red-team audit), their figures counted the records too
    (dbrl's linked records 1237, sse-sst's sst 2474): left out as well."""
    a, b = _neighbours()
    recipe = {**DENSITY, "evaluate": evaluate}
    ra, rb = _run(recipe, a), _run(recipe, b)
    ja, jb = ra.report(non_disclosive=True), rb.report(non_disclosive=True)
    # the record in empty space changes the tree: its number of leaves (a DP figure) is in the texts
    assert set(_differences(_leaves_named(ja, ra), _leaves_named(jb, rb))) <= NOISED
    assert ja["data"]["records"] is None
    noisy = ja["data"]["records_noisy"]
    assert noisy["step"] == 0 and noisy["epsilon"] == pytest.approx(0.05)
    assert noisy["value"] == ra.outcomes[0].diagnostics["n_noisy"] and "noisy count" in noisy["note"]
    assert any("exact number of records" in note for note in ja["left_out"])
    assert ja["evaluations"] == [] and (not evaluate or any("evaluation figures" in x for x in ja["left_out"]))
    for release, n in ((ra, N), (rb, N + 1)):
        text = release.to_json(non_disclosive=True)
        assert not re.search(rf"\b{n}\b", text)
        html = release.to_html(non_disclosive=True, plots=False)
        assert not re.search(rf"\b{n}\b", html) and not re.search(rf"\b{2 * n}\b", html)
        assert "noisy count" in html
    # the HTML pages differ in the noisy figures only (and the creation time)
    la = ra.to_html(non_disclosive=True, plots=False).splitlines()
    lb = rb.to_html(non_disclosive=True, plots=False).splitlines()
    changed = [x for x, y in zip(la, lb, strict=True) if x != y]
    assert changed and all(re.search(r"About \d+ records|min_mass|bandwidth|leaves|peak_z|Created", x)
                           for x in changed)


def test_the_full_report_keeps_the_count_and_the_ledger_says_it_holds_under_replace_one_with_it():
    """The full report goes beside the per-record file, which shows n: the
    exact count stays, and dp-density's ledger statement says what holds
    where n is published."""
    a, _ = _neighbours()
    release = _run(DENSITY, a)
    assert release.report()["data"]["records"] == N
    statement = next(e.statement for e in release.ledger if e.kind == "guarantee" and e.step == 0)
    assert "2-DP under replace-one (n public)" in statement
    assert release.outcomes[0].diagnostics[NOISY_RECORDS]["epsilon"] == pytest.approx(0.05)


def test_a_replace_one_release_beside_makes_the_count_public():
    """With a replace-one release in the run the total is stated under
    replace-one, where n is public: the non-disclosive report keeps it."""
    a, _ = _neighbours()
    recipe = {"steps": [{"use": "laplace", "epsilon": 0.5, "bounds": BOUNDS},
                        {"use": "dp-density", "epsilon": 0.8, "bounds": BOUNDS}]}
    release = _run(recipe, a)
    assert not count_is_private(release.ledger.entries)
    assert release.report(non_disclosive=True)["data"]["records"] == N


@attrs.frozen(kw_only=True)
class AddRemoveNoise:
    """A masker whose values are a DP output stated under add/remove (a test
    stand-in: the host takes the component's word for its statement)."""

    name: ClassVar[str] = "add-remove-noise"
    dp_output: ClassVar[bool] = True

    def mask(self, data, context):
        context.spend(epsilon=1.0, mechanism="laplace", sensitivity=1.0, relation="add/remove",
                      covers="every released value")
        return privclust.Masked(data=data + context.rng.laplace(0.0, 1.0, data.shape))


@attrs.frozen(kw_only=True)
class ClaimsACountWithoutSpending:
    """A masker that reports its exact count as 'noisy' and spends nothing."""

    name: ClassVar[str] = "claims-a-count"

    def mask(self, data, context):
        return privclust.Masked(data=data + 1.0, diagnostics={NOISY_RECORDS: {"value": len(data), "epsilon": 1.0}})


class _Fakes:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(AddRemoveNoise)
        register(ClaimsACountWithoutSpending)


def test_a_dp_verdict_on_the_file_under_add_remove_is_stated_under_replace_one():
    """The per-record file has one row per record: it publishes n, so the
    verdict on it read 'ε = 1 under add/remove', which the file itself
    refutes. It now states what holds there: 2 under replace-one."""
    a, _ = _neighbours()
    registry = Registry(plugins=[_Fakes()], use_env=False)
    release = _run({"steps": [{"use": "add-remove-noise"}]}, a, registry)
    assert release.dp_guarantee
    assert release.verdict.startswith("ε-differentially private (ε = 2, δ = 0) under replace-one (the released "
                                      "file shows its number of records")
    assert "epsilon 1 and delta 0 together" in release.verdict


def test_a_count_from_a_step_without_dp_entries_is_not_shown_as_noisy():
    """Only a step that spent budget can have released a DP count."""
    a, _ = _neighbours()
    registry = Registry(plugins=[_Fakes()], use_env=False)
    release = _run({"steps": [{"use": "add-remove-noise"}, {"use": "claims-a-count"}]}, a, registry)
    rep = release.report(non_disclosive=True)
    assert rep["data"]["records"] is None and rep["data"]["records_noisy"] is None
    assert not re.search(rf"\b{N}\b", json.dumps(rep))


def test_uncounted_follows_the_hosts_wording_not_the_values():
    assert uncounted("clusterer 'x' clustered 2000 records on x, y") == "clusterer 'x' clustered the records on x, y"
    assert uncounted("left 3 of 1 record verbatim; 12 values; 7 groups; epsilon 3") == (
        "left the records verbatim; the values; the groups; epsilon 3")


def test_compare_states_the_files_guarantee_as_the_verdict_does():
    """privclust compare read dp_epsilon 1 under add/remove for the same
    per-record file the verdict states as 2 under replace-one."""
    a, _ = _neighbours()
    registry = Registry(plugins=[_Fakes()], use_env=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = privclust.compare([{"name": "ar", "steps": [{"use": "add-remove-noise"}]}], a, seed=1,
                                  progress=False, processes=1, registry=registry)
    row = table.iloc[0]
    assert row["dp"] and row["dp_epsilon"] == 2.0 and row["dp_relation"].startswith("replace-one (the released file")
