"""What a cross-validation does: its data and split manifest, its instances, its jobs and what they cost.

The output folder ``OUT``:

* ``split_manifest.json``: the grouped k-fold manifest every run trains with (``data.manifest``), made once;
* ``runs/fold<F>/``: fold F's training run (the ordinary run folder: adapter, config, provenance, model card);
* ``eval/fold<F>/``: its evaluation on its own test fold (``rescue-train eval run=OUT/runs/fold<F>``);
  ``eval/zero_shot/``: the base model on every instance with the same prompts (the baseline);
* ``logs/``: one log per job; ``jobs.json``: each finished job's command line, duration and what executed it;
* ``executor/``: the executor's own files (``executor/slurm/<job>/``: a SLURM job's script, logs and id);
* ``cv_config.json``: the hash of the settings (a rerun with others is refused);
* ``results.json``, ``report.md``, ``comparisons.json``: the pooled row (rescue_train.cv.pool, .runner).

The jobs come in two phases whose jobs are independent of each other: the training runs, then the
evaluations (each fold's, and the zero-shot baseline's, which takes the base model and tokenizer from a
finished run). Each job is one step (``Job(name, (Step(argv, log, done),), done)``, ``rescue_train.executor``'s
jobs, with picklable ``done`` checks: a SLURM job runs its steps on a node); :func:`rescue_train.cv.runner.run_phase`
hands each phase to :func:`rescue_train.executor.run_jobs` (``launch.executor``, ``launch.parallel``, ...).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections import Counter
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any

from ..data import load_benchmark
from ..data.splits import SplitManifest, assign_units, fold_notes, load_or_make_manifest
from ..executor import Job, Outcome, Step
from ..jobs import override, rescue_train_command, training_command
from ..tasks import DataConfig, Instance, build
from .config import CvConfig, eval_arguments

ZERO_SHOT = "zero_shot"
# DataConfig keys a run's fold decides; the zero-shot baseline takes every other one (the prompts) from the runs.
SPLIT_KEYS = ("split", "folds", "split_seed", "test_fold", "manifest")


@dataclass
class Plan:
    config: CvConfig
    out: Path
    data: DataConfig
    manifest: SplitManifest
    instances: list[Instance]  # every instance of the tasks, in build order (task by task)
    source: str
    fingerprint: str
    load_notes: list[str]
    baseline: bool
    baseline_reason: str
    evaluation: Any  # the EvalConfig every evaluation composes (its run and folders aside)
    notes: list[str] = field(default_factory=list)  # said in the output, results.json and the report

    @property
    def folds(self) -> list[int]:
        return list(self.config.folds)

    def fold_of(self, inst: Instance) -> int:
        return int(self.manifest.assignment[inst.unit])

    def of_fold(self, fold: int) -> list[Instance]:
        return [i for i in self.instances if self.fold_of(i) == fold]

    def pooled(self) -> list[Instance]:
        """The instances the pooled row covers: those of the chosen folds."""
        chosen = set(self.folds)
        return [i for i in self.instances if self.fold_of(i) in chosen]


def run_dir(out: Path, fold: int) -> Path:
    return (out / "runs" / f"fold{fold}").resolve()


def eval_dir(out: Path, fold: int | str) -> Path:
    return (out / "eval" / (fold if isinstance(fold, str) else f"fold{fold}")).resolve()


def data_config(config: CvConfig) -> DataConfig:
    return DataConfig.from_mapping(config.training_config["data"])


def the_manifest(samples, data: DataConfig, given: str | None, out: Path) -> SplitManifest:
    """``OUT/split_manifest.json``: made once from ``data.folds`` and ``data.split_seed`` (or copied from a
    ``data.manifest`` given), then reused (:func:`~rescue_train.data.splits.load_or_make_manifest`); a rerun whose
    data or split settings differ from it is refused."""
    path = out / "split_manifest.json"
    if path.exists() and not given:
        kept = SplitManifest.load(path)
        if (kept.k, kept.seed) != (data.folds, data.split_seed):
            raise ValueError(f"{out} holds a cross-validation split with data.folds={kept.k} data.split_seed="
                             f"{kept.seed}; use another output_dir")
    if given and Path(given).exists():
        manifest = SplitManifest.load(given)
        if (manifest.scheme, manifest.k) != ("kfold", data.folds):
            raise ValueError(f"data.manifest={given} is a {manifest.scheme} manifest with k={manifest.k}; cv needs "
                             f"kfold with data.folds={data.folds}")
        if path.exists() and SplitManifest.load(path).hash != manifest.hash:
            raise ValueError(f"data.manifest={given} differs from {path}, which this cross-validation's runs use; "
                             "use another output_dir")
    return load_or_make_manifest(samples, path, "kfold", data.folds, data.split_seed, given)


def _on_this_machine(model: str) -> bool:
    """Whether the base model is here without a download: tiny, a packaged model, a folder, or a hub id in the
    Hugging Face cache."""
    if model == "tiny" or model.startswith("package:") or Path(model).expanduser().is_dir():
        return True
    if model.count("/") != 1:
        return False
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except ValueError:  # not a hub id (huggingface_hub's HFValidationError)
        return False


def prepare(config: CvConfig, out: Path) -> Plan:
    """Load the benchmark, fix the split manifest in ``OUT`` and build every instance of the recipe's tasks."""
    data = data_config(config)
    given = _given_manifest(config)
    bench = load_benchmark(data.source)
    out.mkdir(parents=True, exist_ok=True)
    manifest = the_manifest(bench.samples, data, given, out)
    units = assign_units(bench.samples)
    instances = [i for task in config.tasks for i in build(task, bench.samples, data.build_options(), units).instances]
    missing = sorted({i.unit for i in instances} - set(manifest.assignment))
    if missing:
        raise ValueError(f"{out / 'split_manifest.json'} has no fold for unit {missing[0]!r}; use another output_dir")
    model = config.training_config["model"]["path"]
    if config.baseline == "auto":
        here = _on_this_machine(model)
        baseline, reason = here, (f"baseline=auto: the base model {model} is on this machine" if here else
                                  f"baseline=auto: the base model {model} is not on this machine yet; asked again "
                                  "after the training runs, which download it")
    else:
        baseline, reason = config.baseline == "zero_shot", f"baseline={config.baseline}"
    from ..evaluation.config import load_config as load_eval_config

    plan = Plan(config, out, data, manifest, instances, bench.source, bench.fingerprint, bench.notes, baseline, reason,
                load_eval_config(eval_arguments(config)))
    plan.notes = fold_notes(manifest, plan.folds, Counter(i.unit for i in instances))
    if plan.folds != list(range(manifest.k)):
        plan.notes.append(f"folds {', '.join(map(str, plan.folds))} of {manifest.k} only: the pooled row covers "
                          f"{len(plan.pooled())} of the {len(instances)} instances, unlike the paper's rows")
    return plan


