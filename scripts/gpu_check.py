"""One-shot check of the GPU paths: training throughput, the class-weighted recipe, QLoRA, two processes,
and evaluation on vLLM against transformers, with targets beside the figures.

    bash scripts/gpu_check.sh                  # one GPU (H100/H200 class): about 8 minutes, no network
    bash scripts/gpu_check.sh --cpu-smoke      # the same steps with tiny shapes on a CPU (< 3 minutes)

Models have random weights and the real shapes of Llama-3.1-8B and Qwen2.5-7B (the values of their
config.json, below); the tokenizer is the tiny model's, trained offline on our bundled data. Steps:

1. ``sft``: LoRA SFT of the Llama-3.1-8B shape (its full 128k vocabulary; the tokenizer's ids are a subset),
   bf16, packing into 4096-token rows, 30 steps: tokens/s,
   peak memory, MFU (6 x parameters x tokens/s over the GPU's peak bf16 FLOP/s; LoRA skips the frozen
   weights' gradients, so the true utilisation is somewhat lower).
2. ``weighted``: the ``ssp_lora`` recipe with ``balance.strategy=sqrt_weights`` through ``rescue_train.sft``
   (conversion, class weights, evaluation every few steps, adapter) on the Qwen2.5-7B shape saved to disk
   (its vocabulary cut to the tokenizer's, so generated ids decode). Its adapter serves step 5.
3. ``qlora``: the same recipe with ``model.quantization=4bit`` when CUDA and bitsandbytes are present.
4. ``ddp``: the recipe under ``accelerate launch`` with two processes, when two GPUs are visible (on CPU in
   the smoke).
5. ``eval``: the closed-set tasks (ITP, RPP, STP, SSP) with the step-2 adapter, protocols rank and sft, on
   the hf backend and then (after it is freed) on vLLM: instances/s and the vLLM/HF ratio. vLLM is in .venv
   (``bash scripts/setup.sh``); ``--vllm-python`` names another environment's python when it is not importable
   here; without vLLM, hf only.

Writes ``OUT/gpu_check.json`` and prints one table. A step that fails is reported and the others still run;
the exit status is 1 if any step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
ROOT = Path(__file__).resolve().parents[1]

# The architecture values of the released config.json files (weights are random).
SHAPES = {
    "llama-3.1-8b": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                     "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072,
                     "tie_word_embeddings": False},
    "qwen2.5-7b": {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                   "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "rope_theta": 1000000.0,
                   "rms_norm_eps": 1e-6, "max_position_embeddings": 32768, "tie_word_embeddings": False},
}
# --cpu-smoke: the same architectures, tiny (head size 64: vLLM's CPU attention needs >= 32)
SMOKE_SIZES = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
               "num_key_value_heads": 1}
TARGETS = {
    "sft.tokens_per_second": (10000.0, "LoRA SFT of an 8B on one H200"),
    "eval.vllm_vs_hf.sft": (10.0, "vLLM vs HF on generation (sft protocol)"),
    "eval.vllm_rank_vs_sft": (1.0, "vLLM rank at least as fast as vLLM sft generation"),
    "eval.vllm_vs_hf.rank": (1.0, "vLLM rank at least as fast as HF rank"),
}


class Skipped(Exception):
    """A step that cannot run here (no CUDA, no bitsandbytes, one GPU)."""


def build_model(shape: str, smoke: bool, vocab_size: int | None, dtype, device: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from rescue_train.tiny import tiny_model_path

    values = dict(SHAPES[shape])
    model_type = values.pop("model_type")
    if smoke:
        values.update(SMOKE_SIZES)
    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    if vocab_size is not None:
        values["vocab_size"] = vocab_size
    config = AutoConfig.for_model(model_type, **values, bos_token_id=None, eos_token_id=tok.eos_token_id,
                                  pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def tokenizer_vocab() -> int:
    from transformers import AutoTokenizer

    from rescue_train.tiny import tiny_model_path

    return len(AutoTokenizer.from_pretrained(tiny_model_path()))


def sft_rows(out: Path):
    import datasets

    from rescue_train.convert import ConvertConfig, convert

    tasks = ["itp", "rpp", "stp", "ssp", "er", "vp"]
    convert(ConvertConfig(output_dir=str(out), tasks=tasks))  # the bundled data
    return datasets.concatenate_datasets([datasets.load_from_disk(str(out / t / "sft"))["train"].select_columns(
        ["prompt", "completion", "chat_template_kwargs"]) for t in tasks])


def peak_memory_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def step_sft(args, work: Path) -> dict:
    """LoRA SFT throughput on the Llama-3.1-8B shape, packed rows of max_length tokens."""
    import torch
    from peft import LoraConfig, TaskType
    from trl import SFTConfig

    from rescue_train.sft.models import compute_dtype
    from rescue_train.sft.trainer import RescueSFTTrainer

    dtype = compute_dtype("auto")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok = build_model("llama-3.1-8b", args.cpu_smoke, tokenizer_vocab() if args.cpu_smoke else None, dtype,
                             device)
    rows = sft_rows(work / "data")
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    config = SFTConfig(output_dir=str(work / "sft"), use_cpu=device == "cpu", max_steps=args.sft_steps,
                       per_device_train_batch_size=1, max_length=args.max_length, packing=True,
                       completion_only_loss=True, logging_steps=1, report_to="none", save_strategy="no",
                       gradient_checkpointing=False, bf16=dtype == torch.bfloat16, disable_tqdm=True, seed=0,
                       learning_rate=1e-4)
    trainer = RescueSFTTrainer(model=model, args=config, train_dataset=rows, processing_class=tok,
                               peft_config=LoraConfig(task_type=TaskType.CAUSAL_LM, r=16, lora_alpha=32,
                                                      target_modules="all-linear"))
    trainer.train()
    logs = [e for e in trainer.state.log_history if "tokens_per_second" in e][1:]  # the first step warms up
    tokens_per_second = sum(e["tokens_per_second"] for e in logs) / max(len(logs), 1)
    parameters = sum(p.numel() for p in trainer.model.parameters())
    figures = {"steps": trainer.state.global_step, "tokens_per_second": round(tokens_per_second, 1),
               "peak_memory_gib": peak_memory_gib(), "parameters": parameters, "dtype": str(dtype),
               "max_length": args.max_length, "non_pad_share": round(logs[-1]["non_pad_share"], 3) if logs else None}
    if device == "cuda":
        figures["mfu"] = round(6 * parameters * tokens_per_second / (args.peak_tflops * 1e12), 4)
    del trainer, model
    from rescue_train.devices import release_memory

    release_memory()
    return figures


def saved_eval_model(args, work: Path) -> Path:
    """The Qwen2.5-7B shape with the tokenizer's vocabulary, written once for the recipe runs and vLLM."""
    import torch

    from rescue_train.sft.models import compute_dtype

    folder = work / "qwen2.5-7b-shape"
    if (folder / "config.json").exists():
        return folder
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok = build_model("qwen2.5-7b", args.cpu_smoke, tokenizer_vocab(), compute_dtype("auto"), device)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    del model
    from rescue_train.devices import release_memory

    release_memory()
    return folder


