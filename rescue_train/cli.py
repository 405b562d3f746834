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

from .data.schema import DataError
from .tasks import ANSWER_FORMATS, MODES, TASKS, BuildOptions
from .tasks.base import RSG_CONDITIONS
from .tasks.rpp import DEFINITIONS

# command -> (module, function, one-line help); each function takes the remaining argv.
DISPATCH = {
    "train": ("rescue_train.training.cli", "main",
              "fine-tune with LoRA (recipe=ssp_lora) or train one classifier (recipe=rpp_cls strategy=...)"),
    "merge": ("rescue_train.training.merge", "main", "merge a LoRA run into a full model: rescue-train merge RUN_DIR"),
    "compare": ("rescue_train.training.compare", "main",
                "compare rebalancing strategies: rescue-train compare recipe=rpp_cls strategies=[...] seeds=[...]"),
    "eval": ("rescue_train.evaluation.cli", "main", "evaluate a model: rescue-train eval model=... tasks=[...] ..."),
    "report": ("rescue_train.evaluation.report", "main", "paper-style tables and plots: rescue-train report RESULTS..."),
    "agreement": ("rescue_train.evaluation.agreement", "main", "judge-vs-human agreement: rescue-train agreement ..."),
    "baselines": ("baselines.cli", "main", "trivial baselines beside the paper's LLMs: rescue-train baselines DATA"),
}


def _build_options(args: argparse.Namespace) -> BuildOptions:
    return BuildOptions(context=args.context, rpp_definition=args.rpp_definition,
                        rpp_include_current=args.rpp_include_current, stp_targets=args.stp_targets,
                        ssp_target_emotion=args.ssp_target_emotion, rsg_condition=args.rsg_condition,
                        rsg_min_words=args.rsg_min_words, rsg_per_sample=args.rsg_per_sample)


def _add_build_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="benchmark_191.jsonl, a per-sample folder, a saved dataset, a hub id, or 'bundled'")
    parser.add_argument("--context", type=int, default=None,
                        help="rows of context: -1 all prior rows, 0 none, k the last k (default: per task)")
    parser.add_argument("--rpp-definition", choices=sorted(DEFINITIONS), default="D", help="RPP gold definition")
    parser.add_argument("--rpp-include-current", action="store_true", help="show the labelled RPP turn itself")
    parser.add_argument("--stp-targets", choices=("collapse", "set"), default="collapse",
                        help="multi-person targets: collapse to the group label, or keep exact sets")
    parser.add_argument("--ssp-target-emotion", action="store_true",
                        help="give SSP the target's latest annotated emotion")
    parser.add_argument("--rsg-condition", choices=RSG_CONDITIONS, default="none",
                        help="what RSG gives beyond the conversation: none, the target, or target and strategy")
    parser.add_argument("--rsg-min-words", type=int, default=5, help="RSG keeps therapist turns of at least N words")
    parser.add_argument("--rsg-per-sample", type=int, default=0,
                        help="RSG keeps at most N evenly spaced turns per sample (0: all)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rescue-train", description="Train and benchmark models on RESCUE-Bench.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stats = sub.add_parser("stats", help="instance counts, exclusions and labels per task, beside the paper's Table 6")
    _add_build_args(stats)
    stats.add_argument("--json", action="store_true", help="print JSON instead of text")
    convert = sub.add_parser("convert", help="write instances.jsonl and SFT / classification / generation datasets")
    _add_build_args(convert)
    convert.add_argument("--out", required=True, help="output folder")
    convert.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    convert.add_argument("--mode", choices=MODES, default="dialogue", help="input mode (which cues are shown)")
    convert.add_argument("--format", dest="answer_format", choices=ANSWER_FORMATS, default="label",
                         help="answer format: a bare label, or the paper's JSON answers")
    convert.add_argument("--split", dest="scheme", choices=("kfold", "holdout", "none"), default="kfold")
    convert.add_argument("--folds", type=int, default=5)
    convert.add_argument("--seed", type=int, default=0)
    convert.add_argument("--test-fold", type=int, default=0)
    for name, (_, _, text) in DISPATCH.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in DISPATCH:
            module, function, _ = DISPATCH[argv[0]]
            return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
        args = _parser().parse_args(argv)
        if args.command == "stats":
            from .stats import main_stats

            print(main_stats(args.source, args.json, _build_options(args)))
        elif args.command == "convert":
            from .convert import ConvertConfig, convert

            meta = convert(ConvertConfig(source=args.source, out=args.out, tasks=args.tasks, mode=args.mode,
                                         answer_format=args.answer_format, scheme=args.scheme, k=args.folds,
                                         seed=args.seed, test_fold=args.test_fold, build=_build_options(args)))
            for task, info in meta["tasks"].items():
                print(f"{task}: {info['instances']} instances, splits {info['splits']} -> {args.out}/{task}/")
            for note in meta["manifest_notes"] + meta["load_notes"]:
                print("note:", note)
        return 0
    except (DataError, ValueError, FileNotFoundError) as exc:
        print(f"rescue-train: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error; keep Python quiet at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