def _given_manifest(config: CvConfig) -> str | None:
    """A ``data.manifest=FILE`` among the training overrides (the resolved config leaves it out)."""
    given = [a.split("=", 1)[1] for a in config.training if a.lstrip("+").split("=", 1)[0] == "data.manifest"]
    return given[-1] if given and given[-1] not in ("", "null") else None


# ---------------------------------------------------------------- jobs and their "already done" checks

def trained(folder: Path) -> bool:
    """A finished training run: its provenance says so and its adapter is there."""
    try:
        provenance = json.loads((folder / "provenance.json").read_text())
    except (OSError, ValueError):
        return False
    return provenance.get("status") == "finished" and (folder / "adapter" / "adapter_config.json").exists()


def evaluated(folder: Path) -> bool:
    return (folder / "results.json").exists()


def one_step(name: str, argv, log: Path, done) -> Job:
    """A job of one command: done (as a job and as its step) when ``done()`` says so."""
    return Job(name, (Step(tuple(argv), log, done),), done)


def training_jobs(plan: Plan) -> list[Job]:
    out, config = plan.out, plan.config
    manifest = (out / "split_manifest.json").resolve()
    jobs = []
    for fold in plan.folds:
        folder = run_dir(out, fold)
        argv = training_command(config.launch, config.recipe,
                                [*config.training, f"data.test_fold={fold}", override("data.manifest", str(manifest))],
                                folder)
        jobs.append(one_step(f"train fold {fold}", argv, out / "logs" / f"train_fold{fold}.log",
                             partial(trained, folder)))
    return jobs


def fold_eval_jobs(plan: Plan) -> list[Job]:
    out = plan.out
    return [one_step(f"eval fold {fold}",
                     rescue_train_command("eval", f"run={run_dir(out, fold)}", *eval_arguments(plan.config),
                                          f"output_dir={eval_dir(out, fold)}"),
                     out / "logs" / f"eval_fold{fold}.log", partial(evaluated, eval_dir(out, fold)))
            for fold in plan.folds]


# The job of evaluations sharing one engine: rescue_train.cli.eval.together, given their eval arguments as JSON.
TOGETHER = "import sys; from rescue_train.cli.eval import together; together(sys.argv[1])"