def recipe_overrides(model_dir: Path, out: Path, steps: int, eval_steps: int) -> list[str]:
    return [f"model.path={model_dir}", "model.name=qwen2.5-7b-shape", "train.gradient_checkpointing=true",
            f"train.max_steps={steps}", f"train.eval_steps={eval_steps}", "train.batch_size=2", "train.grad_accum=1",
            "train.logging_steps=1", "train.report_to=[none]", "train.max_length=4096", f"output_dir={out}"]


def run_recipe(overrides: list[str]) -> dict:
    import torch

    from rescue_train.sft.config import load_config
    from rescue_train.sft.runner import run

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    run_dir = run(load_config("ssp_lora", overrides))
    prov = json.loads((run_dir / "provenance.json").read_text())
    return {"run_dir": str(run_dir), "status": prov["status"], "global_step": prov["global_step"],
            "train_seconds": prov["train_seconds"], "eval_loss": prov["metrics"].get("eval_loss"),
            "base_quantization": prov.get("base_quantization"), "peak_memory_gib": peak_memory_gib()}


def step_weighted(args, work: Path) -> dict:
    model_dir = saved_eval_model(args, work)
    figures = run_recipe([*recipe_overrides(model_dir, work / "weighted", args.recipe_steps, args.recipe_steps // 2),
                          "balance.strategy=sqrt_weights"])
    if figures["eval_loss"] is None:
        raise RuntimeError("the class-weighted run logged no evaluation loss")
    return figures


def step_qlora(args, work: Path) -> dict:
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        raise Skipped("needs CUDA")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise Skipped("bitsandbytes is not installed")
    model_dir = saved_eval_model(args, work)
    return run_recipe([*recipe_overrides(model_dir, work / "qlora", args.recipe_steps, 0), "model.quantization=4bit"])


def step_ddp(args, work: Path) -> dict:
    if not args.cpu_smoke and args.gpus < 2:
        raise Skipped(f"{args.gpus} GPU visible; needs 2")
    model_dir = saved_eval_model(args, work)
    out = work / "ddp"
    launch = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
              "--dynamo_backend", "no"]
    env = dict(os.environ)
    if not args.cpu_smoke:
        env["CUDA_VISIBLE_DEVICES"] = args.all_gpus  # this process sees one GPU; the launch gets two
    cmd = [sys.executable, "-m", "accelerate.commands.launch", *launch, "train.py", "recipe=ssp_lora",
           *recipe_overrides(model_dir, out, 4, 0)]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"accelerate launch failed:\n{done.stderr[-3000:]}")
    prov = json.loads((out / "provenance.json").read_text())
    return {"processes": 2, "status": prov["status"], "global_step": prov["global_step"],
            "seconds": round(time.perf_counter() - started, 1)}


