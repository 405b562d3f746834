"""LoRA SFT throughput of the balanced recipes: batches as drawn (before) beside length-grouped batches (now).

    python scripts/bench_sft.py                       # tiny model, ssp_lora and rpp_lora at batch 8, CPU or GPU
    python scripts/bench_sft.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 30 --peak-tflops 989

For each recipe it trains ``--steps`` steps with ``train.batching=drawn`` and with ``length_grouped`` and
prints the real tokens per second and the non-pad share (real tokens / tokens in the padded batches) over
the steps after the first, and their ratios. On a GPU it also prints the model FLOPs utilisation of LoRA
training: (4 x frozen + 6 x trained weights) x tokens/s / peak FLOP/s, about 4 x parameters (the frozen base
gets no weight gradients), attention's own FLOPs left out (``rescue_train.sft.models.training_flops_per_token``).

The rows are the recipe's own: the bundled samples converted as a run converts them, each class's instances
repeated up to ``--instances`` rows, and the recipe's balance columns computed on those rows. The bundled
prompts are short and alike, the benchmark's are not, so each prompt is lengthened (with bundled dialogue
text placed before it) to a length drawn from ``PROMPT_TOKENS`` for its scenario (see there).
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
# A drawn batch of 8 RPP prompts is padded to its longest, near the top of the family range.
PROMPT_TOKENS = {
    "ssp": {"couple": (944, 1142), "family": (817, 1061)},
    "rpp": {"couple": (794, 1574), "family": (1025, 5650)},
}
RECIPES = {"ssp": "ssp_lora", "rpp": "rpp_lora"}


def lengthened_rows(recipe: str, tokenizer, instances: int, scale: float, out: Path):
    """The recipe's training rows, ``instances`` of them, prompts lengthened to drawn lengths, with the balance
    columns a run computes for them."""
    import numpy as np

    from rescue_train.convert import convert
    from rescue_train.io import read_json
    from rescue_train.sft import data as run_data
    from rescue_train.sft.config import load_config

    cfg = load_config(recipe)
    convert(run_data.convert_config(cfg, out))
    fold = run_data.load_fold(cfg, out, read_json(out / "convert_meta.json"))
    train = fold.train.remove_columns([c for c in ("sample_weight", "class_weight") if c in fold.train.column_names])
    task = next(iter(cfg.tasks))
    # every row of the conversion in turn, so classes keep their bundled shares (what the balance corrects)
    train = train.select([i % len(train) for i in range(instances)])
    rng = np.random.default_rng(0)
    pool = tokenizer("\n".join(m["content"] for row in fold.train["prompt"] for m in row if m["role"] == "user"),
                     add_special_tokens=False)["input_ids"]

    def lengthen(row):
        low, high = PROMPT_TOKENS[task][row["scenario"]]
        target = int(rng.uniform(low, high) * scale)
        have = len(tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True))
        start = int(rng.integers(len(pool)))
        need = max(target - have, 0)
        filler = tokenizer.decode((pool[start:] + pool * (need // len(pool) + 1))[:need])
        prompt = [dict(m) for m in row["prompt"]]
        user = next(m for m in prompt if m["role"] == "user")
        user["content"] = f"Earlier in the session:\n{filler}\n\n{user['content']}" if need else user["content"]
        return {"prompt": prompt}

    train = train.map(lengthen, keep_in_memory=True)
    return run_data.add_balance_columns(train, cfg), cfg.train.max_length


class StepMeter:
    """Real and padded tokens and the time, at the end of the first step and of the last (a TrainerCallback)."""

    def __init__(self):
        self.marks = []

    def hook(self, trainer):
        from transformers import TrainerCallback

        meter = self

        class Mark(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                meter.marks.append((time.perf_counter(), trainer._run_meter.clone()))

        return Mark()

    def figures(self) -> tuple[float, float]:
        (t0, m0), (t1, m1) = self.marks[0], self.marks[-1]  # the first step warms up
        real, padded = float(m1[0] - m0[0]), float(m1[1] - m0[1])
        return real / max(t1 - t0, 1e-9), real / padded


def measure(model_path: str, rows, max_length: int, batching: str, args, out: str) -> dict:
    import torch
    from omegaconf import OmegaConf
    from peft import LoraConfig, TaskType
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig

    from rescue_train.sft.models import compute_dtype, load_tokenizer, training_flops_per_token
    from rescue_train.sft.trainer import RescueSFTTrainer

    dtype = compute_dtype("auto")
    tokenizer = load_tokenizer(OmegaConf.create({"chat_template": None, "pad_token": None}), model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    config = SFTConfig(output_dir=out, use_cpu=not torch.cuda.is_available(), max_steps=args.steps,
                       per_device_train_batch_size=args.batch_size, max_length=max_length, packing=False,
                       completion_only_loss=True, logging_steps=args.steps, report_to="none", save_strategy="no",
                       gradient_checkpointing=False, bf16=dtype == torch.bfloat16, disable_tqdm=True, seed=0)
    trainer = RescueSFTTrainer(model=model, args=config, train_dataset=rows, processing_class=tokenizer,
                               peft_config=LoraConfig(task_type=TaskType.CAUSAL_LM, r=16, lora_alpha=32,
                                                      target_modules="all-linear"), batching=batching)
    meter = StepMeter()
    trainer.add_callback(meter.hook(trainer))
    trainer.train()
    tokens_per_second, share = meter.figures()
    return {"tokens_per_second": tokens_per_second, "non_pad_share": share,
            "flops_per_token": training_flops_per_token(trainer.model)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny' or a from_pretrained id/folder of a chat model")
    parser.add_argument("--tasks", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--instances", type=int, default=400, help="training rows (50 batches of 8 group at once)")
    parser.add_argument("--length-scale", type=float, default=1.0,
                        help="multiplies PROMPT_TOKENS (a smaller, quicker run keeps their spread)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's peak bf16 TFLOP/s, for MFU")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step warms up)")
    import torch
    from omegaconf import OmegaConf

    from rescue_train.sft.models import load_tokenizer, resolve_model_path

    model_path = resolve_model_path(args.model)
    tokenizer = load_tokenizer(OmegaConf.create({"chat_template": None, "pad_token": None}), model_path)
    for task in args.tasks:
        with tempfile.TemporaryDirectory() as tmp:
            rows, max_length = lengthened_rows(RECIPES[task], tokenizer, args.instances, args.length_scale,
                                               Path(tmp) / "data")
            results = {batching: measure(model_path, rows, max_length, batching, args, f"{tmp}/{batching}")
                       for batching in ("drawn", "length_grouped")}
        for batching, r in results.items():
            line = (f"{RECIPES[task]:9} batch {args.batch_size}  batching={batching:14}  "
                    f"tokens/s {r['tokens_per_second']:10.0f}  non-pad share {r['non_pad_share']:.3f}")
            if torch.cuda.is_available() and args.peak_tflops:
                mfu = r["flops_per_token"] * r["tokens_per_second"] / (args.peak_tflops * 1e12)
                line += f"  MFU (LoRA, 4N) {mfu:.1%}"
            print(line, flush=True)
        new, old = results["length_grouped"], results["drawn"]
        print(f"{RECIPES[task]:9} length_grouped/drawn: tokens/s x{new['tokens_per_second'] / old['tokens_per_second']:.2f}, "
              f"non-pad share x{new['non_pad_share'] / old['non_pad_share']:.2f}", flush=True)


if __name__ == "__main__":
    main()
