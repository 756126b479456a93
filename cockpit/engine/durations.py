"""A stage's duration, estimated from the nodes through it and the nodes still in it.

Every node through a stage gives its duration; every node still in it gives a lower bound,
the time its steps have run so far (a right-censored observation). A stage with such nodes
is the lognormal fitted to both by maximum likelihood (durations are positive and skewed to
the slow side), so the quick nodes through a stage first do not pass for the whole stage;
a stage no node is still in keeps its durations' plain mean. A stage seen on few nodes
takes the relative spread pooled over all the stages. An earlier window of the same fleet
may lend each stage its mean, weighed as :data:`HISTORY_NODES` of its nodes
(:func:`lend_history`): two nodes walked by hand then no longer pass alone for a stage the
running wave has not been through. :mod:`cockpit.engine.forecast` walks the waves left with
these estimates.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: A stage's relative spread while no stage has been seen twice (only the canary is
#: through): assumed, never zero.
ASSUMED_CV = 0.15
#: Fewer samples of a stage than this and its spread is the relative spread pooled over the
#: stages (each stage seen twice or more lends its own; a stage seen once is a mean, no spread).
MIN_SPREAD_SAMPLES = 5

#: How many of its nodes an earlier window's mean of a stage is weighed as: as many as pin a
#: stage's spread (:data:`MIN_SPREAD_SAMPLES`). Two nodes walked by hand no longer pass for a
#: stage alone, and a window that differs from the earlier one (a new driver's install, a
#: firmware's POST) outweighs it once a few of its own nodes are through the stage.
HISTORY_NODES = MIN_SPREAD_SAMPLES

_NORMAL = statistics.NormalDist()


def _upper_tail(z: float) -> tuple[float, float]:
    """log P(Z > z) of a standard normal and its hazard φ(z)/P(Z > z), stable far in the tail."""
    q = 0.5 * math.erfc(z / math.sqrt(2.0))
    if q > 1e-300:
        return math.log(q), _NORMAL.pdf(z) / q
    # beyond erfc's range: Mills' ratio, P(Z > z) ~ φ(z)/z
    return -z * z / 2 - math.log(z * math.sqrt(2 * math.pi)), z + 1 / z


@dataclass(frozen=True, slots=True)
class StageFit:
    """One stage's duration as estimated: its mean and spread, the nodes it was seen on, and
    the standard error of its mean (what the mean may be off by, from what was seen)."""

    mean: float
    sd: float
    seen: int
    se: float


def _fit_mu(logs: Sequence[float], cens: Sequence[float], s: float) -> tuple[float, float]:
    """The lognormal's log-mean by maximum likelihood with its log-spread ``s`` given, from the
    exact durations' and the censored ones' logarithms, and its Fisher information. The
    likelihood is log-concave in the log-mean: Newton's steps, kept inside a shrinking bracket."""
    lo = min(min(logs), min(cens, default=math.inf)) - 40 * s
    hi = max(max(logs), max(cens, default=-math.inf)) + 40 * s
    mu = statistics.fmean(logs)
    info = 0.0
    for _ in range(100):
        score = sum(x - mu for x in logs) / (s * s)
        info = len(logs) / (s * s)
        for c in cens:
            z = (c - mu) / s
            _, h = _upper_tail(z)
            score += h / s
            info += h * (h - z) / (s * s)
        if score > 0:
            lo = mu
        else:
            hi = mu
        step = score / info
        nxt = mu + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - mu) < 1e-10:
            break
        mu = nxt
    return mu, info


@dataclass(frozen=True, slots=True)
class _LogFit:
    """A lognormal fitted to a stage: log-mean and log-spread, and their covariance."""

    mu: float
    s: float
    var_mu: float
    cov: float
    var_s: float

    @property
    def spread_nodes(self) -> float:
        """How many nodes through the stage would say as much of its spread (``n`` complete
        durations pin the log-spread to a variance of ``s² / 2n``): nodes still in a stage,
        and the quick ones through it first, say little of how far its slow ones go."""
        return self.s * self.s / (2 * self.var_s) if self.var_s > 0 else math.inf


def _derivatives(a: float, b: float, logs: Sequence[float], cens: Sequence[float]) -> tuple[float, ...]:
    """The gradient and Hessian of the censored normal's log-likelihood in ``(a, b) = (mu/s, 1/s)``."""
    ga = gb = haa = hab = hbb = 0.0
    for x in logs:
        w = b * x - a
        ga += w
        gb += 1 / b - w * x
        haa -= 1
        hab += x
        hbb -= 1 / (b * b) + x * x
    for c in cens:
        z = b * c - a
        _, h = _upper_tail(z)
        d = h * (h - z)
        ga += h
        gb -= h * c
        haa -= d
        hab += d * c
        hbb -= d * c * c
    return ga, gb, haa, hab, hbb


