"""One LoRA fine-tuning run: resolved config -> ``RUN_DIR`` with the adapter and what produced it.

``RUN_DIR`` (= ``output_dir``) holds:

* ``adapter/`` – the PEFT adapter with the tokenizer and the model's own chat template (what the evaluator,
  ``PeftModel.from_pretrained`` and vLLM's LoRA support load; the base model is ``provenance.json``'s
  ``base_model``);
* ``config.yaml`` – the resolved config; ``provenance.json`` – versions, git commit, split manifest hash,
  data fingerprint, seed, base model, final metrics (the Trainer's, of the last session), and the whole run's
  ``train_seconds``, ``train_loss`` (mean per step) and ``sessions`` (each start, steps, seconds and loss);
* ``data/`` – the converted datasets and the split manifest of this run;
* ``checkpoints/`` – trainer checkpoints (resume); ``logs/`` – TensorBoard events; ``loss.png`` – training and
  validation loss over the steps.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..executor import executor_info
from ..inference.factory import check_model
from ..folders import output_folder
from ..inference.presets import resolve_model_path
from ..io import read_json, write_json_atomic, write_text_atomic
from ..model_card import write_model_card
from ..provenance import config_hash, git_commit, versions
from ..settings import flatten, read_yaml, to_yaml
from . import data as run_data
from .config import LoraRunConfig
from .models import compute_dtype, load_model, load_tokenizer, lora_config

log = logging.getLogger(__name__)
ADAPTER_DIR = "adapter"
# Where a run lives and how it was restarted do not make it another run (a folder may be moved).
NOT_IDENTITY = ("output_dir", "resume")


def training_args(cfg: LoraRunConfig, run_dir: Path, has_validation: bool):
    import torch
    from trl import SFTConfig

    t = cfg.train
    dtype = compute_dtype(t.precision)
    evaluate = has_validation and t.eval_steps > 0
    if t.early_stopping_patience > 0 and not evaluate:
        raise ValueError("train.early_stopping_patience needs a validation fold with instances and train.eval_steps > 0")
    report_to = [r for r in t.report_to if r not in ("tensorboard", "none")]
    return SFTConfig(
        output_dir=str(run_dir / "checkpoints"),
        # without use_cpu, several CPU processes silently train as duplicate single-process runs
        use_cpu=not torch.cuda.is_available(),
        seed=cfg.seed, data_seed=cfg.seed,
        num_train_epochs=t.epochs, max_steps=t.max_steps,
        per_device_train_batch_size=t.batch_size, per_device_eval_batch_size=t.batch_size,
        gradient_accumulation_steps=t.grad_accum, learning_rate=t.lr,
        lr_scheduler_type=t.scheduler, warmup_steps=t.warmup if t.warmup < 1 else int(t.warmup), weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm, max_length=t.max_length, packing=t.packing,
        bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16,
        gradient_checkpointing=t.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False} if t.gradient_checkpointing else None,
        completion_only_loss=True,  # the data are prompt/completion rows: the loss falls on the answer
        logging_steps=t.logging_steps, logging_first_step=True,
        eval_strategy="steps" if evaluate else "no", eval_steps=t.eval_steps if evaluate else None,
        save_strategy="steps", save_steps=t.eval_steps if t.eval_steps > 0 else 500,
        save_total_limit=t.save_total_limit,
        load_best_model_at_end=t.early_stopping_patience > 0, metric_for_best_model="eval_loss",
        report_to=report_to or "none", dataloader_num_workers=t.num_workers,
        ddp_find_unused_parameters=False,
    ), dtype


def _complete_state(path: Path) -> bool:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def last_checkpoint(run_dir: Path, resume: Any) -> str | None:
    """The newest complete checkpoint: the trainer writes trainer_state.json last, so a checkpoint a kill
    cut short lacks it, or holds it half written, and is passed over (resuming from it would fail)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    folder = run_dir / "checkpoints"
    steps = {int(p.name.rsplit("-", 1)[1]): p for p in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*")
             if p.name.rsplit("-", 1)[1].isdigit() and _complete_state(p / "trainer_state.json")}
    found = str(steps[max(steps)]) if steps else None
    mode = str(resume).lower()
    if mode not in ("auto", "true", "false"):
        raise ValueError(f"resume must be auto, true or false, got {resume!r}")
    if mode == "true" and found is None:
        raise ValueError(f"resume=true but {folder} holds no checkpoint")
    return found if mode != "false" else None


