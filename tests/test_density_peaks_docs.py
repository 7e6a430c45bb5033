"""The examples of docs/density-peaks.md run and print what the page shows."""

from __future__ import annotations

from _docblocks import run_page
from conftest import require_dataset


def test_density_peaks_page_runs(tmp_path):
    require_dataset("aggregation.data.gz")
    require_dataset("flame.data.gz")
    assert run_page("density-peaks.md", tmp_path) > 0
