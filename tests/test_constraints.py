"""The ``linear`` constraint handler: grammar, checks, projection, recipes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

import privclust
import privclust.datasets
import privclust.testing
from privclust import ConstraintError, ConstraintSet, ParameterError, RecipeError
from privclust_plugins import _linear
from privclust_plugins.constraints import LinearConstraints

TABLE1_RULE = "total = 1.16*exp16 + 1.07*exp7"


def normal_form(rule: str) -> tuple[str, dict[str, float], float]:
    p = LinearConstraints(rules=[rule]).parsed()[0]
    return p.kind, dict(p.coefs), p.rhs


# ---------------------------------------------------------------------------
# Grammar
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "kind", "coefs", "rhs"),
    [
        (TABLE1_RULE, "eq", {"total": 1.0, "exp16": -1.16, "exp7": -1.07}, 0.0),
        ("tax <= 0.5*gross", "le", {"tax": 1.0, "gross": -0.5}, 0.0),
        ("age >= 0", "le", {"age": -1.0}, 0.0),
        ("PTOTVAL = POTHVAL + PEARNVAL", "eq", {"PTOTVAL": 1.0, "POTHVAL": -1.0, "PEARNVAL": -1.0}, 0.0),
        ("FIXED.ASSETS >= 1e-3", "le", {"FIXED.ASSETS": -1.0}, -1e-3),
        ("`net income` + 2 <= .5 * `gross pay`", "le", {"net income": 1.0, "gross pay": -0.5}, -2.0),
        ("2*(a - 3*b) + 4 = -(c - 1)/2", "eq", {"a": 2.0, "b": -6.0, "c": 0.5}, -3.5),
        ("x == 1.5E+2", "eq", {"x": 1.0}, 150.0),
        ("a + b - b >= 1", "le", {"a": -1.0}, -1.0),
        ("3 * 2 * x <= 12", "le", {"x": 6.0}, 12.0),
    ],
)
def test_rules_parse_to_their_normal_form(rule, kind, coefs, rhs):
    got_kind, got_coefs, got_rhs = normal_form(rule)
    assert got_kind == kind
    assert got_coefs.keys() == coefs.keys()
    for name, a in coefs.items():
        assert got_coefs[name] == pytest.approx(a, rel=1e-15)
    assert got_rhs == pytest.approx(rhs, rel=1e-15, abs=1e-15)


def test_terms_are_collected_exactly_so_a_cancelling_coefficient_leaves_its_column_out():
    # in doubles 0.1 + 0.2 - 0.3 is 5.6e-17, not 0: the rule would count 'a' as one of its columns
    h = LinearConstraints(rules=["0.1*a + 0.2*a = 0.3*a + b", "a/3 + a/3 + a/3 - a + c <= 1", "0.1*x + 0.2*x >= 0.3"])
    assert h.variables() == (frozenset({"b"}), frozenset({"c"}), frozenset({"x"}))
    assert h.parsed()[0].coefs == (("b", -1.0),)
    assert h.parsed()[2].coefs == (("x", -0.3),) and h.parsed()[2].rhs == -0.3  # 0.1 + 0.2 is 0.3 exactly
    with pytest.raises(ConstraintError, match="names no column"):
        LinearConstraints(rules=["0.1*a + 0.2*a - 0.3*a = 1"])
    bound = h.bind(["a", "b", "c", "x"])
    assert bound.violations(np.array([[1e9, 0.0, 0.0, 1.0]])).max() == 0.0  # 'a' plays no part


def test_a_number_beyond_the_doubles_is_refused_before_it_is_built():
    for rule, phrase in (("a <= 1e999999999", "too large"), ("a*1e-999999999 <= 1", "too small"),
                         ("a*" + "*".join(["1e300"] * 600) + " <= 1", "overflows")):
        with pytest.raises(ConstraintError, match=phrase):
            LinearConstraints(rules=[rule])


def test_variables_and_describe():
    h = LinearConstraints(rules=[TABLE1_RULE, "exp16 >= 0", "a + b - b >= 1"])
    assert h.variables() == (frozenset({"total", "exp16", "exp7"}), frozenset({"exp16"}), frozenset({"a"}))
    assert h.describe() == (TABLE1_RULE, "exp16 >= 0", "a + b - b >= 1")


@pytest.mark.parametrize(
    ("rule", "column", "phrase"),
    [
        ("a <= b*c", 7, "not linear"),
        ("a = 2b", 6, "'*'"),
        ("a = b = c", 7, "second relation"),
        ("a < 3", 3, "strict inequality"),
        ("a + (b - c = 1", 12, "expected ')'"),
        ("x / (y - 1) = 2", 3, "not linear"),
        ("x / 0 = 2", 5, "division by zero"),
        ("a = ", 5, "right-hand side"),
        ("a + b", 6, "no relation"),
        ("", 1, "empty"),
        ("3 = 3", 1, "names no column"),
        ("a = b $ c", 7, "unexpected character"),
        ("`unclosed = 1", 1, "never closed"),
        ("a != b", 3, "'!='"),
        ("a =< b", 3, "'=<' is not an operator; write '<='"),
        ("a => b", 3, "'=>' is not an operator; write '>='"),
        ("a = b c", 7, "unexpected name 'c'"),
        ("a = * b", 5, "unexpected '*'"),
    ],
)
def test_a_rule_that_does_not_parse_points_at_the_character(rule, column, phrase):
    with pytest.raises(ConstraintError) as info:
        LinearConstraints(rules=["x >= 0", rule])
    message = str(info.value)
    assert repr(rule) in message
    assert f"at column {column}:" in message
    assert phrase in message
    lines = message.splitlines()
    assert lines[-1] == "    " + " " * (column - 1) + "^"


def test_every_bad_rule_is_reported_at_once():
    with pytest.raises(ConstraintError) as info:
        LinearConstraints(rules=["a <= b*c", "ok >= 0", "d = 2e"])
    assert "'a <= b*c'" in str(info.value) and "'d = 2e'" in str(info.value)


@pytest.mark.parametrize("rules", [[], [3], "  ", None])
def test_bad_rules_parameter(rules):
    with pytest.raises((ParameterError, ConstraintError)):
        LinearConstraints(rules=rules)


def test_a_single_rule_string_is_accepted():
    assert LinearConstraints(rules="a >= 0").rules == ("a >= 0",)


def test_the_parser_never_evaluates_code():
    with pytest.raises(ConstraintError):
        LinearConstraints(rules=["__import__('os').system('true') = 1"])


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def test_check_reports_unknown_columns_with_close_matches():
    h = LinearConstraints(rules=[TABLE1_RULE, "gross >= 0"])
    problems = h.check(["exp16", "exp7", "totl", "gros"])
    assert len(problems) == 2
    assert "'total'" in problems[0] and "did you mean 'totl'" in problems[0] and "rule 1" in problems[0]
    assert "'gross'" in problems[1] and "did you mean 'gros'" in problems[1]
    assert h.check(None) == []
    assert h.check(["exp16", "exp7", "total", "gross"]) == []


def test_check_reports_redundant_and_contradictory_equalities():
    h = LinearConstraints(rules=["a = b + c", "2*a = 2*b + 2*c", "a - b = c + 1", "d >= 0"])
    problems = h.check(None)
    assert len(problems) == 2
    assert "rule 2" in problems[0] and "follows from rule 1" in problems[0] and "rank-deficient" in problems[0]
    assert "rule 3" in problems[1] and "contradicts rule 1" in problems[1]


def test_check_reports_a_combination_that_contradicts():
    h = LinearConstraints(rules=["a = b", "b = c", "a = c + 1"])
    (problem,) = h.check(None)
    assert "rule 3" in problem and "rule 1" in problem and "rule 2" in problem


@pytest.mark.parametrize("rules", [["a = 1e16*b + 1", "b = 0"], ["a = 1e-300*b", "b = 1"],
                                   ["1e12*a = b", "a + b = 3"]])
def test_badly_scaled_independent_equalities_are_not_taken_for_multiples(rules):
    """'a = 1e16*b + 1' and 'b = 0' hold together (a = 1): the rank test read
    them as multiples of each other and named no rule ("follows from :")."""
    assert LinearConstraints(rules=rules).check(None) == []


@pytest.mark.parametrize("rules, word", [(["a = 1e16*b", "2*a = 2e16*b"], "follows from rule 1"),
                                         (["a = 1e16*b", "2*a = 2e16*b + 1"], "contradicts rule 1")])
def test_badly_scaled_dependent_equalities_are_still_named(rules, word):
    (problem,) = LinearConstraints(rules=rules).check(None)
    assert "rule 2" in problem and word in problem


def test_check_reports_infeasible_inequalities_with_a_minimal_set():
    h = LinearConstraints(rules=["z >= 5", "a >= 1", "b >= 1", "a + b <= 1"])
    (problem,) = h.check(None)
    assert "rule 2" in problem and "rule 3" in problem and "rule 4" in problem
    assert "rule 1" not in problem
    assert "cannot all hold" in problem


def test_check_accepts_a_feasible_mixed_system():
    h = LinearConstraints(rules=[TABLE1_RULE, "exp16 >= 0", "exp7 >= 0", "exp16 <= exp7"])
    assert h.check(None) == []


@pytest.mark.parametrize("rule", ["a <= 1e14*b", "a <= 1e16*b", "a <= 1e100*b", "a <= 1e308*b",
                                  "a <= 1e308*b - 1e308*c", "a <= 1e-300*b", "a >= 1e25", "a <= -1e300"])
def test_a_feasible_rule_with_coefficients_out_of_scale_is_accepted(rule):
    """a <= 1e16*b holds at a = b = 0 (unscaled, HiGHS proved it 'infeasible'); a >= 1e25 at a = 1e25."""
    assert LinearConstraints(rules=[rule]).check(None) == []


@pytest.mark.parametrize("rules", [["a <= 1e16*b", "a >= 0", "b >= 0"], ["a >= 1e25", "a <= 2e25"],
                                   ["a + 1e-20*b >= 1", "a <= 0"], ["a = 1e300*b", "a >= 1"]])
def test_feasible_systems_out_of_scale_are_accepted(rules):
    # the last three hold at a = 1e25, at (a, b) = (0, 1e20) and at (a, b) = (1, 1e-300)
    assert LinearConstraints(rules=rules).check(None) == []


@pytest.mark.parametrize(("rules", "culprits"), [
    (["a >= 1", "a <= 0"], [1, 2]),
    (["z >= 0", "a >= 1", "a <= 0"], [2, 3]),
    (["a <= 1e16*b", "b <= -1", "a >= 0"], [1, 2, 3]),
    (["a >= 1e25", "a <= 1e24"], [1, 2]),
    (["1e-20*a >= 1", "a <= 0"], [1, 2]),
    (["a <= 1e-300*b", "a >= 1", "b <= 1e299"], [1, 2, 3]),
])
def test_contradictory_rules_are_still_refused_whatever_their_scale(rules, culprits):
    (problem,) = LinearConstraints(rules=rules).check(None)
    shown = ", ".join(f"rule {i} {rules[i - 1]!r}" for i in culprits)
    assert problem == (f"{shown} cannot all hold at once: no record satisfies them together (the feasible set is "
                       "empty; relax or remove one of them)")


def test_the_feasibility_check_agrees_with_the_unscaled_one_on_rules_rescaled_by_powers_of_ten():
    """Random small systems with small integer coefficients (where HiGHS unscaled is reliable), then each rule
    multiplied by 10^-15..10^15 and each column measured in a unit 10^-8..10^8: the same answer."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(1)
    answers = []
    for _ in range(150):
        d, m = int(rng.integers(1, 5)), int(rng.integers(1, 7))
        A = rng.integers(-3, 4, size=(m, d)).astype(float)
        c = rng.integers(-5, 6, size=m).astype(float)
        E = rng.integers(-3, 4, size=(int(rng.integers(0, 2)), d)).astype(float)
        f = rng.integers(-5, 6, size=E.shape[0]).astype(float)
        truth = linprog(np.zeros(d), A_ub=A, b_ub=c, A_eq=E if E.size else None, b_eq=f if E.size else None,
                        bounds=[(None, None)] * d, method="highs").status != 2
        rows, eq_rows = 10.0 ** rng.integers(-15, 16, size=m), 10.0 ** rng.integers(-15, 16, size=E.shape[0])
        unit = 10.0 ** rng.integers(-8, 9, size=d)
        scaled = _linear.infeasible_subset(E * eq_rows[:, None] * unit, f * eq_rows, A * rows[:, None] * unit,
                                           c * rows) is None
        assert scaled == truth, (A, c, E, f, rows, eq_rows, unit)
        answers.append(truth)
    assert 0 < sum(answers) < len(answers)  # both answers occur


