"""The ``rescue-train`` command: data commands here, the others dispatched to their modules.

Commands taking ``key=value`` overrides (train, eval, compare) pass their arguments through untouched.
Bad input exits with status 2 and one located message, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from ..data import config as data_config
from ..data.schema import DataError
from ..settings import plain_warnings
from ..tasks import TASKS

# command -> (module, function, one-line help); each function takes the remaining argv.
DISPATCH = {
    "train": ("rescue_train.cli.train", "main",
              "fine-tune with LoRA (recipe=ssp_lora) or train one classifier (recipe=rpp_cls strategy=...)"),
    "merge": ("rescue_train.cli.merge", "main", "merge a LoRA run into a full model: rescue-train merge RUN_DIR"),
    "compare": ("rescue_train.cli.compare", "main",
                "compare rebalancing strategies: rescue-train compare recipe=rpp_cls strategies=[...] seeds=[...]"),
    "eval": ("rescue_train.cli.eval", "main",
             "evaluate a model or a training run: rescue-train eval run=RUN_DIR | model=... [key=value ...]"),
    "report": ("rescue_train.cli.report", "main", "paper-style tables and plots: rescue-train report RESULTS..."),
    "agreement": ("rescue_train.cli.agreement", "main", "judge-vs-human agreement: rescue-train agreement ..."),
    "baselines": ("rescue_train.cli.baselines", "main", "trivial baselines beside the paper's LLMs: rescue-train baselines DATA"),
    "audit": ("rescue_train.cli.audit", "main",
              "relational-orientation audit (RELATE): rescue-train audit INPUT... model=JUDGE [--dry-run]"),
    "card": ("rescue_train.cli.card", "main",
             "write a run's Hugging Face model card, with eval results: rescue-train card RUN_DIR [EVAL_DIR ...]"),
    "export": ("rescue_train.cli.export", "main",
               "closed-set tasks as lm-evaluation-harness tasks: rescue-train export lm-eval --output-dir DIR"),
}


BUILD_FLAGS = ("context", "rpp_definition", "rpp_include_current", "stp_targets", "ssp_target_emotion")
SOURCE_HELP = "benchmark_191.jsonl, a per-sample folder, a saved dataset, a hub id, or 'bundled'"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rescue-train", description="Train and benchmark models on RESCUE-Bench.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stats = sub.add_parser("stats", help="instance counts, exclusions and labels per task, beside the paper's Table 6")
    stats.add_argument("source", help=SOURCE_HELP)
    stats.add_argument("--json", action="store_true", help="print JSON instead of text")
    data_config.add_flags(stats, include=BUILD_FLAGS)
    convert = sub.add_parser(
        "convert", help="write instances.jsonl and SFT / classification / generation datasets",
        description="Every dataset row carries its fold and split; the DatasetDict keys are the splits of "
                    "--test-fold. The split groups samples into units (couples / families sharing people) so "
                    "that no unit is in two splits.")
    convert.add_argument("source", help=SOURCE_HELP)
    convert.add_argument("--output-dir", help="output folder (required)")
    convert.add_argument("--out", dest="output_dir", action=data_config.Renamed, new="--output-dir",
                         help=argparse.SUPPRESS)
    convert.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    data_config.add_flags(convert, exclude=("source",))
    for name, (_, _, text) in DISPATCH.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    plain_warnings()
    try:
        if argv and argv[0] in DISPATCH:
            module, function, _ = DISPATCH[argv[0]]
            return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
        args = _parser().parse_args(argv)
        if args.command == "stats":
            from ..stats import main_stats

            print(main_stats(args.source, args.json, data_config.from_flags(args).build_options()))
        elif args.command == "convert":
            from ..convert import ConvertConfig, convert

            if not args.output_dir:
                raise ValueError("convert needs --output-dir FOLDER")
            meta = convert(ConvertConfig(data=data_config.from_flags(args), out=args.output_dir, tasks=args.tasks))
            for task, info in meta["tasks"].items():
                print(f"{task}: {info['instances']} instances, splits {info['splits']} -> {args.output_dir}/{task}/")
            for note in meta["manifest_notes"] + meta["load_notes"]:
                print("note:", note)
        return 0
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error; keep Python quiet at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (DataError, ValueError, OSError) as exc:  # OSError: an output folder that cannot be written
        print(f"rescue-train: error: {exc}", file=sys.stderr)
        return 2
