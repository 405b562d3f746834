"""``rescue-train card RUN_DIR [EVAL_DIR ...]``: write a run's Hugging Face model card, with eval results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from ..model_card import USAGE, _read_results, write_model_card


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    try:
        run_dir = Path(argv[0])
        if not (run_dir / "provenance.json").exists():
            raise FileNotFoundError(f"{run_dir} is not a training run folder (no provenance.json)")
        path = write_model_card(run_dir, [r for p in argv[1:] for r in _read_results(p)])
    except (OSError, ValueError, KeyError) as exc:
        print(f"rescue-train card: error: {exc}", file=sys.stderr)
        return 2
    print(f"model card: {path}")
    return 0
