"""Uncertainty of numbers whose instances come in clusters: the project's one implementation of clustered
standard errors, intervals, paired tests, Holm's correction and detectable differences.

RESCUE-Bench instances are not independent: a couple's (or family's) instances share people and sessions,
so every interval here treats the cluster (the split unit), not the instance, as the unit of sampling.

* **A mean over records** (Recall@k, MRR, accuracy, a judge score, BERTScore F1, ...): the cluster-robust
  CR1 standard error, what statsmodels' intercept-only OLS with ``cov_type="cluster"`` gives,
  ``se = sqrt(G/(G-1) * sum_g (sum_{i in g} (s_i - mean))^2) / n`` (its other small-sample factor,
  (n-1)/(n-k), is 1 with the constant alone), with a t interval and p-value on G-1 degrees of freedom
  (statsmodels' ``use_t``). A paired difference is the same estimator over per-instance differences.
* **Anything else** (a ratio such as precision, an F1, a macro average, distinct-n): a percentile cluster
  bootstrap. ``scipy.stats.bootstrap`` draws the clusters with replacement within each stratum (each
  scenario keeps its own number of clusters; a stratum with one cluster is the same in every draw), the
  statistic is recomputed from how often each cluster was drawn, and the interval is the 2.5th and 97.5th
  percentile of the draws where the statistic is defined (``undefined_draws`` counts the others); its SE
  is their standard deviation. A paired difference is bootstrapped as one statistic (both results on the
  same draws) and its two-sided p is ``2 * min(#(d* <= 0) + 1, #(d* >= 0) + 1) / (draws + 1)`` (the
  percentile interval's inversion, never 0).
* Fewer than 2 clusters: no interval, and ``reason`` says why. Fewer than ``FEW_CLUSTERS``:
  ``few_clusters`` is true (cluster-robust inference is known to be fragile there).

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
BOOTSTRAP_DRAWS = 10_000
BOOTSTRAP_SEED = 0
BOOTSTRAP_BATCH = 1000  # draws per call of the statistic: bounds its memory (batch x clusters x outputs)
MEAN_METHOD = "CR1 cluster-robust SE (statsmodels OLS on a constant, cov_type='cluster'), t with G-1 = {df} df"
BOOTSTRAP_METHOD = "percentile cluster bootstrap (scipy.stats.bootstrap; clusters resampled within each {strata})"


def cluster_index(clusters: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct clusters in sorted order, each record's position among them)."""
    names, index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    return names, index


def stream_seed(seed: int, *names: str) -> list[int]:
    """A seed for one quantity (``names``: e.g. task and scenario), so that its draws do not depend on what
    else is computed, and reruns give the same numbers."""
    return [seed, *(zlib.crc32(name.encode()) for name in names)]


def too_few_clusters(clusters: int, where: str = "") -> str | None:
    """Why no interval can be given (fewer than 2 clusters), or None."""
    if clusters >= 2:
        return None
    place = f" in {where}" if where else ""
    return f"{clusters} cluster{'' if clusters == 1 else 's'}{place}: an interval needs at least 2"


def no_interval(reason: str, *, estimate: float | None, n: int, clusters: int, method: str) -> dict[str, Any]:
    return {"estimate": estimate, "se": None, "ci": None, "clusters": clusters, "n": n, "method": method,
            "few_clusters": clusters < FEW_CLUSTERS, "reason": reason}


def clustered_mean(values: Sequence[float], clusters: Sequence, *, confidence: float = CONFIDENCE,
                   test: bool = False, where: str = "") -> dict[str, Any]:
    """The mean of ``values`` with its CR1 standard error and t interval (G-1 df), clusters given per value;
    ``test`` adds ``p``, the two-sided p-value of "the mean is 0" (for a paired difference)."""
    import statsmodels.api as sm

    values = np.asarray(values, dtype=float)
    _, index = cluster_index(clusters)
    n, count = len(values), int(index.max()) + 1 if len(values) else 0
    estimate = float(values.mean()) if n else None
    method = MEAN_METHOD.format(df=max(count - 1, 0))
    reason = too_few_clusters(count, where)
    if reason:
        return {**no_interval(reason, estimate=estimate, n=n, clusters=count, method=method),
                **({"p": None} if test else {})}
    fit = sm.OLS(values, np.ones(n)).fit(cov_type="cluster", cov_kwds={"groups": index}, use_t=True)
    se = float(fit.bse[0])
    low, high = (float(x) for x in fit.conf_int(alpha=1 - confidence)[0])
    out = {"estimate": estimate, "se": se, "ci": [low, high], "clusters": count, "n": n, "method": method,
           "confidence": confidence, "few_clusters": count < FEW_CLUSTERS}
    if test:
        with np.errstate(divide="ignore", invalid="ignore"):
            p = float(fit.pvalues[0])
        # No spread at all: the t statistic's limits (identical results: 1; a constant nonzero difference: 0).
        out["p"] = (1.0 if estimate == 0 else 0.0) if se == 0 else p
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

    def interval(self, output: int, confidence: float = CONFIDENCE) -> list[float] | None:
        kept = self.distribution[output][~np.isnan(self.distribution[output])]
        if not len(kept):
            return None
        alpha = (1 - confidence) / 2
        return [float(np.quantile(kept, alpha)), float(np.quantile(kept, 1 - alpha))]

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
               "method": BOOTSTRAP_METHOD.format(strata=self.stratum_name), "confidence": confidence,
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
                      where: str = "") -> Bootstrap | str:
    """Bootstrap ``statistic`` over clusters; ``strata[g]`` is cluster g's stratum (clusters are resampled
    within their stratum). ``statistic(counts)`` takes ``counts[b, g]``, how often draw b took cluster g
    (floats, batch x clusters), and returns its value per draw (batch,) or several values (outputs x batch);
    NaN marks a draw where it is undefined. Returns the draws, or why there can be none (``where`` names
    the data in that reason)."""
    from scipy.stats import bootstrap

    strata = np.asarray(strata, dtype=str)
    count = len(strata)
    reason = too_few_clusters(count, where)
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
