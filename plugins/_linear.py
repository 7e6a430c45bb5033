"""Kernels of the ``linear`` constraint handler: the rule parser and the
projection onto a polyhedron, vectorised over rows (the controlled rounding
of integer columns is in :mod:`privclust_plugins._rounding`).

Pure functions on strings and arrays; the component class in
:mod:`privclust_plugins.constraints` validates parameters and talks to the
host.

Grammar (``parse_rule``), whitespace ignored::

    rule    := expr REL expr            REL is one of  =  <=  >=
    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*
    unary   := ("+" | "-") unary | atom
    atom    := NUMBER | NAME | "`" any text but "`" "`" | "(" expr ")"

A NUMBER is ``12``, ``1.5``, ``.5``, ``1e-3``; a NAME starts with a letter or
``_`` and continues with letters, digits, ``_`` and ``.`` (``FIXED.ASSETS``).
Every expression is kept as a linear form ``sum_j a_j x_j + const``; a
product of two forms that both name columns, or a division by one, is not
linear and is refused. The parser never evaluates text as code.

Projection (``project_polyhedron``): the Euclidean projection of each row
onto ``{z : E z = f, A z <= c}``. Equalities are eliminated in closed form
(``z = z0 + N w`` with ``N`` an orthonormal basis of the null space of ``E``,
which is ``z - E^T (E E^T)^+ (E z - f)``); the inequalities are then solved
exactly in ``w``-space either by enumerating candidate active sets (few
inequalities) or by a dual accelerated projected-gradient method whose
active sets are then solved exactly and verified against the KKT conditions
(many inequalities).
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "LinearForm",
    "ParsedRule",
    "RuleSyntaxError",
    "parse_rule",
    "project_polyhedron",
    "equality_problems",
    "infeasible_subset",
]


class RuleSyntaxError(ValueError):
    """A rule does not parse: ``position`` is the 0-based character index."""

    def __init__(self, rule: str, position: int, message: str):
        self.rule = rule
        self.position = position
        self.message = message
        super().__init__(format_syntax_error(rule, position, message))


def format_syntax_error(rule: str, position: int, message: str) -> str:
    """``message`` with the rule quoted and a caret under the character."""
    line = rule.replace("\n", " ").replace("\t", " ")
    shown, caret = rule, position
    if len(rule) > 80:  # a long rule is quoted around the fault
        lo = max(0, position - 30)
        shown = ("..." if lo else "") + rule[lo:lo + 60] + ("..." if lo + 60 < len(rule) else "")
        line = shown.replace("\n", " ").replace("\t", " ")
        caret = position - lo + (3 if lo else 0)
    return (f"edit rule {shown!r} does not parse at column {position + 1}: {message}\n"
            f"    {line}\n    {' ' * caret}^")


# ---------------------------------------------------------------------------
# Linear forms
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearForm:
    """``sum_j coefs[name_j] * name_j + const``, with exact rational
    coefficients: the parser collects terms without rounding, so a
    coefficient that cancels (``0.1*a + 0.2*a - 0.3*a``) is exactly 0 and
    the rule does not use that column (in doubles it would be 5.6e-17)."""

    coefs: tuple[tuple[str, Fraction], ...]
    const: Fraction

    @staticmethod
    def constant(value: Fraction | int | str) -> LinearForm:
        return LinearForm((), Fraction(value))

    @staticmethod
    def variable(name: str) -> LinearForm:
        return LinearForm(((name, Fraction(1)),), Fraction(0))

    @property
    def is_constant(self) -> bool:
        return not self.coefs

    def as_dict(self) -> dict[str, Fraction]:
        return dict(self.coefs)

    def _combine(self, other: LinearForm, sign: int) -> LinearForm:
        out = dict(self.coefs)
        for name, a in other.coefs:
            out[name] = out.get(name, Fraction(0)) + sign * a
        return LinearForm(tuple(out.items()), self.const + sign * other.const)

    def __add__(self, other: LinearForm) -> LinearForm:
        return self._combine(other, 1)

    def __sub__(self, other: LinearForm) -> LinearForm:
        return self._combine(other, -1)

    def scaled(self, factor: Fraction) -> LinearForm:
        return LinearForm(tuple((n, a * factor) for n, a in self.coefs), self.const * factor)


@dataclass(frozen=True)
class ParsedRule:
    """A rule in the normal form ``sum_j coefs[j] x_j (= or <=) rhs``.

    ``>=`` rules are stored negated as ``<=``. ``names`` are every column the
    text mentions (even one whose coefficient cancels); ``variables`` are
    those with a non-zero coefficient. Terms are collected exactly (decimal
    numbers as fractions) before the coefficients become doubles, so a
    column whose coefficients sum to exactly 0 is not among ``coefs``.
    """

    text: str
    kind: str  # "eq" or "le"
    coefs: tuple[tuple[str, float], ...]
    rhs: float
    names: tuple[str, ...]
    #: ``coefs`` and ``rhs`` exactly, as the decimals of the text give them
    #: (``0.1`` is 1/10), for the integer checks of
    #: :mod:`privclust_plugins._rounding`.
    exact_coefs: tuple[tuple[str, Fraction], ...]
    exact_rhs: Fraction

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(n for n, a in self.coefs if a != 0.0)

    def row(self, columns: dict[str, int], d: int) -> np.ndarray:
        out = np.zeros(d)
        for name, a in self.coefs:
            out[columns[name]] += a
        return out

    def exact_row(self, columns: dict[str, int], d: int) -> tuple[tuple[Fraction, ...], Fraction]:
        """:meth:`row` and the right-hand side as exact fractions."""
        out = [Fraction(0)] * d
        for name, a in self.exact_coefs:
            out[columns[name]] += a
        return tuple(out), self.exact_rhs


# ---------------------------------------------------------------------------
# Tokenizer and parser
# ---------------------------------------------------------------------------

#: The longest rule text accepted, in characters.
MAX_RULE_LENGTH = 10_000
#: The deepest nesting of parentheses and signs in a rule (``-(-(x))`` is 4).
MAX_NESTING = 64

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_RELATIONS = ("<=", ">=", "==", "=")
_SINGLE = "+-*/()"


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "name", "op", "rel", "end"
    value: object
    pos: int


#: Exact products and quotients of numbers stop here (far beyond any double,
#: so no double coefficient is refused; the exact values stay small).
_BOUND_HIGH = Fraction(10) ** 400
_BOUND_LOW = 1 / _BOUND_HIGH


def _exact_number(rule: str, pos: int, text: str) -> Fraction:
    """A number literal exactly (``0.1`` is 1/10, not the nearest double),
    refused when no double is near it (checked before the exact value is
    built, so ``1e999999999`` costs nothing)."""
    approx = float(text)
    if not math.isfinite(approx):
        raise RuleSyntaxError(rule, pos, f"the number {text!r} is too large (beyond the range of a double, about "
                                         "1.8e308); divide both sides of the rule by a power of ten")
    if approx == 0.0 and any(ch in "123456789" for ch in text.split("e")[0].split("E")[0]):
        raise RuleSyntaxError(rule, pos, f"the number {text!r} is too small (below the range of a double); "
                                         "multiply both sides of the rule by a power of ten")
    return Fraction(text)


def _tokenize(rule: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(rule)
    while i < n:
        ch = rule[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "`":
            end = rule.find("`", i + 1)
            if end < 0:
                raise RuleSyntaxError(rule, i, "a quoted name opened with ` is never closed; add the closing `")
            name = rule[i + 1:end]
            if not name.strip():
                raise RuleSyntaxError(rule, i, "an empty quoted name ``; write the column name between the quotes")
            tokens.append(_Token("name", name, i))
            i = end + 1
            continue
        m = _NUMBER.match(rule, i)
        if m and (ch.isdigit() or ch == "."):
            end = m.end()
            if end < n and (rule[end].isalpha() or rule[end] == "_"):
                raise RuleSyntaxError(rule, end, f"a number runs into a name ({rule[i:end + 1]!r}); write "
                                                 "a '*' between a coefficient and a column, e.g. 2*x")
            tokens.append(_Token("num", _exact_number(rule, i, m.group()), i))
            i = end
            continue
        m = _NAME.match(rule, i)
        if m:
            tokens.append(_Token("name", m.group(), i))
            i = m.end()
            continue
        if rule.startswith(("=<", "=>"), i):
            right = "<=" if rule[i + 1] == "<" else ">="
            raise RuleSyntaxError(rule, i, f"{rule[i:i + 2]!r} is not an operator; write {right!r} (the '=' "
                                           "comes second)")
        rel = next((r for r in _RELATIONS if rule.startswith(r, i)), None)
        if rel is not None:
            tokens.append(_Token("rel", "=" if rel == "==" else rel, i))
            i += len(rel)
            continue
        if ch in "<>":
            raise RuleSyntaxError(rule, i, f"strict inequality {ch!r} is not supported; use {ch + '='!r}")
        if ch in _SINGLE:
            tokens.append(_Token("op", ch, i))
            i += 1
            continue
        if ch == "!":
            raise RuleSyntaxError(rule, i, "'!=' is not a linear edit rule; use =, <= or >=")
        raise RuleSyntaxError(rule, i, f"unexpected character {ch!r}; a rule uses numbers, column names "
                                       "(quote other names as `my column`), + - * / ( ) and one of = <= >=")
    tokens.append(_Token("end", None, n))
    return tokens


class _Parser:
    def __init__(self, rule: str):
        self.rule = rule
        self.tokens = _tokenize(rule)
        self.i = 0
        self.depth = 0
        self.names: list[str] = []

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"nested more than {MAX_NESTING} levels deep (parentheses and signs); write the rule "
                            "without the redundant nesting")

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def fail(self, message: str, pos: int | None = None) -> RuleSyntaxError:
        return RuleSyntaxError(self.rule, self.tok.pos if pos is None else pos, message)

    def parse(self) -> ParsedRule:
        if self.tok.kind == "end":
            raise self.fail("the rule is empty; write e.g. \"total = a + b\"")
        lhs = self.expr()
        if self.tok.kind != "rel":
            if self.tok.kind == "end":
                raise self.fail("no relation; a rule needs one of =, <= or >= between two sides")
            raise self.fail(f"unexpected {self._show()}; expected an operator (+ - * /) or a relation (= <= >=)")
        rel_tok = self.tok
        self.i += 1
        if self.tok.kind == "end":
            raise self.fail(f"nothing after {rel_tok.value!r}; the right-hand side is missing")
        rhs = self.expr()
        if self.tok.kind == "rel":
            raise self.fail("a second relation; a rule has exactly one of =, <= or >= (split chains into two rules)")
        if self.tok.kind != "end":
            raise self.fail(f"unexpected {self._show()}; expected an operator (+ - * /) or the end of the rule")
        form = lhs - rhs if rel_tok.value != ">=" else rhs - lhs
        exact = [(n, a) for n, a in form.coefs if a != 0]  # exactly 0 after collecting terms: not used
        try:
            coefs = tuple((n, float(a)) for n, a in exact)
            const = float(form.const)
        except OverflowError:
            raise RuleSyntaxError(self.rule, 0, "a coefficient or the constant is beyond the range of a double "
                                                "(about 1.8e308); divide both sides of the rule by a power of "
                                                "ten") from None
        if not all(math.isfinite(a) for _, a in coefs):
            raise RuleSyntaxError(self.rule, 0, "a coefficient is beyond the range of a double (about 1.8e308); "
                                                "divide both sides of the rule by a power of ten")
        if not coefs:
            raise RuleSyntaxError(self.rule, 0, "the rule names no column (or its columns cancel out); "
                                                "an edit rule must constrain at least one column")
        tiny = [(n, a) for n, a in exact if abs(a) < sys.float_info.min]
        if tiny or 0 < abs(form.const) < sys.float_info.min:
            what = (f"the coefficient {float(tiny[0][1]):g} of {tiny[0][0]!r}" if tiny
                    else f"the constant {float(-form.const):g}")
            raise RuleSyntaxError(self.rule, 0, f"{what} is below the smallest normal double "
                                                f"({sys.float_info.min:.3g}), where arithmetic on it loses its "
                                                "precision; multiply both sides of the rule by a power of ten")
        kind = "eq" if rel_tok.value == "=" else "le"
        return ParsedRule(self.rule, kind, coefs, -const, tuple(dict.fromkeys(self.names)), tuple(exact),
                          -form.const)

    def _show(self) -> str:
        t = self.tok
        if t.kind == "num":
            return f"number {self.rule[t.pos:].split()[0]!r}"
        if t.kind == "name":
            return f"name {t.value!r}"
        if t.kind == "end":
            return "end of rule"
        return repr(t.value)

    def expr(self) -> LinearForm:
        out = self.term()
        while self.tok.kind == "op" and self.tok.value in ("+", "-"):
            op = self.tok.value
            self.i += 1
            right = self.term()
            out = out + right if op == "+" else out - right
        return out

    def term(self) -> LinearForm:
        out = self.unary()
        while self.tok.kind == "op" and self.tok.value in ("*", "/"):
            op_tok = self.tok
            self.i += 1
            start = self.tok.pos
            right = self.unary()
            if op_tok.value == "*":
                if out.is_constant:
                    out = right.scaled(out.const)
                elif right.is_constant:
                    out = out.scaled(right.const)
                else:
                    raise RuleSyntaxError(self.rule, op_tok.pos, "not linear: a product of two expressions that "
                                          "both name columns; an edit rule may multiply a column by numbers only")
            else:
                if not right.is_constant:
                    raise RuleSyntaxError(self.rule, op_tok.pos, "not linear: division by an expression that "
                                          "names a column; divide by numbers only")
                if right.const == 0:
                    raise RuleSyntaxError(self.rule, start, "division by zero")
                out = out.scaled(1 / right.const)
            if any(a and not _BOUND_LOW < abs(a) < _BOUND_HIGH for a in (out.const, *dict(out.coefs).values())):
                raise RuleSyntaxError(self.rule, op_tok.pos, "a coefficient or constant overflows (this product or "
                                      "quotient of numbers is beyond the range of floating-point numbers); rescale "
                                      "the rule, e.g. write the coefficient as one number")
        return out

    def unary(self) -> LinearForm:
        if self.tok.kind == "op" and self.tok.value in ("+", "-"):
            sign = Fraction(-1 if self.tok.value == "-" else 1)
            self.i += 1
            self._enter()
            out = self.unary().scaled(sign)
            self.depth -= 1
            return out
        return self.atom()

    def atom(self) -> LinearForm:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            return LinearForm.constant(t.value)  # type: ignore[arg-type]
        if t.kind == "name":
            self.i += 1
            self.names.append(t.value)  # type: ignore[arg-type]
            return LinearForm.variable(t.value)  # type: ignore[arg-type]
        if t.kind == "op" and t.value == "(":
            self.i += 1
            self._enter()
            inner = self.expr()
            self.depth -= 1
            if not (self.tok.kind == "op" and self.tok.value == ")"):
                raise self.fail(f"expected ')' to close the '(' at column {t.pos + 1}; got {self._show()}")
            self.i += 1
            return inner
        if t.kind == "end":
            raise self.fail("the rule ends where a number, a column name or '(' was expected")
        raise self.fail(f"unexpected {self._show()}; expected a number, a column name or '('")


def parse_rule(rule: str) -> ParsedRule:
    """Parse one edit rule (see the module docstring for the grammar).

    :raises RuleSyntaxError: with the 0-based position of the offending
        character; also for a rule longer than :data:`MAX_RULE_LENGTH`
        characters or nested deeper than :data:`MAX_NESTING`.
    """
    if len(rule) > MAX_RULE_LENGTH:
        raise RuleSyntaxError(rule, 0, f"the rule is {len(rule):,} characters long, more than the limit "
                              f"of {MAX_RULE_LENGTH:,}; split it or shorten the column names")
    return _Parser(rule).parse()


# ---------------------------------------------------------------------------
# Consistency checks (no data needed)
# ---------------------------------------------------------------------------


def _rank_tol(matrix: np.ndarray) -> float:
    if matrix.size == 0:
        return 0.0
    s = np.linalg.svd(matrix, compute_uv=False)
    return float(max(matrix.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0) * 10)


def equality_problems(E: np.ndarray, f: np.ndarray) -> list[tuple[str, int, list[int]]]:
    """Redundant and contradictory equalities.

    Adds the rows one by one; a row in the span of the earlier ones is
    ``("redundant", i, deps)`` when its right-hand side agrees with the same
    combination of theirs, else ``("contradictory", i, deps)``. ``deps`` are
    the earlier rows the combination uses. The test runs on the rows and
    columns scaled to magnitudes near 1 (:func:`_equilibrated`), so a badly
    scaled rule (``a = 1e16*b + 1`` beside ``b = 0``) is not taken for a
    multiple of another.
    """
    out: list[tuple[str, int, list[int]]] = []
    kept: list[int] = []
    if E.size:
        E, rows, _ = _equilibrated(np.asarray(E, dtype=float))
        f = np.asarray(f, dtype=float) * rows
    for i in range(E.shape[0]):
        if kept:
            B = E[kept]
            coef, *_ = np.linalg.lstsq(B.T, E[i], rcond=None)
            resid = E[i] - coef @ B
            scale = max(1.0, float(np.abs(E[i]).max()))
            if np.linalg.norm(resid) <= 1e-9 * scale * math.sqrt(E.shape[1]):
                deps = [kept[j] for j in np.flatnonzero(np.abs(coef) > 1e-12)]
                if not deps:  # not a combination of any earlier rule after all
                    kept.append(i)
                    continue
                gap = f[i] - coef @ f[kept]
                rhs_scale = 1.0 + abs(f[i]) + float(np.abs(coef) @ np.abs(f[kept]))
                out.append(("redundant" if abs(gap) <= 1e-9 * rhs_scale else "contradictory", i, deps))
                continue
        kept.append(i)
    return out


def _pow2(x: np.ndarray) -> np.ndarray:
    """The power of two nearest ``x`` (1 where ``x`` is 0): scaling by it is exact."""
    return np.where(x > 0, np.exp2(np.round(np.log2(np.where(x > 0, x, 1.0)))), 1.0)


def _equilibrated(M: np.ndarray, sweeps: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row and column scalings (powers of two) of ``M``: geometric sweeps
    (each row, then each column, divided by the geometric mean of its
    smallest and largest non-zero magnitude), then each row divided by its
    largest magnitude. Returns ``(scaled M, row factors, column factors)``."""
    S = M.astype(float, copy=True)
    rows, cols = np.ones(M.shape[0]), np.ones(M.shape[1])
    if not S.size:
        return S, rows, cols
    nonzero = S != 0

    def spread(axis: int) -> np.ndarray:
        mag = np.abs(S)
        big = mag.max(axis=axis)
        small = np.where(nonzero, mag, np.inf).min(axis=axis)
        return _pow2(np.sqrt(big) * np.sqrt(np.where(np.isfinite(small), small, big)))

    for _ in range(sweeps):
        r = 1.0 / spread(1)
        S *= r[:, None]
        s = 1.0 / spread(0)
        S *= s[None, :]
        rows, cols = rows * r, cols * s
        if np.all(r == 1.0) and np.all(s == 1.0):
            break
    r = 1.0 / _pow2(np.abs(S).max(axis=1))
    return S * r[:, None], rows * r, cols