def measure_backends(model_dir: str, adapter_run: str, backends: list[str], limit: int, batch_size: int) -> dict:
    """Instances/s per (backend, protocol) on the closed-set tasks, the same instances for every backend."""
    from rescue_train.data import load_samples
    from rescue_train.evaluation.models import find_adapter
    from rescue_train.evaluation.protocols import predict
    from rescue_train.inference import BackendSpec, EngineOptions, make_backend
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    samples = load_samples("bundled")
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:limit]]
    rates: dict[str, float] = {}
    for name in backends:
        spec = BackendSpec(backend=name, model=model_dir, adapters={"adapter": str(find_adapter(Path(adapter_run))[0])},
                           engine=EngineOptions(max_model_len=8192, gpu_memory_utilization=0.85),
                           batch_size=batch_size, progress=False)
        started = time.perf_counter()
        backend = make_backend(spec)
        rates[f"{name}.load_seconds"] = round(time.perf_counter() - started, 1)
        adapter = "adapter"
        predict(backend, instances[:2], protocol="rank", mode="dialogue", adapter=adapter)  # warm-up
        for protocol in ("rank", "sft"):
            started = time.perf_counter()
            predict(backend, instances, protocol=protocol, mode="dialogue", adapter=adapter)
            rates[f"{name}.{protocol}"] = round(len(instances) / (time.perf_counter() - started), 2)
        backend.close()  # frees the GPU for the next backend
    rates["instances"] = len(instances)
    return rates


def step_eval(args, work: Path, adapter_run: str | None) -> dict:
    import importlib.util

    if adapter_run is None:
        raise Skipped("no adapter: the weighted step did not finish")
    model_dir = str(saved_eval_model(args, work))
    limit = 2 if args.cpu_smoke else args.eval_limit
    if importlib.util.find_spec("vllm") is not None:
        figures = measure_backends(model_dir, adapter_run, ["hf", "vllm"], limit, args.batch_size)
    elif args.vllm_python and Path(args.vllm_python).exists():
        out = work / "eval.json"
        cmd = [args.vllm_python, __file__, "--measure-eval", model_dir, adapter_run, str(out), "--eval-limit", str(limit),
               "--batch-size", str(args.batch_size)]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"evaluation in {args.vllm_python} failed:\n{done.stderr[-3000:]}")
        figures = json.loads(out.read_text())
    else:
        figures = measure_backends(model_dir, adapter_run, ["hf"], limit, args.batch_size)
        figures["vllm"] = "not installed here (pass --vllm-python)"
    if "vllm.sft" in figures:
        figures["vllm_vs_hf.sft"] = round(figures["vllm.sft"] / figures["hf.sft"], 2)
        figures["vllm_vs_hf.rank"] = round(figures["vllm.rank"] / figures["hf.rank"], 2)
        figures["vllm_rank_vs_sft"] = round(figures["vllm.rank"] / figures["vllm.sft"], 2)
    return figures


