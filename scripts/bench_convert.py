"""Benchmark: load + build all six tasks vs. a bare json.loads of the same file (target ratio <= 3x).

The bare load keeps the decoded objects, as any loader must (discarding them would also skip the
garbage collector's work that holding them costs).

    python scripts/bench_convert.py [--sizes 191 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rescue_train.data import load_samples
from rescue_train.data.splits import assign_units
from rescue_train.data.synthetic import scaled_benchmark, write_jsonl
from rescue_train.tasks import TASKS, BuildOptions


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bare(path: Path) -> list:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def full(path: Path) -> int:
    samples = load_samples(path)
    units = assign_units(samples)
    return sum(len(task.build(samples, units, BuildOptions()).instances) for task in TASKS.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[191, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'samples':>8} {'MB':>6} {'json.loads s':>13} {'load+build s':>13} {'instances':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"bench_{size}.jsonl"
            write_jsonl(scaled_benchmark(size, seed=0), path)
            baseline = best_of(args.repeat, lambda: bare(path))
            ours = best_of(args.repeat, lambda: full(path))
            print(f"{size:>8} {path.stat().st_size / 1e6:>6.1f} {baseline:>13.3f} {ours:>13.3f} "
                  f"{full(path):>10} {ours / baseline:>6.2f}x")


if __name__ == "__main__":
    main()
