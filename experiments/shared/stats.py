"""Small statistics for comparisons, in pure Python (scipy is only a test dependency).

Student's t distribution through the regularized incomplete beta function, the 95 %
confidence interval of a mean, the coefficient of variation and Welch's unequal-variances
t-test. Every function takes summary statistics (n, mean, sample variance), which the
database computes: nothing here loops over runs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (df may be fractional)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_pdf(t: float, df: float) -> float:
    return math.exp(
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(t * t / df)
    )


@functools.lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t: the t with P(T <= t) = q. Newton's method on the tail,
    kept inside a bracket by bisection, to a relative 1e-12."""
    if not 0.0 < q < 1.0:
        raise ValueError("q must lie strictly between 0 and 1")
    if df <= 0:
        raise ValueError("df must be positive")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    tail = 1.0 - q
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > tail:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    t = (lo + hi) / 2.0
    for _ in range(200):
        excess = t_sf(t, df) - tail  # > 0: t is too small
        if excess > 0:
            lo = t
        else:
            hi = t
        step = excess / t_pdf(t, df)
        nxt = t + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0
        if abs(nxt - t) <= 1e-13 * max(1.0, abs(t)) or hi - lo <= 1e-13 * max(1.0, hi):
            return nxt
        t = nxt
    return t


def sample_variance(n: int, mean: float, sum_sq: float) -> float:
    """Sample variance from n, mean and the sum of squares (what SQLite can aggregate)."""
    if n < 2:
        return math.nan
    return max((sum_sq - n * mean * mean) / (n - 1), 0.0)


def confidence_interval(
    n: int,
    mean: float,
    stddev: float | None,
    level: float = 0.95,
    floor: float | None = None,
) -> tuple[float, float] | None:
    """Two-sided t interval of the mean; None for fewer than two values. ``floor``: the
    least value the quantity can take (0 for throughput, op/s, latency, sizes): the lower
    end is clipped at it (the t interval of two or three spread values reaches below zero,
    which a throughput never does; the upper end stays the t interval's)."""
    if n < 2 or stddev is None or math.isnan(stddev):
        return None
    half = t_ppf(0.5 + level / 2.0, n - 1) * stddev / math.sqrt(n)
    low = mean - half
    if floor is not None and low < floor:
        low = floor
    return low, mean + half


def cv(mean: float, stddev: float | None) -> float | None:
    """Coefficient of variation (stddev / |mean|) as a fraction; None when undefined."""
    if stddev is None or math.isnan(stddev) or not mean:
        return None
    return stddev / abs(mean)


@dataclass(frozen=True)
class Welch:
    t: float
    df: float
    p: float


def welch(n1: int, mean1: float, var1: float, n2: int, mean2: float, var2: float) -> Welch | None:
    """Welch's two-sided t-test from summary statistics (sample variances).

    None when it cannot be computed: fewer than two values on a side, or no spread at all.
    Matches ``scipy.stats.ttest_ind(a, b, equal_var=False)``.
    """
    if n1 < 2 or n2 < 2 or any(math.isnan(v) for v in (var1, var2)):
        return None
    se1, se2 = var1 / n1, var2 / n2
    se = se1 + se2
    if se <= 0:
        return None
    t = (mean1 - mean2) / math.sqrt(se)
    df = se * se / (se1 * se1 / (n1 - 1) + se2 * se2 / (n2 - 1))
    p = min(1.0, 2.0 * t_sf(abs(t), df))
    return Welch(t, df, p)


def format_p(p: float) -> str:
    if p < 0.001:
        return "p < 0.001"
    if p < 0.01:
        return "p < 0.01"
    return f"p = {p:.2f}"
