"""Red-team audit rt21, F3 and F5: what a seed redraws, and repeated releases of a random masker.

F3: the host writes the released rows in an order drawn from the run's randomness. Under a seed, whoever has the
seed (or finds a small one by trying seeds in turn) redraws that order on any stand-in of the same length and puts
every row back at its input position; the verdict of a seeded MDAV release said nothing of it (the seeded sentence
named only the steps that drew randomness), and ``privclust run`` printed "in a random order" whatever the seed.

F5: the verdict of a release made by a non-DP random masker (PRAM, fuzzy microaggregation) read as if it were the only
release: 15 PRAM releases of the same records, lined up through the columns released unchanged, gave back 97.5% of
the original column by a majority vote; PRAM's ledger said that what an intruder can infer "follows from the matrix
and the number of values changed".
"""

from __future__ import annotations

import json
import warnings
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Masked, Registry, hookimpl
from privclust.cli import main
from privclust.verify import SEEDED_CAVEAT, SEEDED_ORDER, repeated_draws, seeded_draws

#: The words every seeded verdict now carries, and no unseeded one.
ORDER_WORDS = "the order of the released rows, putting every record back at its input position"
#: The opening of the repeated-release clause of a verdict without a DP guarantee.
REPEATED_WORDS = "Not covered: any other release made from the same records with other random draws of"

MDAV = {"steps": [{"use": "microaggregation", "columns": ["income", "age"], "clusterer": {"use": "mdav", "k": 5}}]}


def sorted_file(n: int = 50) -> pd.DataFrame:
    """A survey file as stored: sorted by income (each row's position is its income rank)."""
    rng = np.random.default_rng(9)
    return pd.DataFrame({"income": np.sort(rng.gamma(2, 1000, n)).round(2), "age": rng.integers(18, 90, n)})


def people(n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"job": rng.choice(["clerk", "farmer", "nurse"], n), "sex": rng.choice(["f", "m"], n),
                         "a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n)})


def quietly(recipe: Any, data: pd.DataFrame, **kwargs: Any) -> privclust.Release:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, data, **kwargs)


# --- F3: the seed redraws the order ------------------------------------------------------------------------------


def test_a_seeded_mdav_verdict_says_the_seed_puts_the_rows_back_in_their_input_order():
    # before: "No differential-privacy guarantee: ... Verified by the host: k-anonymity with k = 5 ...", no word on
    # the seed, although seed 1 found by trying 0, 1, ... put every published row back at its input position
    data = sorted_file()
    release = quietly(MDAV, data, seed=1)
    stand_in = pd.DataFrame({"income": np.linspace(1, 2, len(data)), "age": np.arange(len(data)) % 70 + 18})
    redrawn = quietly(MDAV, stand_in, seed=1).publication_order
    assert np.array_equal(redrawn, release.publication_order)  # the attack the sentence warns of
    assert release.random_steps == ()  # MDAV draws nothing: the host's order is all the seed redraws
    assert release.verdict.endswith(seeded_draws()) and ORDER_WORDS in release.verdict
    assert "gives its rank when the input was sorted by a column" in release.verdict
    assert "keep the seed secret like a key" in release.verdict and "without a seed" in release.verdict
    assert "random choices" not in release.verdict


def test_a_seeded_local_suppression_verdict_says_so_too():
    recipe = {"roles": {"keys": ["job", "sex"]},
              "steps": [{"use": "local-suppression", "k": 3, "columns": ["job", "sex"]}]}
    release = quietly(recipe, people(), seed=4)
    assert release.random_steps == () and release.verdict.endswith(seeded_draws())


def test_an_unseeded_verdict_carries_no_seeded_sentence():
    for recipe in (MDAV, {"steps": [{"use": "laplace", "columns": ["income"], "epsilon": 1.0,
                                     "bounds": {"income": [0, 20000]}}]}):
        release = quietly(recipe, sorted_file())
        assert "seed" not in release.verdict and ORDER_WORDS not in release.verdict
        assert ORDER_WORDS in quietly(recipe, sorted_file(), seed=2).verdict  # the same recipe seeded