def _fit_both(logs: Sequence[float], cens: Sequence[float]) -> _LogFit | None:
    """The lognormal's log-mean and log-spread by maximum likelihood from exact and censored
    durations' logarithms, with their covariance (the inverse of the observed information);
    None: no finite fit. Newton's method in ``(mu/s, 1/s)``, where the censored normal's
    log-likelihood is concave (Olsen 1978), with halved steps."""

    def loglik(a: float, b: float) -> float:
        if b <= 0:
            return -math.inf
        total = sum(math.log(b) - (b * x - a) ** 2 / 2 for x in logs)
        return total + sum(_upper_tail(b * c - a)[0] for c in cens)

    mu0 = statistics.fmean([*logs, *cens])
    s0 = max(statistics.pstdev([*logs, *cens]), 0.01)
    a, b = mu0 / s0, 1 / s0
    here = loglik(a, b)
    for _ in range(100):
        ga, gb, haa, hab, hbb = _derivatives(a, b, logs, cens)
        det = haa * hbb - hab * hab
        if det <= 0:
            return None
        da = -(hbb * ga - hab * gb) / det
        db = -(haa * gb - hab * ga) / det
        t = 1.0
        while t > 1e-6 and loglik(a + t * da, b + t * db) < here:
            t /= 2
        a, b = a + t * da, b + t * db
        there = loglik(a, b)
        if abs(there - here) < 1e-10:
            break
        here = there
    if b <= 0 or not math.isfinite(a / b):
        return None
    _, _, haa, hab, hbb = _derivatives(a, b, logs, cens)
    det = haa * hbb - hab * hab
    if det <= 0:
        return None
    # the covariance of (a, b), then of (mu, s) = (a/b, 1/b) through its Jacobian
    caa, cab, cbb = -hbb / det, hab / det, -haa / det
    ja, jb, kb = 1 / b, -a / (b * b), -1 / (b * b)  # d mu/da, d mu/db, d s/db
    var_mu = ja * ja * caa + 2 * ja * jb * cab + jb * jb * cbb
    cov = ja * kb * cab + jb * kb * cbb
    return _LogFit(a / b, 1 / b, var_mu, cov, kb * kb * cbb)


def _own_spread(exact: Sequence[float], censored: Sequence[float]) -> _LogFit | None:
    """A stage's own lognormal fit, where it pins the stage's spread as well as
    :data:`MIN_SPREAD_SAMPLES` nodes through it would (None: not so well, or no fit)."""
    logs = [math.log(x) for x in exact if x > 0]
    if len(logs) < MIN_SPREAD_SAMPLES:
        return None
    fit = _fit_both(logs, [math.log(c) for c in censored if c > 0])
    return fit if fit is not None and fit.s > 1e-6 and fit.spread_nodes >= MIN_SPREAD_SAMPLES else None


def fit_stage(exact: Sequence[float], censored: Sequence[float], pooled_cv: float) -> StageFit:
    """One stage's duration from the nodes through it (``exact``) and those still in it, each
    known to take at least its time so far (``censored``).

    The nodes through a stage first are its quick ones (two hundred nodes draining together
    report their fastest drains first), and a stage the running wave is in has few through it:
    the nodes still in it say how many are slower, and by how much at least. While some are,
    the stage is the lognormal fitted to both by maximum likelihood (the survival estimate
    with the forecast's own distribution of durations: positive, skewed to the slow side);
    its log-spread its own where that pins it as well as five nodes through would, else the
    pooled relative spread's. With none still in it, the durations' plain mean and spread."""
    n = len(exact)
    cens = [c for c in censored if c > 0]
    m = statistics.fmean(exact)
    if not cens or m <= 0:
        sd = statistics.stdev(exact) if n >= MIN_SPREAD_SAMPLES else pooled_cv * m
        return StageFit(m, sd, n, sd / math.sqrt(n))
    logs = [math.log(x) for x in exact if x > 0]
    own = _own_spread(exact, cens)
    if own is not None:
        mean = math.exp(own.mu + own.s * own.s / 2)
        # the mean's error from the fit's (the delta method: d log mean = d mu + s d s)
        var_log = own.var_mu + 2 * own.s * own.cov + own.s * own.s * own.var_s
        return StageFit(mean, mean * math.sqrt(math.expm1(own.s**2)), n, mean * math.sqrt(max(var_log, 0.0)))
    s = math.sqrt(math.log1p(pooled_cv * pooled_cv))
    if not logs or s <= 0:
        sd = pooled_cv * m
        return StageFit(m, sd, n, sd / math.sqrt(n))
    mu, info = _fit_mu(logs, [math.log(c) for c in cens], s)
    mean = math.exp(mu + s * s / 2)
    # the mean's error from the log-mean's (the delta method: d mean / d mu = mean)
    return StageFit(mean, mean * math.sqrt(math.expm1(s * s)), n, mean / math.sqrt(info))


