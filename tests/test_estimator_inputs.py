"""PrivateLogisticRegression's inputs: error messages without record values, one DataError
for a label in memory and on Dask, options checked before any charge (new-user trial 2)."""

import warnings

import numpy as np
import pytest

import privbayes as pb
from privbayes import PrivateLogisticRegression
from privbayes.accounting import default_accountant

SECRET = 0.7315926  # a record value no message may quote: its digits must not appear


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.clip(rng.normal(size=n) * 0.2, -0.3, 0.3), np.full(n, SECRET)])
    # every row holds the secret (the first rows are what numpy prints); norms <= 0.8
    return X, (X[:, 0] > 0).astype(int)


def _fitted():
    X, y = _data()
    return PrivateLogisticRegression(eps=1.0, beta=0.1).fit(X, y), X, y


def _bad_inputs():
    X, y = _data()
    return {
        "1-D X": (X[:, 1], y),
        "scalar X": (SECRET, y),
        "complex X": (X + 1j * SECRET, y),
        "one row": (X[0], y[:1]),
        "strings in X": (np.array([[f"{SECRET}x", "1"]] * 40), y),
        "objects in X": (np.array([[SECRET, f"{SECRET}x"]] * 40, dtype=object), y),
    }


def _assert_no_values(err, expected_type):
    text = str(err)
    assert type(err) is expected_type, (type(err), text)
    assert "7315" not in text and "0.73" not in text, text  # SECRET, as numpy prints it
    shown = err.__cause__ or (None if err.__suppress_context__ else err.__context__)
    assert shown is None, f"a traceback would print the original: {shown!r}"


@pytest.mark.parametrize("case", list(_bad_inputs()))
@pytest.mark.parametrize("method", ["fit", "predict", "predict_proba", "decision_function"])
def test_input_errors_name_shapes_never_values(case, method):
    """scikit-learn's validate_data quotes the array ("array=[...]", "Complex data not
    supported\\n[...]", "could not convert string to float: '...'"): every such message is
    reworded, with the exception type scikit-learn's checks expect."""
    X, y = _bad_inputs()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        if method == "fit":
            with pytest.raises((ValueError, TypeError)) as got:
                PrivateLogisticRegression(eps=1.0, beta=0.1).fit(X, y)
        else:
            est = _fitted()[0]
            with pytest.raises((ValueError, TypeError)) as got:
                getattr(est, method)(X)
    _assert_no_values(got.value, ValueError)
    if "1-D" in case or "scalar" in case or "row" in case:
        assert "Reshape your data" in str(got.value)  # scikit-learn's check_fit2d_predict1d
    if "complex" in case:
        assert "Complex data not supported" in str(got.value) and "complex128" in str(got.value)
    if case == "1-D X":
        assert "shape (40,)" in str(got.value)


def test_score_errors_never_quote_labels():
    """score(): scikit-learn's metrics quote y's labels ("Mix of label input types (string
    and number); Got [...]"), and its input check the rows."""
    est, X, y = _fitted()
    with pytest.raises(ValueError) as got:
        est.score(X, np.where(y > 0, "s3cr3t", "h1dden"))
    _assert_no_values(got.value, ValueError)
    assert "s3cr3t" not in str(got.value) and "h1dden" not in str(got.value)
    assert "Mix of label input types" in str(got.value)
    with pytest.raises(ValueError) as got:
        est.score(X[:, 1], y)
    _assert_no_values(got.value, ValueError)


def test_a_type_error_stays_a_type_error():
    """A guard (its message holds no value, before and after): the type is kept, as
    scikit-learn's check_dtype_object wants."""
    X, y = _data()
    bad = X.astype(object)
    bad[0, 0] = {"k": SECRET}
    with pytest.raises(TypeError, match="argument must be .* string.* number") as got:
        PrivateLogisticRegression(eps=1.0).fit(bad, y)
    _assert_no_values(got.value, TypeError)