def _callbacks(cfg: LoraRunConfig, run_dir: Path, is_main: bool) -> list:
    from transformers import EarlyStoppingCallback
    from transformers.integrations import TensorBoardCallback

    callbacks = []
    if "tensorboard" in cfg.train.report_to and is_main:
        from torch.utils.tensorboard import SummaryWriter

        callbacks.append(TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(run_dir / "logs"))))
    if cfg.train.early_stopping_patience > 0:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.train.early_stopping_patience))
    return callbacks


def provenance(cfg: LoraRunConfig, resolved: dict, base_path: str, train_data, extra: dict) -> dict:
    return {
        "kind": "lora_sft", "recipe": cfg.name, "tasks": dict(resolved["tasks"]),
        "base_model": base_path, "model_preset": cfg.model.name, "model_path": cfg.model.path,
        "chat_template": cfg.model.chat_template, "adapter": ADAPTER_DIR, "seed": cfg.seed,
        # QLoRA trains on 4-bit base weights; merge and evaluation load the base unquantized (bf16 on a GPU)
        "base_quantization": cfg.model.quantization,
        "data": train_data.meta, "manifest_hash": train_data.meta["manifest_hash"],
        "split_manifest": "data/split_manifest.json", "config_hash": config_hash(resolved),
        "git_commit": git_commit(), "versions": versions(), "executor": executor_info(), **extra,
    }


def _identity(tree: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in flatten(tree).items() if k.split(".")[0] not in NOT_IDENTITY}


def previous_run(cfg: LoraRunConfig) -> str | None:
    """The status of the training run already in ``cfg.output_dir`` (``running``: killed, or still going;
    ``finished``), once it is known to be this configuration's run; None when there is none, or ``resume=false``
    starts the folder over. A run of another configuration is refused: resuming it, or training a finished one
    again, would not give the run either configuration describes."""
    run_dir = Path(cfg.output_dir).resolve()
    if cfg.resume == "false" or not (run_dir / "provenance.json").is_file():
        return None
    status = read_json(run_dir / "provenance.json", {"status": str}, "a training run's provenance")["status"]
    if (run_dir / "config.yaml").is_file():
        before, now = _identity(read_yaml(run_dir / "config.yaml")), _identity(asdict(cfg))
        differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
        if differ:
            shown = "; ".join(f"{k}: {before.get(k)!r} there, {now.get(k)!r} here" for k in differ[:3])
            raise ValueError(f"{run_dir} holds a {status} training run with another configuration ({shown}); choose "
                             "another output_dir, or pass resume=false to start that folder over")
    return status


def already_finished(cfg: LoraRunConfig) -> bool:
    """Whether ``cfg``'s run is in its folder and finished: it is not trained again."""
    return previous_run(cfg) == "finished"


def run(cfg: LoraRunConfig) -> Path:
    """Train the recipe ``cfg``; returns the run folder. A finished run of ``cfg`` is left as it is; a killed one
    resumes from its last complete checkpoint, drawing the batches the uninterrupted run would have drawn."""
    run_dir = Path(cfg.output_dir).resolve()
    if previous_run(cfg) == "finished":
        return run_dir
    if not cfg.model.path.startswith("package:"):
        check_model(resolve_model_path(cfg.model.path), "model.path")  # before anything is written
    checkpoint = last_checkpoint(run_dir, cfg.resume)
    args, dtype = training_args(cfg, run_dir, has_validation=True)
    with output_folder(run_dir, "train") if args.process_index == 0 else nullcontext():
        if cfg.resume == "false":  # starting over: no checkpoint of the run before may stand in for this one's
            shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        _train(cfg, run_dir, checkpoint, args, dtype)
    return run_dir


@contextmanager
def interrupts_name_the_step(trainer):
    """Ctrl-C, or the SIGTERM with which ``accelerate launch`` stops its training process on Ctrl-C (and SLURM a job
    at its time limit), ends training with one line naming the step (the command prints it and exits 130): the run
    resumes from its last checkpoint when the same command runs again."""
    import signal
    import threading

    def stop(signum, frame):
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, stop) if main_thread else None
    try:
        yield
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted at step {trainer.state.global_step}; rerun the same command to "
                                "resume") from None
    finally:
        if main_thread and previous is not None:  # None: a handler not set from Python, left as it is
            signal.signal(signal.SIGTERM, previous)