def one_engine(plan: Plan) -> bool:
    """Whether the evaluations share one engine: jobs that would run one after another on this machine (the local
    executor with one slot) with a local backend. The base model is then loaded once (and, with vLLM on a GPU,
    its CUDA graphs captured once) instead of once per fold and once for the baseline. SLURM and several local
    slots (``launch.parallel``, several GPUs) keep one job per evaluation, which run at the same time."""
    from ..inference.factory import backend_class

    launch = plan.config.launch
    return launch.executor == "local" and (launch.parallel or 1) == 1 and not backend_class(
        plan.evaluation.backend).remote


def _all_done(checks) -> bool:
    return all(check() for check in checks)


def sharing_one_engine(plan: Plan, jobs: list[Job]) -> list[Job]:
    """``jobs`` (each one ``rescue-train eval``), or where :func:`one_engine` says so, those not done yet as one
    job (:data:`TOGETHER`) whose evaluations are each the one its own job makes (run folder, records, resume)."""
    todo = [job for job in jobs if not job.done()]
    if not one_engine(plan) or len(todo) < 2:
        return jobs
    names = [job.name.removeprefix("eval ") for job in todo]
    argvs = [list(job.steps[0].argv[4:]) for job in todo]  # what follows python -m rescue_train eval
    log = plan.out / "logs" / f"eval_{'+'.join(name.replace(' ', '') for name in names)}.log"
    together = one_step(f"eval {', '.join(names)}", [sys.executable, "-c", TOGETHER, json.dumps(argvs)], log,
                        partial(_all_done, tuple(job.done for job in todo)))
    return [job for job in jobs if job not in todo] + [together]


def settle_baseline(plan: Plan) -> None:
    """``baseline=auto`` once the runs are trained: their base model is on this machine by then if it ever is."""
    if plan.config.baseline == "auto" and not plan.baseline and _on_this_machine(base_of_runs(plan)[0]):
        plan.baseline, plan.baseline_reason = True, "baseline=auto: the runs' base model is on this machine"


def base_of_runs(plan: Plan) -> tuple[str, str]:
    """(the base model, the tokenizer with its chat template) the finished runs trained with; they must agree."""
    bases = {}
    for fold in plan.folds:
        folder = run_dir(plan.out, fold)
        if trained(folder):
            bases[fold] = json.loads((folder / "provenance.json").read_text())["base_model"]
    if not bases:
        raise ValueError("no finished training run to take the base model from")
    if len(set(bases.values())) > 1:
        raise ValueError(f"the runs trained on different base models: {bases}")
    fold = min(bases)
    return bases[fold], str(run_dir(plan.out, fold) / "adapter")


def zero_shot_job(plan: Plan) -> Job:
    """The base model, with the runs' tokenizer and chat template, asked every instance with the same prompts
    and protocol as the fold models (``data.split=none``: the whole benchmark)."""
    base, tokenizer = base_of_runs(plan)
    prompts = [override(f"data.{f.name}", getattr(plan.data, f.name)) for f in fields(DataConfig)
               if f.name not in SPLIT_KEYS]
    folder = eval_dir(plan.out, ZERO_SHOT)
    argv = rescue_train_command("eval", override("model", base), override("tokenizer", tokenizer), *prompts,
                                "data.split=none", *eval_arguments(plan.config), f"output_dir={folder}")
    return one_step(f"eval {ZERO_SHOT}", argv, plan.out / "logs" / f"eval_{ZERO_SHOT}.log",
                    partial(evaluated, folder))


# ---------------------------------------------------------------- timings, estimate and the printed plan

def read_timings(out: Path) -> dict[str, dict[str, Any]]:
    path = out / "jobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def announce(job: Job) -> None:
    """Say that ``job`` is handed to the executor (it starts when a slot, or SLURM, takes it) and where it logs."""
    logs = ", ".join(str(step.log) for step in job.steps)
    print(f"{job.name}: to run (log {logs})", flush=True)


