"""One-shot check of the GPU paths: training throughput, the class-weighted recipe, evaluation on transformers
and vLLM, QLoRA and two processes, with targets beside the figures.

    bash scripts/gpu_check.sh                  # one H100/H200, offline; stops itself after --time-limit (450 s)
    bash scripts/gpu_check.sh --cpu-smoke      # the same steps with tiny shapes on a CPU (about a minute)

Models have random weights and the real shapes of Llama-3.1-8B and Qwen2.5-7B (the values of their
config.json, below); the tokenizer is the tiny model's, trained offline on our bundled data.

First a preflight: the installed versions of what training needs against their requirements, then one
process that imports the training stack and counts the GPUs this check may use (``CUDA_VISIBLE_DEVICES``
is honoured). If that import fails, nothing else runs. Then the steps, each in its own process, so that
one step's memory is the driver's again when the next starts:

1. ``sft``: LoRA SFT of the Llama-3.1-8B shape (its full 128k vocabulary; the tokenizer's ids are a subset),
   bf16, packing into 4096-token rows, 30 steps: tokens/s, peak memory, and the model FLOPs utilisation of
   LoRA, ``mfu_lora``: (4 x frozen + 6 x trained weights) FLOPs per token, about 4 x parameters, attention's
   own FLOPs left out (``rescue_train.sft.models.training_flops_per_token``), over ``--peak-tflops``.
2. ``weighted``: the ``ssp_lora`` recipe with ``balance.strategy=sqrt_weights`` through ``rescue_train.sft``
   (conversion, class weights, evaluation every few steps, adapter) on the Qwen2.5-7B shape saved to disk
   (its vocabulary cut to the tokenizer's, so generated ids decode). Its adapter serves step 3.
3. ``eval``: the closed-set tasks (ITP, RPP, STP, SSP) with the step-2 adapter, protocols rank and sft, in one
   process on the hf backend, then in another on vLLM (in ``--vllm-python`` when vLLM is not importable
   here), whose ``gpu_memory_utilization`` is set from the memory free when it starts. Both generate with
   the same budget: unconstrained greedy decoding, the tasks' 16 new tokens (a random model rarely stops
   sooner). Instances/s and the vLLM/HF ratios.
4. ``qlora``: the recipe with ``model.quantization=4bit``, when CUDA and bitsandbytes are present.
5. ``ddp``: the recipe under ``accelerate launch`` with two processes on two visible GPUs (on two CPU
   processes in the smoke).

Every figure is written to ``OUT/gpu_check.json`` (and the table to ``OUT/gpu_check.md``) as soon as it is
measured, so a step that fails or a run stopped from outside keeps what was measured before. A step that
fails is reported and the others still run; a step that would start after ``--time-limit`` is skipped, and
one running then is stopped. The exit status is 1 if the preflight or any step failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's package, also where it is not installed (the device machine)

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
    "eval.vllm_vs_hf.sft": (10.0, "vLLM vs HF on generation, same token budget"),
    "eval.vllm_rank_vs_sft": (1.0, "vLLM rank at least as fast as vLLM sft generation"),
    "eval.vllm_vs_hf.rank": (1.0, "vLLM rank at least as fast as HF rank"),
}
STEPS = ("sft", "weighted", "eval", "qlora", "ddp")
# What training and evaluation import; the preflight checks these and everything they require.
TRAINING_STACK = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "omegaconf",
                  "tokenizers", "safetensors", "numpy")
# vLLM's worker creates its own CUDA context (and NCCL buffers) before it compares the memory free with
# gpu_memory_utilization x total: leave that much out of what it is given.
VLLM_HEADROOM_GIB = 3.0
MIN_SECONDS_TO_START = 20  # a step that cannot get this long before the time limit is not started
FAILED_CHILD = 1


# --------------------------------------------------------------------------------------------- the report

def report_path(out: Path) -> Path:
    return out / "gpu_check.json"


def read_report(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write_report(path: Path, report: dict) -> None:
    from rescue_train.io import write_json_atomic

    write_json_atomic(path, report)
    path.with_suffix(".md").write_text(table(report) + "\n", encoding="utf-8")


def update_step(path: Path, step: str, figures: dict | None = None, **fields) -> dict:
    """Merge ``figures`` and ``fields`` into the step's entry and write the report at once. The parent and
    a step's process take turns (the parent waits for the step), so each reads what the other wrote."""
    report = read_report(path)
    entry = next(e for e in report["steps"] if e["step"] == step)
    if figures:
        entry.setdefault("figures", {}).update(figures)
    entry.update(fields)
    write_report(path, report)
    return report


