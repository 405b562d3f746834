"""``rescue-train cv`` without training: the pooling's refusals on hand-made inputs, the settings it refuses, the
family note, the job list it builds, the judge calls it plans, the checks before work, and each phase handed to
the executor."""

from __future__ import annotations

import json
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from rescue_train.cli import main as cli
from rescue_train.cv.config import load_config
from rescue_train.data.splits import fold_notes
from rescue_train.cv.plan import eval_dir, prepare, run_dir, training_jobs, fold_eval_jobs, zero_shot_job
from rescue_train.cv.pool import PoolingError, pool
from rescue_train.executor import Job, Step
from rescue_train.jobs import LaunchSettings, training_command

FAST = ["recipe=ssp_lora", "model=tiny", "data.folds=3"]


def inst(iid: str, unit: str, task: str = "ssp"):
    return SimpleNamespace(id=iid, unit=unit, task=task)


def rec(iid: str, unit: str, task: str = "ssp") -> dict:
    return {"id": iid, "unit": unit, "task": task, "scenario": "couple", "prediction": ["a"]}


# Units a and b are in fold 0, c in fold 1.
ASSIGNMENT = {"a": 0, "b": 0, "c": 1}
INSTANCES = [inst("a1", "a"), inst("c1", "c"), inst("b1", "b"), inst("a2", "a", "er")]
RUNS = {0: "/out/runs/fold0", 1: "/out/runs/fold1"}


def test_pool_keeps_every_instance_once_in_benchmark_order_naming_its_fold_and_run():
    pooled = pool(INSTANCES, ASSIGNMENT, {1: [rec("c1", "c")], 0: [rec("a2", "a", "er"), rec("b1", "b"),
                                                                      rec("a1", "a")]}, RUNS)
    assert [(r["id"], r["fold"], r["run"]) for r in pooled] == [
        ("a1", 0, "/out/runs/fold0"), ("c1", 1, "/out/runs/fold1"), ("b1", 0, "/out/runs/fold0"),
        ("a2", 0, "/out/runs/fold0")]
    assert pooled[0]["prediction"] == ["a"] and pooled[3]["task"] == "er"


@pytest.mark.parametrize("predicted, message", [
    ({0: [rec("a1", "a"), rec("b1", "b"), rec("a2", "a", "er")], 1: []},
     r"1 instance\(s\) without a prediction: 'c1' \(the first: unit 'c', fold 1 in the split manifest\)"),
    ({0: [rec("a1", "a"), rec("b1", "b"), rec("a2", "a", "er"), rec("a1", "a")], 1: [rec("c1", "c")]},
     r"instance 'a1' \(unit 'a'\) was predicted twice by fold 0"),
    ({0: [rec("a1", "a"), rec("b1", "b"), rec("a2", "a", "er")], 1: [rec("c1", "c"), rec("b1", "b")]},
     r"instance 'b1' \(unit 'b', fold 0 in the split manifest\) was predicted by fold 1, whose training saw that "
     r"unit"),
    ({0: [rec("a1", "a"), rec("b1", "b"), rec("a2", "a", "er"), rec("c1", "c")], 1: []},
     r"instance 'c1' \(unit 'c', fold 1 in the split manifest\) was predicted by fold 0, whose training saw"),
    ({0: [rec("a1", "a"), rec("b1", "b"), rec("a2", "a", "er"), rec("z9", "z")], 1: [rec("c1", "c")]},
     r"instance 'z9' \(unit 'z'\) predicted by fold 0 is not an instance of the pooled folds' tasks"),
    ({0: [rec("a1", "c"), rec("b1", "b"), rec("a2", "a", "er")], 1: [rec("c1", "c")]},
     r"instance 'a1': fold 0's record names unit 'c', the benchmark's instance is in unit 'a'"),
])
def test_pool_refuses_naming_the_instance(predicted, message):
    with pytest.raises(PoolingError, match=message):
        pool(INSTANCES, ASSIGNMENT, predicted, RUNS)


