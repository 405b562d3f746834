"""Benchmark: load + build all six tasks vs. a bare json.loads of the same file (target ratio <= 3x), and
the cost of one very long sample (targets: peak memory <= 10x the file size, time linear in its size).

The bare load keeps the decoded objects, as any loader must (discarding them would also skip the
garbage collector's work that holding them costs). Times are CPU seconds of this process (the best of
``--repeat``), so that other work on a shared machine does not move the ratio. Each long sample is
measured in a fresh process: the peak resident memory it adds over the imported toolkit, per MB of
input, for load + build and for ``stats`` (which also sizes every prompt); it needs Linux's /proc.

    python scripts/bench_convert.py [--sizes 191 2000] [--repeat 3] [--long-mb 1 5 10 20]

Measured on the 2-core development machine (shared, so each figure is the range of three runs of
``--repeat 5``): 2,000 samples (38.6 MB) load and build in 1.7-2.1 CPU s, 2.3-2.5x the bare load; one 20 MB
sample builds in 1.1 s with 7.5x its size in peak memory. Until the loader stopped calling ``gc.freeze()``
(which kept alive every object that existed while data loaded, a model's GPU memory included) and
disabling the collector while it read, the same runs took 1.3-1.5 s (1.6-1.8x) and 0.7 s: the cyclic
collector's passes over the growing heap cost about a third more time, and no memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rescue_train.data import load_samples
from rescue_train.tasks import BuildOptions, DataConfig
from rescue_train.data.splits import assign_units
from synthetic import scaled_benchmark, write_jsonl  # scripts/synthetic.py, beside this script
from rescue_train.stats import StatsConfig, stats_report
from rescue_train.tasks import TASKS


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def bare(path: Path) -> list:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def full(path: Path) -> int:
    samples = load_samples(path)
    units = assign_units(samples)
    return sum(len(task.build(samples, units, BuildOptions()).instances) for task in TASKS.values())


def stats(path: Path) -> int:
    return len(stats_report(StatsConfig(data=DataConfig(source=str(path)), json=True)))


def write_long_sample(path: Path, megabytes: float) -> int:
    """One family sample of about ``megabytes`` MB: the rows of the scaled benchmark's family samples,
    renumbered, as one session (the shape of a very long merged transcript). Returns the row count."""
    family = [s for s in scaled_benchmark(40, seed=0) if s["scenario"] == "family"]
    rows, size = [], 0
    while size < megabytes * 1e6:
        for row in (r for s in family for r in s["rows"]):
            rows.append({**row, "row_index": len(rows) + 1})
            size += len(json.dumps(row)) + 2
            if size >= megabytes * 1e6:
                break
    sample = {**family[0], "sample_id": "family_therapy/long/merged", "rows": rows}
    path.write_text(json.dumps(sample) + "\n", encoding="utf-8")
    return len(rows)


def memory_kib(key: str) -> int:
    """VmRSS (now) or VmHWM (the peak) of this process, from Linux's /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def measure(what: str, path: Path) -> None:
    """Run in a fresh process: print CPU seconds and the peak memory added (MB) as JSON."""
    Path("/proc/self/clear_refs").write_text("5")  # restart the peak from here: the imports' peak is not ours
    before = memory_kib("VmRSS")
    start = time.process_time()
    {"build": full, "stats": stats}[what](path)
    seconds = time.process_time() - start
    print(json.dumps({"seconds": seconds, "added_mb": (memory_kib("VmHWM") - before) / 1024}))


def long_samples(sizes: list[float], folder: Path) -> None:
    print(f"\n{'one sample MB':>13} {'rows':>7} {'step':>6} {'CPU s':>7} {'s / MB':>7} {'peak RSS added MB':>18} "
          f"{'RSS / MB':>9}")
    for megabytes in sizes:
        path = folder / f"long_{megabytes}.jsonl"
        rows = write_long_sample(path, megabytes)
        real_mb = path.stat().st_size / 1e6
        for what in ("build", "stats"):
            done = subprocess.run([sys.executable, __file__, "--measure", what, str(path)], check=True,
                                  capture_output=True, text=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{real_mb:>13.1f} {rows:>7} {what:>6} {result['seconds']:>7.2f} {result['seconds'] / real_mb:>7.3f} "
                  f"{result['added_mb']:>18.0f} {result['added_mb'] / real_mb:>8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[191, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--long-mb", type=float, nargs="*", default=[1, 5, 10, 20])
    parser.add_argument("--measure", nargs=2, metavar=("STEP", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure[0], Path(args.measure[1]))
        return
    print(f"{'samples':>8} {'MB':>6} {'json.loads s':>13} {'load+build s':>13} {'instances':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"bench_{size}.jsonl"
            write_jsonl(scaled_benchmark(size, seed=0), path)
            baseline = best_of(args.repeat, lambda: bare(path))
            ours = best_of(args.repeat, lambda: full(path))
            print(f"{size:>8} {path.stat().st_size / 1e6:>6.1f} {baseline:>13.3f} {ours:>13.3f} "
                  f"{full(path):>10} {ours / baseline:>6.2f}x")
        if args.long_mb:
            long_samples(args.long_mb, Path(tmp))


if __name__ == "__main__":
    main()