def table(report: dict) -> str:
    lines = ["| step | status | figure | value | target |", "| --- | --- | --- | --- | --- |"]
    preflight = report.get("preflight") or {}
    for problem in preflight.get("problems", []):
        lines.append(f"| preflight | warning | {problem} | | |")
    if preflight.get("import_error"):
        lines.append(f"| preflight | failed | {preflight['import_error']} | | |")
    for step in report["steps"]:
        figures = {k: v for k, v in (step.get("figures") or {}).items() if k != "run_dir"}
        if step.get("reason") or not figures:
            lines.append(f"| {step['step']} | {step['status']} | {step.get('reason', '')} | | |")
        for key, value in figures.items():
            target = TARGETS.get(f"{step['step']}.{key}")
            verdict = ""
            if target is not None and isinstance(value, (int, float)) and not report["cpu_smoke"]:
                verdict = f"≥ {target[0]:g} ({'met' if value >= target[0] else 'NOT met'}; {target[1]})"
            elif target is not None:
                verdict = f"≥ {target[0]:g} on GPU ({target[1]})"
            lines.append(f"| {step['step']} | {step['status']} | {key} | {value} | {verdict} |")
    return "\n".join(lines)


def add_reason(path: Path, step: str, reason: str) -> None:
    """Add why the step failed or was skipped to what its entry already says (eval runs two processes)."""
    entry = next(e for e in read_report(path)["steps"] if e["step"] == step)
    update_step(path, step, reason="; ".join(filter(None, [entry.get("reason"), reason])))


class Figures:
    """A step's process adds each figure to the report as soon as it is measured."""

    def __init__(self, path: Path, step: str):
        self.path, self.step = path, step

    def add(self, **figures) -> None:
        update_step(self.path, self.step, figures)


# ------------------------------------------------------------------------------------------ the preflight

def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_problems(roots, pinned: dict[str, str]) -> tuple[list[str], int]:
    """Unmet requirements among ``roots`` and everything they require (installed versions against each
    distribution's own Requires-Dist, and ``pinned``: the project's specifiers for the roots). Returns the
    problems and how many distributions were checked."""
    from importlib import metadata

    from packaging.requirements import Requirement

    problems, seen, queue = [], set(), [(root, pinned.get(root), "rescue-train") for root in roots]
    while queue:
        name, spec, wanted_by = queue.pop(0)
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{wanted_by} needs {name}{spec or ''}, which is not installed")
            continue
        if spec and not Requirement(f"{name}{spec}").specifier.contains(version, prereleases=True):
            problems.append(f"{wanted_by} needs {name}{spec}, found {version}")
        if _normal(name) in seen:
            continue
        seen.add(_normal(name))
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                queue.append((requirement.name, str(requirement.specifier) or None, f"{name} {version}"))
    return problems, len(seen)


def project_pins() -> dict[str, str]:
    """The specifiers pyproject.toml gives the training stack. torch's pin is the CPU machines' build; a GPU
    machine keeps its own CUDA torch, so it is not checked."""
    import tomllib

    from packaging.requirements import Requirement

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {Requirement(line).name: str(Requirement(line).specifier) for line in declared}
    return {name: pins[name] for name in TRAINING_STACK if name in pins and name != "torch"}


PROBE = """
import json, torch
import datasets, omegaconf, peft, trl, transformers
import rescue_train.convert, rescue_train.sft.runner, rescue_train.evaluation.protocols
count = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(json.dumps({"gpus": count, "device": torch.cuda.get_device_name(0) if count else "cpu",
                  "gpu_memory_gib": round(torch.cuda.mem_get_info()[1] / 2**30, 1) if count else None}))
"""


def probe(python: str) -> dict:
    """Import the training stack and count the GPUs in a separate process (this one never touches CUDA, so
    it holds no GPU memory while the steps run)."""
    done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        last = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise ImportError(last[-1] if last else f"exit status {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def visible_gpus(cuda_visible_devices: str | None, count: int) -> list[str]:
    """The ids to hand on in CUDA_VISIBLE_DEVICES for each of the ``count`` GPUs this process sees: the
    entries of its own CUDA_VISIBLE_DEVICES (indices or UUIDs), else 0..count-1."""
    if cuda_visible_devices is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in cuda_visible_devices.split(",") if entry.strip()][:count]


