"""privclust: protect a data set before release, with honest privacy accounting.

The public API. Everything else is private and may change.

>>> import privclust
>>> release = privclust.run("recipe.toml", frame, seed=1)   # doctest: +SKIP
>>> release.data, release.ledger, release.evaluations       # doctest: +SKIP
"""

from __future__ import annotations

# First of all, and only in the privclust command (the console script, python -m privclust or -m privclust.cli):
# importing the command's modules takes about a second, and a stop signal then ended the process by the signal or
# with a traceback. The handlers come before any other import: _signal is the interpreter's builtin module, loaded
# before any Python code runs (signal wraps it in enums: importing it took a few milliseconds, a window in which a
# Ctrl-C still gave a traceback), and os and sys are loaded when the interpreter starts.
import sys as _sys

_signal = _sys.modules.get("_signal") or __import__("signal")
import os as _os

#: The stop signals' names, by number.
_STOP_NAMES = {getattr(_signal, _name): _name for _name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(_signal, _name)}


def _stop_while_starting(signum: int, frame: object) -> None:
    """The ``privclust`` command stopped by a signal while its modules are
    imported, before it has begun: 128 + the signal's number, no traceback
    (``privclust.cli.entry`` installs the handlers of the command itself)."""
    _os.write(2, f"privclust: interrupted by {_STOP_NAMES.get(signum, signum)}; nothing was written\n".encode())
    _os._exit(128 + signum)


_argv = getattr(_sys, "orig_argv", None) or _sys.argv
if (_os.path.basename(_sys.argv[0] if _sys.argv else "") in ("privclust", "privclust.exe")
        or any(a == "-m" and b in ("privclust", "privclust.cli") for a, b in zip(_argv, _argv[1:], strict=False))):
    for _number in _STOP_NAMES:
        try:
            if _signal.getsignal(_number) is not _signal.SIG_IGN:  # nohup's SIGHUP stays ignored
                _signal.signal(_number, _stop_while_starting)
        except (OSError, ValueError):  # not the main thread
            pass

from importlib import import_module as _import_module
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec as _find_spec
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING

# The public names are imported when first used (PEP 562), so that ``import privclust`` and the command's
# ``--version`` and ``--help`` import no pandas, numpy or scipy. The imports below are for type checkers and the
# API documentation only; _LAZY says where each name lives (tests/test_startup.py checks that they agree).
if TYPE_CHECKING:  # pragma: no cover
    from . import datasets as datasets
    from . import plots as plots
    from . import sampling as sampling
    from .accounting import (
        Accountant,
        BasicAccountant,
        ContextView,
        Ledger,
        LedgerEntry,
        NothingProtectedWarning,
        PrivacyContext,
        PrivacyLeakWarning,
        RecordProgress,
        Stash,
        StashKey,
        ThrottledProgress,
        at_least,
        at_most,
    )
    from .claims import DifferentialPrivacy, Guarantee, KAnonymity, ProbabilisticKAnonymity, Relation
    from .compare import compare, summarize
    from .components import (
        CAPABILITIES,
        KINDS,
        BoundConstraints,
        Capability,
        Clusterer,
        ConstraintHandler,
        EvaluationInputs,
        Evaluator,
        FuzzyClusterer,
        Masked,
        Masker,
        NoiseMechanism,
        Partition,
        Sensitivity,
        TopMemberships,
        capability,
        component_params,
        data_matrix,
        is_real_column,
        stated_params,
    )
    from .constraints import RULE_RTOL, ConstraintSet, RuleStatus, integer_flags, integer_rule_tolerance, judge
    from .errors import (
        BudgetExceededError,
        ConstraintError,
        DataError,
        DatasetUnavailableError,
        DuplicateComponentError,
        ParameterError,
        PluginError,
        PrivclustError,
        PrivclustWarning,
        Problem,
        RecipeError,
        UnknownComponentError,
    )
    from .hookspecs import NAME, hookimpl
    from .params import (
        DataLeak,
        column_bounds,
        declared_leaks,
        nested,
        param,
        public_bounds,
    )
    from .private_count import NOISY_RECORDS
    from .recipe import (
        KNOWN_LEAKS,
        Budget,
        ComponentSpec,
        EvaluateSpec,
        Recipe,
        Roles,
        Step,
    )
    from .registry import (
        ComponentInfo,
        PluginInfo,
        Registry,
        get_registry,
        known_leak_names,
        register,
        reset_registry,
    )
    from .report import EFFECTIVE_PARAMS, EFFECTIVE_PARAMS_FROM_DATA, Release
    from .runner import CompiledRecipe, StepOutcome, compile, numeric_columns, run
    from .strata import DatasetRelease, run_dataset

#: The submodules reachable as attributes (``privclust.datasets``...).
_SUBMODULES = ("datasets", "plots", "sampling")