def test_a_rule_whose_numbers_overflow_is_refused_by_name():
    with pytest.raises(ConstraintError, match=r"edit rule 'a <= 1e308\*1e308\*b' does not parse at column 11: a "
                                              r"coefficient or constant overflows .* rescale the rule"):
        LinearConstraints(rules=["a >= 0", "a <= 1e308*1e308*b"])


def test_compile_reports_rule_problems_and_run_reports_unknown_columns(registry):
    bad = {"constraints": [{"use": "linear", "rules": ["a >= 1", "a <= 0"]}], "steps": [{"use": "mdav"}]}
    with pytest.raises(RecipeError, match=r"constraints\[0\].*cannot all hold"):
        privclust.compile(bad, registry)
    syntax = {"constraints": [{"use": "linear", "rules": ["a <= b*c"]}], "steps": [{"use": "mdav"}]}
    with pytest.raises(RecipeError, match="not linear"):
        privclust.compile(syntax, registry)
    unknown = {"constraints": [{"use": "linear", "rules": ["totl = 1.16*exp16 + 1.07*exp7"]}],
               "steps": [{"use": "mdav", "k": 3}]}
    with pytest.raises(privclust.DataError, match="did you mean 'total'"):
        privclust.run(unknown, privclust.datasets.table1(), seed=0, registry=registry)


