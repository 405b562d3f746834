"""Uncertainty of numbers whose instances come in clusters: the project's one implementation of clustered
standard errors, intervals, paired tests, Holm's correction and detectable differences.

RESCUE-Bench instances are not independent: a couple's (or family's) instances share people and sessions,
so every interval here treats the cluster (the split unit), not the instance, as the unit of sampling.

* **A mean over records** (Recall@k, MRR, accuracy, a judge score, BERTScore F1, ...): the CR2
  (Bell-McCaffrey) cluster-robust standard error, with Satterthwaite degrees of freedom for the t quantile
  and test (Pustejovsky and Tipton 2018; ``cr2``: closed forms for a mean). statsmodels' CR1 with G-1 df,
  used before, covered 83% at 10 clusters and rate 0.1 and left [0, 1] in half the cases
  (``scripts/bench_intervals.py``). A mean in a range (the metric's; by default [0, 1] for values that lie
  there, ``natural_bounds``) gets an interval inside it: the hull of the Wilson interval on the effective
  sample size and the inverted cluster-robust score test (``bounded_interval``). A paired difference is the
  same over per-instance differences, within [lo - hi, hi - lo].
* **Anything else** (a ratio such as precision, an F1, a macro average, distinct-n): an expanded percentile
  cluster bootstrap. ``scipy.stats.bootstrap`` draws the clusters with replacement within each stratum (each
  scenario keeps its own number of clusters; a stratum with one cluster is the same in every draw), the
  statistic is recomputed from how often each cluster was drawn, and the interval is the percentiles of
  the draws where the statistic is defined (``undefined_draws`` counts the others), taken at the level
  that corrects the bootstrap's narrowness on few clusters (Hesterberg 2015, ``Bootstrap.level``) and
  widened to the estimate -/+ z sd at that level where that reaches further (``Bootstrap.interval``), never
  beyond the draws, so inside the metric's range since every draw is a value of the metric. Its SE is the draws' standard deviation.
  A paired difference is bootstrapped as one statistic (both results on the same draws) and its two-sided
  p is ``2 * min(#(d* <= 0) + 1, #(d* >= 0) + 1) / (draws + 1)`` (the percentile interval's inversion,
  never 0).
* Fewer than ``MIN_CLUSTERS`` clusters: no interval, and ``reason`` says why. Fewer than ``FEW_CLUSTERS``:
  ``few_clusters`` is true (intervals are wide and their coverage is not checked there).

Every entry records its method, clusters, n and, for the bootstrap, draws and seed.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
FEW_CLUSTERS = 10
MIN_CLUSTERS = 5  # below: Bell-McCaffrey df near 1-2, an interval spans its whole range or explodes (bench_intervals)
BOOTSTRAP_DRAWS = 10_000
BOOTSTRAP_SEED = 0
BOOTSTRAP_BATCH = 1000  # draws per call of the statistic: bounds its memory (batch x clusters x outputs)
MEAN_METHOD = "CR2 cluster-robust SE (Bell-McCaffrey), t with Satterthwaite {df} df"
BOUNDED_METHOD = ", within [{low:g}, {high:g}]: hull of the Wilson interval on the effective sample size and the inverted score test"
BOOTSTRAP_METHOD = ("expanded percentile cluster bootstrap (scipy.stats.bootstrap; clusters resampled within each "
                    "{strata}; percentiles at the {level:.2%} level for {df} df, Hesterberg 2015)")


def cluster_index(clusters: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct clusters in sorted order, each record's position among them)."""
    names, index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    return names, index


def stream_seed(seed: int, *names: str) -> list[int]:
    """A seed for one quantity (``names``: e.g. task and scenario), so that its draws do not depend on what
    else is computed, and reruns give the same numbers."""
    return [seed, *(zlib.crc32(name.encode()) for name in names)]


def too_few_clusters(clusters: int, where: str = "", minimum: int = MIN_CLUSTERS) -> str | None:
    """Why no interval can be given (fewer than ``minimum`` clusters), or None."""
    if clusters >= minimum:
        return None
    place = f" in {where}" if where else ""
    return f"{clusters} cluster{'' if clusters == 1 else 's'}{place}: an interval needs at least {minimum}"


def no_interval(reason: str, *, estimate: float | None, n: int, clusters: int, method: str) -> dict[str, Any]:
    return {"estimate": estimate, "se": None, "ci": None, "clusters": clusters, "n": n, "method": method,
            "few_clusters": clusters < FEW_CLUSTERS, "reason": reason}


def natural_bounds(values: Sequence[float]) -> tuple[float, float] | None:
    """The range a mean of ``values`` is known to lie in when the metric states none: [0, 1] for values
    that all lie there (rates, 0/1 outcomes, shares), otherwise none."""
    values = np.asarray(values, dtype=float)
    return (0.0, 1.0) if len(values) and values.min() >= 0 and values.max() <= 1 else None


