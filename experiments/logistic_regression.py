"""Bayesian logistic regression on Abalone, Adult and MNIST: diffused vs concentrated vs OPS.

Prior w ~ N(0, (n beta)^-1 I), rows with ||x||_2 <= c (paper §4-5). For each data set and
trial: a train/test split (fresh for Abalone; the canonical split with a fresh seed for
Adult and MNIST), then

* map: the non-private MAP, scikit-learn ``LogisticRegression(C=1/(n beta),
  fit_intercept=False)`` (its objective C sum(loss) + ||w||^2/2 is the negative log
  posterior times C; the intercept is a constant feature and shares the prior);
* non-private: one exact-posterior draw, ``pb.sample(..., method="direct")`` with r = m = 1;
* diffused / concentrated / ops at every (lambda, eps): one ``pb.sample`` release.

Metric: test accuracy of sign(w.x). Run ``python experiments/logistic_regression.py --help``.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

import privbayes as pb  # noqa: E402
from privbayes import datasets  # noqa: E402
from privbayes.errors import ConvergenceError, SamplingError  # noqa: E402
from privbayes.preprocessing import normalize_rows  # noqa: E402

NAME = "logistic_regression"
METHODS = ("diffused", "concentrated", "ops")
DATASETS = ("abalone", "adult", "mnist")
# Abalone: per-attribute maxima published in abalone.names, rounded up to 0.1 (UCI units)
ABALONE_BOUNDS = np.array([0.9, 0.7, 1.2, 2.9, 1.5, 0.8, 1.1])
QUICK = dict(
    lams=[2.0],
    eps_grid=C.log_grid("0.1,10"),
    trials=1,
    max_train=300,
    max_test=500,
)


def parse_args(argv: list[str] | None = None):
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--datasets", type=lambda s: s.split(","), default=list(DATASETS))
    p.add_argument("--lams", type=C.floats, default=[2.0, 8.0], help="Renyi orders")
    p.add_argument(
        "--eps-grid", type=C.log_grid, default="0.01:10:7", help="LOW:HIGH:COUNT (log) or list"
    )
    p.add_argument("--trials", type=int, default=10, help="splits / seeds per data set")
    p.add_argument("--beta", type=float, default=1e-3, help="prior precision per record")
    p.add_argument("--c", type=float, default=1.0, help="public bound on ||x||_2")
    p.add_argument("--abalone-threshold", type=int, default=9, help="label: rings > this")
    p.add_argument("--abalone-test", type=float, default=0.3, help="test fraction")
    p.add_argument("--mnist-digits", type=C.ints, default=[3, 8], help="negative,positive")
    p.add_argument("--mnist-pool", type=int, default=2, help="average-pool k x k pixels")
    p.add_argument("--max-train", type=int, default=0, help="subsample train sets (0 = all)")
    p.add_argument("--max-test", type=int, default=0, help="subsample test sets (0 = all)")
    p.add_argument(
        "--model-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra BayesianLogisticRegression keyword (sampler settings), repeatable",
    )
    p.add_argument("--on-bad", choices=("raise", "warn"), default="raise", help="MCMC checks")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    bad = set(args.datasets) - set(DATASETS)
    if bad:
        p.error(f"unknown data sets {sorted(bad)}; choose from {list(DATASETS)}")
    if len(args.mnist_digits) != 2:
        p.error("--mnist-digits takes two digits, e.g. 3,8")
    return args


def _model_options(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        for cast in (int, float):
            try:
                value = cast(value)
                break
            except ValueError:
                pass
        out[key.strip()] = value
    return out


# -- features: every map is row-wise with public constants (see experiments/README.md) -------


def abalone_features(data: datasets.Abalone, threshold: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """[one-hot sex (3), measurements / public bounds clipped to [0, 1] (7), 1] / 3.

    Each of the 9 unit-bounded blocks has norm <= 1, so ||x|| <= 1. Label: rings > threshold.
    """
    meas = np.clip(data.measurements / ABALONE_BOUNDS, 0.0, 1.0)
    sex = datasets.one_hot(data.sex, ("M", "F", "I"))
    x = np.hstack([sex, meas, np.ones((len(data), 1))]) / 3.0
    return x, (data.rings > threshold).astype(float)


def adult_features(data: datasets.Adult) -> tuple[np.ndarray, np.ndarray]:
    """[one-hot of the 8 categoricals (99, public codebook), 5 numeric in [0, 1], 1] / sqrt(14).

    age/100, education-num/16, log1p(capital-gain or -loss)/log1p(1e5), hours/100, clipped
    to [0, 1]; fnlwgt (a census sampling weight) is dropped. Label: income > 50K.
    """
    blocks = [
        datasets.one_hot(data.categorical[k], v) for k, v in datasets.ADULT_CATEGORICAL.items()
    ]
    log_money = np.log1p(1e5)
    num = np.column_stack(
        [
            data.column("age") / 100.0,
            data.column("education-num") / 16.0,
            np.log1p(data.column("capital-gain")) / log_money,
            np.log1p(data.column("capital-loss")) / log_money,
            data.column("hours-per-week") / 100.0,
        ]
    )
    x = np.hstack(blocks + [np.clip(num, 0.0, 1.0), np.ones((len(data), 1))]) / np.sqrt(14.0)
    return x, data.income.astype(float)


def mnist_features(images, labels, digits=(3, 8), pool: int = 2):
    """Digits ``digits[0]`` (label 0) vs ``digits[1]`` (label 1): pixels/255, k x k average
    pooling, each row scaled to norm 1/sqrt(2), then a constant 1/sqrt(2): ||x|| = 1."""
    keep = np.isin(labels, digits)
    im = images[keep].astype(float) / 255.0
    if pool > 1:
        side = 28 // pool
        im = im[:, : side * pool, : side * pool]
        im = im.reshape(len(im), side, pool, side, pool).mean(axis=(2, 4))
    x = normalize_rows(im.reshape(len(im), -1), 1.0 / np.sqrt(2.0))
    x = np.hstack([x, np.full((len(x), 1), 1.0 / np.sqrt(2.0))])
    return x, (labels[keep] == digits[1]).astype(float)


_CACHE: dict = {}


def load(name: str, args) -> dict:
    """Features of ``name``: {"x", "y"} (Abalone) or {"train": (x, y), "test": (x, y)}."""
    key = (name, args.data_dir, args.abalone_threshold, tuple(args.mnist_digits), args.mnist_pool)
    if key not in _CACHE:
        if name == "abalone":
            x, y = abalone_features(datasets.load_abalone(args.data_dir), args.abalone_threshold)
            _CACHE[key] = {"x": x, "y": y}
        elif name == "adult":
            _CACHE[key] = {
                s: adult_features(datasets.load_adult(args.data_dir, f))
                for s, f in (("train", "train"), ("test", "test"))
            }
        else:
            _CACHE[key] = {
                s: mnist_features(
                    *datasets.load_mnist(args.data_dir, s), args.mnist_digits, args.mnist_pool
                )
                for s in ("train", "test")
            }
    return _CACHE[key]


def split(name: str, args, rng) -> tuple:
    data = load(name, args)
    if "x" in data:
        x, y = data["x"], data["y"]
        idx = rng.permutation(len(y))
        n_test = int(round(args.abalone_test * len(y)))
        tr, te = idx[n_test:], idx[:n_test]
        xtr, ytr, xte, yte = x[tr], y[tr], x[te], y[te]
    else:
        (xtr, ytr), (xte, yte) = data["train"], data["test"]
    if args.max_train and len(ytr) > args.max_train:
        keep = rng.choice(len(ytr), args.max_train, replace=False)
        xtr, ytr = xtr[keep], ytr[keep]
    if args.max_test and len(yte) > args.max_test:
        keep = rng.choice(len(yte), args.max_test, replace=False)
        xte, yte = xte[keep], yte[keep]
    return xtr, ytr, xte, yte


def accuracy(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x @ w > 0) == (y > 0.5)))


def run_task(index: int, name: str, trial: int, args) -> list[tuple]:
    """One (data set, trial): MAP, a non-private draw, and every (lam, eps, method) release."""
    from sklearn.linear_model import LogisticRegression

    rng = C.task_rng(args.seed, index)
    xtr, ytr, xte, yte = split(name, args, rng)
    n, d = xtr.shape
    model = pb.BayesianLogisticRegression(args.beta, args.c, **_model_options(args.model_option))
    rows = []

    t0 = time.perf_counter()
    clf = LogisticRegression(
        C=1.0 / (n * args.beta), fit_intercept=False, tol=1e-8, max_iter=10_000
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(xtr, ytr)
    w_map = clf.coef_.ravel()
    rows.append(
        (
            name,
            "map",
            n,
            d,
            "",
            "",
            trial,
            accuracy(w_map, xte, yte),
            "",
            "",
            time.perf_counter() - t0,
            "ok",
        )
    )

    def release(method: str, lam: float, eps: float, label: str) -> tuple:
        t = time.perf_counter()
        try:
            rel = pb.sample(
                model, (xtr, ytr), lam, eps, method, rng=rng, on_bad_diagnostics=args.on_bad
            )
        except ConvergenceError:
            return (
                name,
                label,
                n,
                d,
                lam,
                eps,
                trial,
                np.nan,
                "",
                "",
                time.perf_counter() - t,
                "no-convergence",
            )
        except SamplingError:
            return (
                name,
                label,
                n,
                d,
                lam,
                eps,
                trial,
                np.nan,
                "",
                "",
                time.perf_counter() - t,
                "sampling-error",
            )
        knob = rel.m if method == "concentrated" else rel.r
        acc = accuracy(np.asarray(rel.value), xte, yte)
        return (
            name,
            label,
            n,
            d,
            lam,
            eps,
            trial,
            acc,
            knob,
            rel.eps,
            time.perf_counter() - t,
            "ok",
        )

    # the exact posterior (r = m = 1): "direct" at an eps it certifies, reported as lam/eps ""
    row = release("direct", args.lams[0], 1e300, "non-private")
    rows.append(row[:4] + ("", "") + row[6:9] + ("",) + row[10:])
    for lam in args.lams:
        for eps in args.eps_grid:
            for method in METHODS:
                rows.append(release(method, float(lam), float(eps), method))
    return rows


COLUMNS = "dataset method n d lam eps trial accuracy knob eps_certified seconds status".split()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    timer = C.Timer()
    eps_grid = np.asarray(args.eps_grid, dtype=float)
    args.eps_grid = [float(e) for e in eps_grid]
    tasks = [
        (i, name, t, args)
        for i, (name, t) in enumerate((nm, t) for nm in args.datasets for t in range(args.trials))
    ]
    results = C.run_tasks(run_task, tasks, args.jobs, NAME, not args.no_progress)
    rows = [r for task_rows in results for r in task_rows]
    out = Path(args.out)
    count = C.write_csv(out / f"{NAME}.csv", COLUMNS, rows)
    table = {c: np.array([r[i] for r in rows], dtype=object) for i, c in enumerate(COLUMNS)}
    figures = _figures(args, table, eps_grid, out)
    report = _report(args, table, eps_grid, figures, str(timer), count)
    C.replace_report_section(out / "REPORT.md", NAME, report)
    print(f"{NAME}: {count} rows, {len(figures)} figures, REPORT.md section in {out} ({timer})")


def _select(table, **conds) -> np.ndarray:
    mask = np.ones(len(table["dataset"]), dtype=bool)
    for k, v in conds.items():
        col = table[k]
        mask &= np.array([x == v for x in col])
    return mask


def _acc(table, mask) -> np.ndarray:
    return table["accuracy"][mask].astype(float)


def _figures(args, table, eps_grid, out: Path) -> list[str]:
    names = []
    for name in args.datasets:
        for lam in args.lams:
            fig, axes = C.new_figure(1, width=5.2, height=3.8)
            ax = axes[0, 0]
            for method in METHODS:
                means, lo, hi = [], [], []
                for eps in eps_grid:
                    a = _acc(
                        table,
                        _select(table, dataset=name, method=method, lam=float(lam), eps=float(eps)),
                    )
                    a = a[np.isfinite(a)]
                    m = a.mean() if a.size else np.nan
                    s = a.std() if a.size else np.nan
                    means.append(m)
                    lo.append(m - s)
                    hi.append(m + s)
                ax.plot(
                    eps_grid,
                    means,
                    marker="o",
                    ms=3,
                    color=C.COLORS[method],
                    label=C.LABELS[method],
                )
                ax.fill_between(eps_grid, lo, hi, color=C.COLORS[method], alpha=0.18, lw=0)
            for ref in ("non-private", "map"):
                a = _acc(table, _select(table, dataset=name, method=ref))
                a = a[np.isfinite(a)]
                if a.size:
                    ax.axhline(
                        a.mean(),
                        color=C.COLORS[ref],
                        ls="--" if ref == "non-private" else ":",
                        lw=1.2,
                        label=C.LABELS[ref],
                    )
            ax.set_xscale("log")
            ax.set_xlim(eps_grid[0] / 1.3, eps_grid[-1] * 1.3)
            ax.set_xlabel("ε (nats, RDP at λ)")
            ax.set_ylabel("test accuracy (fraction correct)")
            ax.grid(alpha=0.3, which="both", lw=0.4)
            ax.legend(fontsize=7, loc="lower right")
            ax.set_title(
                f"{name}, λ = {lam:g}, β = {args.beta:g}: mean ± std over {args.trials} runs",
                fontsize=9,
            )
            fname = f"{NAME}_{name}_lam{lam:g}.png"
            C.save_figure(fig, out / fname)
            names.append(fname)
    return names


def _report(args, table, eps_grid, figures, elapsed: str, rows: int) -> str:
    pick = sorted({C.nearest(eps_grid, e) for e in (0.1, 1.0, eps_grid[-1])})
    header = ["data set", "n train", "d", "λ"]
    for j in pick:
        header += [f"{m} ε={eps_grid[j]:.3g}" for m in METHODS]
    header += ["non-private sample", "MAP"]
    body = []
    for name in args.datasets:
        sel = _select(table, dataset=name, method="map")
        n = int(table["n"][sel][0]) if sel.any() else 0
        d = int(table["d"][sel][0]) if sel.any() else 0
        for lam in args.lams:
            row = [name, f"{n:,}", str(d), f"{lam:g}"]
            for j in pick:
                for m in METHODS:
                    a = _acc(
                        table,
                        _select(
                            table, dataset=name, method=m, lam=float(lam), eps=float(eps_grid[j])
                        ),
                    )
                    row.append(C.mean_std(a[np.isfinite(a)]) if np.isfinite(a).any() else "failed")
            for ref in ("non-private", "map"):
                a = _acc(table, _select(table, dataset=name, method=ref))
                row.append(C.mean_std(a[np.isfinite(a)]) if np.isfinite(a).any() else "failed")
            body.append(row)
    detail = C.markdown_table(header, body)
    status = table["status"]
    failures = {s: int(np.sum(status == s)) for s in set(status.tolist()) if s != "ok"}
    secs = table["seconds"].astype(float)
    timing_rows = []
    for name in args.datasets:
        for m in METHODS + ("non-private", "map"):
            sel = _select(table, dataset=name, method=m)
            if sel.any():
                timing_rows.append(
                    [name, m, f"{np.median(secs[sel]):.3g}", f"{secs[sel].sum():.0f}"]
                )
    timing = C.markdown_table(
        ["data set", "method", "median s per release", "total s"], timing_rows
    )
    figs = "\n".join(f"![{f}]({f})" for f in figures)
    fail_text = ", ".join(f"{v} {k}" for k, v in failures.items()) or "none"
    return f"""## Logistic regression (`experiments/{NAME}.py`)

Data sets {args.datasets}; β = {args.beta:g}, c = {args.c:g}, OPS radius R = c/β; λ ∈ {args.lams};
ε ∈ {", ".join(f"{e:.3g}" for e in eps_grid)}; {args.trials} runs per data set; seed
{args.seed}; sampler options {args.model_option or "default"}. {rows:,} rows in `{NAME}.csv`;
wall time {elapsed}{" (`--quick`)" if args.quick else ""}. Failed releases: {fail_text}.

{figs}

**Test accuracy, mean ± std over runs:**

{detail}

**Where the time goes** (seconds per release, all runs):

{timing}
"""


if __name__ == "__main__":
    main()