def _lp_infeasible(E: np.ndarray, A: np.ndarray, bounds: list[tuple[float | None, float | None]],
                   method: str) -> bool:
    """Whether HiGHS (``method``) proves ``{E w = 0, A w <= 0}`` within
    ``bounds`` empty (status 2); any other outcome (a point, numerical
    trouble, an iteration limit) is no proof."""
    from scipy.optimize import linprog

    d = len(bounds)
    res = linprog(np.zeros(d), A_ub=A if A.size else None, b_ub=np.zeros(A.shape[0]) if A.size else None,
                  A_eq=E if E.size else None, b_eq=np.zeros(E.shape[0]) if E.size else None, bounds=bounds,
                  method=method)
    return res.status == 2


def _feasible(E: np.ndarray, f: np.ndarray, A: np.ndarray, c: np.ndarray) -> bool:
    """Whether some point satisfies ``E z = f, A z <= c``.

    The check solves the homogenised system ``A z - c t <= 0, E z - f t = 0,
    t >= 1`` (the same set, divided by ``t``) after scaling its rows and
    columns, the right-hand sides a column like the others, to magnitudes
    near 1 (:func:`_equilibrated`): scipy's HiGHS works with absolute
    tolerances and reads an absolute value of 1e20 or more as infinite, so
    unscaled it refuses ``a <= 1e16*b`` although ``a = b = 0`` satisfies it.
    The set is called empty only when HiGHS's dual simplex proves it on the
    scaled system and its interior-point method confirms it.
    """
    d = E.shape[1] if E.size else A.shape[1]
    E, A = E.reshape(-1, d), A.reshape(-1, d)
    k = A.shape[0]
    S, _, _ = _equilibrated(np.vstack([np.hstack([A, -np.asarray(c, float)[:, None]]),
                                       np.hstack([E, -np.asarray(f, float)[:, None]])]))
    # t = (its column factor) * t', and the set is a cone: t' >= 1 is as good as t = 1
    bounds: list[tuple[float | None, float | None]] = [(None, None)] * d + [(1.0, None)]
    return not (_lp_infeasible(S[k:], S[:k], bounds, "highs-ds") and _lp_infeasible(S[k:], S[:k], bounds, "highs-ipm"))


