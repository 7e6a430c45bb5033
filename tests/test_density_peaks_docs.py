"""The examples of docs/density-peaks.md run and print what the page shows."""

from __future__ import annotations

from _docblocks import run_page
from conftest import require_dataset


def test_density_peaks_page_runs(tmp_path):
    require_dataset("aggregation.data.gz")
    require_dataset("flame.data.gz")
    assert run_page("density-peaks.md", tmp_path) > 0


def test_clustering_evaluation_page_runs(tmp_path):
    """docs/clustering-evaluation.md prints what its output blocks show (no test ran it: its idp-kmeans ledger
    still showed a sensitivity of 21.00001431 where the statement prints it rounded down, 21.0000143)."""
    assert run_page("clustering-evaluation.md", tmp_path) >= 5


def test_reproduction_page_runs(tmp_path):
    """docs/reproduction-dp-dpcl.md's 'Try it' examples print what the page shows."""
    assert run_page("reproduction-dp-dpcl.md", tmp_path) >= 3
