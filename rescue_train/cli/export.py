"""``rescue-train export lm-eval --output-dir DIR [key=value ...]``: the closed-set tasks as lm-evaluation-harness tasks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from ..data.schema import DataError
from ..export.lm_eval import GROUP, USAGE, export


def main(argv: Sequence[str]) -> int:
    from ..evaluation.config import load_config

    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] != "lm-eval":
        print(f"rescue-train export: unknown format {argv[0]!r}; expected lm-eval\n\n{USAGE}", file=sys.stderr)
        return 2
    rest, out = argv[1:], None
    for flag in ("--output-dir", "--out"):
        if flag in rest:
            at = rest.index(flag)
            if at + 1 >= len(rest):
                print(f"rescue-train export: {flag} needs a folder", file=sys.stderr)
                return 2
            out, rest = rest[at + 1], rest[:at] + rest[at + 2:]
    out = out or next((a.split("=", 1)[1] for a in rest if a.startswith("output_dir=")), None)
    rest = [a for a in rest if not a.startswith("output_dir=")]
    if not out:
        print(f"rescue-train export: --output-dir DIR is required\n\n{USAGE}", file=sys.stderr)
        return 2
    try:
        cfg = load_config(rest)
        if not cfg.model and not cfg.adapter and not cfg.run:
            cfg.model = "tiny"
        meta = export(cfg, Path(out))
    except (DataError, ValueError, OSError) as exc:
        print(f"rescue-train export: error: {exc}", file=sys.stderr)
        return 2
    for task, n in meta["tasks"].items():
        print(f"{GROUP}_{task}: {n} instances")
    print(f"-> {out}  (lm_eval --model hf --model_args pretrained=MODEL --include_path {out} --tasks {GROUP})")
    return 0
