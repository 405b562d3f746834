"""Which model the evaluation loads and how: the base model, the adapters (bare PEFT folders or training run
folders) with their provenance and tokenizer, and the backend that serves them.

``adapter`` accepts a bare PEFT folder (``adapter_config.json`` inside) or a training run folder whose
``provenance.json`` names the base model and which holds the adapter somewhere below it. With no ``model``
given, the base model comes from the run's provenance or the adapter's own config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..inference import ApiOptions, BackendSpec, EngineOptions
from ..inference.presets import model_folder
from ..inference.factory import backend_class
from ..inference.options import pick
from ..io import read_json
from ..provenance import unfinished_training_run
from ..settings import as_list
from .config import EvalConfig
from .trained import TrainingRun, run_of_adapter, run_of_model, served_adapter


@dataclass
class ModelSpec:
    """The base model, the adapters (name -> folder) and the tokenizer, as resolved from the config."""

    model: str
    adapters: dict[str, str]
    tokenizer: str | None
    provenance: dict[str, dict[str, Any]]  # adapter name -> its training provenance.json, when found
    runs: dict[str, TrainingRun] = field(default_factory=dict)  # adapter name -> the run that trained it
    base_run: TrainingRun | None = None  # the run a merged model came from


def model_name(model: str) -> str:
    """A model's short name: a local folder's name, a hub id with ``--`` for ``/``, ``tiny`` for the tiny model."""
    name = Path(model).name if Path(model).exists() else model.replace("/", "--")
    return "tiny" if name.startswith("tiny-") else name  # the tiny model's cache folder is named by its build


def find_adapter(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The PEFT folder inside ``folder`` (itself, or the shallowest one below a run folder) and the run's
    provenance (empty for a bare adapter)."""
    if not folder.is_dir():
        raise ValueError(f"adapter {folder}: no such folder")
    provenance_file = folder / "provenance.json"
    provenance = read_json(provenance_file, {}, "a training run's provenance") if provenance_file.exists() else {}
    unfinished_training_run(folder, provenance)
    if (folder / "adapter_config.json").exists():
        return folder, provenance
    named = folder / str(provenance.get("adapter", ""))
    if provenance.get("adapter") and (named / "adapter_config.json").exists():
        return named, provenance
    found = sorted(folder.rglob("adapter_config.json"), key=lambda p: (len(p.parts), str(p)))
    if not found:
        raise ValueError(f"adapter {folder}: no adapter_config.json in it or below it (is it a LoRA run?)")
    return found[0].parent, provenance


def _base_of(adapter_dir: Path, provenance: dict[str, Any]) -> str | None:
    for key in ("base_model", "model"):
        if isinstance(provenance.get(key), str):
            return provenance[key]
    config = read_json(adapter_dir / "adapter_config.json", {}, "a PEFT adapter config")
    return config.get("base_model_name_or_path")


def resolve_model(cfg: EvalConfig) -> ModelSpec:
    adapters: dict[str, str] = {}
    provenance: dict[str, dict[str, Any]] = {}
    runs: dict[str, TrainingRun] = {}
    bases = []
    base_run = run_of_model(cfg.model)
    backend = backend_class(cfg.backend)
    if backend.adapters_by_name:  # adapters are served models, addressed by name (vllm serve --lora-modules)
        if not cfg.model:
            raise ValueError(f"backend={cfg.backend} needs model=<the served model's name>")
        for entry in as_list(cfg.adapter):
            name, run = served_adapter(entry)
            adapters[name] = name
            if run is not None:
                runs[name], provenance[name] = run, run.provenance
        return ModelSpec(cfg.model, adapters, None, provenance, runs, base_run)
    for entry in as_list(cfg.adapter):
        folder = Path(entry).expanduser()
        adapter_dir, prov = find_adapter(folder)
        run = run_of_adapter(entry)
        prov = prov or (run.provenance if run else {})
        name = (run.folder if run else folder.resolve()).name
        if prov.get("recipe") and prov["recipe"] not in name:  # runs/<recipe>/<model>/fold<k>: name it by recipe
            name = f"{prov['recipe']}-{name}"
        while name in adapters:
            name += "_"
        adapters[name] = str(adapter_dir.resolve())
        provenance[name] = prov
        if run is not None:
            runs[name] = run
        bases.append(_base_of(adapter_dir, prov))
    model = cfg.model or next((b for b in bases if b), None)
    if not model:
        raise ValueError("model is required (a local path, a hub name, or 'tiny'), unless an adapter names its base")
    model = model_folder(model)
    tokenizer = cfg.tokenizer
    if tokenizer is None and not backend.remote:
        tokenizer = next((p for p in adapters.values() if (Path(p) / "tokenizer_config.json").exists()), None)
    return ModelSpec(model, adapters, tokenizer, provenance, runs, base_run)


def backend_spec(cfg: EvalConfig, spec: ModelSpec) -> BackendSpec:
    """What the inference factory needs to serve ``spec`` with the settings of ``cfg``."""
    return BackendSpec(backend=cfg.backend, model=spec.model, adapters=spec.adapters, tokenizer=spec.tokenizer,
                       engine=pick(EngineOptions, cfg), api=pick(ApiOptions, cfg), batch_size=cfg.batch_size,
                       seed=cfg.seed, progress=cfg.progress and cfg.verbose)  # quiet: our bar only


def problems_before_work(cfg: EvalConfig, *, model: bool = True, judge: bool = True) -> list[str]:
    """What the evaluation will need, checked before any instance is loaded (each one line): the model's backend
    (vLLM importable, an API endpoint that answers; ``model=False`` when the caller gives a started backend),
    enough GPUs for ``data_parallel`` x ``tensor_parallel_size`` engines, and the judge's backend when a task it
    grades is evaluated (``judge=False`` when the caller gives one)."""
    from ..devices import visible_gpus
    from ..inference.factory import backend_problems
    from ..tasks import TASKS

    found = []
    if model:
        found += backend_problems(cfg.backend, pick(ApiOptions, cfg))
        gpus = visible_gpus()
        needed = cfg.data_parallel * cfg.tensor_parallel_size
        if backend_class(cfg.backend).data_parallel and gpus and needed > len(gpus):
            found.append(f"data_parallel={cfg.data_parallel} x tensor_parallel_size={cfg.tensor_parallel_size} needs "
                         f"{needed} GPUs; {len(gpus)} visible")
    if judge and cfg.judge.on and any(TASKS[t].judged for t in cfg.tasks):
        found += backend_problems(cfg.judge.backend, pick(ApiOptions, cfg.judge), "judge.")
    return found
