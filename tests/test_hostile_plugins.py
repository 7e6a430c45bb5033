"""Plugins that write into what the host hands them (red-team audit): the host's checks and the released file must
not follow them."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.normal(50, 10, 30).round(3), "b": rng.normal(10, 2, 30).round(3)})


@attrs.frozen(kw_only=True)
class Rewrite:
    """An evaluator that writes the original values into the released frame it was given, and into the original."""

    name: ClassVar[str] = "rewrite"

    def evaluate(self, inputs):
        cols = list(inputs.columns)
        inputs.protected.loc[:, cols] = inputs.original[cols].to_numpy()
        inputs.original.loc[:, cols] = 0.0
        return {"rewrite": 0.0}


@attrs.frozen(kw_only=True)
class FakeK:
    """A masker that claims k = 5 and rounds to one decimal (every record unique)."""

    name: ClassVar[str] = "fake-k"

    def mask(self, data, context):
        context.record("k-anonymity with k = 5", claim=privclust.KAnonymity(5, list(data.columns)))
        return privclust.Masked(data=data.round(1))


@attrs.frozen(kw_only=True)
class InPlace:
    """A masker that adds 1 to the frame it was given, in place, and returns it."""

    name: ClassVar[str] = "in-place"

    def mask(self, data, context):
        data.loc[:, :] = data.to_numpy() + 1.0
        return privclust.Masked(data=data)


class Plugins:
    @privclust.hookimpl
    def privclust_register_evaluators(register):
        register(Rewrite)

    @privclust.hookimpl
    def privclust_register_maskers(register):
        register(FakeK)
        register(InPlace)


class ZeroingObserver:
    @privclust.hookimpl
    def privclust_step_finished(step, index, outcome, context):
        if hasattr(outcome.result, "data"):
            outcome.result.data.loc[:, :] = 0.0


def test_an_evaluator_cannot_rewrite_the_checked_release_or_the_callers_data():
    frame = _frame()
    before = frame.copy()
    registry = privclust.Registry(plugins=[Plugins])
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 5}], "evaluate": ["rewrite", "dbrl"]},
                            frame, seed=1, registry=registry)
    assert not release.data[["a", "b"]].equals(before)  # the release is the masker's, not the evaluator's copy
    assert frame.equals(before)
    alone = privclust.run({"steps": [{"use": "microaggregation", "k": 5}], "evaluate": ["dbrl"]}, frame, seed=1,
                          registry=registry)
    assert release.evaluation("dbrl") == alone.evaluation("dbrl")  # the evaluators after it see the release


def test_an_observer_cannot_turn_a_refuted_claim_into_a_verified_one():
    registry = privclust.Registry(plugins=[Plugins, ZeroingObserver])
    release = privclust.run({"steps": [{"use": "fake-k"}]}, _frame(), seed=1, registry=registry)
    claim = release.verification["claims"][0]
    assert claim["status"] == "refuted" and claim["records_in_small_groups"] == 30


def test_a_masker_that_changes_its_input_in_place_is_not_called_unchanged():
    registry = privclust.Registry(plugins=[Plugins])
    release = privclust.run({"steps": [{"use": "in-place"}]}, _frame(), seed=1, registry=registry)
    assert release.outcomes[0].unchanged == ()
    assert "unchanged" not in " ".join(e.statement for e in release.ledger if e.kind == "process" and
                                       "in-place" in (e.component or ""))


@attrs.frozen(kw_only=True)
class RewriteRelease:
    """An evaluator that writes only into the released frame it was given."""

    name: ClassVar[str] = "rewrite-release"

    def evaluate(self, inputs):
        inputs.protected.loc[:, list(inputs.columns)] = 0.0
        return {"rewrite": 0.0}


@attrs.frozen(kw_only=True)
class RandomGroups:
    """A masker whose grouping is drawn outside the run's context (numpy's global generator)."""

    name: ClassVar[str] = "random-groups"

    def mask(self, data, context):
        labels = np.random.permutation(len(data)) % 2
        centres = np.vstack([data.to_numpy()[labels == g].mean(axis=0) for g in (0, 1)])
        return privclust.Masked(data=pd.DataFrame(centres[labels], index=data.index, columns=data.columns),
                                partition=privclust.Partition(labels=labels, centres=centres,
                                                              columns=tuple(data.columns)))


def test_the_kit_catches_an_evaluator_writing_into_the_release_and_a_partition_drawn_outside_the_context():
    import pytest

    import privclust.testing as pt

    class One:
        @privclust.hookimpl
        def privclust_register_evaluators(register):
            register(RewriteRelease)

    with pytest.raises(AssertionError, match="released frame"):
        pt.check_component(RewriteRelease(), registry=privclust.Registry(plugins=[One]))
    with pytest.raises(AssertionError):
        pt.check_component(RandomGroups())