def cr2(values: np.ndarray, index: np.ndarray, count: int) -> tuple[float, float, float]:
    """(mean, CR2 standard error, Bell-McCaffrey degrees of freedom) of ``values`` in clusters ``index``.

    For a mean (OLS on a constant) the CR2 adjustment ``(I - H_gg)^(-1/2)`` scales cluster g's residual sum
    S_g by ``(1 - n_g/n)^(-1/2)``: ``se^2 = sum_g S_g^2 / (1 - n_g/n) / n^2``. The degrees of freedom are
    Satterthwaite's for that variance under independent equal-variance errors (Bell and McCaffrey 2002;
    Pustejovsky and Tipton 2018): ``tr(B)^2 / tr(B^2)`` with ``B = diag(n_g / (1 - c_g)) - w w' / n``,
    ``c_g = n_g / n``, ``w_g = n_g / sqrt(1 - c_g)``; G - 1 when the clusters are equal."""
    n = len(values)
    mean = float(values.mean())
    sizes = np.bincount(index, minlength=count).astype(float)
    sums = np.bincount(index, weights=values - mean, minlength=count)
    kept = 1 - sizes / n
    se = float(np.sqrt(np.sum(sums ** 2 / kept)) / n)
    weights = sizes / np.sqrt(kept)
    b = np.diag(sizes / kept) - np.outer(weights, weights) / n
    return mean, se, float(np.trace(b) ** 2 / np.sum(b * b))


def wilson_interval(p: float, se: float, clusters: int, t: float) -> list[float]:
    """The Wilson score interval (t in place of z) of a mean ``p`` in [0, 1] on its effective sample size
    ``n_eff = p (1 - p) / se^2`` (Kish's design effect); a mean on a bound counts each cluster once."""
    if 0 < p < 1 and se == 0:
        return [p, p]  # every value the same inner number
    n_eff = p * (1 - p) / se ** 2 if 0 < p < 1 else float(clusters)
    k = t * t / n_eff
    centre, half = (p + k / 2) / (1 + k), t * np.sqrt(p * (1 - p) / n_eff + k / (4 * n_eff)) / (1 + k)
    return [centre - half, centre + half]


def score_test_interval(values: np.ndarray, index: np.ndarray, count: int, t: float) -> list[float]:
    """The means m0 that a cluster-robust test with the variance taken under the null does not reject:
    ``(mean - m0)^2 <= t^2 sum_g (y_g - n_g m0)^2 / n^2`` (y_g: cluster g's sum), a quadratic in m0. Under
    the null this variance is unbiased whatever the cluster sizes, and it grows on the side away from the
    data, as a rate's spread does; a side the test cannot bound (few or very unequal clusters) is infinite."""
    n, mean = len(values), float(values.mean())
    sizes = np.bincount(index, minlength=count).astype(float)
    residuals = np.bincount(index, weights=values - mean, minlength=count)
    # In d = m0 - mean: (n^2 - t^2 C) d^2 + 2 t^2 B d - t^2 A <= 0.
    a, b, c = n * n - t * t * np.sum(sizes ** 2), 2 * t * t * np.sum(residuals * sizes), -t * t * np.sum(residuals ** 2)
    if a <= 0:
        return [-np.inf, np.inf]
    root = np.sqrt(b * b - 4 * a * c)
    return [mean + (-b - root) / (2 * a), mean + (-b + root) / (2 * a)]


def bounded_interval(values: np.ndarray, index: np.ndarray, count: int, se: float, t: float,
                     bounds: tuple[float, float] | None) -> list[float]:
    """The interval of the mean of ``values`` (CR2 ``se``, t quantile ``t``). Unbounded or half-open:
    ``mean -/+ t se`` (cut at a finite bound).
    Bounded: the hull of two score-type intervals that bend away from a bound the way a rate's sampling
    distribution does, clipped to the range (each alone falls short of the target for skewed rates):
    Wilson's on the effective sample size (with the design effect taken as at least 1: a cluster-robust SE
    below the unclustered one on few clusters is noise) and the inverted cluster-robust score test."""
    mean = float(values.mean())
    if bounds is None or not np.all(np.isfinite(bounds)):  # no range, or a half-open one (a length: [0, inf))
        low, high = bounds or (-np.inf, np.inf)
        return [float(max(low, mean - t * se)), float(min(high, mean + t * se))]
    low, high = bounds
    width = high - low
    unclustered = np.sqrt(values.var(ddof=1) / len(values)) if len(values) > 1 else 0.0
    wilson = wilson_interval((mean - low) / width, max(se, unclustered) / width, count, t)
    score = score_test_interval(values, index, count, t)
    return [float(max(low, min(low + width * wilson[0], score[0]))),
            float(min(high, max(low + width * wilson[1], score[1])))]


