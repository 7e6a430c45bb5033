"""The privclust error tree.

Every error a user can cause derives from :class:`PrivclustError`. The CLI
prints these as one line and exits non-zero; anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

__all__ = [
    "BudgetExceededError",
    "ConstraintError",
    "DataError",
    "DuplicateComponentError",
    "ParameterError",
    "PluginError",
    "PrivclustError",
    "PrivclustWarning",
    "Problem",
    "RecipeError",
    "UnknownComponentError",
    "DatasetUnavailableError",
]


class PrivclustError(Exception):
    """Base class of every error a user of privclust can cause."""


class PrivclustWarning(UserWarning):
    """Base class of privclust's warnings (e.g. a data-dependent parameter leaks)."""


class PluginError(PrivclustError):
    """A plugin could not be loaded or breaks the hook contract.

    The message names the plugin, its distribution, the hook and the expected
    signature, and says how to get rid of the plugin (uninstall or block it).
    """

    def __init__(self, message: str, *, plugin: str | None = None, distribution: str | None = None):
        super().__init__(message)
        self.plugin = plugin
        self.distribution = distribution


class UnknownComponentError(PrivclustError):
    """A recipe or call names a component no installed plugin provides."""

    def __init__(self, kind: str, name: str, known: Sequence[str], suggestions: Sequence[str]):
        self.kind = kind
        self.name = name
        self.known = tuple(known)
        self.suggestions = tuple(suggestions)
        if suggestions:
            hint = "did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
        elif known:
            hint = "known " + kind + ": " + ", ".join(sorted(known))
        else:
            hint = f"no {kind} are installed"
        super().__init__(f"unknown {kind[:-1] if kind.endswith('s') else kind} {name!r}: {hint}")


class DuplicateComponentError(PrivclustError):
    """Two plugins register a component of the same kind under the same name."""


class ParameterError(PrivclustError, ValueError):
    """A hyper-parameter has a wrong type or an out-of-range value.

    Raised by the attrs validators of components; the message names the
    parameter, what was expected and what was got.
    """


@attrs.define(unsafe_hash=True, repr=False)
class Problem:
    """One problem found in a recipe: where it is, what is wrong, how to fix it.

    Problems compare and hash by their three fields.
    """

    where: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.fix:
            text += f" ({self.fix})"
        return text

    def __repr__(self) -> str:
        return f"Problem({self.where!r}, {self.message!r}, {self.fix!r})"


class RecipeError(PrivclustError):
    """A recipe is malformed or does not fit the installed plugins or the data.

    All problems found are reported together; ``problems`` holds them.
    The message starts with ``recipe`` (``recipe <source>`` with a
    ``source``), or with ``head`` when no recipe is involved (the call that
    raised it, such as ``Registry.create('clusterers', 'fcm')``).
    """

    def __init__(self, problems: Iterable[Problem | str], *, source: str | None = None, head: str | None = None):
        self.problems: tuple[Problem, ...] = tuple(
            p if isinstance(p, Problem) else Problem("", str(p)) for p in problems
        )
        self.source = source
        if head is None:
            head = f"recipe {source}" if source else "recipe"
        if len(self.problems) == 1:
            message = f"{head}: {self.problems[0]}"
        else:
            lines = "; ".join(f"[{i + 1}] {p}" for i, p in enumerate(self.problems))
            message = f"{head} has {len(self.problems)} problems: {lines}"
        super().__init__(message)


class DataError(PrivclustError, ValueError):
    """The data do not fit the recipe: missing or non-numeric columns, NaN or
    infinite values, an empty frame, too few records."""


class ConstraintError(PrivclustError):
    """Edit rules that do not parse, name unknown columns, contradict each
    other or cannot be satisfied."""


class BudgetExceededError(PrivclustError):
    """A spend would take the run past its privacy budget.

    Raised before anything is recorded in the ledger and before any noise is
    drawn.
    """


class DatasetUnavailableError(PrivclustError):
    """A named data set is neither in the local folder nor downloadable."""
