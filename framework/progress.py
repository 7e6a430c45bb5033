"""Progress callbacks for long steps: they pass ``context.progress(done,
total)`` on a bounded number of times, whatever the loop's length."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RecordProgress", "ThrottledProgress"]


class ThrottledProgress:
    """A progress callback for a long loop: ``report(done)`` passes
    ``context.progress(done, total)`` on at most ``steps`` times over the
    run (whenever ``done`` crosses the next ``total / steps``), so a loop
    may call it on every iteration. ``context`` is anything with a
    ``progress(done, total)`` method (a :class:`PrivacyContext`)."""

    def __init__(self, context: Any, total: float, *, steps: int = 200):
        self.context = context
        self.total = float(max(total, 1))
        self.steps = int(max(steps, 1))
        self.last = -1

    def __call__(self, done: float) -> None:
        step = int(self.steps * min(done, self.total) / self.total)
        if step != self.last:
            self.last = step
            self.context.progress(min(done, self.total), self.total)


class RecordProgress:
    """A step's progress in whole records: ``context.progress(done, n)``
    with ``done`` an integer from 0 to ``n``, never decreasing, reported at
    most ``steps`` times (plus the final ``n``), so that a progress bar
    counts the step's records.

    A step made of phases gives each a share of the records:
    ``phase(start, stop, units)`` is a callback taking the work done in that
    phase, out of ``units``, and reports ``n * (start + (stop - start) *
    done / units)`` records. ``stage(i, of)`` reports stage ``i`` of ``of``
    equal stages; ``finish()`` reports ``n``. ``context`` is anything with
    a ``progress(done, total)`` method (a :class:`PrivacyContext`).

    >>> seen = []
    >>> class Context:
    ...     def progress(self, done, total):
    ...         seen.append((done, total))
    >>> progress = RecordProgress(Context(), 900)
    >>> fit = progress.phase(0.0, 0.5, units=3)
    >>> fit(1); fit(3); progress.stage(2, 4); progress.finish()
    >>> seen
    [(150, 900), (450, 900), (900, 900)]
    """

    def __init__(self, context: Any, n_records: int, *, steps: int = 200):
        self.context = context
        self.n = int(max(n_records, 0))
        self.every = max(1, self.n // max(int(steps), 1))
        self.done = 0
        self.reported = -1

    def __call__(self, records: float) -> None:
        """Report ``records`` done (clipped to ``0..n``; a smaller value than
        the last is not reported)."""
        done = int(min(max(records, 0), self.n))
        if done < self.done or (done < self.n and done - max(self.reported, 0) < self.every and self.reported >= 0):
            self.done = max(self.done, done)
            return
        self.done = done
        if done != self.reported:
            self.reported = done
            self.context.progress(done, self.n)

    def phase(self, start: float, stop: float, units: float = 1.0) -> Callable[[float], None]:
        """A callback for the part of the step between the shares ``start``
        and ``stop`` (0 to 1) of its records: it takes the work done in the
        phase, out of ``units``."""
        units = float(units) if units > 0 else 1.0

        def report(done: float) -> None:
            self(self.n * (start + (stop - start) * min(max(done / units, 0.0), 1.0)))
        return report

    def stage(self, i: int, of: int) -> None:
        """Stage ``i`` of ``of`` equal stages done."""
        self(self.n * i / max(of, 1))

    def finish(self) -> None:
        """Every record done."""
        self(self.n)