def table(report: dict) -> str:
    lines = ["| step | status | figure | value | target |", "| --- | --- | --- | --- | --- |"]
    for step in report["steps"]:
        figures = step.get("figures") or {}
        if not figures:
            lines.append(f"| {step['step']} | {step['status']} | {step.get('reason', '')} | | |")
        for key, value in figures.items():
            if key == "run_dir":
                continue
            target = TARGETS.get(f"{step['step']}.{key}")
            verdict = ""
            if target is not None and isinstance(value, (int, float)) and not report["cpu_smoke"]:
                verdict = f"≥ {target[0]:g} ({'met' if value >= target[0] else 'NOT met'}; {target[1]})"
            elif target is not None:
                verdict = f"≥ {target[0]:g} on GPU ({target[1]})"
            lines.append(f"| {step['step']} | {step['status']} | {key} | {value} | {verdict} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on CPU, few steps")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check")
    parser.add_argument("--work", type=Path, default=None,
                        help="models, data and runs (default OUT/work; tens of GB on a GPU)")
    parser.add_argument("--steps", default="sft,weighted,qlora,ddp,eval")
    parser.add_argument("--vllm-python", default=None,
                        help="a python whose environment has vLLM, used when vLLM is not importable here")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the GPU's peak dense bf16 TFLOP/s")
    parser.add_argument("--eval-limit", type=int, default=64, help="instances per closed-set task")
    parser.add_argument("--batch-size", type=int, default=32, help="hf backend batch size")
    parser.add_argument("--measure-eval", nargs=3, metavar=("MODEL", "ADAPTER_RUN", "OUT_JSON"),
                        help=argparse.SUPPRESS)  # the eval step, run inside the vLLM environment
    args = parser.parse_args()
    if args.measure_eval:
        model_dir, adapter_run, out = args.measure_eval
        Path(out).write_text(json.dumps(measure_backends(model_dir, adapter_run, ["hf", "vllm"], args.eval_limit,
                                                         args.batch_size)))
        return 0
    args.gpus = int(os.environ.get("GPU_CHECK_GPUS", "0"))
    args.all_gpus = os.environ.get("GPU_CHECK_ALL_GPUS", "")
    args.sft_steps, args.recipe_steps, args.max_length = (3, 4, 512) if args.cpu_smoke else (30, 10, 4096)
    if args.cpu_smoke:
        args.batch_size = min(args.batch_size, 8)
    import torch

    from rescue_train.provenance import versions

    work = args.work or args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"cpu_smoke": args.cpu_smoke, "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
              "gpus": args.gpus, "versions": versions(), "targets": {k: v[0] for k, v in TARGETS.items()},
              "steps": []}
    started = time.perf_counter()
    adapter_run = None
    for name in args.steps.split(","):
        step_started = time.perf_counter()
        entry: dict = {"step": name}
        try:
            if name == "eval":
                figures = step_eval(args, work, adapter_run)
            else:
                figures = {"sft": step_sft, "weighted": step_weighted, "qlora": step_qlora, "ddp": step_ddp}[name](
                    args, work)
            if name == "weighted":
                adapter_run = figures["run_dir"]
            entry.update(status="ok", figures=figures)
        except Skipped as why:
            entry.update(status="skipped", reason=str(why))
        except Exception as exc:  # report and go on: one broken step must not hide the others' figures
            traceback.print_exc()
            entry.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:2000])
        entry["seconds"] = round(time.perf_counter() - step_started, 1)
        report["steps"].append(entry)
        print(f"[gpu_check] {name}: {entry['status']} in {entry['seconds']} s", flush=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    print(table(report))
    print(f"written: {args.out / 'gpu_check.json'} ({report['seconds']} s)")
    return 1 if any(s["status"] == "failed" for s in report["steps"]) else 0


if __name__ == "__main__":  # vLLM's workers re-import this module
    sys.exit(main())
