"""Sequence classifiers for the closed-set tasks on the converter's ``cls`` datasets (the torch path).

Label space: one output per (scenario, label) pair -- "couple:pursue_withdraw" and
"family:pursue_withdraw" are different outputs -- and each instance's logits outside its own candidate
labels are set to -inf. This is the same as separate couple and family heads on one shared encoder: the
two scenarios share the representation (family data is small and many cues are common) but keep their own
classes, priors and class weights, and a single model and training run serve both.

The model is any ``AutoModelForSequenceClassification``: ``tiny-bert`` (a random BERT encoder built
offline with the tiny model's tokenizer), ``tiny`` (the random Qwen2 decoder of ``tiny.py`` with a
classification head), or a local path / hub id (optionally with LoRA, ``TaskType.SEQ_CLS``). Training is
``transformers.Trainer`` with ``compute_loss`` replaced by the strategy's loss (balance.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .. import rebalance
from ..rebalance import Strategy
from ..settings import meaning
from . import balance

# ----------------------------------------------------------------------------------- data, torch-free

@dataclass
class LabelSpace:
    """The classifier's outputs: (scenario, label) pairs, scenario by scenario in order of first use."""

    classes: list[tuple[str, str]]

    @classmethod
    def from_rows(cls, rows: Sequence[dict]) -> "LabelSpace":
        seen: dict[tuple[str, str], None] = {}
        for scenario in sorted({r["scenario"] for r in rows}):
            for row in rows:
                if row["scenario"] == scenario:
                    seen.update(dict.fromkeys((scenario, name) for name in row["label_names"]))
        return cls(list(seen))

    @property
    def names(self) -> list[str]:
        return [f"{s}:{label}" for s, label in self.classes]

    def index(self, scenario: str, label: str) -> int:
        return self._index[(scenario, label)]

    def __post_init__(self):
        self._index = {c: i for i, c in enumerate(self.classes)}

    def __len__(self) -> int:
        return len(self.classes)


@dataclass
class Split:
    """The rows of one role (train / validation / test) with their class ids and candidate masks."""

    rows: list[dict]
    y: np.ndarray
    mask: np.ndarray  # n x C, True where the class is one of the instance's candidates

    @classmethod
    def of(cls, rows: list[dict], space: LabelSpace) -> "Split":
        y = np.array([space.index(r["scenario"], r["label"]) for r in rows], dtype=np.int64)
        mask = np.zeros((len(rows), len(space)), dtype=bool)
        for i, row in enumerate(rows):
            mask[i, [space.index(row["scenario"], name) for name in row["label_names"]]] = True
        return cls(rows, y, mask)

    @property
    def texts(self) -> list[str]:
        return [r["text"] for r in self.rows]

    def counts(self, n_classes: int) -> np.ndarray:
        return np.bincount(self.y, minlength=n_classes)

    def __len__(self) -> int:
        return len(self.rows)


def load_cls_rows(data_dir: str | Path, task: str) -> list[dict]:
    """Every row of ``DATA/<task>/cls`` (all splits), checked: the gold must be one of its label_names."""
    import datasets

    folder = Path(data_dir) / task / "cls"
    if not folder.exists():
        raise FileNotFoundError(f"{folder}: no classification dataset (run `rescue-train convert` for {task})")
    rows = [row for split in datasets.load_from_disk(str(folder)).values() for row in split]
    if rows and "query" not in rows[0]:
        raise ValueError(f"{folder}: converted by an older rescue-train, without the classifier input's query and "
                         f"conversation; run `rescue-train convert` again")
    for row in rows:
        if row["label"] not in row["label_names"]:
            raise ValueError(f"{folder}: instance {row['id']}: label {row['label']!r} is not among its "
                             f"label_names {row['label_names']}")
    return rows


def fold_splits(rows: list[dict], roles: dict[str, str], space: LabelSpace) -> dict[str, Split]:
    """train / validation / test by each row's unit role (``SplitManifest.roles(test_fold)``)."""
    missing = sorted({r["unit"] for r in rows} - set(roles))
    if missing:
        raise ValueError(f"units {missing[:5]} are not in the split manifest")
    return {role: Split.of([r for r in rows if roles[r["unit"]] == role], space)
            for role in ("train", "validation", "test")}