# ---------------------------------------------------------------------------------- steps (own processes)

def imported_distributions() -> dict[str, str]:
    """The installed distributions whose modules this process imported, with their versions."""
    from importlib import metadata

    owners = metadata.packages_distributions()
    found = {}
    for top in {name.partition(".")[0] for name in list(sys.modules)}:
        for dist in owners.get(top, []):
            found[_normal(dist)] = metadata.version(dist)
    return dict(sorted(found.items()))


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


def sft_rows(out: Path, count: int):
    """``count`` shuffled prompt/completion rows of all six tasks (the bundled data): enough to fill every
    packed row of the run without preparing thousands."""
    import datasets

    from rescue_train.convert import ConvertConfig, convert

    tasks = ["itp", "rpp", "stp", "ssp", "er", "vp"]
    convert(ConvertConfig(output_dir=str(out), tasks=tasks))
    rows = datasets.concatenate_datasets([datasets.load_from_disk(str(out / t / "sft"))["train"].select_columns(
        ["prompt", "completion", "chat_template_kwargs"]) for t in tasks]).shuffle(seed=0)
    return rows.select(range(min(count, len(rows))))


def peak_memory_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def step_sft(args, work: Path, figures: Figures) -> None:
    """LoRA SFT throughput on the Llama-3.1-8B shape, packed rows of max_length tokens."""
    import torch
    from peft import LoraConfig, TaskType
    from trl import SFTConfig

    from rescue_train.sft.models import compute_dtype, training_flops_per_token
    from rescue_train.sft.trainer import RescueSFTTrainer

    dtype = compute_dtype("auto")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.perf_counter()
    model, tok = build_model("llama-3.1-8b", args.cpu_smoke, tokenizer_vocab() if args.cpu_smoke else None, dtype,
                             device)
    figures.add(build_seconds=round(time.perf_counter() - started, 1), dtype=str(dtype).replace("torch.", ""),
                max_length=args.max_length)
    rows = sft_rows(work / "data", 16 * args.sft_steps)
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
    flops_per_token = training_flops_per_token(trainer.model)
    measured = {"steps": trainer.state.global_step, "tokens_per_second": round(tokens_per_second, 1),
                "peak_memory_gib": peak_memory_gib(), "parameters": sum(p.numel() for p in trainer.model.parameters()),
                "flops_per_token": flops_per_token,
                "non_pad_share": round(logs[-1]["non_pad_share"], 3) if logs else None}
    if device == "cuda":
        measured["mfu_lora"] = round(flops_per_token * tokens_per_second / (args.peak_tflops * 1e12), 4)
        measured["mfu_lora_means"] = (f"(4 x frozen + 6 x trained weights) FLOPs/token x tokens/s over "
                                      f"{args.peak_tflops:g} TFLOP/s; attention's own FLOPs left out")
    figures.add(**measured)


def saved_eval_model(args, work: Path) -> Path:
    """The Qwen2.5-7B shape with the tokenizer's vocabulary, written once for the recipe runs and vLLM."""
    import torch

    from rescue_train.devices import release_memory
    from rescue_train.sft.models import compute_dtype

    folder = work / "qwen2.5-7b-shape"
    if (folder / "config.json").exists():
        return folder
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok = build_model("qwen2.5-7b", args.cpu_smoke, tokenizer_vocab(), compute_dtype("auto"), device)
    partial = folder.with_name(folder.name + ".partial")
    model.save_pretrained(partial)
    tok.save_pretrained(partial)
    partial.replace(folder)  # complete or absent: a step stopped while writing leaves no half model
    del model
    release_memory()  # the recipe loads its own copy in this process
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
        torch.cuda.reset_peak_memory_stats()  # the recipe's peak, not that of building the model before it
    cfg = load_config("ssp_lora", overrides)
    shutil.rmtree(cfg.output_dir, ignore_errors=True)  # a check measures a fresh run, not the resumed last one
    run_dir = run(cfg)
    prov = json.loads((run_dir / "provenance.json").read_text())
    return {"run_dir": str(run_dir), "status": prov["status"], "global_step": prov["global_step"],
            "train_seconds": prov["train_seconds"], "eval_loss": prov["metrics"].get("eval_loss"),
            "base_quantization": prov.get("base_quantization"), "peak_memory_gib": peak_memory_gib()}


