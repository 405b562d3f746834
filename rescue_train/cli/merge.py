"""``rescue-train merge RUN_DIR [--out DIR]``: base model + LoRA adapter -> one plain model folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..sft.merge import merge


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rescue-train merge", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run folder written by `rescue-train train`")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: RUN_DIR/merged)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    out = merge(args.run_dir.resolve(), (args.out or args.run_dir / "merged").resolve())
    print(f"merged model: {out}")
    return 0