def infeasible_subset(E: np.ndarray, f: np.ndarray, A: np.ndarray, c: np.ndarray) -> tuple[list[int], list[int]] | None:
    """``None`` when ``{E z = f, A z <= c}`` is non-empty (scipy's HiGHS LP),
    else an irreducible infeasible subset ``(equality rows, inequality rows)``
    found by the deletion filter (Chinneck & Dravnieks 1991)."""
    if _feasible(E, f, A, c):
        return None
    eq = list(range(E.shape[0]))
    le = list(range(A.shape[0]))
    for which in ("le", "eq"):
        for i in list(eq if which == "eq" else le):
            trial_eq = [j for j in eq if not (which == "eq" and j == i)]
            trial_le = [j for j in le if not (which == "le" and j == i)]
            if not _feasible(E[trial_eq], f[trial_eq], A[trial_le], c[trial_le]):
                eq, le = trial_eq, trial_le
    return eq, le


# ---------------------------------------------------------------------------
# Projection
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectionStats:
    """How the last projection went (for tests and diagnostics)."""

    method: str
    iterations: int
    max_violation: float


def _affine_frame(E: np.ndarray, f: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(z0, N)``: the minimum-norm solution of ``E z = f`` and an
    orthonormal basis of the null space of ``E`` (``d x r``)."""
    if E.shape[0] == 0:
        return np.zeros(d), np.eye(d)
    U, s, Vt = np.linalg.svd(E, full_matrices=True)
    tol = max(E.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0) * 10
    rank = int((s > tol).sum())
    z0 = Vt[:rank].T @ ((U[:, :rank].T @ f) / s[:rank])
    return z0, Vt[rank:].T.copy()


def _active_set_solution(W: np.ndarray, A: np.ndarray, c: np.ndarray, S: tuple[int, ...]
                         ) -> tuple[np.ndarray, np.ndarray] | None:
    """Projection of the rows of ``W`` onto ``{A_S w = c_S}`` and the
    multipliers ``(A_S A_S^T)^{-1} (A_S w - c_S)``; ``None`` when ``A_S`` has
    dependent rows. Computed from one SVD of ``A_S`` (not from the inverse
    Gram matrix), so nearly parallel rows lose no accuracy in the point."""
    if not S:
        return W.copy(), np.zeros((W.shape[0], 0))
    AS = A[list(S)]
    try:
        U, sig, Vt = np.linalg.svd(AS, full_matrices=False)
    except np.linalg.LinAlgError:
        return None
    if sig.size < len(S) or sig[-1] <= sig[0] * 1e-13:
        return None
    resid = W @ AS.T - c[list(S)]  # (n, |S|)
    coef = resid @ U  # (n, |S|)
    step = (coef / sig) @ Vt
    lam = (coef / sig**2) @ U.T
    return W - step, lam


def _kkt_ok(Wp: np.ndarray, lam: np.ndarray, A: np.ndarray, c: np.ndarray, tol: np.ndarray,
            S: tuple[int, ...]) -> np.ndarray:
    """Per row, whether ``Wp`` satisfies every inequality within ``tol``
    (``(n, m)``, per row and inequality) and the multipliers of the active
    set ``S`` are non-negative within the same tolerance."""
    feas = np.all(Wp @ A.T - c <= tol, axis=1)
    if lam.shape[1]:
        feas &= np.all(lam >= -tol[:, list(S)], axis=1)
    return feas


def _solve_enumerate(W: np.ndarray, A: np.ndarray, c: np.ndarray, tol: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact: try candidate active sets by increasing size; the first that
    satisfies the KKT conditions for a row is its projection (unique)."""
    m, r = A.shape
    out = np.empty_like(W)
    todo = np.arange(W.shape[0])
    tried = 0
    for size in range(0, min(m, r) + 1):
        for S in itertools.combinations(range(m), size):
            if todo.size == 0:
                return out, tried
            sol = _active_set_solution(W[todo], A, c, S)
            tried += 1
            if sol is None:
                continue
            Wp, lam = sol
            ok = _kkt_ok(Wp, lam, A, c, tol[todo], S)
            out[todo[ok]] = Wp[ok]
            todo = todo[~ok]
    if todo.size:
        # only rounding can leave a row here (every feasible row has a KKT set); the dual method with its
        # verified polish settles it
        out[todo], it, _ = _solve_dual(W[todo], A, c, tol[todo] * 10.0, 10_000)
        tried += it
    return out, tried


def _solve_dual(W: np.ndarray, A: np.ndarray, c: np.ndarray, tol: np.ndarray, max_iter: int
                ) -> tuple[np.ndarray, int, int]:
    """Dual accelerated projected gradient (FISTA) on
    ``min_{lam >= 0} 1/2 ||A^T lam||^2 - lam^T (A w - c)`` for all rows at once;
    every 25 iterations the rows' active sets ``{lam > 0}`` are solved
    exactly and rows passing the KKT check are final. Returns the solution,
    the iterations used and the rows that never passed (left at the dual
    iterate's primal point, which is within ``tol`` of feasible by then or
    the caller is told)."""
    n = W.shape[0]
    m = A.shape[0]
    Q = A @ A.T
    L = float(np.linalg.eigvalsh(Q)[-1]) if m else 1.0
    step = 1.0 / L
    g0 = W @ A.T - c  # (n, m): A w_bar - c
    lam = np.maximum(0.0, g0) / np.maximum(np.diag(Q), 1e-300)
    y = lam.copy()
    t = 1.0
    out = np.empty_like(W)
    todo = np.arange(n)
    it = 0
    while todo.size and it < max_iter:
        for _ in range(25):
            grad = g0 - y @ Q
            new = np.maximum(0.0, y + step * grad)
            t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            y = new + ((t - 1.0) / t_new) * (new - lam)
            lam, t = new, t_new
            it += 1
        # polish: exact solve on each distinct active pattern
        active = lam > 0
        patterns, inverse = np.unique(active, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        done = np.zeros(todo.size, dtype=bool)
        for p, pattern in enumerate(patterns):
            rows = np.flatnonzero(inverse == p)
            S = tuple(np.flatnonzero(pattern).tolist())
            sol = _active_set_solution(W[todo[rows]], A, c, S)
            if sol is None:
                continue
            Wp, lm = sol
            ok = _kkt_ok(Wp, lm, A, c, tol[todo[rows]], S)
            out[todo[rows[ok]]] = Wp[ok]
            done[rows[ok]] = True
        keep = ~done
        todo, g0, lam, y = todo[keep], g0[keep], lam[keep], y[keep]
    if todo.size:
        out[todo] = W[todo] - lam @ A
    return out, it, int(todo.size)


def project_polyhedron(Z: np.ndarray, E: np.ndarray, f: np.ndarray, A: np.ndarray, c: np.ndarray, *,
                       rtol: float = 1e-13, max_iter: int = 10_000, max_active_sets: int = 256
                       ) -> tuple[np.ndarray, ProjectionStats]:
    """Euclidean projection of every row of ``Z`` onto ``{E z = f, A z <= c}``.

    :param Z: ``(n, d)`` points (not modified).
    :param E, f: ``(p, d)`` and ``(p,)`` equalities (``p`` may be 0).
    :param A, c: ``(q, d)`` and ``(q,)`` inequalities (``q`` may be 0).
    :param rtol: feasibility and multiplier tolerance of each inequality,
        relative to the size of its terms at the row,
        ``sum_j |a_j z_j| + |c|`` (a small multiple of the double-precision
        error of evaluating it).
    :param max_iter: iteration cap of the dual method.
    :param max_active_sets: enumerate active sets exactly when there are at
        most this many candidates; otherwise use the dual method.
    """
    n, d = Z.shape
    z0, N = _affine_frame(E, f, d)
    W = (Z - z0) @ N  # coordinates in the affine subspace
    if A.shape[0] == 0 or W.shape[1] == 0:
        out = z0 + W @ N.T
        return out, ProjectionStats("closed form", 0, 0.0)
    Aw = A @ N
    cw = c - A @ z0
    row_norm = np.linalg.norm(Aw, axis=1)
    flat = row_norm <= 1e-12 * max(1.0, float(np.abs(A).max()))
    if flat.any():  # inequalities constant on the subspace: feasibility was checked by the caller
        Aw, cw = Aw[~flat], cw[~flat]
    Aw = Aw / row_norm[~flat, None]
    cw = cw / row_norm[~flat]
    # per row and inequality, rtol times the size of the rule's own terms at the row, sum_j |a_j z_j| + |c| (with
    # the equalities' point z0 counted in; in the units of the normalised rule), the scale of the floating-point
    # error of evaluating it. Not rtol * (1 + max |z|): that accepted a break of 50 at values near 1e12 as
    # "already feasible" (a red-team audit)
    tol = rtol * ((np.abs(Z) + np.abs(z0)) @ np.abs(A[~flat]).T + np.abs(c[~flat])) / row_norm[~flat]
    q, r = Aw.shape
    candidates = sum(math.comb(q, s) for s in range(0, min(q, r) + 1))
    if q == 0:
        Wp, stats = W, ProjectionStats("closed form", 0, 0.0)
    elif candidates <= max_active_sets:
        Wp, tried = _solve_enumerate(W, Aw, cw, tol)
        stats = ProjectionStats("active-set enumeration", tried, 0.0)
    else:
        Wp, it, left = _solve_dual(W, Aw, cw, tol, max_iter)
        stats = ProjectionStats("dual FISTA + verified active-set polish" + (f" ({left} rows unverified)"
                                                                                if left else ""), it, 0.0)
    out = z0 + Wp @ N.T
    viol = 0.0
    if A.shape[0]:
        viol = max(viol, float(np.max(out @ A.T - c, initial=0.0)))
    if E.shape[0]:
        viol = max(viol, float(np.max(np.abs(out @ E.T - f), initial=0.0)))
    return out, ProjectionStats(stats.method, stats.iterations, viol)
