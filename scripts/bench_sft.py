"""LoRA SFT of the balanced recipes: batches as drawn (before) beside length-grouped batches (now).

    python scripts/bench_sft.py                       # tiny model, ssp_lora and rpp_lora at batch 8, CPU or GPU
    python scripts/bench_sft.py --data benchmark.jsonl --model Qwen/Qwen2.5-0.5B-Instruct --peak-tflops 989

For each recipe and each ``train.batching`` (``drawn``, ``length_grouped``) it prints:

* the non-pad share (real tokens / tokens in the padded batches) of one whole epoch of ``--instances`` rows, as
  the trainer's own data loader batches them (no model runs);
* the real tokens per second of training: ``--steps`` steps, twice over the first ``--steps`` x batch rows
  (two epochs of the same draws for both batchings), timed over the second epoch (the first warms up); on a
  CPU per second of the process's CPU time (``time.process_time``), which other work on the machine does not
  blur as it does wall time.

On a GPU with ``--peak-tflops`` it also prints the model FLOPs utilisation of LoRA training: (4 x frozen + 6 x
trained weights) x tokens/s / peak FLOP/s, about 4 x parameters (the frozen base gets no weight gradients),
attention's own FLOPs left out (``rescue_train.sft.models.training_flops_per_token``).

The rows are the recipe's own: the samples converted as a run converts them (their training rows in turn, up
to ``--instances``), and the recipe's balance columns computed on those rows. With ``--data`` they are a real
benchmark file's; without it, the bundled samples', whose prompts are short and alike where the benchmark's are
not: couple and family rows are then taken in the real fixtures' shares, and each prompt is lengthened (with
bundled dialogue text placed before it) to a length drawn from ``PROMPT_TOKENS`` for its scenario (see there).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Prompt lengths in tokens (the chat-templated prompt, dialogue mode, label answers), uniform in [low, high] per
# scenario. Measured on the eight real benchmark samples of the team's fixtures (5 couple sessions, 3 family
# sessions; characters / 4, about a Qwen or Llama tokenizer's count on this English text):
#   SSP (a window of rows): couple 14 instances, 944-1142 tokens; family 100 instances, 817-1061.
#   RPP (every prior row): couple 26 instances, 794-1574; family 149 instances, 1025-5650, growing with the
#   turn (median 3262), so uniform is its shape.
# A drawn batch of 8 RPP prompts is padded to its longest, near the top of the family range. The rows keep the
# fixtures' share of couple instances (COUPLE_SHARE), not the bundled samples' (about half).
PROMPT_TOKENS = {
    "ssp": {"couple": (944, 1142), "family": (817, 1061)},
    "rpp": {"couple": (794, 1574), "family": (1025, 5650)},
}
COUPLE_SHARE = {"ssp": 14 / 114, "rpp": 26 / 175}
RECIPES = {"ssp": "ssp_lora", "rpp": "rpp_lora"}
BATCHINGS = ("drawn", "length_grouped")  # before, now


def recipe_rows(recipe: str, tokenizer, instances: int, source: str | None, out: Path):
    """The recipe's training rows, ``instances`` of them, with the balance columns a run computes for them;
    without ``source`` (a benchmark file) the bundled rows with lengthened prompts."""
    import numpy as np

    from rescue_train.convert import convert
    from rescue_train.io import read_json
    from rescue_train.sft import data as run_data
    from rescue_train.sft.config import load_config

    # the bundled samples' fold 2 trains on both couple and family sessions (folds 0 and 4 on couples only)
    cfg = load_config(recipe, [f"data.source={source}"] if source else ["data.test_fold=2"])
    convert(run_data.convert_config(cfg, out))
    fold = run_data.load_fold(cfg, out, read_json(out / "convert_meta.json"))
    train = fold.train.remove_columns([c for c in ("sample_weight", "class_weight") if c in fold.train.column_names])
    task = next(iter(cfg.tasks))
    if source is None:
        # every row of each scenario in turn (classes keep their shares, which the balance corrects), the
        # scenarios in the fixtures' shares
        rows = {sc: [i for i, s in enumerate(train["scenario"]) if s == sc] for sc in ("couple", "family")}
        couples = round(instances * COUPLE_SHARE[task])
        train = train.select([rows["couple"][i % len(rows["couple"])] for i in range(couples)]
                             + [rows["family"][i % len(rows["family"])] for i in range(instances - couples)])
        train = train.shuffle(seed=0, keep_in_memory=True)  # the timed epochs take the first rows
        rng = np.random.default_rng(0)
        pool = tokenizer("\n".join(m["content"] for row in fold.train["prompt"] for m in row if m["role"] == "user"),
                         add_special_tokens=False)["input_ids"]

        def lengthen(row):
            low, high = PROMPT_TOKENS[task][row["scenario"]]
            text = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
            have = len(tokenizer(text, add_special_tokens=False)["input_ids"])  # a longer one keeps its length
            need, start = max(int(rng.uniform(low, high)) - have, 0), int(rng.integers(len(pool)))
            filler = tokenizer.decode((pool[start:] + pool * (need // len(pool) + 1))[:need])
            prompt = [dict(m) for m in row["prompt"]]
            user = next(m for m in prompt if m["role"] == "user")
            user["content"] = f"Earlier in the session:\n{filler}\n\n{user['content']}" if need else user["content"]
            return {"prompt": prompt}

        train = train.map(lengthen, keep_in_memory=True)
    else:  # every row of the conversion in turn
        train = train.select([i % len(train) for i in range(instances)])
    return train, cfg


class StepMeter:
    """The trainer's real and padded token counts and the time at the end of every step (a TrainerCallback)."""

    def __init__(self):
        self.marks = []

    def hook(self, trainer):
        import torch
        from transformers import TrainerCallback

        meter = self
        # on a CPU, this process's CPU time: a machine shared with other work would blur wall time
        clock = time.perf_counter if torch.cuda.is_available() else time.process_time

        class Mark(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                meter.marks.append((clock(), trainer._run_meter.clone()))

        return Mark()

    def figures(self, since: int) -> tuple[float, float]:
        """Real tokens per second and the non-pad share of the steps after step ``since``."""
        (t0, m0), (t1, m1) = self.marks[since - 1], self.marks[-1]
        real, padded = float(m1[0] - m0[0]), float(m1[1] - m0[1])
        return real / max(t1 - t0, 1e-9), real / padded


def make_trainer(model_path: str, rows, cfg, batching: str, args, out: str, steps: int = 1):
    import torch
    from omegaconf import OmegaConf
    from peft import LoraConfig, TaskType
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig

    from rescue_train.sft import data as run_data
    from rescue_train.sft.models import compute_dtype, load_tokenizer
    from rescue_train.sft.trainer import RescueSFTTrainer

    dtype = compute_dtype("auto")
    tokenizer = load_tokenizer(OmegaConf.create({"chat_template": None, "pad_token": None}), model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    config = SFTConfig(output_dir=out, use_cpu=not torch.cuda.is_available(), max_steps=steps,
                       per_device_train_batch_size=args.batch_size, max_length=cfg.train.max_length, packing=False,
                       completion_only_loss=True, logging_steps=steps, report_to="none", save_strategy="no",
                       gradient_checkpointing=False, bf16=dtype == torch.bfloat16, disable_tqdm=True, seed=0)
    return RescueSFTTrainer(model=model, args=config, train_dataset=run_data.add_balance_columns(rows, cfg),
                            processing_class=tokenizer, batching=batching,
                            peft_config=LoraConfig(task_type=TaskType.CAUSAL_LM, r=16, lora_alpha=32,
                                                   target_modules="all-linear"))


def epoch_shares(model_path: str, rows, cfg, args, out: str) -> dict[str, float]:
    """Real tokens / padded tokens over one epoch of the trainer's own training batches, per batching (one
    trainer, so the rows are tokenized once)."""
    trainer = make_trainer(model_path, rows, cfg, BATCHINGS[0], args, out)
    shares = {}
    for batching in BATCHINGS:
        trainer.batching = batching
        real = padded = 0
        for batch in trainer.get_train_dataloader():
            real, padded = real + int(batch["attention_mask"].sum()), padded + batch["attention_mask"].numel()
        shares[batching] = real / padded
    return shares


def measure(model_path: str, rows, cfg, batching: str, args, out: str) -> dict:
    from rescue_train.sft.models import training_flops_per_token

    # two epochs of the first steps x batch rows: the second is timed, on the same draws for both batchings
    trainer = make_trainer(model_path, rows.select(range(args.steps * args.batch_size)), cfg, batching, args, out,
                           steps=2 * args.steps)
    meter = StepMeter()
    trainer.add_callback(meter.hook(trainer))
    trainer.train()
    tokens_per_second, timed_share = meter.figures(since=args.steps)
    return {"tokens_per_second": tokens_per_second, "timed_share": timed_share,
            "flops_per_token": training_flops_per_token(trainer.model)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny' or a from_pretrained id/folder of a chat model")
    parser.add_argument("--data", default=None, help="a benchmark .jsonl (default: bundled rows, lengthened)")
    parser.add_argument("--tasks", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--steps", type=int, default=2, help="steps per timed epoch")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--instances", type=int, default=800,
                        help="rows of the epoch whose non-pad share is measured (50 batches group at once)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's peak bf16 TFLOP/s, for MFU")
    args = parser.parse_args()
    import torch
    from omegaconf import OmegaConf

    from rescue_train.inference.presets import resolve_model_path
    from rescue_train.sft.models import load_tokenizer

    model_path = resolve_model_path(args.model)
    tokenizer = load_tokenizer(OmegaConf.create({"chat_template": None, "pad_token": None}), model_path)
    for task in args.tasks:
        with tempfile.TemporaryDirectory() as tmp:
            rows, cfg = recipe_rows(RECIPES[task], tokenizer, args.instances, args.data, Path(tmp) / "data")
            shares = epoch_shares(model_path, rows, cfg, args, f"{tmp}/epoch")
            results = {batching: {"non_pad_share": shares[batching],
                                  **measure(model_path, rows, cfg, batching, args, f"{tmp}/{batching}")}
                       for batching in BATCHINGS}
        for batching, r in results.items():
            line = (f"{RECIPES[task]:9} batch {args.batch_size}  batching={batching:14}  "
                    f"non-pad share {r['non_pad_share']:.3f}  tokens/s {r['tokens_per_second']:9.0f} "
                    f"(non-pad share of the timed steps {r['timed_share']:.3f})")
            if torch.cuda.is_available() and args.peak_tflops:
                mfu = r["flops_per_token"] * r["tokens_per_second"] / (args.peak_tflops * 1e12)
                line += f"  MFU (LoRA, 4N) {mfu:.1%}"
            print(line, flush=True)
        new, old = results["length_grouped"], results["drawn"]
        print(f"{RECIPES[task]:9} length_grouped/drawn: non-pad share x{new['non_pad_share'] / old['non_pad_share']:.2f}, "
              f"tokens/s x{new['tokens_per_second'] / old['tokens_per_second']:.2f} "
              f"(timed steps' non-pad share x{new['timed_share'] / old['timed_share']:.2f})", flush=True)


if __name__ == "__main__":
    main()