def test_pool_refuses_a_duplicate_across_folds_even_when_both_folds_claim_the_unit():
    """Two records of one instance from two folds: the second is refused (by the fold check, since at most one of
    the two folds holds the unit), so no instance is ever counted twice."""
    with pytest.raises(PoolingError, match="'a1'.*predicted by fold 1, whose training saw"):
        pool(INSTANCES, ASSIGNMENT, {0: [rec("a1", "a")], 1: [rec("a1", "a")]}, RUNS)
    # An instance of an unknown unit twice: the duplicate check itself names both folds.
    extra = [*INSTANCES, inst("q1", "q")]
    with pytest.raises(PoolingError, match=r"instance 'q1' \(unit 'q'\) was predicted by folds 0 and 1"):
        pool(extra, ASSIGNMENT, {0: [rec("q1", "q")], 1: [rec("q1", "q")]}, RUNS)


def test_pooling_error_is_one_line_and_exit_2_on_the_command_line(tmp_path, capsys, monkeypatch):
    import rescue_train.cv.runner as runner

    def refuse(config):
        pool(INSTANCES, ASSIGNMENT, {0: [], 1: []}, RUNS)

    monkeypatch.setattr(runner, "cv", refuse)
    assert cli(["cv", *FAST, f"output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rescue-train cv: error: 4 instance(s) without a prediction: 'a1', 'c1', 'b1' and 1 more")


@pytest.mark.parametrize("argv, message", [
    (["data.test_fold=1"], r"data.test_fold=1: every run of the cross-validation sets data.test_fold itself \(use "
                           r"folds=\[...\]\)"),
    (["eval.run=x"], "eval.run=x: every evaluation of the cross-validation sets run itself"),
    (["eval.data.context=2"], "eval.data.context=2: every evaluation .* sets data itself .*the runs' data"),
    (["eval.limit=3"], "sets limit itself .every instance of a fold is predicted"),
    (["eval.protocol=paper"], "eval.protocol=paper: a fine-tuned model is asked the prompts it trained on"),
    (["eval.backend=openai", "eval.model=x"], "sets model itself"),
    (["eval.backend=openai", "eval.protocol=sft"], "eval.backend=openai: the fold adapters are loaded locally"),
    (["eval.protocol=nope"], "protocol: expected one of sft, paper, rank"),
    (["folds=[0,3]"], r"folds=\[0, 3\]: expected distinct folds in 0..2 \(data.folds=3\)"),
    (["folds=[1,1]"], "expected distinct folds"),
    (["baseline=always"], "baseline: expected one of auto, zero_shot, none"),
    (["data.split=holdout"], "data.split=holdout: cross-validation needs kfold"),
    (["train.nope=1"], "unknown key train.nope"),
])
def test_cv_refuses_bad_settings_clearly(argv, message):
    with pytest.raises(ValueError, match=message):
        load_config([*FAST, *argv])


def test_cv_refuses_a_classifier_recipe_and_a_missing_recipe():
    with pytest.raises(ValueError, match="recipe rpp_cls is not a LoRA recipe"):
        load_config(["recipe=rpp_cls"])
    with pytest.raises(ValueError, match="give recipe=NAME"):
        load_config(["model=tiny"])


def test_cv_settings_split_into_its_own_keys_training_overrides_and_eval_settings():
    config = load_config(["recipe=all_lora", "model=tiny", "train.max_steps=2", "data.folds=4", "folds=[2,0]",
                          "eval.protocol=sft", "eval.judge=none", "eval.batch_size=2", "launch.config_file=cpu",
                          "baseline=none", "output_dir=somewhere"])
    assert config.training == ["model=tiny", "train.max_steps=2", "data.folds=4"]
    assert config.eval == ["protocol=sft", "judge=none", "batch_size=2"]
    assert config.tasks == ["itp", "rpp", "stp", "ssp", "er", "vp"] and config.folds == [0, 2]
    assert (config.launch.config_file, config.baseline, config.output_dir) == ("cpu", "none", "somewhere")
    assert config.training_config["train"]["max_steps"] == 2 and "test_fold" not in config.training_config["data"]
    assert (config.eval_config["protocol"], config.eval_config["batch_size"]) == ("sft", 2)
    assert load_config(["recipe=ssp_lora", "model=tiny"]).output_dir == "runs/cv/ssp_lora/tiny"


def test_family_note_on_the_bundled_data_names_the_fold_trained_on_couples_only(tmp_path):
    """The bundled family samples are one unit: one fold holds every family instance, and its model trained on
    couples only."""
    plan = prepare(load_config([*FAST, f"output_dir={tmp_path}"]), tmp_path)
    family_folds = {plan.fold_of(i) for i in plan.instances if i.scenario == "family"}
    assert len(family_folds) == 1
    (fold,) = family_folds
    n = sum(i.scenario == "family" for i in plan.instances)
    assert plan.notes == [f"family: 0 training instances in the run of test fold {fold}, which tests {n} of the {n} "
                          f"pooled family instances (all family data is in fold {fold}): family scores measure "
                          f"couple-to-family transfer. While all family data is in one fold, no fold both trains on "
                          f"and tests it"]
    # Without that fold there is no family cell: said so, with the fold that would test family data.
    others = [f for f in range(3) if f != fold]
    assert fold_notes(plan.manifest, others, Counter(i.unit for i in plan.instances)) == [
        f"family: 0 test instances (all family data is in fold {fold}): no family scores. Choose "
        f"data.test_fold={fold} to score family"]


def test_the_job_list_trains_every_fold_with_the_shared_manifest_and_evaluates_it_on_its_own_fold(tmp_path):
    config = load_config([*FAST, "train.max_steps=2", "eval.bertscore=none", "launch.config_file=cpu",
                          f"output_dir={tmp_path}"])
    plan = prepare(config, tmp_path)
    training = training_jobs(plan)
    assert [j.name for j in training] == ["train fold 0", "train fold 1", "train fold 2"]
    manifest = (tmp_path / "split_manifest.json").resolve()
    assert [list(step.argv) for step in training[1].steps] == [training_command(
        config.launch, "ssp_lora", ["model=tiny", "data.folds=3", "train.max_steps=2", "data.test_fold=1",
                                    f'data.manifest="{manifest}"'], run_dir(tmp_path, 1))]
    # The launch command compare's runs use too: rescue-train launch, every visible GPU, a free rendezvous port.
    cpu = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "cpu.yaml"
    assert list(training[1].steps[0].argv) == [
        sys.executable, "-m", "rescue_train", "launch", "--config_file", str(cpu), "--gpu_ids", "all",
        "--main_process_port", "0", "-m", "rescue_train", "train", "recipe=ssp_lora", "model=tiny", "data.folds=3",
        "train.max_steps=2", "data.test_fold=1", f'data.manifest="{manifest}"', f"output_dir={run_dir(tmp_path, 1)}"]
    # The done checks travel into SLURM jobs: they pickle, and read the same folders back.
    import pickle

    assert pickle.loads(pickle.dumps(training[1].steps[0].done))() is False
    assert training[1].steps[0].log == tmp_path / "logs" / "train_fold1.log" and not training[1].done()
    assert training[1].steps[0].done == training[1].done
    evaluations = fold_eval_jobs(plan)
    assert len(evaluations[2].steps) == 1
    assert list(evaluations[2].steps[0].argv) == [sys.executable, "-m", "rescue_train", "eval", f"run={run_dir(tmp_path, 2)}",
                                         "protocol=rank", "progress=false", "bertscore=none", "tasks=[ssp]",
                                         f"output_dir={eval_dir(tmp_path, 2)}"]
    with pytest.raises(ValueError, match="no finished training run"):
        zero_shot_job(plan)
    # A finished run gives the zero-shot baseline its base model and tokenizer; the prompts are the runs'.
    folder = run_dir(tmp_path, 1)
    (folder / "adapter").mkdir(parents=True)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "provenance.json").write_text(json.dumps({"status": "finished", "base_model": "/models/base x"}))
    assert training[1].done() and not training[0].done()
    argv = list(zero_shot_job(plan).steps[0].argv)
    assert argv[:6] == [sys.executable, "-m", "rescue_train", "eval", 'model="/models/base x"',
                        f'tokenizer="{folder / "adapter"}"']
    assert {'data.source="bundled"', "data.context=null", 'data.answer_format="label"', "data.split=none",
            "protocol=rank", "tasks=[ssp]"} <= set(argv)
    assert not any(a.startswith(("data.test_fold", "data.manifest", "data.folds")) for a in argv)
    from rescue_train.evaluation.config import load_config as load_eval_config

    zero = load_eval_config(argv[4:])
    assert (zero.model, zero.data.split, zero.data.source, zero.protocol) == ("/models/base x", "none", "bundled", "rank")


