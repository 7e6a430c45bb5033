"""rt22 F5 and F6: `privclust check --input` passed recipes that `run`
refused before writing (a key masker's own checks of its key values: a key
of fractions, a PRAM category without a matrix row, a true/false key), and
said that a key masker's columns "may hold any categories"; a masker that
returned another shape was refused without the step or what differed."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust.cli import main
from privclust.errors import DataError, PrivclustError
from privclust_plugins.keys import LocalSuppression

N = 40
RNG = np.random.default_rng(0)
BASE = pd.DataFrame({"a": RNG.normal(50, 10, N).round(2), "sex": RNG.choice(["f", "m"], N),
                     "age": RNG.integers(20, 60, N)})
MATRIX = '{ f = {f = 0.9, m = 0.1}, m = {f = 0.1, m = 0.9} }'

#: recipe, a change of the data, the refusal (located at the step) that check and run both give
REFUSED = {
    "key-of-fractions": ('[roles]\nkeys = ["sex", "agef"]\n[[steps]]\nuse = "local-suppression"\nk = 3\n'
                         'columns = ["sex", "agef"]\n', lambda d: d.assign(agef=d["age"] + 0.5),
                         "steps[0] (local-suppression): local-suppression: column 'agef' is numeric with values that "
                         "are not whole numbers (such as"),
    "pram-category-without-row": ('[roles]\nkeys = ["sex"]\n[[steps]]\nuse = "pram"\ncolumns = ["sex"]\n'
                                  f'matrix = {MATRIX}\n', lambda d: d.assign(sex=["x", *d["sex"][1:]]),
                                  "steps[0] (pram): pram: column 'sex' holds the category 'x' that the transition "
                                  "matrix has no row for"),
    "recode-value-outside-breaks": ('[roles]\nkeys = ["age"]\n[[steps]]\nuse = "recode"\ncolumns = ["age"]\n'
                                    'breaks = { age = [0, 40, 50] }\n', lambda d: d,
                                    "steps[0] (recode): recode: key 'age' holds the value"),
}


def _files(tmp_path, recipe: str, frame: pd.DataFrame):
    (tmp_path / "r.toml").write_text(recipe)
    frame.to_csv(tmp_path / "d.csv", index=False)
    return str(tmp_path / "r.toml"), str(tmp_path / "d.csv")


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_check_refuses_what_run_refuses_in_the_key_maskers_own_words(case, tmp_path, capsys):
    recipe, change, message = REFUSED[case]
    r, d = _files(tmp_path, recipe, change(BASE.copy()))
    assert main(["check", r, "--input", d]) == 1
    checked = capsys.readouterr().err
    assert main(["run", r, "--input", d, "--output", str(tmp_path / "out.csv"), "-q"]) == 1
    ran = capsys.readouterr().err
    assert message in checked and checked == ran
    assert not (tmp_path / "out.csv").exists()


def test_a_true_false_key_read_from_csv_is_a_key_of_two_categories(tmp_path, capsys):
    """A CSV's true/false is read as bool; the key maskers refused bool, so a CLI user could not mask it."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"flag": rng.choice(["true", "false"], 30), "region": rng.choice(list("abcdefg"), 30)})
    r, d = _files(tmp_path, '[roles]\nkeys = ["flag", "region"]\n[[steps]]\nuse = "local-suppression"\nk = 3\n'
                  'columns = ["flag", "region"]\nimportance = ["region", "flag"]\n', frame)
    assert main(["check", r, "--input", d]) == 0
    assert main(["run", r, "--input", d, "--output", str(tmp_path / "out.csv"), "-q"]) == 0
    capsys.readouterr()
    out = pd.read_csv(tmp_path / "out.csv")
    assert out["flag"].isna().sum() > 0 and set(out["flag"].dropna()) <= {True, False}

    release = privclust.run({"roles": {"keys": ["flag", "region"]},
                             "steps": [{"use": "local-suppression", "k": 3, "columns": ["flag", "region"],
                                        "importance": ["region", "flag"]}]},
                            pd.read_csv(d), seed=0)
    flag = release.data["flag"]
    assert flag.isna().any() and set(flag.dropna()) <= {True, False}
    assert release.verification["whole_file"]["holds"]
    masked = LocalSuppression(k=3, importance=("region", "flag")).mask(pd.read_csv(d), privclust.PrivacyContext(seed=0))
    assert str(masked.data["flag"].dtype) == "boolean"  # still a true/false column, with <NA> where suppressed


def test_pram_on_a_true_false_key_names_its_categories_true_and_false(tmp_path, capsys):
    frame = pd.DataFrame({"flag": [True, False] * 10})
    lower = '[roles]\nkeys = ["flag"]\n[[steps]]\nuse = "pram"\ncolumns = ["flag"]\n' \
            'matrix = { true = {true = 0.9, false = 0.1}, false = {true = 0.1, false = 0.9} }\n'
    r, d = _files(tmp_path, lower, frame)
    assert main(["check", r, "--input", d]) == 1
    assert "(a true/false key's categories are True and False)" in capsys.readouterr().err
    release = privclust.run({"roles": {"keys": ["flag"]},
                             "steps": [{"use": "pram", "columns": ["flag"],
                                        "matrix": {"True": {"True": 0.5, "False": 0.5},
                                                   "False": {"True": 0.5, "False": 0.5}}}]}, frame, seed=0)
    assert release.data["flag"].dtype == bool