def step_weighted(args, work: Path, figures: Figures) -> None:
    model_dir = saved_eval_model(args, work)
    measured = run_recipe([*recipe_overrides(model_dir, work / "weighted", args.recipe_steps, args.recipe_eval_steps),
                           "balance.strategy=sqrt_weights"])
    figures.add(**measured)
    if measured["eval_loss"] is None:
        raise RuntimeError("the class-weighted run logged no evaluation loss")


def step_qlora(args, work: Path, figures: Figures) -> None:
    model_dir = saved_eval_model(args, work)
    figures.add(**run_recipe([*recipe_overrides(model_dir, work / "qlora", args.recipe_steps, 0),
                              "model.quantization=4bit"]))


def step_ddp(args, work: Path, figures: Figures) -> None:
    """The recipe under ``accelerate launch`` with two processes (this process sees the two GPUs)."""
    model_dir = saved_eval_model(args, work)
    out = work / "ddp"
    shutil.rmtree(out, ignore_errors=True)
    launch = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
              "--dynamo_backend", "no"]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", *launch, "train.py", "recipe=ssp_lora",
           *recipe_overrides(model_dir, out, 4, 0)]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"accelerate launch failed with exit status {done.returncode} (its output is above)")
    prov = json.loads((out / "provenance.json").read_text())
    figures.add(processes=2, status=prov["status"], global_step=prov["global_step"],
                seconds=round(time.perf_counter() - started, 1))


def vllm_engine(figures: Figures):
    """Engine options for vLLM, its gpu_memory_utilization from the memory free now (less the headroom its
    worker's own start takes), since vLLM refuses to start when less than that share of the total is free."""
    import torch

    from rescue_train.inference import EngineOptions

    if not torch.cuda.is_available():
        return EngineOptions(max_model_len=8192)
    free, total = torch.cuda.mem_get_info()
    share = int((free - VLLM_HEADROOM_GIB * 2**30) / total * 1000) / 1000  # rounded down
    figures.add(**{"vllm.free_gib_at_start": round(free / 2**30, 1), "vllm.gpu_memory_utilization": min(share, 0.9)})
    if share < 0.2:
        raise RuntimeError(f"only {free / 2**30:.1f} of {total / 2**30:.1f} GiB are free on the GPU: not enough "
                           f"for vLLM with the model and a KV cache")
    return EngineOptions(max_model_len=8192, gpu_memory_utilization=min(share, 0.9))


def step_eval(args, work: Path, figures: Figures) -> None:
    """Instances/s of one backend (``--backend``) per protocol on the closed-set tasks; the same instances and
    the same generation budget for every backend (unconstrained greedy, the tasks' default of new tokens)."""
    from rescue_train.data import load_samples
    from rescue_train.evaluation.models import find_adapter
    from rescue_train.evaluation.protocols import predict
    from rescue_train.inference import BackendSpec, EngineOptions, make_backend
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    name = args.backend
    samples = load_samples("bundled")
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.eval_limit]]
    engine = vllm_engine(figures) if name == "vllm" else EngineOptions()
    spec = BackendSpec(backend=name, model=str(saved_eval_model(args, work)),
                       adapters={"adapter": str(find_adapter(Path(args.adapter_run))[0])}, engine=engine,
                       batch_size=args.batch_size, progress=False)
    started = time.perf_counter()
    backend = make_backend(spec)
    figures.add(**{"instances": len(instances), f"{name}.load_seconds": round(time.perf_counter() - started, 1)})
    for protocol in ("rank", "sft"):  # warm-up: first calls build kernels and caches
        predict(backend, instances[:2], protocol=protocol, mode="dialogue", adapter="adapter", constrained=False)
    for protocol in ("rank", "sft"):
        started = time.perf_counter()
        records = predict(backend, instances, protocol=protocol, mode="dialogue", adapter="adapter",
                          constrained=False)
        figures.add(**{f"{name}.{protocol}": round(len(instances) / (time.perf_counter() - started), 2)})
    # what each backend generated, re-encoded: the same budget shows as about the same length
    lengths = [len(backend.encoder.encode(r["raw"])) for r in records]
    figures.add(**{f"{name}.sft_tokens_per_answer": round(sum(lengths) / len(lengths), 1)})
    if name == "hf":
        figures.add(**{"hf.peak_memory_gib": peak_memory_gib()})
    backend.close()


