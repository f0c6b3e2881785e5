"""GLM posterior sampling with PyMC's NUTS, compiled once per feature dimension.

The model takes X, y, the likelihood weight r and the prior precision as shared data,
so a new data set (any n), a new r or m only updates shared values: the log-density and
its gradient are compiled once per (d, target_accept) and reused. PyMC still builds two
small helper functions (initial point, trace) per ``pm.sample`` call.

Each chain restarts its step-size and mass-matrix adaptation (PyMC resets tuning at the
start of every chain), so nothing learned on one data set carries into the next release.

MCMC is not exact sampling: the certificate is proven for exact posterior draws, and the
release is exact only in the limit. We release one draw taken after tuning and require
R-hat <= 1.01 and no divergent transitions (docs/glm.md).

Interrupts: ``pm.sample`` catches KeyboardInterrupt per chain, goes on with the next
chain and returns what it has (a partial trace). Here Ctrl-C (SIGINT, in the main
thread) stops the whole call instead, and a trace with fewer chains or draws than asked
for (an interrupt that reached PyMC some other way) is never used: both raise
:class:`privbayes.errors.ReleaseInterrupted`, so nothing is released.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import ConvergenceError, ReleaseInterrupted, SamplingError
from .diagnostics import convergence_message

# PyPI's PyTensor cannot find a BLAS to link and says so on every first compile; the
# speed cost is known (benchmarks/glm.py) and the message is noise to our users.
warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")

RHAT_MAX = 1.01


class _QuietPyMC(logging.Filter):
    """Drops PyMC's messages below ERROR while this thread is releasing a draw."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    @property
    def active(self) -> bool:
        return getattr(self.local, "on", False)

    @active.setter
    def active(self, value: bool) -> None:
        self.local.on = value

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.active and record.levelno < logging.ERROR)


_QUIET = _QuietPyMC()
logging.getLogger("pymc").addFilter(_QUIET)
logging.getLogger("pymc.sampling.mcmc").addFilter(_QUIET)
_CACHE: dict[tuple, _Compiled] = {}  # (d, target_accept[, K for softmax regression])
_CACHE_LOCK = threading.Lock()


class _Interrupt(BaseException):
    """SIGINT inside pm.sample. Not a KeyboardInterrupt, which PyMC's chain loop swallows;
    not an Exception, which PyTensor would annotate and callers might catch."""