def training_indices(strategy: Strategy, y: np.ndarray, n_draws: int, seed: int) -> np.ndarray:
    """Which training examples a model sees (in what multiplicity) under the strategy's sampling."""
    return balance.SAMPLERS[strategy.sampling](y, n_draws, seed)


# --------------------------------------------------------------------------------------------- torch

# Settings are OmegaConf structured configs, hence typing.Optional/List rather than PEP 604 annotations.
@dataclass
class TorchSettings:
    model: str = field(default="tiny-bert", metadata=meaning("tiny-bert, tiny, a local folder or a hub id"))
    max_length: int = field(default=512, metadata=meaning(
        "tokens (at most the encoder's positions); longer inputs keep the question and the latest turns and lose "
        "their oldest rows", low=1))
    steps: int = field(default=200, metadata=meaning("optimiser steps", low=1))
    batch_size: int = field(default=16, metadata=meaning("training batch", low=1))
    eval_batch_size: int = field(default=64, metadata=meaning("prediction batch", low=1))
    lr: float = field(default=5e-4, metadata=meaning("learning rate", above=0))
    weight_decay: float = field(default=0.0, metadata=meaning("AdamW weight decay", low=0))
    warmup_steps: int = field(default=0, metadata=meaning("linear warm-up steps", low=0))
    lora: bool = field(default=False, metadata=meaning("train a LoRA adapter (and the head) instead of every weight"))
    lora_r: int = field(default=8, metadata=meaning("LoRA rank", low=1))
    lora_alpha: int = field(default=16, metadata=meaning("LoRA scaling alpha", low=1))
    lora_dropout: float = field(default=0.0, metadata=meaning("LoRA dropout", low=0, below=1))
    bf16: bool = field(default=False, metadata=meaning(
        "bf16 autocast in training and prediction; the weights and optimiser stay fp32"))
    crt_steps: int = field(default=100, metadata=meaning("cRT: steps of the second, classifier-only stage", low=1))
    crt_lr: Optional[float] = field(default=None, metadata=meaning("None: the same as lr", above=0))
    threads: Optional[int] = field(default=None, metadata=meaning(
        "CPU threads for torch (None: its default); 1 is fastest for tiny models", low=1))
    extra: Dict[str, Any] = field(default_factory=dict, metadata=meaning("passed to TrainingArguments"))


TAU_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


@dataclass
class BalanceSettings:
    beta: float = field(default=0.999, metadata=meaning(
        "effective-number weights: (1 - beta) / (1 - beta^n)", low=0, below=1))
    gamma: float = field(default=2.0, metadata=meaning("focal loss focusing parameter", low=0))
    tau: float = field(default=1.0, metadata=meaning(
        "logit-adjustment strength (post-hoc: used when the validation fold is empty)", low=0))
    tau_grid: List[float] = field(default_factory=lambda: list(TAU_GRID), metadata=meaning(
        "post-hoc tau candidates", low=0))
    ldam_max_margin: float = field(default=0.5, metadata=meaning("LDAM: the rarest class's margin", above=0))
    ldam_scale: float = field(default=1.0, metadata=meaning("LDAM: logit scale", above=0))
    drw_start: float = field(default=0.8, metadata=meaning(
        "deferred re-weighting starts at this share of training", low=0, high=1))


def make_loss(strategy: Strategy, counts: np.ndarray, settings: BalanceSettings) -> Callable:
    """loss(logits, targets, progress) for the strategy; ``progress`` (0..1) drives deferred weights."""
    import torch

    weights = rebalance.class_weights(strategy, counts, settings.beta)
    weight_t = None if weights is None else torch.tensor(weights, dtype=torch.float32)
    prior_t = torch.tensor(rebalance.log_prior(counts), dtype=torch.float32)
    margins_t = torch.tensor(rebalance.ldam_margins(counts, settings.ldam_max_margin), dtype=torch.float32)
    loss_of = rebalance.LOSSES[strategy.loss]

    def loss(logits, targets, progress: float):
        weight = weight_t
        if weight is not None:
            weight = None if strategy.deferred and progress < settings.drw_start else weight.to(logits.device)
        inputs = rebalance.LossInputs(prior_t.to(logits.device), margins_t.to(logits.device), settings)
        return loss_of(logits, targets, weight, inputs)

    return loss


