"""Change points of one noisy series: e-divisive means with a permutation test.

The method of MongoDB's performance CI and Apache Otava (Matteson & James 2014, "A
nonparametric approach for multiple change point analysis of multivariate data"; Daly et
al. 2020, "The Use of Change Point Detection to Identify Software Performance Regressions
in a Continuous Integration System"), with alpha = 1 (differences of means):

- for every split ``tau`` of a segment into left ``X`` (m values) and right ``Y`` (k
  values), the divergence ``q(tau) = m k / (m + k) · (2 E|X-Y| - E|X-X'| - E|Y-Y'|)``;
  the split of the largest ``q`` is the candidate;
- its significance: the segment's values permuted ``permutations`` times (a seeded
  generator: the same series always gives the same answer), p the share of permutations
  whose best ``q`` is at least the observed one (``(hits + 1) / (draws + 1)``);
- a candidate with ``p <= alpha`` whose two sides also differ by Welch's t-test at
  ``alpha`` (as Apache Otava confirms e-divisive's candidates: the permutation test alone,
  repeated on every sub-segment, flagged ~2 % of two-level series a second time) is a change
  point, and both sides are searched again (binary segmentation) until no segment holds a
  significant split. Its p-value is the larger of the two tests'.

No distribution is assumed (benchmark noise is skewed, has outliers, is bimodal at times)
and no threshold of percent: a shift counts when it is unlikely under the series' own noise.
Pure numpy: every ``q`` of a segment from the 2-D prefix sums of its distance matrix,
O(n²) per permutation; a permutation test stops early once it cannot end significant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from experiments.shared.stats import confidence_interval, welch

METHOD = "e-divisive means, permutation test and Welch's t-test"


@dataclass(frozen=True)
class Settings:
    """Detection settings (beeweb.settings CHANGES_*; docs/design-notes.md states the
    false-alarm rate and the delay to find a shift measured with the defaults)."""

    alpha: float = 0.01  # largest p-value of a change point
    permutations: int = 199  # draws of the permutation test (p >= 1 / (draws + 1))
    min_size: int = 4  # least runs on either side of a change point
    seed: int = 1234

    @property
    def method(self) -> str:
        return f"{METHOD} (alpha {self.alpha:g}, {self.permutations} permutations)"


@dataclass(frozen=True)
class Segment:
    mean: float
    n: int
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Change:
    """A change point at ``index``: values[index] is the first after the change."""

    index: int
    p_value: float
    q: float
    before: Segment
    after: Segment


def _divergences(d: np.ndarray, min_size: int) -> np.ndarray:
    """q(tau) for tau in [min_size, n - min_size] of the distance matrix ``d`` (n x n)."""
    n = d.shape[0]
    s = np.zeros((n + 1, n + 1))
    s[1:, 1:] = d.cumsum(0).cumsum(1)
    taus = np.arange(min_size, n - min_size + 1)
    m = taus.astype(float)
    k = n - m
    # Block sums of the prefix sums: left x left, right x right, left x right.
    left = s[taus, taus]
    right = s[n, n] - s[taus, n] - s[n, taus] + s[taus, taus]
    cross = s[taus, n] - s[taus, taus]
    within_left = np.where(m > 1, left / np.maximum(m * (m - 1), 1), 0.0)
    within_right = np.where(k > 1, right / np.maximum(k * (k - 1), 1), 0.0)
    between = 2.0 * cross / (m * k)
    return m * k / (m + k) * (between - within_left - within_right)


def _best(values: np.ndarray, min_size: int) -> tuple[int, float]:
    """(tau, q) of the largest divergence of ``values``."""
    d = np.abs(values[:, None] - values[None, :])
    q = _divergences(d, min_size)
    i = int(np.argmax(q))
    return i + min_size, float(q[i])


def _p_value(values: np.ndarray, observed: float, settings: Settings, rng) -> float:
    """Share of permutations of ``values`` whose best divergence reaches ``observed``; stops
    as soon as the answer can no longer be ``<= alpha``."""
    draws = settings.permutations
    most = math.floor(settings.alpha * (draws + 1)) - 1  # hits a significant p allows
    d = np.abs(values[:, None] - values[None, :])
    hits = 0
    for done in range(1, draws + 1):
        order = rng.permutation(len(values))
        q = _divergences(d[np.ix_(order, order)], settings.min_size)
        if q.max() >= observed * (1 - 1e-12):
            hits += 1
            if hits > most:
                return (hits + 1) / (done + 1)
    return (hits + 1) / (draws + 1)


def _segment(values: np.ndarray) -> Segment:
    n = len(values)
    mean = float(values.mean())
    stddev = float(values.std(ddof=1)) if n > 1 else None
    interval = confidence_interval(n, mean, stddev)
    low, high = interval if interval else (None, None)
    return Segment(mean=mean, n=n, low=low, high=high)


def detect(
    series: list[float] | np.ndarray,
    settings: Settings | None = None,
    known: dict[int, float] | None = None,
) -> list[Change]:
    """The change points of ``series`` (values in time order), by index, with their p-values
    and the segments either side (to the neighbouring change points or the series' ends).

    ``known``: indexes found significant before, with their permutation p-values (the
    stored change points, as a new run lands): a best split there keeps its p-value
    without being permuted again (the permutations are the cost: 199 of O(n²) each), and is
    confirmed by Welch's t-test on the segment as it is now."""
    known = known or {}
    settings = settings or Settings()
    values = np.asarray(series, dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError("detect: a one-dimensional series of finite numbers is needed")
    rng = np.random.default_rng(settings.seed)
    found: dict[int, tuple[float, float]] = {}
    todo = [(0, len(values))]
    while todo:
        start, end = todo.pop()
        part = values[start:end]
        if len(part) < 2 * settings.min_size or np.ptp(part) == 0:
            continue
        tau, q = _best(part, settings.min_size)
        p = known.get(start + tau)
        if p is None:
            p = _p_value(part, q, settings, rng)
        if p > settings.alpha:
            continue
        left, right = part[:tau], part[tau:]
        t = welch(
            len(left), float(left.mean()), float(left.var(ddof=1)),
            len(right), float(right.mean()), float(right.var(ddof=1)),
        )  # fmt: skip
        if t is not None:
            if t.p > settings.alpha:
                continue
            p = max(p, t.p)
        found[start + tau] = (p, q)
        todo += [(start, start + tau), (start + tau, end)]
    bounds = [0, *sorted(found), len(values)]
    out = []
    for before_start, index, after_end in zip(bounds, bounds[1:], bounds[2:], strict=False):
        p, q = found[index]
        out.append(
            Change(
                index=index,
                p_value=p,
                q=q,
                before=_segment(values[before_start:index]),
                after=_segment(values[index:after_end]),
            )
        )
    return out