def recorder(plan: Plan):
    """``on_done(outcome)`` for the executor's run_jobs: keeps each finished job's command lines, duration (its
    steps' own time) and what executed it (``outcome.executor``: kind, job_id, host, gpus, threads) in jobs.json,
    and says it."""
    from ..io import write_json_atomic

    def finished(outcome: Outcome) -> None:
        job, seconds = outcome.job, outcome.seconds
        print(f"{job.name}: finished in {seconds:.0f} s", flush=True)
        timings = read_timings(plan.out)
        instances = None
        if job.name.startswith("eval "):  # "eval fold 1" or, sharing one engine, "eval fold 1, fold 2, zero_shot"
            instances = sum(len(plan.instances if which == ZERO_SHOT else plan.of_fold(int(which.split()[-1])))
                            for which in job.name.split(" ", 1)[1].split(", "))
        timings[job.name] = {"seconds": round(seconds, 2), "instances": instances,
                             "steps": [{"argv": list(step.argv), "log": str(step.log)} for step in job.steps],
                             "executor": outcome.executor,
                             "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        write_json_atomic(plan.out / "jobs.json", timings)

    return finished


def estimate(plan: Plan, timings: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Seconds left at the finished jobs' pace: the mean training run, and evaluation seconds per instance
    (the zero-shot baseline evaluates every instance); None before any training run and evaluation finished."""
    runs = [t["seconds"] for name, t in timings.items() if name.startswith("train ")]
    evals = [t for name, t in timings.items() if name.startswith("eval ") and t.get("instances")]
    if not runs or not evals:
        return None
    per_run = sum(runs) / len(runs)
    per_instance = sum(t["seconds"] for t in evals) / sum(t["instances"] for t in evals)
    to_train = [f for f in plan.folds if not trained(run_dir(plan.out, f))]
    to_eval = [f for f in plan.folds if not evaluated(eval_dir(plan.out, f))]
    left = per_run * len(to_train) + per_instance * sum(len(plan.of_fold(f)) for f in to_eval)
    zero_shot = plan.baseline and not evaluated(eval_dir(plan.out, ZERO_SHOT))
    if zero_shot:
        left += per_instance * len(plan.instances)
    return {"seconds_per_run": per_run, "seconds_per_instance": per_instance, "runs_left": len(to_train),
            "evaluations_left": len(to_eval) + zero_shot, "seconds_left": left}


def judge_calls(plan: Plan) -> dict[str, int] | None:
    """At most how many judge calls the evaluations make (every answer assumed readable and judged), per
    fold and for the baseline; None without a judge."""
    from ..evaluation.usage import estimate as usage_estimate

    if not plan.evaluation.judge.on:
        return None

    def calls(instances: list[Instance]) -> int:
        return usage_estimate(plan.evaluation, [], instances, {}, set(), None)["judge"]["calls"]

    out = {f"fold {fold}": calls(plan.of_fold(fold)) for fold in plan.folds}
    if plan.baseline:
        out[ZERO_SHOT] = calls(plan.instances)
    return out


def describe(plan: Plan) -> str:
    """The plan: runs, evaluations and judge calls, what is finished, the notes and (after a finished fold) a time
    estimate."""
    config, out = plan.config, plan.out

    def counts(instances: list[Instance]) -> str:
        return ", ".join(f"{t} {sum(i.task == t for i in instances)}" for t in config.tasks)

    lines = [f"cv of {config.recipe} ({config.training_config['model']['name']}) on {plan.source}: tasks "
             f"{', '.join(config.tasks)}; folds {', '.join(map(str, plan.folds))} of data.folds={plan.manifest.k} "
             f"(split manifest {out / 'split_manifest.json'}, hash {plan.manifest.hash})"]
    for fold in plan.folds:
        mine = plan.of_fold(fold)
        units = sorted({i.unit for i in mine})
        lines.append(f"  fold {fold}: {len(units)} unit(s), {len(mine)} instances ({counts(mine)}); training run "
                     f"{run_dir(out, fold)}: {'finished' if trained(run_dir(out, fold)) else 'to run'}; "
                     f"evaluation: {'finished' if evaluated(eval_dir(out, fold)) else 'to run'}")
    if plan.baseline:
        lines.append(f"  zero-shot baseline ({plan.baseline_reason}): the base model on all {len(plan.instances)} "
                     f"instances with the same prompts: "
                     f"{'finished' if evaluated(eval_dir(out, ZERO_SHOT)) else 'to run'}")
    else:
        lines.append(f"  no zero-shot baseline ({plan.baseline_reason})")
    lines.append(f"  evaluations: rescue-train eval run=OUT/runs/fold<F> protocol={plan.evaluation.protocol} "
                 f"backend={plan.evaluation.backend}" + "".join(f" {a}" for a in config.eval)
                 + ("; one engine serves them all (the base model loaded once)" if one_engine(plan) else
                    "; one job each"))
    calls = judge_calls(plan)
    if calls is None:
        lines.append("  judge calls: none (no judge: eval.judge.backend=... eval.judge.model=... adds one)")
    else:
        lines.append(f"  judge calls, at most: {sum(calls.values())} ("
                     + ", ".join(f"{k} {v}" for k, v in calls.items()) + ")")
    lines += [f"note: {note}" for note in plan.notes]
    left = estimate(plan, read_timings(out))
    if left is None:
        lines.append("time: no estimate before a training run and an evaluation have finished")
    else:
        lines.append(f"time: about {left['seconds_per_run']:.0f} s per training run and "
                     f"{left['seconds_per_instance']:.2f} s per evaluated instance (the finished jobs), so about "
                     f"{left['seconds_left'] / 3600:.2f} h left for {left['runs_left']} training run(s) and "
                     f"{left['evaluations_left']} evaluation(s)")
    return "\n".join(lines)