def _tokenizer(settings: TorchSettings):
    from transformers import AutoTokenizer

    from ..tiny import tiny_model_path

    source = tiny_model_path() if settings.model in ("tiny", "tiny-bert") else settings.model
    tok = AutoTokenizer.from_pretrained(str(source))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _model(settings: TorchSettings, tok, space: LabelSpace):
    from transformers import AutoModelForSequenceClassification, BertConfig

    from ..tiny import tiny_model_path

    labels = {"id2label": dict(enumerate(space.names)), "label2id": {n: i for i, n in enumerate(space.names)}}
    if settings.model == "tiny-bert":
        config = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=128, max_position_embeddings=settings.max_length,
                            pad_token_id=tok.pad_token_id, num_labels=len(space), **labels)
        model = AutoModelForSequenceClassification.from_config(config)
    else:
        source = tiny_model_path() if settings.model == "tiny" else settings.model
        # fp32 master weights whatever ``bf16`` says: AdamW steps on bf16 weights would round most updates at
        # fine-tuning learning rates (3e-5 against weights of ~0.02) to nothing; bf16 is the Trainer's autocast.
        model = AutoModelForSequenceClassification.from_pretrained(
            str(source), num_labels=len(space), ignore_mismatched_sizes=True, dtype="float32", **labels)
    model.config.pad_token_id = tok.pad_token_id  # decoder classifiers pool the last non-pad token
    if settings.lora:
        from peft import LoraConfig, TaskType, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS, r=settings.lora_r,
                                                 lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                                                 target_modules="all-linear"))
    return model


class CollapsedInputs(ValueError):
    """Instances with different texts became the same input once cut to the encoder's length."""


def input_length(settings: TorchSettings, tok, model) -> int:
    """The tokens one input may hold: ``max_length``, at most what the tokenizer and the encoder's position
    embeddings allow (a longer input would index past them)."""
    limits = [settings.max_length, getattr(model.config, "max_position_embeddings", None)]
    if tok.model_max_length < 1_000_000:  # tokenizers without a limit say so with a huge number
        limits.append(tok.model_max_length)
    return min(n for n in limits if n)


def encode_inputs(tok, rows: Sequence[dict], max_length: int) -> tuple[dict, dict]:
    """Token ids of each row's input: its ``query`` whole, then as much of its ``conversation`` as fits, cut
    from the left (the oldest rows go first); a query longer than the input loses its end (the setting comes
    after the question). Returns the encodings and what the cut did: the share of inputs truncated and the
    number of instances whose input became identical to that of an instance with another text."""
    queries, talks = [r["query"] for r in rows], [r["conversation"] for r in rows]
    plain = lambda texts: tok(texts, add_special_tokens=False, verbose=False)["input_ids"]  # noqa: E731
    q_len, c_len = [len(i) for i in plain(queries)], [len(i) for i in plain(talks)]
    special = tok.num_special_tokens_to_add(pair=True)
    pair = [i for i, n in enumerate(q_len) if n + special < max_length]
    alone = [i for i, n in enumerate(q_len) if n + special >= max_length]
    ids: list[list[int] | None] = [None] * len(rows)
    side = tok.truncation_side
    try:
        if pair:
            tok.truncation_side = "left"
            out = tok([queries[i] for i in pair], [talks[i] for i in pair], truncation="only_second",
                      max_length=max_length)["input_ids"]
            for i, row_ids in zip(pair, out):
                ids[i] = row_ids
        if alone:
            tok.truncation_side = "right"
            out = tok([queries[i] for i in alone], truncation=True, max_length=max_length)["input_ids"]
            for i, row_ids in zip(alone, out):
                ids[i] = row_ids
    finally:
        tok.truncation_side = side
    truncated = sum(q + c + special > max_length for q, c in zip(q_len, c_len))
    texts: dict[tuple[int, ...], set] = {}
    for row_ids, q, c in zip(ids, queries, talks):
        texts.setdefault(tuple(row_ids), set()).add((q, c))
    collapsed = sum(len(texts[tuple(row_ids)]) > 1 for row_ids in ids)
    report = {"max_length": max_length, "instances": len(rows),
              "truncated_share": round(truncated / len(rows), 4) if rows else 0.0,
              "identical_after_truncation": collapsed}
    return {"input_ids": ids}, report