STEP_FUNCTIONS = {"sft": step_sft, "weighted": step_weighted, "eval": step_eval, "qlora": step_qlora,
                  "ddp": step_ddp}


def run_step(args) -> int:
    """This process is one step: run it, add its figures as they come, name the failure if it fails."""
    path = report_path(args.out)
    figures = Figures(path, args.step)
    work = args.work or args.out / "work"
    failed = False
    try:
        STEP_FUNCTIONS[args.step](args, work, figures)
    except Exception as exc:  # report it: the parent goes on with the other steps
        traceback.print_exc()
        where = f"{args.backend}: " if args.step == "eval" else ""
        add_reason(path, args.step, f"{where}{type(exc).__name__}: {exc}"[:2000])
        failed = True
    key = f"imported.{args.backend}" if args.step == "eval" else "imported"
    update_step(path, args.step, **{key: imported_distributions()})
    return FAILED_CHILD if failed else 0


# ------------------------------------------------------------------------------------------- the driver

def vllm_python(args) -> str | None:
    """The interpreter that has vLLM: this one, else ``--vllm-python`` if it exists."""
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    return args.vllm_python if args.vllm_python and Path(args.vllm_python).exists() else None


def skip_reason(name: str, args, gpus: int, report: dict) -> str | None:
    if name == "qlora":
        if gpus == 0:
            return "needs CUDA"
        if importlib.util.find_spec("bitsandbytes") is None:
            return "bitsandbytes is not installed"
    if name == "ddp" and not args.cpu_smoke and gpus < 2:
        return f"{gpus} GPU visible; needs 2"
    if name == "eval" and not adapter_run(report, args):
        return "no adapter: the weighted step did not finish"
    return None


def adapter_run(report: dict, args) -> str | None:
    """The weighted step's run: this check's, else a finished one left in the work folder (a rerun of
    ``--steps eval`` on the same machine)."""
    weighted = next((e for e in report["steps"] if e["step"] == "weighted" and e["status"] == "ok"), None)
    if weighted:
        return weighted["figures"]["run_dir"]
    earlier = (args.work or args.out / "work") / "weighted"
    finished = (earlier / "provenance.json").exists() and json.loads(
        (earlier / "provenance.json").read_text()).get("status") == "finished"
    return str(earlier) if finished else None


def step_processes(name: str, args, visible: list[str], report: dict) -> list[tuple[list[str], dict]]:
    """The commands (and environments) of one step: one process, or one per backend for ``eval``."""
    common = [__file__, "--step", name, "--out", str(args.out), "--work", str(args.work or args.out / "work"),
              "--peak-tflops", str(args.peak_tflops), "--eval-limit", str(args.eval_limit),
              "--batch-size", str(args.batch_size)] + (["--cpu-smoke"] if args.cpu_smoke else [])
    env = dict(os.environ)
    if visible:  # every step on the first GPU; ddp on the first two
        env["CUDA_VISIBLE_DEVICES"] = ",".join(visible[:2] if name == "ddp" else visible[:1])
    if name != "eval":
        return [([sys.executable, *common], env)]
    adapter = ["--adapter-run", adapter_run(report, args)]
    runs = [([sys.executable, *common, "--backend", "hf", *adapter], env)]
    python = vllm_python(args)
    if python is not None:
        runs.append(([python, *common, "--backend", "vllm", *adapter], env))
    return runs


def run_process(cmd: list[str], env: dict, timeout: float) -> tuple[bool, str | None]:
    """Run one step's process, its output going to ours: whether it succeeded, and how it ended if it did not
    say so itself (None when it wrote its reason into the report). A process still running at ``timeout`` is
    stopped with everything it started (vLLM's engine, accelerate's ranks)."""
    process = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False, f"stopped at the time limit after {timeout:.0f} s"
    if code in (0, FAILED_CHILD):
        return code == 0, None
    return False, f"ended with exit status {code}" + (" (killed: out of memory?)" if code == -signal.SIGKILL else "")


