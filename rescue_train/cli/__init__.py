"""The ``rescue-train`` command: one module per command in this package, each a :class:`base.Command`.

Every command reads its arguments the same way (rescue_train.cli.base): ``key=value`` or ``--key value``,
inputs as bare words, ``--help`` and ``--cfg`` from its schema, one error line and exit 2 on bad input.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

# command -> one line of help; the command lives in rescue_train/cli/<module>.py
COMMANDS = {
    "stats": ("stats", "instance counts, exclusions and labels per task, beside the paper's Table 6"),
    "convert": ("convert", "write instances.jsonl and SFT / classification / generation datasets"),
    "train": ("train", "fine-tune with LoRA (recipe=ssp_lora) or train one classifier (recipe=rpp_cls strategy=...)"),
    "launch": ("launch", "accelerate launch ending with the training's own status: rescue-train launch [...] train.py"),
    "merge": ("merge", "merge a LoRA run into a full model: rescue-train merge RUN_DIR"),
    "compare": ("compare", "compare rebalancing strategies: rescue-train compare recipe=rpp_cls strategies=[...]"),
    "cv": ("cv", "a fine-tuned model's row over the whole benchmark: rescue-train cv recipe=all_lora model=..."),
    "eval": ("eval", "evaluate a model or a training run: rescue-train eval run=RUN_DIR | model=... [key=value ...]"),
    "chat": ("chat", "one instance's prompt, the model's answer and candidate scores: rescue-train chat RUN_DIR"),
    "report": ("report", "paper-style tables and plots: rescue-train report RESULTS..."),
    "agreement": ("agreement", "judge-vs-human agreement: rescue-train agreement RESULTS --human FILE"),
    "baselines": ("baselines", "trivial baselines beside the paper's LLMs: rescue-train baselines DATA"),
    "audit": ("audit", "relational-orientation audit (RELATE): rescue-train audit INPUT... model=JUDGE [--dry-run]"),
    "card": ("card", "write a run's Hugging Face model card, with eval results: rescue-train card RUN_DIR [EVAL_DIR]"),
    "export": ("export", "closed-set tasks as lm-evaluation-harness tasks: rescue-train export lm-eval --output-dir DIR"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: rescue-train COMMAND [INPUT ...] [key=value | --key value ...] [--cfg] [--help]", "",
             "Train and benchmark models on RESCUE-Bench.", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "rescue-train COMMAND --help lists a command's keys; README.md and docs/ explain them."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from .base import execute

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        import difflib

        close = difflib.get_close_matches(argv[0], COMMANDS, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        print(f"rescue-train: error: unknown command {argv[0]!r}{hint}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{__name__}.{COMMANDS[argv[0]][0]}")
    return execute(module.COMMAND, argv[1:])
