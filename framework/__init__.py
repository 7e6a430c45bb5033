"""privclust: protect a data set before release, with honest privacy accounting.

The public API. Everything else is private and may change.

>>> import privclust
>>> release = privclust.run("recipe.toml", frame, seed=1)   # doctest: +SKIP
>>> release.data, release.ledger, release.evaluations       # doctest: +SKIP
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# the submodules privclust.datasets, privclust.plots and privclust.sampling, reachable as attributes
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
from .constraints import ConstraintSet
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


def _version() -> str:
    try:
        return version("privclust")
    except PackageNotFoundError:  # a source tree that was not installed
        return "0+unknown"


#: The installed version of privclust (``0+unknown`` in a source tree that was not installed).
__version__ = _version()

__all__ = [
    "CAPABILITIES",
    "EFFECTIVE_PARAMS",
    "EFFECTIVE_PARAMS_FROM_DATA",
    "KINDS",
    "KNOWN_LEAKS",
    "NAME",
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