# -- one DataError for a label, in memory and on Dask ---------------------------------------
def _error(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value encountered in cast" either
        with pytest.raises(pb.DataError) as got:
            fit()
    e = got.value
    return str(e), e.column, e.rule, e.count, e.index, e.value


def _both(est, X, y):
    import dask.array as da

    memory = _error(lambda: est.fit(X, y))
    dask = _error(lambda: est.fit(da.from_array(X, chunks=10), da.from_array(y, chunks=10)))
    return memory, dask


@pytest.mark.parametrize(
    "classes, labels, bad",
    [
        (None, [0, 1], 2),  # the trial's case
        (None, [0, 1], 9876),
        (None, [0.0, 1.0], 0.4375),
        (None, [0, 1], -1),  # the engine's binary rule would take -1: a code must not be it
        ([0, 1, 2], [0, 1, 2], 9876),
        (["ham", "spam"], ["ham", "spam"], "eggs"),
    ],
)
def test_an_undeclared_label_is_one_error_in_memory_and_on_dask(classes, labels, bad):
    X, _ = _data()
    y = np.array([labels[i % len(labels)] for i in range(40)])
    y = y.astype(object) if isinstance(bad, str) else y.astype(type(bad))
    y[7], y[31] = bad, bad
    est = PrivateLogisticRegression(eps=1.0, beta=0.1, classes=classes)
    memory, dask = _both(est, X, y)
    assert memory[1:] == ("y", 0, 2, 7, None)
    assert dask == memory  # the message too
    assert "y[7] is not one of them" in memory[0] and "y[7] is not one of them" in dask[0]
    if len(str(bad)) > 2:  # its value is not shown (short ones clash with "y[7]")
        assert str(bad) not in memory[0] and str(bad) not in dask[0]


def _missing_labels():
    import pandas as pd

    y = [i % 2 for i in range(40)]
    out = {
        "NaN": np.where(np.arange(40) == 5, np.nan, np.array(y, dtype=float)),
        "masked": np.ma.masked_array(y, mask=np.arange(40) == 5),
        "None": np.array([None if i == 5 else v for i, v in enumerate(y)], dtype=object),
        "pandas NA": pd.Series([pd.NA if i == 5 else v for i, v in enumerate(y)], dtype="Int64"),
    }
    try:
        import polars as pl

        out["polars null"] = pl.Series([None if i == 5 else v for i, v in enumerate(y)])
    except ImportError:
        pass
    try:
        import pyarrow as pa

        out["pyarrow null"] = pa.array([None if i == 5 else v for i, v in enumerate(y)])
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("kind", list(_missing_labels()))
def test_a_missing_label_is_refused_as_missing(kind):
    """A masked / NaN / None / NA / null label: DataError rule "finite" saying the label is
    missing (not scikit-learn's "Unknown label type"), with no RuntimeWarning."""
    X, _ = _data()
    y = _missing_labels()[kind]
    message, *fields = _error(lambda: PrivateLogisticRegression(eps=1.0).fit(X, y))
    assert "y[5] is missing" in message and "Unknown label type" not in message
    assert fields[0] == "y" and fields[1:4] == ["finite", 1, 5] and np.isnan(fields[4])


def test_a_missing_label_is_the_same_error_on_dask():
    X, _ = _data()
    y = _missing_labels()["NaN"]
    memory, dask = _both(PrivateLogisticRegression(eps=1.0), X, y)
    assert memory[0] == dask[0] and memory[1:5] == dask[1:5] == ("y", "finite", 1, 5)


# -- options checked in fit, before any charge -------------------------------------------------
@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"intercept_scaling": 0.3}, ValueError, "applies only with fit_intercept=True"),
        ({"fit_intercept": "yes"}, TypeError, "fit_intercept must be True or False"),
        ({"fit_intercept": None}, TypeError, "fit_intercept must be True or False"),
        ({"fit_intercept": 1}, TypeError, "fit_intercept must be True or False"),
        ({"clip": "yes"}, TypeError, "clip must be True or False"),
        ({"clip": "False"}, TypeError, "clip must be True or False"),
        ({"clip": None}, TypeError, "clip must be True or False"),
        ({"n_samples": float("inf")}, ValueError, "n_samples must be an integer"),
    ],
)
def test_options_that_do_not_apply_are_refused_before_any_charge(tmp_path, options, error, match):
    X, y = _data()
    path = tmp_path / "l.sqlite"
    pb.Ledger(path).init_budget("d", eps=10.0, delta=1e-6)
    before = default_accountant().get_epsilon(1e-6)
    est = PrivateLogisticRegression(eps=1.0, ledger=str(path), dataset="d", **options)
    with pytest.raises(error, match=match):
        est.fit(X, y)
    assert pb.Ledger(path).status("d")[0]["charges"] == []
    assert default_accountant().get_epsilon(1e-6) == before


def test_numpy_bools_are_bools():
    X, y = _data()
    est = PrivateLogisticRegression(eps=1.0, fit_intercept=np.True_, clip=np.False_).fit(X, y)
    assert est.samples_.shape == (1, 3)


def test_a_polars_lazy_frame_is_refused_with_a_type_error():
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(0)
    X = pb.preprocessing.clip_rows(rng.normal(size=(30, 2)), 0.9)
    y = (X[:, 0] > 0).astype(float)
    est = pb.PrivateLogisticRegression(eps=1.0, beta=0.1, backend="langevin", random_state=3)
    with pytest.raises(TypeError, match="LazyFrame"):
        est.fit(pl.DataFrame(X).lazy(), y)
