"""``rescue-train chat RUN_DIR [key=value ...]``: one instance, asked as the evaluation asks it: its prompt, the
model's answer and, for a closed-set task, every candidate's probability (trl's and LLaMA-Factory's ``chat``, for
trying a run on an example)."""

from __future__ import annotations

import math

from ..evaluation.config import EvalConfig
from .base import Command

USAGE = """usage: rescue-train chat RUN_DIR|model=NAME [tasks=[TASK]] [instance=N|ID] [key=value ...]

Asks a trained run (or any model=) one instance of its test fold, as eval asks it: prints the prompt, the model's
answer beside the gold and, for the closed-set tasks (itp, rpp, stp, ssp), every candidate's probability after
the prompt (the rank protocol's scores, normalised over the candidates). instance= is a position in the task's
test instances (default 0) or an instance id; the task is the first of tasks (a run's own tasks by default).
Every eval key applies (protocol=paper asks the paper's prompt, backend=vllm, constrained=false, ...).
Example:
  rescue-train chat runs/ssp_lora/tiny/fold0 instance=3"""


def load(inputs: list[str], overrides: list[str]):
    from ..evaluation.config import load_config
    from ..settings import ConfigError

    if len(inputs) > 1:
        raise ConfigError(f"give one run folder, got {len(inputs)}: {' '.join(inputs)}")
    instance = next((o.split("=", 1)[1] for o in overrides if o.startswith("instance=")), "0")
    rest = [o for o in overrides if not o.startswith("instance=")]
    return load_config([*(f"run={i}" for i in inputs), *rest, "progress=false"]), instance


def run(settings) -> None:
    from ..evaluation.models import backend_spec, resolve_model
    from ..evaluation.protocols import constraint, max_new_tokens, messages, rank_request
    from ..evaluation.plan import load_instances
    from ..inference import make_backend
    from ..tasks import TASKS

    cfg, wanted = settings
    spec = resolve_model(cfg)
    task = cfg.tasks[0]
    found = load_instances(cfg, spec).instances[task]
    inst = next((i for i in found if i.id == wanted), None)
    if inst is None:
        if not wanted.isdigit() or int(wanted) >= len(found):
            raise ValueError(f"instance={wanted}: {task} has {len(found)} test instances here; give a position "
                             f"0-{len(found) - 1} or an instance id (e.g. {found[0].id if found else '-'})")
        inst = found[int(wanted)]
    protocol, fmt = ("sft" if cfg.protocol == "rank" else cfg.protocol), cfg.data.answer_format
    prompt = messages(inst, protocol, cfg.data.mode, fmt)
    adapter = next(iter(spec.adapters), None)
    for message in prompt:
        print(f"--- {message['role']}\n{message['content']}")
    backend = make_backend(backend_spec(cfg, spec))
    try:
        (answer,) = backend.generate([prompt], max_new_tokens=[max_new_tokens(inst, protocol, cfg.max_new_tokens, fmt)],
                                     constraints=[constraint(inst, protocol, fmt) if cfg.constrained else None],
                                     adapter=adapter)
        text = answer if isinstance(answer, str) else answer.text
        print(f"--- answer ({protocol}, {'constrained' if cfg.constrained else 'free'})\n{text}\n--- gold\n{inst.gold}")
        if TASKS[task].closed_set and backend.can_rank:
            (scored,) = backend.loglikelihood([rank_request(inst, cfg.data.mode, fmt)], adapter=adapter)
            top = max(s.logprob for s in scored)
            weights = [math.exp(s.logprob - top) for s in scored]
            ranked = sorted(zip(inst.candidates, weights), key=lambda pair: -pair[1])
            print("--- candidates (probability after the prompt, normalised over the candidates)")
            for label, weight in ranked:
                print(f"{weight / sum(weights):7.2%}  {label}{'  <- gold' if label == inst.gold else ''}")
    finally:
        backend.close()
    print(f"({inst.id}, {task}, instance {found.index(inst)} of {len(found)}; model {spec.model}"
          f"{f', adapter {spec.adapters[adapter]}' if adapter else ''})")


COMMAND = Command("chat", USAGE, load, run, schema=EvalConfig, extra_keys=("recipe", "instance"), inputs=True)