def check_distinct(report: dict) -> None:
    """Stop before training on inputs that no longer tell instances apart."""
    if report["identical_after_truncation"]:
        raise CollapsedInputs(
            f"{report['identical_after_truncation']} of {report['instances']} instances have the same input as an "
            f"instance with another text once cut to the encoder's length of {report['max_length']} tokens "
            f"({100 * report['truncated_share']:.0f}% of inputs are truncated): the classifier could not tell them "
            f"apart. Use an encoder with more positions (and torch.max_length), or shorter contexts "
            f"(data.context=...)")


class _Encoded:
    """Tokenised rows as a map-style dataset of dicts (input ids, class id, candidate mask)."""

    def __init__(self, encodings: dict, y: np.ndarray, mask: np.ndarray, indices: np.ndarray | None = None):
        self.encodings, self.y, self.mask = encodings, y, mask
        self.indices = np.arange(len(y)) if indices is None else np.asarray(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> dict:
        j = int(self.indices[i])
        return {"input_ids": self.encodings["input_ids"][j], "labels": int(self.y[j]), "label_mask": self.mask[j]}


def _collator(tok):
    import torch

    def collate(features: list[dict]) -> dict:
        batch = tok.pad([{"input_ids": f["input_ids"]} for f in features], return_tensors="pt")
        batch["labels"] = torch.tensor([f["labels"] for f in features])
        batch["label_mask"] = torch.tensor(np.stack([f["label_mask"] for f in features]))
        return batch

    return collate


def _trainer(model, tok, dataset, loss_fn, settings: TorchSettings, steps: int, lr: float, seed: int, work_dir: Path):
    import torch
    from transformers import Trainer, TrainingArguments

    class BalancedTrainer(Trainer):
        # Our loss is a per-batch mean, not normalised by num_items_in_batch: the Trainer must divide it by the
        # gradient accumulation steps (left to its default, it would not for models that take loss kwargs).
        loss_is_scaled_for_ga = False

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels, mask = inputs.pop("labels"), inputs.pop("label_mask")
            outputs = model(**inputs)
            logits = outputs.logits.float().masked_fill(~mask, float("-inf"))
            loss = loss_fn(logits, labels, self.state.global_step / max(1, self.state.max_steps))
            return (loss, outputs) if return_outputs else loss

    args = TrainingArguments(
        output_dir=str(work_dir), max_steps=steps, per_device_train_batch_size=settings.batch_size,
        learning_rate=lr, weight_decay=settings.weight_decay, warmup_steps=settings.warmup_steps,
        logging_steps=max(1, steps // 10), save_strategy="no", eval_strategy="no", report_to="none",
        use_cpu=not torch.cuda.is_available(), bf16=settings.bf16, seed=seed, data_seed=seed,
        remove_unused_columns=False, disable_tqdm=True, dataloader_num_workers=0, **settings.extra)
    return BalancedTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok,
                           data_collator=_collator(tok))


def _logits(model, tok, encoded: _Encoded, batch_size: int, bf16: bool = False) -> np.ndarray:
    import torch

    collate = _collator(tok)
    device = next(model.parameters()).device
    model.eval()
    out = []
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):  # as in training
        for start in range(0, len(encoded), batch_size):
            batch = collate([encoded[i] for i in range(start, min(start + batch_size, len(encoded)))])
            mask = batch.pop("label_mask").to(device)
            batch.pop("labels")
            logits = model(**{k: v.to(device) for k, v in batch.items()}).logits.float()
            out.append(logits.masked_fill(~mask, float("-inf")).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, encoded.mask.shape[1]), dtype=np.float32)