def test_bind_refuses_missing_columns_and_bad_rule_numbers():
    h = LinearConstraints(rules=[TABLE1_RULE, "x >= 0"])
    with pytest.raises(ConstraintError, match="'x'"):
        h.bind(["exp16", "exp7", "total"])
    bound = h.bind(["exp16", "exp7", "total"], rules=[0])
    assert bound.rules == (TABLE1_RULE,)
    with pytest.raises(ConstraintError, match="rule number 5"):
        h.bind(["exp16", "exp7", "total", "x"], rules=[5])
    with pytest.raises(ConstraintError, match="cannot all hold"):
        LinearConstraints(rules=["a >= 1", "a <= 0"]).bind(["a"])


# ---------------------------------------------------------------------------
# Violations and projection on known cases
# ---------------------------------------------------------------------------


def test_violations_are_hand_computed_amounts():
    h = LinearConstraints(rules=[TABLE1_RULE, "exp16 >= 20", "exp7 <= 100"])
    bound = h.bind(["exp16", "exp7", "total"])
    X = privclust.datasets.table1().to_numpy()
    v = bound.violations(X)
    assert v.shape == (12, 3)
    assert v[11, 0] == pytest.approx(3.48, abs=1e-9)
    assert np.all(v[:11, 0] < 1e-9)
    np.testing.assert_allclose(v[:, 1], np.maximum(0, 20 - X[:, 0]))
    np.testing.assert_allclose(v[:, 2], np.maximum(0, X[:, 1] - 100))


