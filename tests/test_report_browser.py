"""The HTML report as a person sees it: rendered by headless Chromium.

Chromium comes from Debian's package (``.ci/run`` installs it where it can);
without it these tests are skipped with the reason.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import privclust

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt install chromium)")

SECTIONS = ["Processes applied", "Edit rules", "What is protected, and what is not", "Evaluations",
            "Distributions before and after", "Released data (ten rows, in a random order)",
            "Versions"]


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    rng = np.random.default_rng(0)
    exp = rng.uniform(0, 100, size=(200, 2))
    frame = pd.DataFrame({"exp16": exp[:, 0], "exp7": exp[:, 1], "total": exp.sum(axis=1)})
    release = privclust.run({"name": "Browser check",
                             "constraints": [{"use": "linear", "rules": ["total = exp16 + exp7"]}],
                             "evaluate": ["sse-sst", "dbrl", "edit-violations"],
                             "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]},
                            frame, seed=1)
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(release.to_html(), encoding="utf-8")
    return path


def test_every_section_and_the_figure_are_in_the_rendered_page(report):
    dom = _chromium("--dump-dom", report.as_uri()).stdout
    for section in SECTIONS:
        assert f"<h2>{section}</h2>" in dom, section
    assert "<b>Verdict:</b>" in dom and "Verified by the host: k-anonymity with k = 3" in dom
    assert dom.count('src="data:image/png;base64,') == 1


def _orange_pixels(path) -> int:
    """Pixels of the released histograms (matplotlib's C1 orange at alpha 0.5 on white)."""
    from PIL import Image

    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return int(np.count_nonzero((r > 230) & (g > 160) & (g < 215) & (b > 100) & (b < 170)))


def test_the_screenshot_shows_the_page_and_its_plot(report, tmp_path):
    from PIL import Image

    shot = tmp_path / "shot.png"
    _chromium("--window-size=1200,4000", f"--screenshot={shot}", report.as_uri())
    grey = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert (grey[:300] < 128).mean() > 0.01  # the title and the verdict are drawn
    assert _orange_pixels(shot) > 2000  # the histograms are drawn (the image decoded and laid out)
    public = report.with_name("public.html")
    public.write_text(report.read_text(encoding="utf-8").split('<h2>Distributions')[0] + "</div>",
                      encoding="utf-8")
    _chromium("--window-size=1200,4000", f"--screenshot={shot}", public.as_uri())
    assert _orange_pixels(shot) < 50  # the check tells a page without the plot apart


@pytest.fixture(scope="module")
def fuzzy_report(tmp_path_factory):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.uniform(0, 100, size=(120, 2)), columns=["a", "b"])
    release = privclust.run({"name": "Effective parameters", "evaluate": ["sse-sst", "dbrl"],
                             "steps": [{"use": "fuzzy-microaggregation", "k": 4}]}, frame, seed=1)
    path = tmp_path_factory.mktemp("fuzzy") / "report.html"
    path.write_text(release.to_html(), encoding="utf-8")
    return path, release


def test_the_rendered_page_shows_the_values_used_and_explains_every_figure(fuzzy_report):
    path, release = fuzzy_report
    dom = _chromium("--dump-dom", path.as_uri()).stdout
    used = release.report()["steps"][0]["effective_parameters"]
    # m1 and n_clusters were left unset: the page shows the values the step derived, not a bare null
    assert f"<td><code>m1</code></td><td>{used['m1']:.6g}</td><td><small>not set; derived by the component" in dom
    assert f"<td><code>n_clusters</code></td><td>{used['n_clusters']}</td>" in dom
    assert "<td>None</td>" not in dom and "<td>null</td>" not in dom and "<td></td><td><small>" not in dom
    # every figure has its unit and its explanation; SSE/SST in %
    rows = release.report()["evaluations"]
    assert rows and all(r["explanation"] and r["unit"] for r in rows)
    for row in rows:
        assert row["explanation"] in dom, row["metric"]
    assert '<td class="unit"><small>%</small></td><td><small>share of the total variance lost' in dom