def clustered_mean(values: Sequence[float], clusters: Sequence, *, bounds: tuple[float, float] | None | str = "natural",
                   confidence: float = CONFIDENCE, test: bool = False, where: str = "") -> dict[str, Any]:
    """The mean of ``values`` with its CR2 standard error and an interval on Bell-McCaffrey degrees of
    freedom that stays in ``bounds`` (the metric's range; default ``natural_bounds(values)``, None: none),
    clusters given per value; ``test`` adds ``p``, the two-sided t test of "the mean is 0" (for a paired
    difference) with the same SE and degrees of freedom."""
    from scipy.stats import t as student_t

    values = np.asarray(values, dtype=float)
    _, index = cluster_index(clusters)
    n, count = len(values), int(index.max()) + 1 if len(values) else 0
    estimate = float(values.mean()) if n else None
    bounds = natural_bounds(values) if isinstance(bounds, str) else bounds
    reason = too_few_clusters(count, where)
    if reason:
        return {**no_interval(reason, estimate=estimate, n=n, clusters=count, method=MEAN_METHOD.format(df="-")),
                **({"p": None} if test else {})}
    estimate, se, df = cr2(values, index, count)
    t = float(student_t.ppf((1 + confidence) / 2, df))
    method = MEAN_METHOD.format(df=f"{df:.1f}") + (BOUNDED_METHOD.format(low=bounds[0], high=bounds[1]) if bounds else "")
    out = {"estimate": estimate, "se": se, "df": df,
           "ci": bounded_interval(values, index, count, se, t, bounds),
           "clusters": count, "n": n, "method": method, "confidence": confidence, "few_clusters": count < FEW_CLUSTERS}
    if bounds:
        out["range"] = [float(b) for b in bounds]
    if test:
        # No spread at all: the t statistic's limits (identical results: 1; a constant nonzero difference: 0).
        out["p"] = (1.0 if estimate == 0 else 0.0) if se == 0 else float(2 * student_t.sf(abs(estimate) / se, df))
    return out


@dataclass
class Bootstrap:
    """A cluster bootstrap's draws of one or more statistics (rows of ``distribution``)."""

    observed: np.ndarray       # (outputs,): the statistic on the data as they are (every cluster once)
    distribution: np.ndarray   # (outputs, draws)
    clusters: int
    strata: dict[str, int]     # clusters per stratum
    seed: int | list[int]
    stratum_name: str

    @property
    def draws(self) -> int:
        return int(self.distribution.shape[1])

    @property
    def df(self) -> int:
        """Degrees of freedom of the resampled clusters: their number less one per stratum."""
        return sum(size - 1 for size in self.strata.values() if size >= 2)

    def level(self, confidence: float = CONFIDENCE) -> float:
        """The percentile level of the expanded interval (Hesterberg 2015): the bootstrap's spread is the
        plug-in one, short by (G-1)/G in variance, and a normal quantile is short of Student's on few
        clusters; so the tails are taken at the normal level matching ``sqrt(G/df) * t_df``."""
        from scipy.stats import norm
        from scipy.stats import t as student_t

        resampled = self.df + sum(1 for size in self.strata.values() if size >= 2)
        z = np.sqrt(resampled / self.df) * student_t.ppf((1 + confidence) / 2, self.df)
        return float(1 - 2 * norm.sf(z))

    def interval(self, output: int, confidence: float = CONFIDENCE) -> list[float] | None:
        """The expanded percentile interval, widened where needed to ``observed -/+ z sd`` at the same
        expanded level (the percentiles of a skewed or biased ratio can sit off the estimate), and kept
        within the draws' range, hence the metric's."""
        from scipy.stats import norm

        kept = self.distribution[output][~np.isnan(self.distribution[output])]
        if not len(kept):
            return None
        alpha = (1 - self.level(confidence)) / 2
        low, high = (float(x) for x in np.quantile(kept, [alpha, 1 - alpha]))
        observed = float(self.observed[output])
        if len(kept) > 1 and not np.isnan(observed):
            half = float(norm.isf(alpha) * np.std(kept, ddof=1))
            low, high = max(min(low, observed - half), float(kept.min())), min(max(high, observed + half), float(kept.max()))
        return [low, high]

    def p_value(self, output: int) -> float | None:
        """Two-sided bootstrap p of "the statistic is 0" (for a paired difference)."""
        kept = self.distribution[output][~np.isnan(self.distribution[output])]
        if not len(kept):
            return None
        tail = min(int((kept <= 0).sum()), int((kept >= 0).sum())) + 1
        return min(1.0, 2 * tail / (len(kept) + 1))

    def entry(self, output: int, n: int, *, confidence: float = CONFIDENCE, test: bool = False) -> dict[str, Any]:
        values = self.distribution[output]
        undefined = int(np.isnan(values).sum())
        defined = values[~np.isnan(values)]
        out = {"estimate": float(self.observed[output]), "se": float(np.std(defined, ddof=1)) if len(defined) > 1
               else None, "ci": self.interval(output, confidence), "clusters": self.clusters, "n": n,
               "method": BOOTSTRAP_METHOD.format(strata=self.stratum_name, level=self.level(confidence), df=self.df),
               "confidence": confidence,
               "few_clusters": self.clusters < FEW_CLUSTERS, "draws": self.draws, "seed": self.seed,
               "clusters_per_stratum": self.strata}
        if undefined:
            out["undefined_draws"] = undefined
        if test:
            out["p"] = self.p_value(output)
        return out