def test_projection_of_one_equality_is_the_seed_formula():
    h = LinearConstraints(rules=[TABLE1_RULE])
    bound = h.bind(["exp16", "exp7", "total"])
    X = privclust.datasets.table1().to_numpy()
    alpha, A = np.array([1.16, 1.07, -1.0]), 0.0
    expected = X - np.outer(X @ alpha - A, alpha) / (alpha @ alpha)
    got = bound.project(X)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-10)
    assert np.array_equal(got[:11], X[:11])  # rows that satisfy the rule come back unchanged
    assert np.max(bound.violations(got)) < 1e-10


def test_projection_with_bounds_clips_and_keeps_the_equality():
    h = LinearConstraints(rules=["t = a + b", "a >= 0", "b >= 0"])
    bound = h.bind(["a", "b", "t"])
    got = bound.project(np.array([[-1.0, 3.0, 2.0]]))
    # nearest point of {t = a + b, a, b >= 0} to (-1, 3, 2): a = 0, then b and t split the gap
    np.testing.assert_allclose(got, [[0.0, 2.5, 2.5]], atol=1e-12)


def test_project_never_modifies_its_input_and_keeps_one_dimensional_input():
    bound = LinearConstraints(rules=["a + b <= 1"]).bind(["a", "b"])
    x = np.array([1.0, 1.0])
    x.flags.writeable = False
    y = bound.project(x)
    assert y.shape == (2,) and np.allclose(y, [0.5, 0.5])
    assert np.array_equal(x, [1.0, 1.0])


