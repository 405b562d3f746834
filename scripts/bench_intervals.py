"""How often the error bars of ``rescue_train.scoring.uncertainty`` cover the truth, on simulated evaluations
shaped like RESCUE-Bench's: clusters (couples) of unequal size with a median of about 25 instances, outcomes
correlated within a cluster.

Per cell (what is estimated, clusters G, within-cluster correlation, true value) it prints how often the
nominal 95% interval covers the truth and how often it leaves the metric's range, for the OLD method (CR1
cluster-robust SE with a t interval on G-1 df via statsmodels, the percentile cluster bootstrap) beside the
NEW one (the package's: CR2 with Bell-McCaffrey df and a Wilson interval on the effective sample size; the
expanded percentile bootstrap widened to the normal interval), and whether the new one meets the target: 93% from 10 clusters up (90% for
rates near 0.05), never out of range. Below ``MIN_CLUSTERS`` the new method gives no interval ("none").

    python scripts/bench_intervals.py                  # the documented table (a few minutes on 2 cores)
    python scripts/bench_intervals.py --simulations 40 --bootstrap-simulations 10 --clusters 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import norm

from rescue_train.scoring.uncertainty import MIN_CLUSTERS, Bootstrap, cluster_bootstrap, clustered_mean

TARGET, RARE_TARGET, RARE_RATE, TARGET_FROM = 0.93, 0.90, 0.05, 10
MEDIAN_SIZE = 25


def cluster_sizes(rng, clusters: int) -> np.ndarray:
    """Unequal sizes, median about 25 (log-normal, sd 0.6 on the log scale), at least 2."""
    return np.maximum(2, np.round(rng.lognormal(np.log(MEDIAN_SIZE), 0.6, clusters))).astype(int)


def beta_around(rng, mean: float, icc: float, size) -> np.ndarray:
    """Cluster-level rates with mean ``mean`` whose beta-binomial intra-cluster correlation is ``icc``."""
    scale = (1 - icc) / icc
    return rng.beta(mean * scale, (1 - mean) * scale, size)


def rate_sample(rng, clusters, icc, rate):
    sizes = cluster_sizes(rng, clusters)
    values = rng.binomial(1, np.repeat(beta_around(rng, rate, icc, clusters), sizes)).astype(float)
    return values, np.repeat(np.arange(clusters), sizes)


def score_sample(rng, clusters, icc, mean):
    """A continuous score in [0, 1] (a BERTScore, a rescaled judge score): cluster means from a beta with
    correlation ``icc``, instances from a beta of concentration 4 around their cluster's mean."""
    sizes = cluster_sizes(rng, clusters)
    centres = np.repeat(beta_around(rng, mean, icc, clusters), sizes)
    return rng.beta(4 * centres, 4 * (1 - centres)), np.repeat(np.arange(clusters), sizes)


def paired_sample(rng, clusters, icc, rates=(0.6, 0.5)):
    """Two results on the same instances (latent threshold model: a cluster effect with latent
    correlation ``icc`` and an instance effect both share): the per-instance differences in {-1, 0, 1}."""
    sizes = cluster_sizes(rng, clusters)
    spread = np.sqrt(icc / (1 - icc))
    scale = np.sqrt(1 + spread ** 2)
    shared = np.repeat(rng.normal(0, spread, clusters), sizes) + rng.normal(size=sizes.sum())
    other = shared + rng.normal(0, 1, sizes.sum())  # the second result's own noise, rescaled below
    first = norm.ppf(rates[0]) * scale + shared > 0
    second = norm.ppf(rates[1]) * np.sqrt(scale ** 2 + 1) + other > 0
    return first.astype(float) - second, np.repeat(np.arange(clusters), sizes)


def old_mean_interval(values, index):
    """The previous method: statsmodels' CR1 cluster-robust SE, t interval on G-1 df."""
    import statsmodels.api as sm

    fit = sm.OLS(values, np.ones(len(values))).fit(cov_type="cluster", cov_kwds={"groups": index}, use_t=True)
    return fit.conf_int(alpha=0.05)[0]


def macro_f1(tp, fp, fn, tn):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (2 * tp / (2 * tp + fp + fn) + 2 * tn / (2 * tn + fn + fp)) / 2


def f1_truth(positive=0.3, sensitivity=0.7, false_positive=0.2):
    tp, fn = positive * sensitivity, positive * (1 - sensitivity)
    fp, tn = (1 - positive) * false_positive, (1 - positive) * (1 - false_positive)
    return float(macro_f1(tp, fp, fn, tn))


def f1_sample(rng, clusters, icc, positive=0.3, sensitivity=0.7, false_positive=0.2):
    """A binary classifier's per-cluster confusion counts: the cluster's positive rate, sensitivity and
    false-positive rate each vary between clusters with correlation ``icc``."""
    sizes = cluster_sizes(rng, clusters)
    positives = rng.binomial(sizes, beta_around(rng, positive, icc, clusters))
    tp = rng.binomial(positives, beta_around(rng, sensitivity, icc, clusters))
    fp = rng.binomial(sizes - positives, beta_around(rng, false_positive, icc, clusters))
    return np.stack([tp, fp, positives - tp, sizes - positives - fp]).astype(float)