def _head(model, n_classes: int):
    """The trainable output layer (the last trainable Linear with one output per class)."""
    import torch

    heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == n_classes
             and m.weight.requires_grad]
    if not heads:
        raise ValueError("cRT: found no trainable classification layer to re-train")
    return heads[-1]


def fit_predict_torch(splits: dict[str, Split], space: LabelSpace, strategy: Strategy, settings: TorchSettings,
                      balance_settings: BalanceSettings, seed: int, work_dir: Path,
                      keep_model: bool = False) -> dict[str, Any]:
    """Train on ``splits['train']`` under ``strategy``; return masked logits for validation and test, and
    with ``keep_model`` the trained model and its tokenizer (under "fitted")."""
    import torch
    from transformers import set_seed

    from ..devices import gpus_without_launcher

    gpus = gpus_without_launcher()
    if gpus > 1:
        raise ValueError(
            f"{gpus} GPUs are visible to this one process: transformers would train the torch classifier on all of "
            f"them with nn.DataParallel, {gpus} times the batch, so a run of torch.steps steps would see {gpus}x the "
            f"samples of a one-GPU run. Train on one GPU: CUDA_VISIBLE_DEVICES=0 rescue-train ...; to use several, "
            f"start one process per GPU with disjoint strategies=[...] (docs/classifiers.md)")
    set_seed(seed)
    threads = torch.get_num_threads()
    if settings.threads:  # for this fit only: the process keeps its own setting
        torch.set_num_threads(settings.threads)
    try:
        return _fit_predict_torch(splits, space, strategy, settings, balance_settings, seed, work_dir, keep_model)
    finally:
        torch.set_num_threads(threads)


def _fit_predict_torch(splits: dict[str, Split], space: LabelSpace, strategy: Strategy, settings: TorchSettings,
                       balance_settings: BalanceSettings, seed: int, work_dir: Path,
                       keep_model: bool = False) -> dict[str, Any]:
    import torch

    tok = _tokenizer(settings)
    model = _model(settings, tok, space)
    train = splits["train"]
    counts = train.counts(len(space))
    roles = ("train", "validation", "test")
    # All roles are encoded together, so that no two instances anywhere share one input.
    encodings, inputs = encode_inputs(tok, [r for role in roles for r in splits[role].rows],
                                      input_length(settings, tok, model))
    check_distinct(inputs)
    starts = np.cumsum([0] + [len(splits[role]) for role in roles])
    encoded = {role: {"input_ids": encodings["input_ids"][a:b]} for role, a, b in zip(roles, starts, starts[1:])}
    train_enc = encoded["train"]
    indices = training_indices(strategy, train.y, settings.steps * settings.batch_size, seed)
    dataset = _Encoded(train_enc, train.y, train.mask, indices)
    trainer = _trainer(model, tok, dataset, make_loss(strategy, counts, balance_settings), settings,
                       settings.steps, settings.lr, seed, work_dir)
    history = [trainer.train().training_loss]
    if strategy.retrain_head:
        head = _head(model, len(space))
        for p in model.parameters():
            p.requires_grad_(False)
        head.reset_parameters()
        for p in head.parameters():
            p.requires_grad_(True)
        balanced = balance.SAMPLERS["balanced"](train.y, settings.crt_steps * settings.batch_size, seed)
        plain = make_loss(rebalance.STRATEGIES["none"], counts, balance_settings)
        trainer = _trainer(model, tok, _Encoded(train_enc, train.y, train.mask, balanced), plain, settings,
                           settings.crt_steps, settings.crt_lr or settings.lr, seed, work_dir)
        history.append(trainer.train().training_loss)
    result = {"train_loss": [float(x) for x in history], "sampled_training_examples": len(indices),
              "inputs": inputs}
    for role in ("validation", "test"):
        split = splits[role]
        result[role] = _logits(model, tok, _Encoded(encoded[role], split.y, split.mask), settings.eval_batch_size,
                               settings.bf16) if len(split) else np.zeros((0, len(space)), dtype=np.float32)
    if keep_model:
        result["fitted"] = {"model": model, "tokenizer": tok}
        return result
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result