def test_projection_rejects_bad_shapes_and_scales():
    bound = LinearConstraints(rules=["a + b <= 1"]).bind(["a", "b"])
    with pytest.raises(ConstraintError, match="2 columns"):
        bound.project(np.zeros((3, 3)))
    with pytest.raises(ConstraintError, match="scale"):
        bound.project(np.zeros((3, 2)), scale=[1.0, 0.0])


def test_dual_method_agrees_with_enumeration_on_many_inequalities():
    rng = np.random.default_rng(3)
    d = 4
    rules = ["x0 + x1 + x2 + x3 = 2"]
    for _ in range(9):  # random halfspaces through points near the origin
        a = rng.normal(size=d)
        rules.append(" + ".join(f"{float(a[j])!r}*x{j}" for j in range(d)) + f" <= {float(abs(rng.normal()) + 0.2)!r}")
    rules += [f"x{j} >= -3" for j in range(d)]
    exact = LinearConstraints(rules=rules, max_active_sets=10_000_000).bind([f"x{j}" for j in range(d)])
    dual = LinearConstraints(rules=rules, max_active_sets=1).bind([f"x{j}" for j in range(d)])
    X = rng.normal(scale=4.0, size=(300, d))
    a, b = exact.project(X), dual.project(X)
    assert exact.last_stats.method == "active-set enumeration"
    assert dual.last_stats.method.startswith("dual FISTA")
    assert "unverified" not in dual.last_stats.method
    np.testing.assert_allclose(a, b, atol=1e-8)
    assert exact.satisfied(a).all() and dual.satisfied(b).all()


def test_conformance_kit():
    frame = privclust.testing.example_frame()
    privclust.testing.check_component(LinearConstraints(rules=["a + b <= 10", "c >= 0", "a = 2*c + 1"]), frame)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@st.composite
