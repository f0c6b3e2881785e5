"""10-class MNIST by private softmax regression: test accuracy against eps at lam = 2.

Model (docs/multinomial.md): ``pb.MultinomialLogisticRegression(beta, c=1, n_classes=10)``,
every weight a priori N(0, (n beta)^-1); features: pixels/255, k x k average pooling, each
row scaled to norm 1/sqrt(2), then a constant 1/sqrt(2) (the intercept, sharing the prior):
||x|| = 1. Training rows: the first ``--max-train`` of a fixed random permutation of the 60,000
(per trial); test: the 10,000 test images.

* map: the non-private MAP, scikit-learn ``LogisticRegression(C=1/(n beta),
  fit_intercept=False)`` (multinomial; objective C sum(loss) + ||W||^2/2, the negative log
  posterior times C);
* nonprivate: the certified back-end at r = 1 (eps large enough that nothing is
  tempered): what the algorithm gives without privacy's price;
* diffused / concentrated at every eps: one ``pb.sample`` release each (backend "auto" =
  "langevin", guarantee "algorithm").

Metric: test accuracy of argmax_k x.W_k. Run ``python experiments/mnist_multiclass.py --help``.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

import privbayes as pb  # noqa: E402
from privbayes import datasets  # noqa: E402
from privbayes.preprocessing import normalize_rows  # noqa: E402

NAME = "mnist_multiclass"
METHODS = ("diffused", "concentrated")
COLUMNS = [
    "trial", "method", "lam", "eps", "certified_eps", "r", "m", "steps", "accuracy", "seconds"
]  # fmt: skip
QUICK = dict(eps_grid=C.log_grid("0.01,0.3"), trials=1, max_train=2000, pool=4)


def parse_args(argv: list[str] | None = None):
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--lam", type=float, default=2.0, help="Renyi order")
    # n = 60,000, beta = 0.003: r = 1 already certifies eps ~ 0.044 at lam = 2 (4 lam c^2 /
    # (n beta)), so the grid sits below that
    p.add_argument(
        "--eps-grid", type=C.log_grid, default="0.001:0.1:5", help="LOW:HIGH:COUNT or list"
    )
    p.add_argument("--trials", type=int, default=1, help="training subsets / seeds")
    p.add_argument("--beta", type=float, default=3e-3, help="prior precision per record")
    p.add_argument("--pool", type=int, default=2, help="average-pool k x k pixels")
    p.add_argument("--max-train", type=int, default=60000, help="training rows per trial")
    p.add_argument("--report-only", action="store_true", help="redraw from the last CSV")
    return C.parse_quick(p, argv, QUICK)


def features(images: np.ndarray, pool: int) -> np.ndarray:
    im = images.astype(float) / 255.0
    if pool > 1:
        side = 28 // pool
        im = im[:, : side * pool, : side * pool]
        im = im.reshape(len(im), side, pool, side, pool).mean(axis=(2, 4))
    x = normalize_rows(im.reshape(len(im), -1), 1.0 / np.sqrt(2.0))
    return np.hstack([x, np.full((len(x), 1), 1.0 / np.sqrt(2.0))])


def accuracy(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(x @ w, axis=1) == y))


def run(args) -> list[dict]:
    from sklearn.linear_model import LogisticRegression

    tr_im, tr_y = datasets.load_mnist(args.data_dir, "train")
    te_im, te_y = datasets.load_mnist(args.data_dir, "test")
    x_all, x_te = features(tr_im, args.pool), features(te_im, args.pool)
    rows = []
    for trial in range(args.trials):
        rng = C.task_rng(args.seed, trial)
        keep = rng.permutation(len(x_all))[: args.max_train]
        x, y = x_all[keep], tr_y[keep].astype(int)
        n = len(x)
        base = dict(trial=trial, lam=args.lam, r=1.0, m=1.0, steps=0)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lbfgs' iteration warnings
            fit = LogisticRegression(C=1.0 / (n * args.beta), fit_intercept=False, max_iter=500)
            fit.fit(x, y)
        rows.append(dict(base, method="map", eps=np.inf, certified_eps=np.inf,
                         accuracy=accuracy(fit.coef_.T, x_te, te_y),
                         seconds=time.perf_counter() - t0))  # fmt: skip
        model = pb.MultinomialLogisticRegression(args.beta, 1.0, 10)
        test = (x_te, te_y)
        rows.append(_release(model, (x, y), test, args, rng, base, "diffused", 1e6, "nonprivate"))
        for eps in args.eps_grid:
            for method in METHODS:
                rows.append(_release(model, (x, y), test, args, rng, base, method, float(eps)))
    return rows


def _release(model, data, test, args, rng, base, method, eps, label=None) -> dict:
    """One ``pb.sample`` release (its own calibration at (lam, eps)) and its test accuracy."""
    t = time.perf_counter()
    rel = pb.sample(model, data, args.lam, eps, method, rng=rng)
    cal = rel.calibration
    if not args.no_progress:
        print(f"{label or method} eps={eps:g} r={cal.r:.3g} m={cal.m:.3g} "
              f"K={cal.sampler['steps']} {time.perf_counter() - t:.1f} s", flush=True)  # fmt: skip
    return dict(base, method=label or method, eps=eps, certified_eps=cal.eps, r=cal.r,
                m=cal.m, steps=cal.sampler["steps"], accuracy=accuracy(rel.value, *test),
                seconds=time.perf_counter() - t)  # fmt: skip


def _read_rows(path: Path) -> list[dict]:
    import csv

    with path.open() as f:
        out = []
        for r in csv.DictReader(f):
            out.append({k: (v if k == "method" else float(v)) for k, v in r.items()})
        return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = Path(args.out)
    meta_path = out / f"{NAME}_run.json"
    if args.report_only:
        meta = json.loads(meta_path.read_text())
        for k, v in meta["args"].items():
            setattr(args, k, v)
        rows, elapsed = _read_rows(out / f"{NAME}.csv"), meta["wall_time"]
    else:
        timer = C.Timer()
        args.eps_grid = [float(e) for e in args.eps_grid]
        rows = run(args)
        elapsed = str(timer)
        C.write_csv(out / f"{NAME}.csv", COLUMNS, ([r[c] for c in COLUMNS] for r in rows))
        keys = ("lam", "eps_grid", "trials", "beta", "pool", "max_train", "seed", "quick")
        meta = {"args": {k: getattr(args, k) for k in keys}, "wall_time": elapsed}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    figure = _figure(args, rows, out)
    C.replace_report_section(out / "REPORT.md", NAME, _report(args, rows, figure, elapsed))
    print(f"{NAME}: {len(rows)} rows, REPORT.md section in {out} ({elapsed})")


def _acc(rows, method, eps=None) -> np.ndarray:
    def keep(r) -> bool:  # the CSV keeps 7 digits of eps
        same = eps is None or math.isclose(r["eps"], eps, rel_tol=1e-6)
        return r["method"] == method and same

    return np.array([r["accuracy"] for r in rows if keep(r)])


def _figure(args, rows, out: Path) -> str:
    fig, ax = C.new_figure(1)
    ax = np.ravel(ax)[0]
    eps = np.asarray(args.eps_grid, dtype=float)
    for method in METHODS:
        acc = np.array([_acc(rows, method, e).mean() for e in eps])
        ax.plot(eps, acc, marker="o", label=method)
    for method, style in (("map", "--"), ("nonprivate", ":")):
        ax.axhline(_acc(rows, method).mean(), ls=style, color="k" if method == "map" else "grey",
                   label=method)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel(f"eps at lam = {args.lam:g}")
    ax.set_ylabel("test accuracy (10 classes)")
    ax.set_title(f"MNIST, n = {args.max_train}, beta = {args.beta:g}")
    ax.legend(fontsize=7)
    name = f"{NAME}_lam{args.lam:g}.png"
    C.save_figure(fig, out / name)
    return name


def _report(args, rows, figure: str, elapsed: str) -> str:
    eps = list(args.eps_grid)
    table = []
    for method in METHODS:
        cells = [C.mean_std(_acc(rows, method, e)) for e in eps]
        steps = sorted({int(r["steps"]) for r in rows if r["method"] == method})
        table.append([method, *cells, f"{steps[0]}–{steps[-1]}" if steps else ""])
    for method in ("nonprivate", "map"):
        table.append([method, *([C.mean_std(_acc(rows, method))] * len(eps)), ""])
    secs = [r["seconds"] for r in rows if r["method"] in METHODS]
    return "\n".join([
        "## 10-class MNIST: softmax regression (`mnist_multiclass.py`)",
        "",
        f"Test accuracy (10,000 test images) of one release per (method, eps), λ = {args.lam:g},"
        f" β = {args.beta:g}, {args.max_train} training rows, {args.pool}×{args.pool} pooling"
        f" (d = {(28 // args.pool) ** 2 + 1} with the constant), {args.trials} trial(s) (mean ±"
        " sd over trials when more than one). Back-end: `auto` = `langevin` (guarantee"
        " **algorithm**: the certificate bounds the released K-step output's law,"
        " docs/multinomial.md §4). `map` is the non-private MAP (scikit-learn),"
        " `nonprivate` the same algorithm at r = 1 without privacy.",
        "",
        C.markdown_table(["method", *[f"ε = {e:.3g}" for e in eps], "steps K"], table),
        "",
        f"![accuracy vs eps]({figure})",
        "",
        f"Seconds per release: median {np.median(secs):.1f}, max {np.max(secs):.1f}"
        f" (2 shared cores). Wall time {elapsed}.",
        "",
        "Discussion: a release is one draw of (nearly) the tempered posterior, not its mode:"
        " even without privacy (`nonprivate`, r = 1) its accuracy is below the MAP's by the"
        " posterior's own spread over d·K weights. Privacy's price is the step from"
        " `nonprivate` to the certified rows; at large ε the knob reaches r = 1 (m = 1) and"
        " the rows coincide with `nonprivate` up to the draw's randomness.",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
