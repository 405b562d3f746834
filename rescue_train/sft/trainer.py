"""trl's SFTTrainer plus what it lacks here: weighted sampling, class-weighted answer loss, throughput logs.

The data are conversational prompt/completion rows: trl renders them with the model's own chat template and
puts the loss on the answer; :mod:`rescue_train.chat` fits the prompts to the template and ends the loss at
the answer's end-of-turn token, as the evaluator renders and scores them.

The dataset may carry two per-instance columns (see :mod:`.weighting`):

* ``sample_weight`` – draw probability; the training sampler becomes an :class:`EpochWeightedSampler`
  (with replacement, one epoch = as many draws as instances) whose draws in epoch e depend only on (seed, e).
  So every rank draws the same sequence (accelerate's batch sharding hands each rank a different slice of
  it), and a resumed run draws what the uninterrupted run drew: the trainer re-creates the data loader,
  calls ``set_epoch`` for the epoch it resumes in and skips the batches already trained
  (``accelerate.skip_first_batches``). With ``batching="length_grouped"`` (the runs' default) the sampler
  then orders each epoch's draws into batches of similar length (:class:`EpochWeightedSampler`): the same
  draws, far less padding, and the order still depends only on (seed, epoch).
* ``class_weight`` – weight of the instance's answer tokens in the training loss. The evaluation loss is
  always the plain token mean, so ``eval_loss`` stays comparable across balancing options.

Every training log also gets ``non_pad_share`` (real tokens / tokens in the padded batches) and
``tokens_per_second`` (real tokens, all ranks, since the previous log); :meth:`RescueSFTTrainer.non_pad_share`
is the share over every step this process trained.

A run may take several sessions (killed, then resumed from a checkpoint): each checkpoint keeps, in
``sessions.json``, the sessions that led to it (steps, seconds, mean training loss of the steps it kept), so
that the finished run's :meth:`RescueSFTTrainer.run_summary` covers the whole run, not its last session.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from trl import SFTTrainer

from ..chat import check_training_template, end_loss_at_turn_end, fold_system, special_tokens


def epoch_seed(seed: int, epoch: int) -> int:
    """A generator seed for (training seed, epoch): numpy's SeedSequence keeps the streams of different pairs
    apart (seed + epoch would give seed 1's first epoch the draws of seed 0's second)."""
    import numpy as np

    return int(np.random.SeedSequence((seed, epoch)).generate_state(1, np.uint64)[0])


BATCHINGS = ("length_grouped", "drawn")


class EpochWeightedSampler(torch.utils.data.WeightedRandomSampler):
    """Weighted draws with replacement, as many per epoch as there are instances, seeded by (seed, epoch).

    The trainer (and accelerate's data loader) call ``set_epoch`` before each epoch; the generator is seeded
    afresh on every pass, so no draw depends on how many passes this object made before (a resumed run makes
    fewer).

    Given the instances' token ``lengths`` and the data loader's ``batch_size``, each epoch's draws are
    reordered so that consecutive ``batch_size`` draws have similar lengths: every ``group_batches`` batches'
    worth of draws are sorted by length and cut into batches, whose order is then shuffled by the same
    generator (so the learning-rate schedule does not meet the long instances together); an epoch's last,
    incomplete batch stays last, so the data loader cuts the same batches. The draws themselves are those of
    the drawn order, so the class balance and the per-instance weights are unchanged: only the padding
    goes (trl pads each batch to its longest instance). As transformers' ``LengthGroupedSampler``, 50
    batches to a group: on lengths spread like the benchmark's RPP prompts this leaves ~1.5% padding at batch 8
    (``scripts/bench_sft.py``)."""

    group_batches = 50

    def __init__(self, weights, seed: int, lengths=None, batch_size: int = 1):
        super().__init__(weights, num_samples=len(weights), replacement=True)
        self.seed, self.epoch = seed, 0
        self.lengths, self.batch_size = lengths, batch_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        self.generator = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        draws = list(super().__iter__())
        if self.lengths is None:
            return iter(draws)
        size = self.batch_size * self.group_batches
        ordered: list[int] = []
        for start in range(0, len(draws), size):
            group = sorted(draws[start:start + size], key=lambda i: -self.lengths[i])  # stable: ties keep draw order
            batches = [group[b:b + self.batch_size] for b in range(0, len(group), self.batch_size)]
            whole = [batch for batch in batches if len(batch) == self.batch_size]
            for b in torch.randperm(len(whole), generator=self.generator).tolist():
                ordered += whole[b]
            ordered += [i for batch in batches[len(whole):] for i in batch]  # the epoch's incomplete batch
        return iter(ordered)


class ClassWeightCollator:
    """Wraps trl's collator and adds the batch's ``class_weight`` tensor (one weight per sequence).

    The trainer uses the same collator for evaluation, whose rows carry no weights (the evaluation loss is
    unweighted): such batches pass through unchanged."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if not any("class_weight" in e for e in examples):
            return self.inner(examples)
        weights = [float(e.pop("class_weight")) for e in examples]
        batch = self.inner(examples)
        batch["class_weight"] = torch.tensor(weights, dtype=torch.float32)
        return batch


def count_warmup_from_one(scheduler, warmup: int):
    """``scheduler`` (a transformers schedule, a LambdaLR) with its warmup counted from the first optimiser step: step
    k of ``warmup`` gets k / warmup of the learning rate. transformers starts at 0 / warmup, so a run's first step
    learnt nothing (the whole warmup at a few steps: a two-step run trained one step); after the warmup the
    schedule is unchanged."""
    from torch.optim.lr_scheduler import LambdaLR

    def counted(schedule):
        return lambda step: schedule(step + 1) if step < warmup else schedule(step)

    for group, initial in zip(scheduler.optimizer.param_groups, scheduler.base_lrs):
        group["lr"] = initial  # as before the schedule: the new one starts from the initial rates
    return LambdaLR(scheduler.optimizer, [counted(schedule) for schedule in scheduler.lr_lambdas])


SESSIONS = "sessions.json"  # in each checkpoint: the sessions of the run up to it


class RescueSFTTrainer(SFTTrainer):
    def create_scheduler(self, num_training_steps: int, optimizer=None):
        from torch.optim.lr_scheduler import LambdaLR

        if self.lr_scheduler is None:
            schedule = super().create_scheduler(num_training_steps, optimizer)
            warmup = self.args.get_warmup_steps(num_training_steps)
            if warmup > 0 and isinstance(schedule, LambdaLR):
                self.lr_scheduler = count_warmup_from_one(schedule, warmup)
        return self.lr_scheduler

    def __init__(self, *args, batching: str = "length_grouped", **kwargs):
        """``batching`` orders weighted draws (see :class:`EpochWeightedSampler`): ``length_grouped`` into
        batches of similar length, ``drawn`` as drawn; runs without weights keep the trainer's shuffle."""
        if batching not in BATCHINGS:
            raise ValueError(f"batching must be one of {', '.join(BATCHINGS)}, got {batching!r}")
        train = kwargs.get("train_dataset")
        balancing = [c for c in ("sample_weight", "class_weight") if train is not None and c in train.column_names]
        if balancing and (kwargs["args"].packing or kwargs["args"].padding_free):
            # packing keeps only token columns and joins instances of different classes into one row
            raise ValueError(f"task mixing and class balancing ({', '.join(balancing)}) need one instance per row: "
                             "set train.packing=false (train.batching=length_grouped batches weighted draws of "
                             "similar length instead), or, for one task, balance.strategy=none")
        self.batching = batching if train is not None and "sample_weight" in train.column_names else "shuffled"
        super().__init__(*args, **kwargs)
        if "class_weight" in balancing:
            self.data_collator = ClassWeightCollator(self.data_collator)
        self._meter = torch.zeros(2, dtype=torch.float64)  # real tokens, padded-batch tokens since the last log
        self._run_meter = torch.zeros(2, dtype=torch.float64)  # the same over every step of this process
        self._meter_since: float | None = None

    def train(self, resume_from_checkpoint=None, **kwargs):
        """The Trainer's ``train``, with this session's start and the sessions before it (from the checkpoint's
        ``sessions.json``) kept for :meth:`run_summary`."""
        self._earlier: list[dict[str, Any]] = []
        if resume_from_checkpoint and (Path(resume_from_checkpoint) / SESSIONS).is_file():
            self._earlier = json.loads((Path(resume_from_checkpoint) / SESSIONS).read_text())
        self._session_start = (datetime.now(timezone.utc).isoformat(timespec="seconds"), time.time())
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def _session(self, loss_sum: float, seconds: float) -> dict[str, Any]:
        first = self._initial_global_step  # the Trainer's: the step this session resumed at (0: a fresh run)
        steps = self.state.global_step - first
        return {"started": self._session_start[0], "steps": [first + 1, self.state.global_step],
                "seconds": round(seconds, 2), "train_loss": loss_sum / steps if steps else None}

    def _save_checkpoint(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        if self.args.should_save:  # this session up to here: the loss logged so far and what is not logged yet
            loss_sum = self._total_loss_scalar + float(self._tr_loss.item())
            session = self._session(loss_sum, time.time() - self._session_start[1])
            folder = Path(self._get_output_dir(trial)) / f"checkpoint-{self.state.global_step}"
            (folder / SESSIONS).write_text(json.dumps([*self._earlier, session], indent=1))

    def run_summary(self, output) -> dict[str, Any]:
        """The whole run after ``train`` returned ``output``: every session (steps, seconds, training loss),
        and the run's seconds and mean training loss per step over all of them."""
        steps_now = self.state.global_step - self._initial_global_step
        sessions = [*self._earlier, self._session(output.metrics["train_loss"] * steps_now,
                                                  output.metrics["train_runtime"])]
        trained = [(s["steps"][1] - s["steps"][0] + 1, s["train_loss"]) for s in sessions
                   if s["train_loss"] is not None]
        steps = sum(n for n, _ in trained)
        return {"sessions": sessions, "train_seconds": round(sum(s["seconds"] for s in sessions), 2),
                "train_loss": sum(n * loss for n, loss in trained) / steps if steps else None, "train_steps": steps}

    def _prepare_dataset(self, dataset, processing_class, args, packing, formatting_func, dataset_name):
        """trl's preparation of conversational prompt/completion rows (loss on the completion, rendered with
        the model's own template), with the prompts fitted to the template and the loss ended at the
        end-of-turn token (:mod:`rescue_train.chat`)."""
        from trl.data_utils import get_dataset_column_names

        if "input_ids" in get_dataset_column_names(dataset):  # already prepared
            return super()._prepare_dataset(dataset, processing_class, args, packing, formatting_func, dataset_name)
        # in memory: several ranks would otherwise write the same cache files next to the run's data
        if "prompt" in get_dataset_column_names(dataset) and check_training_template(self._tokenizer):
            dataset = dataset.map(lambda row: {"prompt": fold_system(row["prompt"])}, keep_in_memory=True)
        dataset = super()._prepare_dataset(dataset, processing_class, args, packing, formatting_func, dataset_name)
        stop_ids = set(special_tokens(self._tokenizer).values())
        dataset = dataset.map(lambda row: {"labels": end_loss_at_turn_end(
            row["labels"], row.get("seq_lengths") or [len(row["labels"])], stop_ids)}, keep_in_memory=True)
        if packing or args.max_length is None:
            return dataset
        # trl keeps the start of an instance longer than max_length, which cuts its answer before the end of
        # turn: drop it instead (run() counts the drop), so no model learns answers that never stop.
        return dataset.filter(lambda row: len(row["input_ids"]) < args.max_length
                              or any(t in stop_ids for t in row["labels"] if t != -100), keep_in_memory=True)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if "class_weight" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "class_weight"]

    def _get_train_sampler(self, train_dataset=None):
        if self.train_dataset is None or "sample_weight" not in self.train_dataset.column_names:
            return super()._get_train_sampler(train_dataset)
        weights = torch.tensor(self.train_dataset["sample_weight"], dtype=torch.float64)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        if self.batching != "length_grouped":
            return EpochWeightedSampler(weights, seed)
        # the data loader's batch: accelerate hands each rank whole batches, so each stays length-grouped
        lengths = [len(ids) for ids in self.train_dataset["input_ids"]]
        return EpochWeightedSampler(weights, seed, lengths, self._train_batch_size)

    def _count_tokens(self, inputs: dict[str, Any]) -> None:
        total = inputs["input_ids"].numel()
        real = inputs["attention_mask"].sum() if "attention_mask" in inputs else total  # padding-free: no pads
        counts = torch.tensor([float(real), float(total)], device=inputs["input_ids"].device)
        counts = self.accelerator.reduce(counts, reduction="sum").cpu().double()
        self._meter += counts
        self._run_meter += counts
        if self._meter_since is None:
            self._meter_since = time.perf_counter()

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        weights = inputs.pop("class_weight", None)
        if self.model.training:
            self._count_tokens(inputs)
        if weights is None or not self.model.training:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        outputs = model(**inputs, use_cache=False, fused_lm_head=True)
        # log_probs is (batch, seq-1) and zero where the label is -100; each row is one instance
        per_token = -outputs.log_probs * weights.to(outputs.log_probs.dtype)[:, None]
        num_tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
        loss = per_token.sum() / torch.as_tensor(num_tokens).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes  # as trl/Trainer: DDP averages gradients over ranks
        return (loss, outputs) if return_outputs else loss

    def non_pad_share(self) -> float | None:
        """Real tokens / tokens in the padded training batches, over every step this process trained."""
        return float(self._run_meter[0] / self._run_meter[1]) if self._run_meter[1] > 0 else None

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._meter[1] > 0:
            now = time.perf_counter()
            logs["non_pad_share"] = float(self._meter[0] / self._meter[1])
            logs["tokens_per_second"] = float(self._meter[0]) / max(now - (self._meter_since or now), 1e-9)
            self._meter.zero_()
            self._meter_since = now
        super().log(logs, start_time)