def systems(draw):
    """A feasible random system over d columns: equalities and inequalities
    through a known feasible point, a column no rule names, points, scales."""
    d = draw(st.integers(2, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    n_eq = draw(st.integers(0, min(2, d - 1)))
    n_le = draw(st.integers(0 if n_eq else 1, 4))
    rng = np.random.default_rng(seed)
    x0 = rng.normal(scale=3.0, size=d)
    C = np.round(rng.normal(size=(n_eq, d)), 3)
    G = np.round(rng.normal(size=(n_le, d)), 3)
    for M in (C, G):
        M[np.abs(M) < 1e-3] = 0.5
    slack = np.abs(rng.normal(size=n_le)) * draw(st.sampled_from([0.0, 0.5, 2.0]))
    names = [f"v{j}" for j in range(d)]

    def text(row: np.ndarray, rel: str, rhs: float) -> str:
        return " + ".join(f"({float(a)!r})*{n}" for a, n in zip(row, names, strict=True)) + f" {rel} {rhs!r}"

    rules = [text(C[i], "=", float(C[i] @ x0)) for i in range(n_eq)]
    rules += [text(G[i], "<=", float(G[i] @ x0 + slack[i])) for i in range(n_le)]
    for j in draw(st.lists(st.integers(0, d - 1), max_size=2, unique=True)):  # bounds on single columns
        rules.append(f"{names[j]} >= {float(x0[j] - abs(rng.normal())):.6f}")
    n = draw(st.integers(1, 25))
    X = rng.normal(scale=draw(st.sampled_from([1.0, 10.0, 1000.0])), size=(n, d)) + x0
    scale = np.exp(rng.uniform(-2, 2, size=d + 1))
    return rules, names, X, scale


def _bound(rules, names):
    h = LinearConstraints(rules=rules)
    return h.bind([*names, "free"])


def _with_free(X, seed=0):
    return np.column_stack([X, np.arange(X.shape[0], dtype=float) * 1.5 - 3.0])


def _rel_ok(bound, P):
    return bound.satisfied(P, tol=1e-9).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems())
def test_projected_points_satisfy_every_rule_and_leave_other_columns_alone(system):
    rules, names, X, scale = system
    bound = _bound(rules, names)
    Xf = _with_free(X)
    original = Xf.copy()
    for s in (None, scale):
        P = bound.project(Xf, scale=s)
        assert _rel_ok(bound, P), bound.violations(P).max()
        assert np.array_equal(P[:, -1], Xf[:, -1])  # seed Prop. 5: a column in no rule is untouched
        assert np.array_equal(Xf, original)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems())
def test_projection_is_idempotent_and_fixes_feasible_points(system):
    rules, names, X, scale = system
    bound = _bound(rules, names)
    P = bound.project(_with_free(X), scale=scale)
    again = bound.project(P, scale=scale)
    np.testing.assert_allclose(again, P, rtol=1e-9, atol=1e-9 * (1 + np.abs(P).max()))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems())
def test_projection_is_the_nearest_feasible_point_in_the_scaled_metric(system):
    rules, names, X, scale = system
    bound = _bound(rules, names)
    s = scale
    Xf = _with_free(X)[:4]
    P = bound.project(Xf, scale=s)
    parsed = bound.handler.parsed()
    index = {c: j for j, c in enumerate(bound.columns)}
    d = len(bound.columns)
    cons = []
    for p in parsed:
        row = p.row(index, d)
        if p.kind == "eq":
            cons.append({"type": "eq", "fun": lambda y, r=row, b=p.rhs: r @ y - b, "jac": lambda y, r=row: r})
        else:
            cons.append({"type": "ineq", "fun": lambda y, r=row, b=p.rhs: b - r @ y, "jac": lambda y, r=row: -r})
    for x, p_ours in zip(Xf, P, strict=True):
        def obj(y, x=x):
            return float(np.sum(((y - x) / s) ** 2))

        res = minimize(obj, p_ours + 0.01 * s, jac=lambda y, x=x: 2 * (y - x) / s**2, constraints=cons,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        ours = obj(p_ours)
        # SLSQP's answer, when feasible, is never better than ours
        if res.success and bound.satisfied(res.x[None], tol=1e-7).all():
            assert ours <= res.fun * (1 + 1e-6) + 1e-9
        # variational inequality: (x - p) . (y - p) <= 0 in the scaled metric for feasible y
        ys = bound.project(p_ours + np.random.default_rng(0).normal(size=(20, d)) * s, scale=s)
        lhs = ((x - p_ours) / s) @ ((ys - p_ours) / s).T
        assert np.all(lhs <= 1e-7 * (1 + np.abs(x / s).max() ** 2))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 100.0))
