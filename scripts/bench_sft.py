"""LoRA SFT throughput with and without packing: real tokens per second and the non-pad share.

    python scripts/bench_sft.py                       # tiny model, bundled SSP data, CPU or GPU
    python scripts/bench_sft.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 30 --peak-tflops 989

Prints one line per setting and the packed/unpacked ratios. On a GPU it also prints the model FLOPs
utilisation of LoRA training: (4 x frozen + 6 x trained weights) x tokens/s / peak FLOP/s, about 4 x
parameters (the frozen base gets no weight gradients), attention's own FLOPs left out
(``rescue_train.sft.models.training_flops_per_token``).
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def sft_rows(task: str, out: str):
    import datasets

    from rescue_train.convert import ConvertConfig, convert

    convert(ConvertConfig(output_dir=out, tasks=[task]))
    return datasets.load_from_disk(f"{out}/{task}/sft")["train"].select_columns(["prompt", "completion", "chat_template_kwargs"])


def measure(model_path: str, rows, packing: bool, args, out: str) -> dict:
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
                       per_device_train_batch_size=args.batch_size, max_length=args.max_length, packing=packing,
                       completion_only_loss=True, logging_steps=1, report_to="none", save_strategy="no",
                       gradient_checkpointing=False, bf16=dtype == torch.bfloat16, disable_tqdm=True, seed=0)
    trainer = RescueSFTTrainer(model=model, args=config, train_dataset=rows, processing_class=tokenizer,
                               peft_config=LoraConfig(task_type=TaskType.CAUSAL_LM, r=16, lora_alpha=32,
                                                      target_modules="all-linear"))
    trainer.train()
    logs = [e for e in trainer.state.log_history if "non_pad_share" in e][1:]  # skip the warm-up step
    return {"tokens_per_second": sum(e["tokens_per_second"] for e in logs) / len(logs),
            "non_pad_share": sum(e["non_pad_share"] for e in logs) / len(logs),
            "flops_per_token": training_flops_per_token(trainer.model)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny' or a from_pretrained id/folder of a chat model")
    parser.add_argument("--task", default="ssp")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's peak bf16 TFLOP/s, for MFU")
    args = parser.parse_args()
    import torch

    from rescue_train.inference.presets import resolve_model_path

    model_path = resolve_model_path(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        rows = sft_rows(args.task, f"{tmp}/data")
        results = {packing: measure(model_path, rows, packing, args, f"{tmp}/run{int(packing)}")
                   for packing in (False, True)}
    for packing, r in results.items():
        line = (f"packing={str(packing):5}  tokens/s {r['tokens_per_second']:10.0f}  "
                f"non-pad share {r['non_pad_share']:.3f}")
        if torch.cuda.is_available() and args.peak_tflops:
            mfu = r["flops_per_token"] * r["tokens_per_second"] / (args.peak_tflops * 1e12)
            line += f"  MFU (LoRA, 4N) {mfu:.1%}"
        print(line)
    print(f"packed/unpacked: tokens/s x{results[True]['tokens_per_second'] / results[False]['tokens_per_second']:.2f}, "
          f"non-pad share x{results[True]['non_pad_share'] / results[False]['non_pad_share']:.2f}")


if __name__ == "__main__":
    main()