def eval_ratios(figures: dict) -> dict:
    if "vllm.sft" not in figures or "hf.sft" not in figures:
        return {}
    ratios = {"vllm_vs_hf.sft": round(figures["vllm.sft"] / figures["hf.sft"], 2),
              "vllm_rank_vs_sft": round(figures["vllm.rank"] / figures["vllm.sft"], 2)}
    if "hf.rank" in figures:
        ratios["vllm_vs_hf.rank"] = round(figures["vllm.rank"] / figures["hf.rank"], 2)
    return ratios


def run_check(args) -> int:
    from rescue_train.provenance import git_commit, versions

    started = time.perf_counter()
    deadline = started + args.time_limit
    args.out.mkdir(parents=True, exist_ok=True)
    path = report_path(args.out)
    problems, checked = requirement_problems(TRAINING_STACK, project_pins())
    report = {"cpu_smoke": args.cpu_smoke, "versions": versions(), "commit": git_commit(ROOT),
              "time_limit_s": args.time_limit, "targets": {k: v[0] for k, v in TARGETS.items()},
              "preflight": {"distributions_checked": checked, "problems": problems}, "steps": []}
    write_report(path, report)
    try:
        found = probe(sys.executable)
    except ImportError as exc:
        report["preflight"]["import_error"] = f"the training stack does not import: {exc}"
        write_report(path, report)
        print(table(report))
        return 1
    visible = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), found["gpus"])
    report.update(found, cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), visible_gpus=visible)
    write_report(path, report)
    for name in args.steps.split(","):
        step_started = time.perf_counter()
        report["steps"].append({"step": name, "status": "running"})
        write_report(path, report)
        reason = skip_reason(name, args, found["gpus"], report)
        if reason is None and deadline - time.perf_counter() < MIN_SECONDS_TO_START:
            reason = f"not started: the time limit ({args.time_limit:g} s) is near"
        status = "skipped" if reason else "ok"
        if reason:
            add_reason(path, name, reason)
        else:
            for cmd, env in step_processes(name, args, visible, report):
                succeeded, ending = run_process(cmd, env, timeout=max(deadline - time.perf_counter(), 1))
                if not succeeded:
                    status = "failed"
                if ending:
                    add_reason(path, name, ending)
        report = read_report(path)  # with the figures and reasons the step's processes wrote
        entry = report["steps"][-1]
        if name == "eval" and "figures" in entry:
            entry["figures"].update(eval_ratios(entry["figures"]))
            if vllm_python(args) is None:
                entry["figures"]["vllm"] = "not installed here (pass --vllm-python)"
        entry.update(status=status, seconds=round(time.perf_counter() - step_started, 1))
        write_report(path, report)
        print(f"[gpu_check] {name}: {status} in {entry['seconds']} s", flush=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    write_report(path, report)
    print(table(report))
    print(f"written: {path} and {path.with_suffix('.md')} ({report['seconds']} s)")
    return 1 if any(s["status"] == "failed" for s in report["steps"]) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on CPU, few steps")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check")
    parser.add_argument("--work", type=Path, default=None,
                        help="models, data and runs (default OUT/work; tens of GB on a GPU)")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"),
                        help="the python of the vLLM environment, used when vLLM is not importable here")
    parser.add_argument("--peak-tflops", type=float, default=989.0,
                        help="the GPU's peak dense bf16 TFLOP/s (H100/H200 SXM datasheet: 989)")
    parser.add_argument("--eval-limit", type=int, default=None, help="instances per closed-set task (64; smoke 2)")
    parser.add_argument("--batch-size", type=int, default=None, help="hf backend batch size (32; smoke 8)")
    parser.add_argument("--time-limit", type=float, default=450.0,
                        help="seconds: no step starts after this, and one still running is stopped")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # this process is that step
    parser.add_argument("--backend", choices=("hf", "vllm"), help=argparse.SUPPRESS)
    parser.add_argument("--adapter-run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.work = args.work.resolve() if args.work else None
    # the smoke evaluates once, at its last step (evaluation is most of its CPU time)
    args.sft_steps, args.recipe_steps, args.recipe_eval_steps, args.max_length = (
        (3, 4, 4, 512) if args.cpu_smoke else (30, 10, 5, 4096))
    args.eval_limit = args.eval_limit or (2 if args.cpu_smoke else 64)
    args.batch_size = args.batch_size or (8 if args.cpu_smoke else 32)
    return run_step(args) if args.step else run_check(args)


if __name__ == "__main__":  # vLLM's workers re-import this module
    sys.exit(main())