class Cell:
    def __init__(self, quantity, clusters, icc, truth, bounds, target):
        self.key = (quantity, clusters, icc, truth)
        self.bounds, self.target, self.truth = bounds, target, truth
        self.tally = {m: {"covered": 0, "outside": 0, "given": 0, "runs": 0} for m in ("old", "new")}

    def add(self, method, interval):
        tally = self.tally[method]
        tally["runs"] += 1
        if interval is None:
            return
        low, high = interval
        tally["given"] += 1
        tally["covered"] += low <= self.truth <= high
        tally["outside"] += low < self.bounds[0] - 1e-12 or high > self.bounds[1] + 1e-12

    def shares(self, method):
        tally = self.tally[method]
        if not tally["given"]:
            return None, 0.0
        return tally["covered"] / tally["given"], tally["outside"] / tally["given"]

    def verdict(self):
        coverage, outside = self.shares("new")
        if outside > 0:
            return "FAIL (out of range)"
        if self.key[1] < TARGET_FROM:
            return "-"
        return "ok" if coverage is not None and coverage >= self.target else "FAIL"


def run_means(cell, rng, simulations, sample, *args):
    for _ in range(simulations):
        values, index = sample(rng, cell.key[1], cell.key[2], *args)
        cell.add("old", old_mean_interval(values, index))
        cell.add("new", clustered_mean(values, index, bounds=cell.bounds)["ci"])


def run_f1(cell, rng, simulations, draws):
    for _ in range(simulations):
        sums = f1_sample(rng, cell.key[1], cell.key[2])
        drawn = cluster_bootstrap(lambda counts: macro_f1(*(counts @ sums.T).T), ["couple"] * cell.key[1],
                                  draws=draws, seed=int(rng.integers(1 << 31)))
        if not isinstance(drawn, Bootstrap):
            cell.add("old", None), cell.add("new", None)
            continue
        kept = drawn.distribution[0][~np.isnan(drawn.distribution[0])]
        cell.add("old", np.quantile(kept, [0.025, 0.975]))  # the previous method: the plain percentile interval
        cell.add("new", drawn.interval(0) if cell.key[1] >= MIN_CLUSTERS else None)


def shown(share):
    return "none" if share is None else f"{share:.3f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=1000, help="simulated evaluations per mean cell")
    parser.add_argument("--bootstrap-simulations", type=int, default=300, help="per bootstrap (macro-F1) cell")
    parser.add_argument("--draws", type=int, default=1000, help="bootstrap draws per simulated evaluation")
    parser.add_argument("--clusters", type=int, nargs="+", default=[3, 5, 10, 20, 40])
    parser.add_argument("--iccs", type=float, nargs="+", default=[0.05, 0.1, 0.2],
                        help="intra-cluster correlations (0.4: see docs/evaluation.md, rare rates fall short)")
    parser.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.1, 0.5, 0.9])
    parser.add_argument("--seed", type=int, default=2025)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    start = time.time()
    cells = []
    for clusters in args.clusters:
        for icc in args.iccs:
            for rate in args.rates:
                cell = Cell("rate", clusters, icc, rate, (0.0, 1.0), RARE_TARGET if rate <= RARE_RATE else TARGET)
                run_means(cell, rng, args.simulations, rate_sample, rate)
                cells.append(cell)
            cell = Cell("score in [0,1]", clusters, icc, 0.7, (0.0, 1.0), TARGET)
            run_means(cell, rng, args.simulations, score_sample, 0.7)
            cells.append(cell)
            cell = Cell("paired difference", clusters, icc, 0.1, (-1.0, 1.0), TARGET)
            run_means(cell, rng, args.simulations, paired_sample)
            cells.append(cell)
            cell = Cell("macro-F1 (bootstrap)", clusters, icc, f1_truth(), (0.0, 1.0), TARGET)
            run_f1(cell, rng, args.bootstrap_simulations, args.draws)
            cells.append(cell)
    print("| quantity | clusters | icc | truth | OLD coverage | OLD out of range | NEW coverage | "
          "NEW out of range | target | NEW meets it |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for cell in cells:
        quantity, clusters, icc, truth = cell.key
        (old, old_out), (new, new_out) = cell.shares("old"), cell.shares("new")
        target = f">= {cell.target:.2f}" if clusters >= TARGET_FROM else "in range"
        print(f"| {quantity} | {clusters} | {icc:g} | {truth:.3g} | {shown(old)} | {old_out:.1%} | {shown(new)} | "
              f"{new_out:.1%} | {target} | {cell.verdict()} |")
    failed = [c for c in cells if c.verdict().startswith("FAIL")]
    print(f"\n{len(cells)} cells ({args.simulations} simulations per mean cell, {args.bootstrap_simulations} per "
          f"bootstrap cell, seed {args.seed}, {time.time() - start:.0f} s); new method below target in "
          f"{len(failed)}; no interval below {MIN_CLUSTERS} clusters.")


if __name__ == "__main__":
    main()