def test_the_values_are_checked_before_the_run_only_where_no_earlier_step_changes_them(tmp_path, capsys):
    """After a recode, pram's column holds the recoded categories: check says so, and the run still refuses the
    category the recode made as the step runs."""
    recipe = ('[roles]\nkeys = ["sex", "age"]\n[[steps]]\nuse = "recode"\ncolumns = ["sex"]\n'
              'maps = { sex = { f = "x" } }\n'
              f'[[steps]]\nuse = "pram"\ncolumns = ["sex"]\nmatrix = {MATRIX}\n')
    frame = BASE
    r, d = _files(tmp_path, recipe, frame)
    assert main(["check", r, "--input", d]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "records;" in x)
    assert "any categories" not in line
    assert ("step 0 'recode' accepts the values of its columns (the step's own checks); step 1 'pram' "
            "checks the values of its columns only as it runs: an earlier step changes them") in line
    with pytest.raises(DataError, match="holds the category 'x' that the transition matrix has no row"):
        privclust.run(recipe, frame, seed=0)


def test_check_names_a_key_masker_that_states_no_value_checks(tmp_path, capsys):
    @attrs.frozen(kw_only=True)
    class Silent:
        name: ClassVar[str] = "rt22-silent-keys"
        key_masker: ClassVar[bool] = True

        def mask(self, data, context):
            return privclust.Masked(data=data.copy())

    class Plugin:
        @privclust.hookimpl
        def privclust_register_maskers(register):
            register(Silent)

    privclust.register(Plugin, name="rt22-silent")
    try:
        r, d = _files(tmp_path, '[roles]\nkeys = ["sex"]\n[[steps]]\nuse = "rt22-silent-keys"\ncolumns = ["sex"]\n',
                      BASE)
        assert main(["check", r, "--input", d]) == 0
        assert ("step 0 'rt22-silent-keys', key masker stating no checks of its values, checks them only as it runs"
                in capsys.readouterr().out)
    finally:
        privclust.get_registry().unregister("rt22-silent")


def _masker(name: str, returns: Any, problems: Any = None) -> type:
    @attrs.frozen(kw_only=True)
    class M:
        def mask(self, data, context):
            return privclust.Masked(data=returns(data))

        if problems is not None:
            def data_problems(self, data):
                return problems

    M.name = name
    return M


RESHAPED = {
    "add-col": (lambda d: d.assign(extra=1.0), "shape (60, 3) received, (60, 2) expected; column(s) added: 'extra'"),
    "drop-col": (lambda d: d.drop(columns=["b"]), "shape (60, 1) received, (60, 2) expected; column(s) missing: 'b'"),
    "rename": (lambda d: d.rename(columns={"a": "A"}), "column(s) added: 'A'; column(s) missing: 'a'"),
    "swap": (lambda d: d[["b", "a"]], "the columns in another order ('b', 'a'; given: 'a', 'b')"),
    "dup-rows": (lambda d: pd.concat([d, d.iloc[:1]]),
                 "shape (61, 2) received, (60, 2) expected; 1 row(s) repeated (index 0)"),
    "fewer": (lambda d: d.iloc[:-1], "shape (59, 2) received, (60, 2) expected; 1 row(s) missing (index 59)"),
    "reorder": (lambda d: d.iloc[::-1], "the rows in another order (position 0 holds index 59, given 0)"),
    "reindex": (lambda d: d.set_axis(d.index + 100), "60 row(s) added (index 100, 101, 102, 103, 104 and 55 more)"),
    "array": (lambda d: d.to_numpy()[:, :1], "an array of shape (60, 1), expected (60, 2)"),
}


@pytest.mark.parametrize("case", sorted(RESHAPED))
def test_a_reshaped_release_is_refused_naming_the_step_and_what_differs(case):
    returns, differs = RESHAPED[case]
    cls = _masker(f"rt22-{case}", returns)

    class Plugin:
        @privclust.hookimpl
        def privclust_register_maskers(register):
            register(cls)

    privclust.register(Plugin, name=f"rt22-{case}")
    frame = pd.DataFrame({"a": np.arange(60.0), "b": np.arange(60.0) * 2})
    try:
        with pytest.raises(PrivclustError) as err:
            privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["a"], "bounds": {"a": [0, 60]}},
                                     {"use": cls.name, "columns": ["a", "b"]}]}, frame, seed=0)
    finally:
        privclust.get_registry().unregister(f"rt22-{case}")
    text = str(err.value)
    assert text.startswith(f"steps[1] ({cls.name}): masker {cls.name!r} returned data of another shape")
    assert differs in text and "nothing was returned or written" in text


def test_a_malformed_data_problems_answer_is_a_bug_of_its_plugin():
    cls = _masker("rt22-malformed", lambda d: d.copy(), problems="a text, not a list")

    class Plugin:
        @privclust.hookimpl
        def privclust_register_maskers(register):
            register(cls)

    privclust.register(Plugin, name="rt22-malformed")
    try:
        with pytest.raises(PrivclustError, match=r"steps\[0\] \(rt22-malformed\): rt22-malformed.data_problems\(\) "
                                                 r"must be a list of texts.*a bug in its plugin"):
            privclust.run({"steps": [{"use": "rt22-malformed", "columns": ["a"]}]}, BASE, seed=0)
    finally:
        privclust.get_registry().unregister("rt22-malformed")