def _train(cfg: LoraRunConfig, run_dir: Path, checkpoint: str | None, args, dtype) -> None:
    from .trainer import RescueSFTTrainer

    resolved = asdict(cfg)
    is_main = args.process_index == 0
    if is_main:
        write_text_atomic(run_dir / "config.yaml", to_yaml(cfg))  # other ranks may be reading the last one
    train_data = run_data.prepare(cfg, run_dir, is_main, barrier=args.distributed_state.wait_for_everyone)
    if train_data.validation is None:
        log.warning("fold %s has no validation instances: no evaluation loss, no early stopping", cfg.data.test_fold)
        args, dtype = training_args(cfg, run_dir, has_validation=False)
    base_path = resolve_model_path(cfg.model.path)
    tokenizer = load_tokenizer(cfg.model, base_path)
    model = load_model(cfg.model, base_path, dtype)
    trainer = RescueSFTTrainer(model=model, args=args, train_dataset=train_data.train,
                               eval_dataset=train_data.validation, processing_class=tokenizer,
                               peft_config=lora_config(cfg.lora), callbacks=_callbacks(cfg, run_dir, is_main),
                               batching=cfg.train.batching)
    # which chat template rendered the data (the model's own unless model.chat_template names a file)
    template = {"chat_template_sha256": hashlib.sha256(tokenizer.chat_template.encode()).hexdigest()[:16]}
    dropped = {}  # with packing, rows are bins of instances and cannot be compared with instance counts
    if not cfg.train.packing:
        dropped["train"] = len(train_data.train) - len(trainer.train_dataset)
        if train_data.validation is not None:
            dropped["validation"] = len(train_data.validation) - len(trainer.eval_dataset)
    if any(dropped.values()):
        log.warning("instances whose answer does not fit in train.max_length=%s tokens were dropped: %s",
                    cfg.train.max_length, dropped)
    if is_main:
        write_json_atomic(run_dir / "provenance.json", provenance(cfg, resolved, base_path, train_data, {
            "status": "running", "resumed_from": checkpoint, "dropped_too_long": dropped, **template,
            "batching": trainer.batching}))
    if checkpoint and is_main:
        state = read_json(Path(checkpoint) / "trainer_state.json", {"global_step": int}, "a checkpoint's trainer state")
        print(f"resuming from {Path(checkpoint).name}, step {state['global_step']} of {state.get('max_steps', '?')}",
              flush=True)
    with interrupts_name_the_step(trainer):
        result = trainer.train(resume_from_checkpoint=checkpoint)
    run_summary = trainer.run_summary(result)
    metrics = dict(result.metrics)  # the Trainer's, of this session; run_summary's cover the run
    evals = [e for e in trainer.state.log_history if "eval_loss" in e]  # the trainer evaluates the last step too
    if evals:
        metrics.update(evals[-1])
    trainer.save_model(str(run_dir / ADAPTER_DIR))  # adapter + tokenizer with the chat template (main only)
    if is_main:
        write_json_atomic(run_dir / "provenance.json", provenance(cfg, resolved, base_path, train_data, {
            "status": "finished", "resumed_from": checkpoint, "dropped_too_long": dropped,
            "global_step": trainer.state.global_step, "train_seconds": run_summary["train_seconds"],
            "train_loss": run_summary["train_loss"], "sessions": run_summary["sessions"], "metrics": metrics,
            "best_checkpoint": trainer.state.best_model_checkpoint, **template,
            # how batches were formed, and their measured real-token share (over this process's steps)
            "batching": trainer.batching, "non_pad_share": trainer.non_pad_share()}))
        write_model_card(run_dir)
        plot_loss(trainer.state.log_history, run_dir / "loss.png")
    args.distributed_state.wait_for_everyone()


def plot_loss(history: list[dict[str, Any]], path: Path) -> None:
    """Training and validation loss over the optimiser steps, from the trainer's log history (a run resumed
    from a checkpoint has that checkpoint's history too), as ``loss.png`` in the run folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.5))
    for key, label in (("loss", "train"), ("eval_loss", "validation")):
        points = [(entry["step"], entry[key]) for entry in history if key in entry and "step" in entry]
        if points:
            axes.plot(*zip(*points), marker="o" if len(points) < 20 else None, label=label)
    axes.set(xlabel="optimiser step", ylabel="loss", title=path.parent.name)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