def test_a_seeded_dp_verdict_names_the_order_among_what_the_seed_redraws():
    recipe = {"steps": [{"use": "laplace", "columns": ["income"], "epsilon": 1.0, "bounds": {"income": [0, 20000]}}]}
    release = quietly(recipe, sorted_file(), seed=1)
    assert release.verdict.startswith("ε-differentially private")
    assert release.verdict.endswith(SEEDED_CAVEAT) and SEEDED_ORDER in SEEDED_CAVEAT
    assert "draw the same noise again and subtract it" in release.verdict


def test_the_reports_seeded_line_agrees_with_the_verdict():
    release = quietly(MDAV, sorted_file(), seed=1)
    report = release.report(non_disclosive=True)
    assert report["seeded"] is True and report["verdict"] == release.verdict and ORDER_WORDS in report["verdict"]
    page = release.to_html(plots=False)
    # before: the HTML's seeded line named the run's random choices only, the JSON nothing beyond "seeded": true
    assert f"and {SEEDED_ORDER}" in page.replace("&#39;", "'") and "keep the seed secret like a key" in page
    unseeded = quietly(MDAV, sorted_file())
    assert "Seeded: no (entropy from the operating system)" in unseeded.to_html(plots=False)
    assert unseeded.report()["seeded"] is False


@pytest.fixture
def files(tmp_path):
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "microaggregation"\ncolumns = ["income", "age"]\n'
                                     'clusterer = {use = "mdav", k = 5}\n', encoding="utf-8")
    sorted_file().to_csv(tmp_path / "in.csv", index=False)
    return tmp_path


def test_the_cli_says_a_seeded_order_is_drawn_from_the_seed(files, capsys):
    # before: "(50 records, in a random order)" with --seed 1 as without
    assert main(["run", str(files / "r.toml"), "-i", str(files / "in.csv"), "-o", str(files / "s.csv"),
                 "--seed", "1", "--report", str(files / "s.json"), "--non-disclosive"]) == 0
    err = capsys.readouterr().err
    assert ("(50 records, in an order drawn from the seed: whoever has the seed can put them back in the input's "
            "order)") in err and "in a random order" not in err
    assert ORDER_WORDS in json.loads((files / "s.json").read_text(encoding="utf-8"))["verdict"]
    assert main(["run", str(files / "r.toml"), "-i", str(files / "in.csv"), "-o", str(files / "u.csv")]) == 0
    err = capsys.readouterr().err
    assert "(50 records, in a random order)" in err
    assert "drawn from the seed" not in err and "The run was seeded" not in err


def test_the_demo_says_its_order_is_drawn_from_the_seed(tmp_path, capsys):
    assert main(["demo", "--seed", "1", "--output", str(tmp_path / "demo.csv")]) == 0
    assert "(12 records, in an order drawn from the seed" in capsys.readouterr().out


# --- F5: repeated releases of a random masker --------------------------------------------------------------------

PRAM_MATRIX = {"clerk": {"clerk": 0.6, "farmer": 0.2, "nurse": 0.2},
               "farmer": {"farmer": 0.6, "clerk": 0.2, "nurse": 0.2},
               "nurse": {"nurse": 0.6, "clerk": 0.2, "farmer": 0.2}}
PRAM = {"roles": {"keys": ["job"]}, "steps": [{"use": "pram", "columns": ["job"], "matrix": PRAM_MATRIX}]}
FUZZY = {"steps": [{"use": "fuzzy-microaggregation", "columns": ["a", "b"], "k": 5}]}