def cluster_bootstrap(statistic: Callable[[np.ndarray], np.ndarray], strata: Sequence, *,
                      draws: int = BOOTSTRAP_DRAWS, seed: int | list[int] = BOOTSTRAP_SEED,
                      batch: int | None = BOOTSTRAP_BATCH, stratum_name: str = "scenario",
                      where: str = "", minimum: int = 2) -> Bootstrap | str:
    """Bootstrap ``statistic`` over clusters; ``strata[g]`` is cluster g's stratum (clusters are resampled
    within their stratum). ``statistic(counts)`` takes ``counts[b, g]``, how often draw b took cluster g
    (floats, batch x clusters), and returns its value per draw (batch,) or several values (outputs x batch);
    NaN marks a draw where it is undefined. Returns the draws, or why there can be none (``where`` names
    the data in that reason; ``minimum``: the fewest clusters to resample, ``MIN_CLUSTERS`` for a metric's
    interval, 2 for the callers that judge their own units: compare's runs, the audit's dialogues)."""
    from scipy.stats import bootstrap

    strata = np.asarray(strata, dtype=str)
    count = len(strata)
    reason = too_few_clusters(count, where, minimum)
    groups = {s: np.flatnonzero(strata == s) for s in dict.fromkeys(strata.tolist())}
    movable = [members for members in groups.values() if len(members) >= 2]
    if reason is None and not movable:
        reason = f"every {stratum_name} has a single cluster{f' in {where}' if where else ''}: nothing to resample"
    if reason:
        return reason
    fixed = np.zeros(count)
    for members in groups.values():
        if len(members) == 1:
            fixed[members] = 1.0  # resampled within itself, a lone cluster is drawn once every time

    def from_draws(*drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        # drawn[s][b, j]: the cluster taken at position j of draw b in the s-th stratum with 2+ clusters
        size = drawn[0].shape[0]
        counts = np.tile(fixed, (size, 1))
        for picked in drawn:
            np.add.at(counts, (np.arange(size)[:, None], picked), 1.0)
        return np.atleast_2d(statistic(counts))

    observed = np.atleast_2d(statistic(np.ones((1, count))))[:, 0]
    with warnings.catch_warnings():  # undefined draws are expected (counted), scipy's own interval is unused
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*confidence interval cannot be calculated.*")
        result = bootstrap(tuple(movable), from_draws, n_resamples=draws, batch=batch, vectorized=True,
                           paired=False, method="percentile", rng=np.random.default_rng(seed))
    distribution = np.atleast_2d(result.bootstrap_distribution)
    return Bootstrap(observed, distribution, count, {s: len(m) for s, m in groups.items()}, seed, stratum_name)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values (statsmodels' multipletests) over the given ones; None stays None."""
    from statsmodels.stats.multitest import multipletests

    tested = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if tested:
        adjusted = multipletests([pvalues[i] for i in tested], method="holm")[1]
        for i, p in zip(tested, adjusted):
            out[i] = float(p)
    return out


def minimal_detectable_difference(se: float | None, clusters: int, *, alpha: float = 0.05,
                                  power: float = 0.8) -> float | None:
    """The smallest true difference a two-sided test at ``alpha`` detects with probability ``power``, given
    the standard error ``se`` of the estimated difference over ``clusters`` clusters.

    The clustered test is, to first order, a one-sample t test on G cluster-level contributions whose mean
    has standard error ``se``; statsmodels' ``TTestPower`` gives the smallest standardised effect d it
    detects with G observations (noncentral t, G-1 df), and the difference is ``d * sqrt(G) * se``, about
    ``(t_{1-alpha/2, G-1} + t_{power, G-1}) * se`` (2.80 se for many clusters)."""
    from statsmodels.stats.power import TTestPower

    if se is None or clusters < 2:
        return None
    effect = TTestPower().solve_power(effect_size=None, nobs=clusters, alpha=alpha, power=power,
                                      alternative="two-sided")
    return float(effect * np.sqrt(clusters) * se)
