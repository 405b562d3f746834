#!/usr/bin/env python3
"""Write synthetic RESCUE-Bench samples as jsonl.

    python scripts/make_synthetic.py                       # rewrite the bundled mini-benchmark
    python scripts/make_synthetic.py --samples 191 --seed 0 --out /tmp/synthetic_191.jsonl

Without --samples it writes ``mini_benchmark()`` (to the bundled file unless --out is given); with
--samples N it writes ``scaled_benchmark(N, seed)`` to --out (required then). Output is deterministic.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from synthetic import BUNDLED_PATH, mini_benchmark, scaled_benchmark, write_jsonl  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=None, help="number of scaled samples (default: the bundled set)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scaled set (default 0)")
    parser.add_argument("--out", type=Path, default=None, help="output .jsonl (default: the bundled file)")
    args = parser.parse_args(argv)
    if args.samples is None:
        samples = mini_benchmark()
        out = args.out or BUNDLED_PATH
    else:
        if args.samples < 0:
            parser.error("--samples must be >= 0")
        if args.out is None:
            parser.error("--out is required with --samples (the bundled file holds the mini-benchmark only)")
        samples = scaled_benchmark(args.samples, seed=args.seed)
        out = args.out
    path = write_jsonl(samples, out)
    n_family = sum(1 for s in samples if s["scenario"] == "family")
    n_rows = sum(len(s["rows"]) for s in samples)
    print(f"wrote {len(samples)} samples ({len(samples) - n_family} couple, {n_family} family, {n_rows} rows) to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