def test_scaling_every_column_alike_changes_nothing(seed, factor):
    rng = np.random.default_rng(seed)
    bound = LinearConstraints(rules=["t = 2*a + b", "a >= 0", "b <= 3"]).bind(["a", "b", "t"])
    X = rng.normal(scale=5, size=(10, 3))
    np.testing.assert_allclose(bound.project(X, scale=np.full(3, factor)), bound.project(X), atol=1e-9)


def test_the_scaled_metric_moves_the_cheap_column():
    bound = LinearConstraints(rules=["a + b = 0"]).bind(["a", "b"])
    x = np.array([[1.0, 1.0]])
    # b divided by 10: moving b is 100 times cheaper, so almost all the change is in b
    got = bound.project(x, scale=[1.0, 10.0])
    # the exact answer: minimise (da)^2 + (db/10)^2 s.t. da + db = -2: da = -2/101, db = -200/101
    np.testing.assert_allclose(got, [[1 - 2 / 101, 1 - 200 / 101]], atol=1e-12)


# ---------------------------------------------------------------------------
# In recipes
# ---------------------------------------------------------------------------


def test_the_runner_binds_only_the_rules_inside_a_step(registry):
    frame = privclust.datasets.table1().assign(other=np.linspace(-5, 5, 12))
    recipe = {
        "constraints": [{"use": "linear", "rules": [TABLE1_RULE, "other >= 0"]}],
        "steps": [{"use": "mdav", "k": 3, "columns": ["exp16", "exp7", "total"]}],
        "evaluate": [{"use": "edit-violations"}],
    }
    release = privclust.run(recipe, frame, seed=0, registry=registry)
    centres = release.outcomes[0].result.centres
    rules = LinearConstraints(rules=[TABLE1_RULE]).bind(["exp16", "exp7", "total"])
    assert rules.satisfied(centres).all()
    ev = release.evaluations.set_index("metric")["value"]
    assert ev["other >= 0: share violated"] == pytest.approx(6 / 12)
    assert isinstance(frame, pd.DataFrame) and frame.shape == (12, 4)


def test_projection_kernel_closed_form_when_equalities_fix_everything():
    E = np.eye(2)
    f = np.array([1.0, 2.0])
    out, stats = _linear.project_polyhedron(np.zeros((3, 2)), E, f, np.array([[1.0, 1.0]]), np.array([5.0]))
    np.testing.assert_allclose(out, [[1.0, 2.0]] * 3)
    assert stats.method == "closed form"


def test_the_docs_page_examples_run(tmp_path):
    from _docblocks import run_page

    assert run_page("constraints.md", tmp_path) >= 2


def test_a_masker_says_every_record_satisfies_the_rules_only_when_they_do():
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.uniform(0, 2, 30), "b": rng.uniform(0, 2, 30)})
    # two tables whose rules cannot hold together: each is consistent alone, and the recipe is refused
    two = [{"use": "linear", "rules": ["a <= 0"]}, {"use": "linear", "rules": ["a >= 1"]}]
    for use in ("microaggregation", "fuzzy-microaggregation"):
        with pytest.raises(privclust.RecipeError, match=r"constraints\[1\]: its rules and those of constraints\[0\] "
                                                        "cannot all hold together"):
            privclust.run({"constraints": two, "steps": [{"use": use, "k": 3, "columns": ["a", "b"]}]}, data, seed=1)
        one = privclust.run({"constraints": [{"use": "linear", "rules": ["a >= 1"]}],
                             "steps": [{"use": use, "k": 3, "columns": ["a", "b"]}]}, data, seed=1)
        assert "so every released record satisfies them" in next(
            e for e in one.ledger.of_kind("guarantee") if e.component == use
            and "projected onto the edit rules" in e.statement).statement