#: Each public name, by the module that defines it.
_LAZY: dict[str, str] = {name: module for module, names in {
    "accounting": (
        "Accountant BasicAccountant ContextView Ledger LedgerEntry NothingProtectedWarning PrivacyContext "
        "PrivacyLeakWarning RecordProgress Stash StashKey ThrottledProgress at_least at_most"
    ),
    "claims": "DifferentialPrivacy Guarantee KAnonymity ProbabilisticKAnonymity Relation",
    "compare": "compare summarize",
    "components": (
        "CAPABILITIES KINDS BoundConstraints Capability Clusterer ConstraintHandler EvaluationInputs "
        "Evaluator FuzzyClusterer Masked Masker NoiseMechanism Partition Sensitivity TopMemberships "
        "capability component_params data_matrix is_real_column stated_params"
    ),
    "constraints": "RULE_RTOL ConstraintSet RuleStatus integer_flags integer_rule_tolerance judge",
    "errors": (
        "BudgetExceededError ConstraintError DataError DatasetUnavailableError DuplicateComponentError "
        "ParameterError PluginError PrivclustError PrivclustWarning Problem RecipeError UnknownComponentError"
    ),
    "hookspecs": "NAME hookimpl",
    "params": "DataLeak column_bounds declared_leaks nested param public_bounds",
    "recipe": "KNOWN_LEAKS Budget ComponentSpec EvaluateSpec Recipe Roles Step",
    "registry": "ComponentInfo PluginInfo Registry get_registry known_leak_names register reset_registry",
    "private_count": "NOISY_RECORDS",
    "report": "EFFECTIVE_PARAMS EFFECTIVE_PARAMS_FROM_DATA Release",
    "runner": "CompiledRecipe StepOutcome compile numeric_columns run",
    "strata": "DatasetRelease run_dataset",
}.items() for name in names.split()}


def __getattr__(name: str) -> object:
    """A public name or a submodule, imported on first use and then kept."""
    if name in _LAZY:
        value: object = getattr(_import_module(f"{__name__}.{_LAZY[name]}"), name)
    elif name in _SUBMODULES or (not name.startswith("__") and _find_spec(f"{__name__}.{name}") is not None):
        # a submodule, as an attribute (privclust.registry...), as when every module was imported with privclust
        value = _import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


class _Package(_ModuleType):
    """``privclust`` itself. Importing a submodule binds it as an attribute of
    its package, which would hide a public name it shares (``privclust.compare``
    is the function of ``privclust/compare.py``, imported when first used): the
    name keeps its public meaning."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, _ModuleType) and _LAZY.get(name) == name:
            return  # the submodule stays in sys.modules; the attribute is the public name
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def _version() -> str:
    try:
        return version("privclust")
    except PackageNotFoundError:  # a source tree that was not installed
        return "0+unknown"


#: The installed version of privclust (``0+unknown`` in a source tree that was not installed).
__version__ = _version()

__all__ = [
    "DifferentialPrivacy",
    "Guarantee",
    "KAnonymity",
    "ProbabilisticKAnonymity",
    "Relation",
    "CAPABILITIES",
    "EFFECTIVE_PARAMS",
    "EFFECTIVE_PARAMS_FROM_DATA",
    "KINDS",
    "KNOWN_LEAKS",
    "NAME",
    "NOISY_RECORDS",
    "Accountant",
    "BasicAccountant",
    "BoundConstraints",
    "Budget",
    "DatasetRelease",
    "Roles",
    "BudgetExceededError",
    "Capability",
    "Clusterer",
    "CompiledRecipe",
    "ComponentInfo",
    "ComponentSpec",
    "ConstraintError",
    "ConstraintHandler",
    "ConstraintSet",
    "RULE_RTOL",
    "RuleStatus",
    "integer_flags",
    "integer_rule_tolerance",
    "judge",
    "ContextView",
    "DataError",
    "DataLeak",
    "DatasetUnavailableError",
    "DuplicateComponentError",
    "EvaluateSpec",
    "EvaluationInputs",
    "Evaluator",
    "FuzzyClusterer",
    "Ledger",
    "LedgerEntry",
    "Masked",
    "Masker",
    "NoiseMechanism",
    "NothingProtectedWarning",
    "ParameterError",
    "Partition",
    "PluginError",
    "PluginInfo",
    "PrivacyContext",
    "PrivacyLeakWarning",
    "PrivclustError",
    "PrivclustWarning",
    "Problem",
    "Recipe",
    "RecipeError",
    "RecordProgress",
    "Registry",
    "Release",
    "Sensitivity",
    "Stash",
    "StashKey",
    "Step",
    "StepOutcome",
    "ThrottledProgress",
    "TopMemberships",
    "UnknownComponentError",
    "__version__",
    "at_least",
    "at_most",
    "compare",
    "compile",
    "declared_leaks",
    "known_leak_names",
    "capability",
    "column_bounds",
    "component_params",
    "data_matrix",
    "is_real_column",
    "stated_params",
    "get_registry",
    "hookimpl",
    "nested",
    "numeric_columns",
    "param",
    "public_bounds",
    "register",
    "reset_registry",
    "run",
    "run_dataset",
    "summarize",
]