def test_the_plan_counts_judge_calls_per_fold_and_for_the_baseline(tmp_path):
    config = load_config(["recipe=er_lora", "model=tiny", "data.folds=3", "eval.judge.backend=openai",
                          "eval.judge.model=judge-x", "baseline=zero_shot", f"output_dir={tmp_path}"])
    plan = prepare(config, tmp_path)
    from rescue_train.cv.plan import describe, judge_calls

    calls = judge_calls(plan)  # ER: one judge call per instance whose answer parses (all, at most)
    assert calls == {"fold 0": len(plan.of_fold(0)), "fold 1": len(plan.of_fold(1)), "fold 2": len(plan.of_fold(2)),
                     "zero_shot": len(plan.instances)}
    text = describe(plan)
    assert f"judge calls, at most: {2 * len(plan.instances)} (fold 0 {len(plan.of_fold(0))}," in text
    assert "time: no estimate before a training run and an evaluation have finished" in text


def test_a_changed_configuration_is_refused_naming_the_key(tmp_path, capsys, monkeypatch):
    """The settings stamp is written before any run starts; a rerun with another training setting stops there."""
    import rescue_train.cv.runner as runner

    def stop(plan):  # right after the stamp is checked, before any job is built or launched
        raise ValueError("stopped")

    monkeypatch.setattr(runner, "training_jobs", stop)
    assert cli(["cv", *FAST, f"output_dir={tmp_path}"]) == 2
    assert "stopped" in capsys.readouterr().err and (tmp_path / "cv_config.json").exists()
    assert cli(["cv", *FAST, "train.lr=0.1", f"output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "holds a cross-validation made with other settings (changed: training.train.lr); use another " \
           "output_dir" in err
    assert cli(["cv", *FAST, "launch.args=--num_processes 2", f"output_dir={tmp_path}"]) == 2
    assert "(changed: launch.args)" in capsys.readouterr().err
    # Runtime settings of the evaluations, the folds, the baseline and where the jobs execute may change; the
    # accelerate config by name is the same file as by path.
    assert cli(["cv", *FAST, "eval.batch_size=2", "folds=[1]", "baseline=none", "launch.parallel=2",
                "launch.gpus_per_run=0", f"output_dir={tmp_path}"]) == 2
    assert "stopped" in capsys.readouterr().err
    shipped_cpu = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "cpu.yaml"
    for config_file in ("cpu", shipped_cpu):
        assert cli(["cv", *FAST, f"launch.config_file={config_file}", f"output_dir={tmp_path / 'named'}"]) == 2
        assert "stopped" in capsys.readouterr().err


def _done(path: Path) -> bool:
    return path.exists()


@pytest.mark.parametrize("argv, message", [
    (["launch.executor=cloud"], "launch.executor must be one of local, slurm, got 'cloud'"),
    (["launch.parallel=0"], "launch.parallel=0: expected >= 1"),
    (["launch.gpus_per_run=-1"], "launch.gpus_per_run=-1: expected >= 0"),
    (["launch.slurm.timeout_min=0"], "launch.slurm.timeout_min=0: expected >= 1"),
    (["launch.parallel=2", "launch.gpus_per_run=1", "dry_run=true"],
     "launch.parallel=2 x launch.gpus_per_run=1 needs 2 GPUs; 0 visible (CUDA_VISIBLE_DEVICES=)"),
    (["eval.judge.backend=openai", "eval.judge.model=x", "eval.judge.base_url=http://127.0.0.1:9",
      "recipe=er_lora"], "eval.judge.base_url=http://127.0.0.1:9: the server does not answer"),
])
def test_launch_and_evaluation_settings_are_checked_before_anything_is_written(argv, message, tmp_path, capsys,
                                                                               monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever the machine has
    out = tmp_path / "out"
    assert cli(["cv", *FAST, *argv, f"output_dir={out}"]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_run_phase_hands_the_jobs_to_the_executor_records_each_and_names_every_failed_one(tmp_path, capsys):
    """Jobs done before are skipped, a failed job lets the others finish and be recorded (with what executed
    them), then one error names every failed job with its log's tail."""
    from rescue_train.cv.runner import run_phase

    plan = SimpleNamespace(config=SimpleNamespace(launch=LaunchSettings(parallel=2, gpus_per_run=0)), out=tmp_path,
                           instances=[])
    marker = tmp_path / "fold2.done"
    write = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('x'); print('ran', sys.argv[1])"

    def job(fold, code, *args, done):
        return Job(f"train fold {fold}", (Step((sys.executable, "-c", code, *args), tmp_path / f"f{fold}.log", done),),
                   done)

    jobs = [job(0, "print('never')", done=partial(_done, tmp_path)),
            job(1, "import sys; print('boom'); sys.exit(3)", done=partial(_done, tmp_path / "never")),
            job(2, write, str(marker), done=partial(_done, marker)),
            job(3, "import sys; print('bang'); sys.exit(4)", done=partial(_done, tmp_path / "never"))]
    with pytest.raises(ValueError) as caught:
        run_phase(plan, jobs, "cv training runs")
    message = str(caught.value)
    assert message.startswith("2 of 4 cv training runs failed (train fold 1, train fold 3; the others are recorded; "
                              "rerun the same command to retry the failed ones):\n")
    assert "train fold 1: step 1 of 1" in message and "exit status 3" in message and "boom" in message
    assert "train fold 3: step 1 of 1" in message and "exit status 4" in message and "bang" in message
    assert marker.read_text() == "x" and not (tmp_path / "f0.log").exists()
    printed = capsys.readouterr().out
    assert "train fold 0: to run" not in printed
    assert all(f"train fold {f}: to run (log {tmp_path / f'f{f}.log'})" in printed for f in (1, 2, 3))
    recorded = json.loads((tmp_path / "jobs.json").read_text())
    assert set(recorded) == {"train fold 2"}
    entry = recorded["train fold 2"]
    assert entry["steps"] == [{"argv": list(jobs[2].steps[0].argv), "log": str(tmp_path / "f2.log")}]
    assert entry["executor"]["kind"] == "local" and entry["executor"]["gpus"] == [] and entry["instances"] is None
    assert entry["seconds"] > 0
    # Rerun: the done job is skipped, the failed ones run again.
    with pytest.raises(ValueError, match=r"^2 of 4 cv training runs failed \(train fold 1, train fold 3;"):
        run_phase(plan, jobs, "cv training runs")
    assert "train fold 2: to run" not in capsys.readouterr().out


def test_baseline_auto_is_on_when_the_base_model_is_here_and_asked_again_after_training(tmp_path):
    from rescue_train.cv.plan import _on_this_machine, settle_baseline

    assert _on_this_machine("tiny") and _on_this_machine(str(tmp_path))
    assert not _on_this_machine("no-such-org/no-such-model") and not _on_this_machine("/no/such/folder")
    assert prepare(load_config([*FAST, f"output_dir={tmp_path}"]), tmp_path).baseline  # tiny is built here
    out = tmp_path / "hub"
    plan = prepare(load_config(["recipe=ssp_lora", "model=any", "model.path=no-such-org/no-such-model",
                                "data.folds=3", f"output_dir={out}"]), out)
    assert not plan.baseline and "not on this machine yet; asked again after the training runs" in plan.baseline_reason
    # The training runs fetched it: their provenance names a base model that is here now.
    base = tmp_path / "downloaded"
    base.mkdir()
    folder = run_dir(out, 0)
    (folder / "adapter").mkdir(parents=True)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "provenance.json").write_text(json.dumps({"status": "finished", "base_model": str(base)}))
    settle_baseline(plan)
    assert plan.baseline and zero_shot_job(plan).steps[0].argv[4] == f'model="{base}"'
    none = prepare(load_config([*FAST, "baseline=none", f"output_dir={out}"]), out)
    settle_baseline(none)
    assert not none.baseline