def _stage_cv(exact: Sequence[float], censored: Sequence[float]) -> tuple[float, float] | None:
    """A stage's own relative variance and its degrees of freedom, for the pooled spread: the
    durations' own while no node is still in it, else the censored fit's where it pins the
    spread as well as five nodes through would (the quick ones through first would say the
    stage spreads less), weighted by as many nodes as it is worth."""
    n = len(exact)
    m = statistics.fmean(exact) if exact else 0.0
    if n < 2 or m <= 0:
        return None
    if not any(c > 0 for c in censored):
        return statistics.variance(exact) / (m * m), n - 1
    own = _own_spread(exact, censored)
    return None if own is None else (math.expm1(own.s**2), own.spread_nodes - 1)


def lend_history(fit: StageFit, earlier: Sequence[float], cv: float) -> StageFit:
    """A stage's fit with an earlier window's durations of it (``earlier``, all positive) lent:
    the two means weighed by how surely each is known, on a log scale (where a ratio counts the
    same either way): this window's by its standard error, from every node through the stage
    or still in it; the earlier window's as if ``min(HISTORY_NODES, its nodes)`` of its nodes
    had been seen now, spread by ``cv``. The spread stays the fit's: how far the two windows
    differ is not a spread among this one's nodes."""
    if not earlier or fit.mean <= 0:
        return fit
    var_own = math.log1p((fit.se / fit.mean) ** 2)
    if var_own <= 0:  # this window's mean is known exactly: nothing to lend it
        return fit
    w_own = 1 / var_own
    w_h = min(HISTORY_NODES, len(earlier)) / math.log1p(cv * cv)
    mean = math.exp((w_own * math.log(fit.mean) + w_h * math.log(statistics.fmean(earlier))) / (w_own + w_h))
    return StageFit(mean, fit.sd * mean / fit.mean, fit.seen, mean * math.sqrt(math.expm1(1 / (w_own + w_h))))


def _earlier_cv(earlier: Sequence[float]) -> float | None:
    """An earlier window's relative spread of a stage, where its nodes pin it (None: too few)."""
    if len(earlier) < MIN_SPREAD_SAMPLES:
        return None
    cv = statistics.stdev(earlier) / statistics.fmean(earlier)
    return cv if cv > 0 else None


def stage_fits(
    stage_s: Mapping[str, Sequence[float]],
    censored_s: Mapping[str, Sequence[float]] | None = None,
    history_s: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, StageFit]:
    """Each stage seen (:func:`fit_stage`). A stage seen on few nodes (after the canary, every
    stage) takes the relative spread pooled over all the stages seen more than once, each
    weighted by its degrees of freedom: two nodes' six stages say more of the spread than any
    one of them, and more than an assumption. ``history_s``: an earlier window's durations
    per stage, lent to each stage seen now (:func:`lend_history`); where they pin the stage's
    spread, a stage seen on few nodes now takes theirs instead of the pooled one."""
    censored_s = censored_s or {}
    history_s = history_s or {}
    seen = {sid: list(v) for sid, v in stage_s.items() if v}
    if not seen:
        raise ValueError("a forecast needs at least one stage measured (the canary's)")
    rel_var = 0.0
    dof = 0.0
    for sid, values in seen.items():
        own = _stage_cv(values, censored_s.get(sid, ()))
        if own is not None:
            rel_var += own[0] * own[1]
            dof += own[1]
    pooled = math.sqrt(rel_var / dof) if dof else ASSUMED_CV
    fits: dict[str, StageFit] = {}
    for sid, values in seen.items():
        earlier = [d for d in history_s.get(sid, ()) if d > 0]
        # a stage seen on few nodes now is spread as the earlier window's nodes were through it,
        # where they pin it: a better word on its spread than the pool of two nodes' stages
        cv = _earlier_cv(earlier) or pooled
        fits[sid] = lend_history(fit_stage(values, censored_s.get(sid, ()), cv), earlier, cv)
    return fits


def node_time(fits: Mapping[str, StageFit]) -> tuple[float, float]:
    """A node's expected time through the stages ``fits`` and its spread: the stages' means
    added, their variances added (stages independent)."""
    stages = fits.values()
    return sum(f.mean for f in stages), math.sqrt(sum(f.sd * f.sd for f in stages))


def node_mean_sigma(
    stage_s: Mapping[str, Sequence[float]],
    censored_s: Mapping[str, Sequence[float]] | None = None,
    history_s: Mapping[str, Sequence[float]] | None = None,
) -> tuple[float, float]:
    """:func:`node_time` of the stages as measured (:func:`stage_fits`)."""
    return node_time(stage_fits(stage_s, censored_s, history_s))
