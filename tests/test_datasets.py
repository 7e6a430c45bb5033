"""privclust.datasets: built-in data, the local folder, the download cache, offline errors."""

from __future__ import annotations

import gzip
import io
import urllib.error

import numpy as np
import pytest
from conftest import require_dataset

import privclust
from privclust import datasets
from privclust.errors import DatasetUnavailableError


def test_table1_is_the_papers_table_with_one_violating_record():
    t = datasets.table1()
    assert t.shape == (12, 3) and list(t.columns) == ["exp16", "exp7", "total"]
    residual = t["total"] - (1.16 * t["exp16"] + 1.07 * t["exp7"])
    assert np.allclose(residual[:-1], 0, atol=1e-9)
    assert residual.iloc[-1] == pytest.approx(3.48)
    t.iloc[0, 0] = -1  # a copy: the next call is pristine
    assert datasets.table1().iloc[0, 0] == 15


def test_sklearn_sets_have_categorical_classes():
    iris, wdbc = datasets.iris(), datasets.wdbc()
    assert iris.shape == (150, 5) and wdbc.shape == (569, 31)
    assert str(iris["class"].dtype) == "category" and iris["class"].nunique() == 3
    assert "class" not in privclust.numeric_columns(iris)


def test_local_shape_sets_and_sdc_files():
    require_dataset("aggregation.data.gz")
    agg = datasets.load("aggregation")
    assert agg.shape == (788, 3) and agg["class"].nunique() == 7
    assert privclust.numeric_columns(agg) == ("x0", "x1")
    census = datasets.load("casc_census")
    assert census.shape == (1080, 13)
    assert np.allclose(census["PTOTVAL"], census["POTHVAL"] + census["PEARNVAL"])
    assert datasets.load("EIA").shape == (4092, 15)


def test_unknown_name_suggests():
    with pytest.raises(DatasetUnavailableError, match="did you mean 'aggregation'"):
        datasets.load("agregation")


@pytest.mark.parametrize("bad", [3, None, ["flame"], b"flame"])
def test_a_name_that_is_not_a_string_is_refused_clearly(bad):
    # load(3) raised AttributeError: 'int' object has no attribute 'lower'
    with pytest.raises(DatasetUnavailableError, match="named by a string.*known: aggregation"):
        datasets.load(bad)


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A user with no local folder and an empty cache."""
    monkeypatch.setattr(datasets, "data_dir", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "privclust"


def test_offline_gives_a_clear_error_and_leaves_no_partial_file(elsewhere, monkeypatch):
    def offline(url, timeout):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(datasets.urllib.request, "urlopen", offline)
    with pytest.raises(DatasetUnavailableError, match="you seem to be offline") as err:
        datasets.load("flame")
    assert "PRIVCLUST_DATA" in str(err.value)
    assert not elsewhere.exists() or not any(elsewhere.iterdir())


def test_downloads_once_into_the_cache(elsewhere, monkeypatch):
    calls = []
    payloads = {"flame.data.gz": b"1 2\n3 4\n5 6\n", "flame.labels0.gz": b"1\n2\n2\n"}

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def fake(url, timeout):
        calls.append(url)
        name = url.rsplit("/", 1)[-1]
        return Response(gzip.compress(payloads[name]))

    monkeypatch.setattr(datasets.urllib.request, "urlopen", fake)
    first = datasets.load("flame")
    second = datasets.load("flame")
    assert first.equals(second) and first.shape == (3, 3)
    assert len(calls) == 2 and all(u.startswith("https://github.com/gagolews/clustering-data-v1/") for u in calls)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["flame.data.gz", "flame.labels0.gz"]


def test_environment_variable_names_the_folder(tmp_path, monkeypatch):
    (tmp_path / "casc_census.csv").write_text("A,B\n1,2\n")
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path))
    assert datasets.data_dir() == tmp_path
    assert datasets.load("casc_census").shape == (1, 2)


def test_a_shared_datasets_folder_is_found_from_the_working_directory_upwards(tmp_path, monkeypatch):
    folder = tmp_path / "shared" / "datasets"
    folder.mkdir(parents=True)
    (folder / "tarragona.csv").write_text("A,B\n1,2\n3,4\n")
    deep = tmp_path / "project" / "notebooks"
    deep.mkdir(parents=True)
    monkeypatch.delenv("PRIVCLUST_DATA", raising=False)
    monkeypatch.chdir(deep)
    assert datasets.data_dir() == folder.resolve()
    assert datasets.load("tarragona").shape == (2, 2)


def test_a_missing_environment_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCLUST_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(DatasetUnavailableError, match=r"PRIVCLUST_DATA=.*nowhere is not a folder"):
        datasets.load("flame")


def test_a_missing_file_is_named_with_where_to_put_it(elsewhere, monkeypatch):
    def offline(url, timeout):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(datasets.urllib.request, "urlopen", offline)
    with pytest.raises(DatasetUnavailableError, match=r"flame\.data\.gz is not on this machine.*put flame\.data\.gz "
                                                      r"in a folder named by PRIVCLUST_DATA, or a shared/datasets"):
        datasets.load("flame")
    with pytest.raises(DatasetUnavailableError, match=r"testdata\.RData.*put testdata\.RData in"):
        datasets.load("sdc_testdata")


def test_the_cache_serves_a_file_put_there_by_hand(elsewhere):
    elsewhere.mkdir(parents=True)
    (elsewhere / "eia.csv.gz").write_bytes(gzip.compress(b"A,B\n1,2\n"))
    assert datasets.load("eia").shape == (1, 2)


def test_the_survey_file_with_categorical_keys_and_weights():
    require_dataset("sdc_testdata.csv")
    survey = datasets.load("sdc_testdata")
    assert survey.shape == (4580, 15)
    assert survey["ori_hid"].nunique() == 1000
    # every column the docs' description names, and no other
    described = {"ori_hid", "urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "age", "hhcivil",
                 "expend", "income", "savings", "sampling_weight", "household_weights"}
    assert set(survey.columns) == described
    assert "sdc_testdata" in datasets.names()


def test_a_cache_write_that_fails_leaves_no_temporary_file(elsewhere, monkeypatch):
    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(datasets.urllib.request, "urlopen", lambda url, timeout: Response(b"1 2\n"))
    real = datasets.os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(datasets.os, "fdopen", lambda fd, mode="r": Full(real(fd, mode)))
    with pytest.raises(DatasetUnavailableError, match="No space left on device"):
        datasets.load("flame")
    assert not any(elsewhere.iterdir())