@contextlib.contextmanager
def _sigint_stops_sampling():
    """While sampling, SIGINT raises _Interrupt (through PyMC) instead of KeyboardInterrupt.

    Only in the main thread (the only one Python runs signal handlers in) and only over
    Python's default handler: a handler the caller installed is left alone. Once disarmed,
    a late SIGINT is the usual KeyboardInterrupt."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    armed = [True]

    def handler(signum, frame):
        if armed[0]:
            armed[0] = False
            raise _Interrupt
        signal.default_int_handler(signum, frame)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        armed[0] = False
        signal.signal(signal.SIGINT, previous)


@dataclass
class _Compiled:
    model: object
    step: object
    lock: threading.Lock  # one data set at a time: set_data + sample must not interleave


def compiled(d: int, target_accept: float, classes: int = 0) -> _Compiled:
    key = (d, target_accept) if classes == 0 else (d, target_accept, classes)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _build(d, target_accept, classes)
        return _CACHE[key]


def _build(d: int, target_accept: float, classes: int = 0) -> _Compiled:
    """classes = 0: binary logistic (y in {-1, +1}); K >= 2: softmax regression with the
    weights flattened row-major from (d, K), y in {0, ..., K-1} (docs/multinomial.md)."""
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model() as model:
        x = pm.Data("X", np.zeros((1, d)))
        y = pm.Data("y", np.ones(1) if classes == 0 else np.zeros(1, dtype=np.int64))
        r = pm.Data("r", 1.0)
        prec = pm.Data("prec", 1.0)
        w = pm.Flat("w", shape=d * max(classes, 1))
        pm.Potential("log_prior", -0.5 * prec * pt.sum(w**2))
        if classes == 0:
            pm.Potential("log_lik", -r * pt.sum(pt.softplus(-y * pt.dot(x, w))))
        else:
            z = pt.dot(x, w.reshape((d, classes)))
            picked = z[pt.arange(z.shape[0]), y]
            loss = pt.sum(pt.logsumexp(z, axis=1)) - pt.sum(picked)
            pm.Potential("log_lik", -r * loss)
        step = pm.NUTS(model=model, target_accept=target_accept)
    return _Compiled(model, step, threading.Lock())


def posterior_draws(
    model,
    xy,
    r: float,
    m: float,
    rng,
    *,
    progressbar: bool = False,
    scale: int = 1,
    chains: int | None = None,
):
    """Post-tuning draws of the tempered posterior, shape (chains, draws, d), and diagnostics.

    Density: exp(-r * sum log(1 + exp(-y w.x)) - (n beta / m) ||w||^2 / 2).
    """
    import arviz as az
    import pymc as pm

    x, y = xy
    n, d = x.shape
    family = getattr(model, "family", None)
    classes = 0 if family is None or family.name == "binary logistic" else family.outputs
    comp = compiled(d, model.target_accept, classes)
    seed = int(rng.integers(2**32))
    _QUIET.active = True  # PyMC's own messages mention divergences etc.
    with comp.lock:
        data = {"X": x, "y": y, "r": float(r), "prec": n * model.beta / m}
        pm.set_data(data, model=comp.model)
        try:
            with warnings.catch_warnings(), _sigint_stops_sampling():
                warnings.simplefilter("ignore")
                idata = _sample(pm, comp, model, scale, seed, progressbar, chains)
        except _Interrupt:
            raise ReleaseInterrupted("PyMC's NUTS was stopped by SIGINT") from None
        except ValueError as exc:
            # every chain stopped by a KeyboardInterrupt during its tuning: PyMC's
            # _choose_chains has no draws left to return
            if "samples to build a trace" not in str(exc) and "No traces" not in str(exc):
                raise
            raise ReleaseInterrupted("PyMC's NUTS was interrupted in every chain") from None
        except pm.exceptions.SamplingError as exc:
            raise SamplingError(
                f"NUTS could not start ({type(exc).__name__}); the tempered posterior may be "
                "extremely concentrated (tiny eps or m): try a larger eps"
            ) from None
        finally:
            _QUIET.active = False
            # do not keep the private data in the cached model after the release
            empty = np.ones(1) if classes == 0 else np.zeros(1, dtype=np.int64)
            pm.set_data({"X": np.zeros((1, d)), "y": empty}, model=comp.model)
    post = idata.posterior["w"]
    want = (chains or model.chains, model.draws * scale)
    got = (int(post.sizes["chain"]), int(post.sizes["draw"]))
    if got != want:  # PyMC caught a KeyboardInterrupt and returned what it had
        # (how far it got depends on timing, which depends on the data: not reported)
        raise ReleaseInterrupted(
            f"PyMC's NUTS returned fewer than the {want[0]} chain(s) of {want[1]} draws asked "
            "for: it was interrupted"
        )
    # np.max/np.min over .values propagate NaN; xarray's .max() skips it, so a coordinate
    # whose chains are constant (R-hat 0/0) would read as converged.
    diagnostics = {
        "rhat_max": float(np.max(az.rhat(idata, var_names=["w"])["w"].values)),
        "ess_bulk_min": float(np.min(az.ess(idata, var_names=["w"], method="bulk")["w"].values)),
        "ess_tail_min": float(np.min(az.ess(idata, var_names=["w"], method="tail")["w"].values)),
        "divergences": int(idata.sample_stats["diverging"].sum()),
        "chains": chains or model.chains,
        "draws": model.draws * scale,
        "tune": model.tune * scale,
    }
    return np.asarray(post.values), diagnostics


def _sample(pm, comp, model, scale: int, seed: int, progressbar: bool, chains):
    return pm.sample(
        draws=model.draws * scale,
        tune=model.tune * scale,
        step=comp.step,
        chains=chains or model.chains,
        cores=1,
        random_seed=seed,
        progressbar=progressbar,
        model=comp.model,
        compute_convergence_checks=False,
        return_inferencedata=True,
    )


def _problems(diag: dict) -> list[str]:
    out = []
    if not diag["rhat_max"] <= RHAT_MAX:  # NaN R-hat counts as a failure
        out.append(f"R-hat {diag['rhat_max']:.4f} > {RHAT_MAX}")
    if diag["divergences"]:
        out.append(f"{diag['divergences']} divergent transition(s)")
    return out


def release_draw(model, xy, cal, rng, *, progressbar: bool, on_bad: str, size=None):
    """Released weight vector(s), (d,) or (size, d), and diagnostics; raises ConvergenceError.

    ``size=k`` runs max(chains, k) chains and releases the last draw of k of them (OPS: k
    accepted draws from distinct chains). A run whose diagnostics fail is repeated with
    twice the tuning and draws (R-hat of a converged chain still fluctuates around 1.01
    with few draws), ``model.reruns`` times.
    """
    from ..glm.passes import is_rows

    if is_rows(xy[0]):  # normally refused earlier, in the model's _statistics
        raise TypeError("backend='pymc' needs X in memory; it does not take Dask inputs")
    chains = max(model.chains, size or 1)
    for attempt in range(model.reruns + 1):
        draws, diag = posterior_draws(
            model,
            xy,
            cal.r,
            cal.m,
            rng,
            progressbar=progressbar,
            scale=2**attempt,
            chains=chains,
        )
        problems = _problems(diag)
        if not problems:
            break
    diag["attempts"] = attempt + 1
    if problems:
        # "warn" never releases chains whose R-hat is undefined (NaN: they did not move)
        can_warn = not math.isnan(diag["rhat_max"])
        if on_bad == "raise" or not can_warn:
            message = convergence_message(problems, diag["attempts"], can_warn=can_warn)
            raise ConvergenceError(message, diagnostics=diag)
        message = convergence_message(problems, diag["attempts"], can_warn=True, released=True)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    chains, n_draws, _ = draws.shape
    k = 1 if size is None else size
    if cal.method == "ops":
        inside = np.linalg.norm(draws, axis=-1) <= model.radius
        diag["ops_acceptance"] = float(inside.mean())
        # Rejection from the untruncated tempered posterior at a fixed time: a chain's last
        # draw is a posterior draw, and given that it lies in the ball, a draw from the
        # truncated posterior. (Choosing among the draws by where they lie would bias it.)
        ok = np.flatnonzero(inside[:, -1])
        if ok.size < k:
            raise SamplingError(
                f"OPS rejection: the last draws of only {ok.size} of {chains} chains lie in the "
                f"ball ||w|| <= R = {model.radius:g} (need {k}; {inside.mean():.1%} of all "
                "draws do). Use a larger radius (the certificate weakens as R grows)"
            )
        values = draws[rng.choice(ok, size=k, replace=False), -1]
    else:
        values = draws[rng.choice(chains, size=k, replace=False), -1]  # last draws
    value = np.array(values[0] if size is None else values, dtype=float)
    value.setflags(write=False)
    return value, diag