def test_rules_over_a_text_column_or_with_a_subnormal_coefficient_are_refused_before_any_step():
    data = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "city": list("xyzxyz")})
    recipe = {"constraints": [{"use": "linear", "rules": ["city >= 0"]}],
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["a"]}]}
    with pytest.raises(privclust.DataError, match="column 'city' of its rules is not numeric"):
        privclust.run(recipe, data, seed=1)
    with pytest.raises(privclust.RecipeError, match="below the smallest normal double"):
        privclust.compile({"constraints": [{"use": "linear", "rules": ["1e-310*a >= 0"]}],
                           "steps": [{"use": "microaggregation", "k": 3, "columns": ["a"]}]})


def test_a_handler_without_magnitudes_is_judged_on_its_own_rules_columns():
    class Plain:  # a plugin's bound rules without the magnitudes capability: "a >= 0" and "c >= 0"
        columns = ("a", "c")
        rules = ("a >= 0", "c >= 0")

        def project(self, points, *, scale=None):
            return np.maximum(points, 0.0)

        def violations(self, points):
            return np.maximum(-np.asarray(points, dtype=float), 0.0)

    rules = privclust.ConstraintSet(("a", "c"), [Plain()])
    points = np.array([[-1e-3, 2e9], [np.nan, 5.0]])
    size = rules.magnitudes(points, [[0], [1]])
    assert size.tolist() == [[1e-3, 2e9], [0.0, 5.0]]  # each rule's own column; a missing value counts 0
    # without the rules' columns: every column (the looser bound, 2e9 for the first rule)
    assert rules.magnitudes(points)[0].tolist() == [2e9, 2e9]
    assert not rules.satisfied(np.array([[-1e-3, 1.0]])).any()  # 1e-3 is no rounding error at this size


def test_a_rule_on_small_values_is_kept_and_judged_relative_to_its_terms():
    """Red-team audit: the tolerance was 1e-11 times 1 + the size of the terms, a floor of 1e-11 in the data's units,
    so a <= b on values near 1e-15 passed any violation: never projected, reported as holding, while 15 of 30 written
    records broke it by up to 243%. Judged and projected relative to the terms, it holds."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(1, 10, 30) * 1e-15, "b": rng.uniform(1, 10, 30) * 1e-15})
    rules = ConstraintSet.of([LinearConstraints(rules=["a <= b"])], ("a", "b"))
    assert privclust.judge(rules, frame.to_numpy()).violated.sum() == (frame.a > frame.b).sum() > 0
    release = privclust.run({"constraints": [{"use": "linear", "rules": ["a <= b"]}],
                             "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]}, frame,
                            seed=1)
    out = release.data
    assert ((out.a - out.b) <= 1e-11 * (out.a.abs() + out.b.abs())).all()
    # the same rule scaled: the same answer (a floor in the data's units made it depend on the scale)
    scaled = ConstraintSet.of([LinearConstraints(rules=["1e-15*a <= 1e-15*b"])], ("a", "b"))
    np.testing.assert_array_equal(privclust.judge(scaled, frame.to_numpy() * 1e15).violated,
                                  privclust.judge(rules, frame.to_numpy()).violated)


def test_a_rule_whose_terms_overflow_is_projected_and_never_judged_held():
    """Red-team audit: 1e299*a <= 1e299*b with values near 1e9: the terms overflow, the rows were skipped by the
    projection (inf <= inf passed its test) and the judge read the clipped residual 0 as "held"."""
    bound = LinearConstraints(rules=["1e299*a <= 1e299*b"]).bind(("a", "b"))
    X = np.array([[5e9, 3e9], [1e9, 2e9]])
    with np.errstate(over="ignore", invalid="ignore"):
        out = bound.project(X)
    assert out[0, 0] <= out[0, 1] and np.array_equal(out[1], X[1])
    status = privclust.judge(ConstraintSet.of([LinearConstraints(rules=["1e299*a <= 1e299*b"])], ("a", "b")), X)
    assert status.undecided.all() and not status.satisfied.any()