def test_a_pram_verdict_says_other_releases_with_other_draws_are_not_covered():
    data = people()
    releases = [quietly(PRAM, data) for _ in range(15)]
    votes = pd.concat([r.data["job"] for r in releases], axis=1).mode(axis=1)[0]
    one = (releases[0].data["job"] == data["job"]).mean()
    assert (votes == data["job"]).mean() > one + 0.2  # the attack: a majority vote undoes the draws
    verdict = releases[0].verdict
    assert repeated_draws("step 0 (pram)") in verdict and "majority vote" in verdict
    assert "holds for this one release only" in verdict
    statement = next(e.statement for e in releases[0].ledger.entries if e.kind == "guarantee")
    # before: "what an intruder can infer follows from the matrix and from the number of values changed", unqualified
    assert "what an intruder can infer from this one release follows from the matrix" in statement
    assert "It holds for one release only" in statement and "majority vote" in statement


def test_a_fuzzy_microaggregation_verdict_says_so_too():
    release = quietly(FUZZY, people())
    assert repeated_draws("step 0 (fuzzy-microaggregation)") in release.verdict
    statement = next(e.statement for e in release.ledger.entries if e.kind == "guarantee")
    assert "It covers these columns only and this one release (other releases of these records with other " \
           "draws, lined up record by record, average back towards the original values)" in statement


def test_deterministic_steps_get_no_repeated_release_clause():
    mdav = quietly(MDAV, sorted_file())
    suppressed = quietly({"roles": {"keys": ["job", "sex"]},
                          "steps": [{"use": "local-suppression", "k": 3, "columns": ["job", "sex"]}]}, people())
    for release in (mdav, suppressed):
        assert release.random_steps == () and REPEATED_WORDS not in release.verdict
    assert REPEATED_WORDS in quietly(PRAM, people()).verdict  # beside a step that drew


def test_the_clause_names_every_random_step_and_comes_before_the_seeded_sentence():
    recipe = {"roles": {"keys": ["job"]},
              "steps": [{"use": "pram", "columns": ["job"], "matrix": PRAM_MATRIX}, FUZZY["steps"][0]]}
    release = quietly(recipe, people(), seed=3)
    steps = "step 0 (pram), step 1 (fuzzy-microaggregation)"
    assert release.verdict.endswith(repeated_draws(steps) + " " + seeded_draws(steps))


def test_a_dp_verdict_keeps_its_own_other_releases_item_and_no_second_clause():
    recipe = {"steps": [{"use": "laplace", "columns": ["a"], "epsilon": 1.0, "bounds": {"a": [0, 10]}}]}
    release = quietly(recipe, people())
    assert release.verdict.startswith("ε-differentially private")
    assert privclust.verify.OTHER_RELEASES in release.verdict and REPEATED_WORDS not in release.verdict
    # beside a non-DP random step the verdict has no DP guarantee, and the clause names both draws
    mixed = quietly({"roles": {"keys": ["job"]},
                     "steps": [recipe["steps"][0], {"use": "pram", "columns": ["job"], "matrix": PRAM_MATRIX}]},
                    people())
    assert "No differential-privacy guarantee" in mixed.verdict  # after the key figures
    assert repeated_draws("step 0 (laplace), step 1 (pram)") in mixed.verdict


@attrs.frozen(kw_only=True)
class Shuffle:
    """A third-party random masker: each value of a column moved to a random record's row."""

    name: ClassVar[str] = "rt21-shuffle"

    def mask(self, data: pd.DataFrame, context: Any) -> Masked:
        out = data.copy()
        for column in out.columns:
            out[column] = context.rng.permutation(out[column].to_numpy())
        return Masked(data=out)


class ShufflePlugin:
    @hookimpl
    def privclust_register_maskers(register):
        register(Shuffle)


def test_a_third_party_random_masker_gets_the_same_clause():
    # the host's record of the steps that drew randomness, not a list of names
    release = quietly({"steps": [{"use": "rt21-shuffle", "columns": ["a"]}]}, people(),
                      registry=Registry(plugins=[ShufflePlugin]))
    assert release.random_steps == (0,)
    assert repeated_draws("step 0 (rt21-shuffle)") in release.verdict
