"""Parsers of the raw experiment files: small fixtures written here, real files when present."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from privbayes import datasets as ds

ABALONE = """M,0.455,0.365,0.095,0.514,0.2245,0.101,0.15,15
F,0.53,0.42,0.135,0.677,0.2565,0.1415,0.21,9

I,0.33,0.255,0.08,0.205,0.0895,0.0395,0.055,7
"""

ADULT_TRAIN = (
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
    "Male, 2174, 0, 40, United-States, <=50K\n"
    "52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, Wife, White, "
    "Female, 15024, 0, 40, United-States, >50K\n"
    "54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, "
    "Male, 0, 0, 60, South, >50K\n"
    "\n"
)
ADULT_TEST = (
    "|1x3 Cross validator\n"
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, "
    "0, 0, 40, United-States, <=50K.\n"
    "35, Self-emp-inc, 182148, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, "
    "White, Male, 0, 0, 60, United-States, >50K.\n"
    "\n"
)


def _idx(magic: int, dims: tuple[int, ...], payload: bytes) -> bytes:
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


def _write_mnist(root, n_train=3, n_test=2, rng=None):
    rng = rng or np.random.default_rng(0)
    d = root / "mnist"
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n, prefix in (("train", n_train, "train"), ("test", n_test, "t10k")):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labs = rng.integers(0, 10, size=n, dtype=np.uint8)
        (d / f"{prefix}-images-idx3-ubyte.gz").write_bytes(
            gzip.compress(_idx(2051, (n, 28, 28), imgs.tobytes()))
        )
        (d / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(
            gzip.compress(_idx(2049, (n,), labs.tobytes()))
        )
        out[split] = (imgs, labs)
    return out


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.delenv(ds.DATA_ENV, raising=False)
    (tmp_path / "abalone").mkdir()
    (tmp_path / "abalone" / "abalone.data").write_text(ABALONE)
    (tmp_path / "adult").mkdir()
    (tmp_path / "adult" / "adult.data").write_text(ADULT_TRAIN)
    (tmp_path / "adult" / "adult.test").write_text(ADULT_TEST)
    return tmp_path


def test_abalone_fixture(data_root):
    a = ds.load_abalone(data_root)
    assert len(a) == 3
    assert a.sex.tolist() == ["M", "F", "I"]
    assert a.measurements.shape == (3, 7)
    assert a.measurements[0, 0] == 0.455
    assert a.rings.tolist() == [15, 9, 7]


@pytest.mark.parametrize(
    "line, match",
    [
        ("X,0.1,0.1,0.1,0.1,0.1,0.1,0.1,3", "sex"),
        ("M,0.1,0.1,0.1,0.1,0.1,0.1,3", "9 fields"),
        ("M,0.1,abc,0.1,0.1,0.1,0.1,0.1,3", "diameter"),
        ("M,0.1,0.1,0.1,0.1,0.1,0.1,0.1,3.5", "rings"),
    ],
)
def test_abalone_errors_name_the_line(tmp_path, line, match):
    p = tmp_path / "abalone.data"
    p.write_text(ABALONE + line + "\n")
    with pytest.raises(ValueError, match=match) as err:
        ds.parse_abalone(p)
    assert ":5:" in str(err.value)


def test_adult_train_and_test(data_root):
    tr = ds.load_adult(data_root, "train", drop_missing=False)
    assert len(tr) == 3
    assert tr.income.tolist() == [False, True, True]
    assert tr.missing.tolist() == [False, False, True]
    assert tr.categorical["workclass"].tolist() == ["State-gov", "Self-emp-inc", ""]
    assert tr.column("age").tolist() == [39, 52, 54]
    assert tr.numeric.shape == (3, 6)
    assert len(ds.load_adult(data_root, "train")) == 2  # the '?' record dropped
    te = ds.load_adult(data_root, "test")  # header line skipped, trailing dots stripped
    assert te.income.tolist() == [False, True]
    assert te.categorical["relationship"].tolist() == ["Own-child", "Husband"]
    both = ds.load_adult(data_root, "all")
    assert len(both) == 4 and both.income.tolist() == [False, True, False, True]


@pytest.mark.parametrize(
    "bad, match",
    [
        ("39, State-gov, 77516, Bachelors, 13", "15 fields"),
        (ADULT_TRAIN.splitlines()[0].replace("<=50K", "maybe"), "income"),
        (ADULT_TRAIN.splitlines()[0].replace("State-gov", "Pirate"), "workclass"),
        (ADULT_TRAIN.splitlines()[0].replace("77516", "?"), "fnlwgt"),
        (ADULT_TRAIN.splitlines()[0].replace("77516", "7x"), "fnlwgt"),
    ],
)
def test_adult_errors(tmp_path, bad, match):
    p = tmp_path / "adult.data"
    p.write_text(bad + "\n")
    with pytest.raises(ValueError, match=match):
        ds.parse_adult(p)


def test_adult_bad_split(data_root):
    with pytest.raises(ValueError, match="split"):
        ds.load_adult(data_root, "validation")


def test_one_hot_uses_public_levels():
    x = ds.one_hot(np.array(["Male", "Female", "Male"]), ds.ADULT_CATEGORICAL["sex"])
    np.testing.assert_array_equal(x, [[0, 1], [1, 0], [0, 1]])
    assert ds.one_hot(np.array(["Peru"]), ds.ADULT_CATEGORICAL["native-country"]).shape == (1, 41)
    with pytest.raises(ValueError, match="not one of"):
        ds.one_hot(np.array(["Male", ""]), ds.ADULT_CATEGORICAL["sex"])


def test_mnist_fixture(tmp_path, monkeypatch):
    monkeypatch.delenv(ds.DATA_ENV, raising=False)
    truth = _write_mnist(tmp_path)
    for split in ("train", "test"):
        images, labels = ds.load_mnist(tmp_path, split)
        assert images.dtype == np.uint8 and images.shape[1:] == (28, 28)
        np.testing.assert_array_equal(images, truth[split][0])
        np.testing.assert_array_equal(labels, truth[split][1])


def test_read_idx_checks(tmp_path):
    good = _idx(2049, (4,), bytes([1, 2, 3, 4]))
    p = tmp_path / "labels-idx1-ubyte"
    p.write_bytes(good)
    assert ds.read_idx(p, magic=2049).tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="magic number 2049"):
        ds.read_idx(p, magic=2051)
    p.write_bytes(good[:-1])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        ds.read_idx(p)
    p.write_bytes(good + b"\0")
    with pytest.raises(ValueError, match="does not match"):
        ds.read_idx(p)
    p.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        ds.read_idx(p)
    gz = tmp_path / "labels.gz"
    gz.write_bytes(gzip.compress(good)[:-6])  # truncated gzip stream
    with pytest.raises(ValueError, match="corrupt or truncated gzip"):
        ds.read_idx(gz)
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="corrupt or truncated gzip"):
        ds.read_idx(gz)


def test_mnist_shape_and_count_checks(tmp_path, monkeypatch):
    monkeypatch.delenv(ds.DATA_ENV, raising=False)
    _write_mnist(tmp_path)
    labels = tmp_path / "mnist" / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(_idx(2049, (2,), bytes([1, 2]))))
    with pytest.raises(ValueError, match="3 images but labels"):
        ds.load_mnist(tmp_path, "train")
    labels.write_bytes(gzip.compress(_idx(2049, (3,), bytes([1, 2, 10]))))
    with pytest.raises(ValueError, match="label 10"):
        ds.load_mnist(tmp_path, "train")
    images = tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz"
    images.write_bytes(gzip.compress(_idx(2051, (2, 14, 14), bytes(2 * 196))))
    with pytest.raises(ValueError, match="expected \\(n, 28, 28\\)"):
        ds.load_mnist(tmp_path, "test")


def test_missing_file_says_where_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv(ds.DATA_ENV, str(tmp_path / "env"))
    monkeypatch.setattr(ds, "DEFAULT_DATA_DIR", tmp_path / "shared")
    with pytest.raises(FileNotFoundError) as err:
        ds.find_data_file("abalone", "abalone.data", tmp_path / "cli")
    msg = str(err.value)
    assert str(tmp_path / "cli" / "abalone" / "abalone.data") in msg
    assert str(tmp_path / "env" / "abalone" / "abalone.data") in msg
    assert str(tmp_path / "shared" / "abalone" / "abalone.data") in msg
    assert "archive.ics.uci.edu" in msg and "--data-dir" in msg


def test_search_order(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    for d in (first, second):
        (d / "abalone").mkdir(parents=True)
        (d / "abalone" / "abalone.data").write_text(ABALONE)
    monkeypatch.setenv(ds.DATA_ENV, str(second))
    assert ds.find_data_file("abalone", "abalone.data", first).parent.parent == first
    assert ds.find_data_file("abalone", "abalone.data").parent.parent == second
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "abalone.data").write_text(ABALONE)
    assert ds.find_data_file("abalone", "abalone.data", flat) == flat / "abalone.data"


# -- the real files, when present -------------------------------------------------------


def _real(dataset: str, filename: str):
    try:
        return ds.find_data_file(dataset, filename)
    except FileNotFoundError:
        pytest.skip(f"{dataset}/{filename} not available (see data/README.md)")


def test_real_abalone():
    _real("abalone", "abalone.data")
    a = ds.load_abalone()
    assert len(a) == 4177
    assert (a.rings > 9).sum() == 2081
    assert np.isclose(a.measurements[:, 0].max(), 0.815)


def test_real_adult():
    _real("adult", "adult.data")
    _real("adult", "adult.test")
    raw = ds.load_adult(split="all", drop_missing=False)
    assert len(raw) == 48842
    assert len(ds.load_adult(split="train")) == 30162
    te = ds.load_adult(split="test", drop_missing=False)
    assert len(te) == 16281 and te.income.sum() == 3846


def test_real_mnist():
    for f in ("train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        _real("mnist", f)
    images, labels = ds.load_mnist(split="test")
    assert images.shape == (10000, 28, 28)
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
