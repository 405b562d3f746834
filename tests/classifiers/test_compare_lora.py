"""``rescue-train compare recipe=*_lora``: LLM strategies, their training and rank-evaluation commands, and
an end-to-end comparison of two strategies on one fold with the tiny model (accelerate launch, resume,
dry run)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rescue_train.cli import main as cli
from rescue_train.compare.config import load_config, run_settings
from rescue_train.compare.lora import balance_overrides, rank_command, training_command
from rescue_train.settings import shipped

CPU_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "cpu.yaml"
LLM_STRATEGIES = ["none", "inverse_freq", "sqrt_sampling", "balanced_sampling", "sqrt_weights",
                  "sqrt_sampling_sqrt_weights"]


def test_lora_recipe_gives_llm_strategies_and_training_overrides_for_every_run():
    config = load_config(["recipe=rpp_lora", "model=tiny", "train.max_steps=300", "train.max_length=2048",
                          "seeds=[0,1]", "rank.batch_size=4"])
    assert (config.learner, config.task, config.recipe) == ("lora", "rpp", "rpp_lora")
    assert config.strategies == LLM_STRATEGIES and config.seeds == [0, 1] and config.rank.batch_size == 4
    assert config.training == ["model=tiny", "train.max_steps=300", "train.max_length=2048"]
    assert config.training_config["train"]["max_steps"] == 300 and config.training_config["train"]["max_length"] == 2048
    assert "balance" not in config.training_config and "seed" not in config.training_config
    assert (config.data.source, config.data.folds, config.data.split_seed) == ("bundled", 5, 0)
    assert config.output_dir == "runs/compare/rpp_lora-lora"
    assert run_settings(config)["training_config"]["model"]["name"] == "tiny"


def test_the_settings_hash_holds_the_accelerate_configs_content_not_its_name_nor_the_executor(tmp_path):
    """A shipped config by name, by path or copied elsewhere is one setting; an edited copy, other launch flags
    are another; where the runs execute is none."""
    base = ["recipe=ssp_lora", "model=tiny"]

    def launch(*words: str) -> dict:
        return run_settings(load_config([*base, *words]))["launch"]

    by_name = launch("launch.config_file=cpu")
    assert by_name == {"config_file": {"compute_environment": "LOCAL_MACHINE", "distributed_type": "NO",
                                       "num_machines": 1, "num_processes": 1, "machine_rank": 0,
                                       "mixed_precision": "no", "dynamo_config": {}, "use_cpu": True}, "args": ""}
    copy = tmp_path / "mine.yaml"
    copy.write_text(CPU_CONFIG.read_text())
    assert launch(f"launch.config_file={CPU_CONFIG}") == launch(f"launch.config_file={copy}") == by_name
    assert launch("launch.config_file=cpu", "launch.parallel=4", "launch.gpus_per_run=0", "launch.executor=slurm",
                  "launch.slurm.partition=gpu", "launch.keep_checkpoints=true") == by_name
    copy.write_text(CPU_CONFIG.read_text().replace("mixed_precision: 'no'", "mixed_precision: bf16"))
    assert launch(f"launch.config_file={copy}")["config_file"]["mixed_precision"] == "bf16"
    assert launch("launch.config_file=cpu", "launch.args=--num_processes 2")["args"] == "--num_processes 2"
    assert launch()["config_file"] is None


def test_every_llm_strategy_maps_to_the_training_paths_balance_options():
    """One vocabulary: a LoRA comparison's strategy is the name the training recipe's balance.strategy takes, and
    each names the sampling and loss weights of rescue_train.sft.weighting."""
    from rescue_train.sft.weighting import STRATEGIES

    assert {name: balance_overrides(name) for name in LLM_STRATEGIES} == {
        name: [f"balance.strategy={name}"] for name in LLM_STRATEGIES}
    assert {name: (s.sampling, s.class_weights) for name, s in STRATEGIES.items()} == {
        "none": ("none", "none"), "inverse_freq": ("none", "balanced"), "sqrt_sampling": ("sqrt", "none"),
        "balanced_sampling": ("balanced", "none"), "sqrt_weights": ("none", "sqrt"),
        "sqrt_sampling_sqrt_weights": ("sqrt", "sqrt")}


def test_training_and_rank_commands(tmp_path):
    config = load_config(["recipe=ssp_lora", "model=tiny", "data.context=3", "strategies=[sqrt_weights]",
                          "launch.config_file=single_gpu", "launch.args=--num_processes 2 --main_process_port 0",
                          "rank.backend=vllm", "rank.args=[max_model_len=4096]"])
    run_dir = tmp_path / "run"
    assert training_command(config, "sqrt_weights", 2, 1, run_dir) == [
        sys.executable, "-m", "rescue_train", "launch", "--config_file", str(shipped("configs/accelerate") /
                                                                              "single_gpu.yaml"),
        "--gpu_ids", "all", "--main_process_port", "0", "--num_processes", "2",
        "--main_process_port", "0", "-m", "rescue_train", "train", "recipe=ssp_lora", "model=tiny",
        "data.context=3", "train.eval_steps=0", "seed=1", "data.test_fold=2", "balance.strategy=sqrt_weights",
        f"output_dir={run_dir}"]
    assert rank_command(config, run_dir, run_dir / "rank_eval") == [
        sys.executable, "-m", "rescue_train", "eval", f"run={run_dir}", "protocol=rank", "tasks=[ssp]",
        "backend=vllm", "batch_size=8", "rank_score=sum", "bertscore=none", "judge=none", "progress=false",
        f"output_dir={run_dir / 'rank_eval'}", "max_model_len=4096"]


def test_rank_evaluation_takes_the_runs_whole_data_config_include_current_too(tmp_path):
    from rescue_train.evaluation.config import load_config as load_eval_config

    config = load_config(["recipe=rpp_lora", "model=tiny", "data.rpp_include_current=true", "data.context=4",
                          "data.folds=3", "data.rpp_definition=BC"])
    assert (config.data.rpp_include_current, config.data.context, config.data.folds) == (True, 4, 3)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # The run folder as training leaves it: the resolved config of the run's own command, and its provenance.
    train_argv = training_command(config, "none", 2, 0, run_dir)
    resolved = subprocess.run([sys.executable, "-m", "rescue_train", *train_argv[train_argv.index("train"):],
                               "--cfg"], capture_output=True, text=True, check=True).stdout
    (run_dir / "config.yaml").write_text(resolved)
    (run_dir / "provenance.json").write_text(json.dumps({"kind": "lora_sft", "base_model": "tiny",
                                                         "split_manifest": "data/split_manifest.json"}))
    rank = load_eval_config(rank_command(config, run_dir, tmp_path / "eval")[4:])
    assert (rank.data.rpp_include_current, rank.data.context, rank.data.rpp_definition) == (True, 4, "BC")
    assert (rank.data.split, rank.data.folds, rank.data.test_fold) == ("kfold", 3, 2)
    assert rank.data.manifest == str(run_dir / "data" / "split_manifest.json")
    assert (rank.protocol, rank.tasks, rank.output_dir) == ("rank", ["rpp"], str(tmp_path / "eval"))


@pytest.mark.parametrize("argv, message", [
    (["recipe=rpp_lora", "balance.strategy=sqrt_sampling"], "sets balance itself"),
    (["recipe=rpp_lora", "seed=3"], r"use seeds=\[...\]"),
    (["recipe=rpp_lora", "data.test_fold=1"], r"use test_folds=\[...\]"),
    (["recipe=rpp_lora", "strategies=[focal]"], "do not apply to learner=lora"),
    (["recipe=rpp_lora", "train.nope=1"], "unknown key train.nope"),
    (["recipe=rpp_lora", "data.answer_format=json"], "answer_format must be label"),
    (["recipe=rpp_lora", "rank.backend=openai"], "rank.backend must be hf or vllm"),
    (["recipe=er_lora"], "not a closed-set task"),
    (["recipe=all_lora"], "trains 6 tasks"),
])
def test_lora_compare_rejects_bad_settings_clearly(argv, message):
    with pytest.raises(ValueError, match=message):
        load_config(argv)




def test_lora_compare_checks_what_it_needs_before_the_first_run(tmp_path, monkeypatch, capsys):
    """vLLM for rank.backend=vllm (here a vllm whose import fails, as PyPI's torchvision breaks it beside the CPU
    torch), sbatch for launch.executor=slurm, enough GPUs: each one line, before any folder or run exists."""
    fake = tmp_path / "site"
    (fake / "vllm").mkdir(parents=True)
    (fake / "vllm" / "__init__.py").write_text("raise RuntimeError('operator torchvision::nms does not exist')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no sbatch
    out = tmp_path / "cmp"
    base = ["recipe=ssp_lora", "model=tiny", "strategies=[none]", f"output_dir={out}"]
    assert cli(["compare", *base, "rank.backend=vllm"]) == 2
    error = capsys.readouterr().err
    assert "rank.backend=vllm needs vLLM in this environment" in error and "importing it fails: RuntimeError: " \
        "operator torchvision::nms does not exist; bash scripts/setup.sh puts it beside training" in error
    assert cli(["compare", *base, "launch.executor=slurm"]) == 2
    assert "launch.executor=slurm needs SLURM's sbatch, and none is on PATH" in capsys.readouterr().err
    assert cli(["compare", *base, "launch.parallel=2", "launch.gpus_per_run=1"]) == 2
    assert "launch.parallel=2 x launch.gpus_per_run=1 needs 2 GPUs; 0 visible" in capsys.readouterr().err
    assert not out.exists()


def test_a_failed_lora_run_is_reported_with_its_logs_tail(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["recipe=ssp_lora", "model=tiny", "strategies=[none]", "test_folds=[0]", f"output_dir={out}",
            "launch.args=--no-such-launch-flag"]
    assert cli(["compare", *argv]) == 2
    error = capsys.readouterr().err
    assert "1 of 1 runs failed (the others are recorded; rerun the same command to retry the failed ones)" in error
    assert "none/fold0_seed0: step 1 of 2" in error and "no-such-launch-flag" in error
    log = (out / "work" / "none" / "fold0_seed0.train.log").read_text()
    assert log.startswith("$ ") and "--no-such-launch-flag" in log.splitlines()[-1]
    assert not (out / "runs" / "none" / "fold0_seed0.json").exists()


# One LoRA comparison on the tiny model (two strategies on one fold, one step each), run one run after another; the
# executor tests below run it again, in parallel and on SLURM. Fold 2 of three holds two couples (a paired test
# with 2^2 unit swaps) and few instances (fold 0 holds the bundled data's family unit); pooling folds is the
# classifier comparisons' code (tests/classifiers/test_compare.py).
TINY_LORA = ["recipe=ssp_lora", "model=tiny", "data.folds=3", "test_folds=[2]", "seeds=[0]", f"launch.config_file={CPU_CONFIG}",
             "train.max_steps=1", "train.batch_size=2", "train.grad_accum=1", "train.max_length=1024",
             "train.report_to=[none]", "data.context=2", "evaluation.bootstrap=50", "evaluation.permutations=100"]


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    """The comparison's dry run (it trains the first run to time it), then the whole comparison: the output folder
    and what the dry run printed."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("sequential") / "cmp"
    argv = [*TINY_LORA, "strategies=[sqrt_sampling_sqrt_weights]", f"output_dir={out}"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli(["compare", *argv, "dry_run=true"]) == 0
    dry = printed.getvalue()
    assert (out / "runs" / "none" / "fold2_seed0.json").exists() and not (out / "results.json").exists()
    assert cli(["compare", *argv]) == 0
    return out, argv, dry


@pytest.mark.slow
def test_lora_compare_tiny_two_strategies_end_to_end(sequential, tmp_path):
    from rescue_train.classifiers.classifier import load_cls_rows
    from rescue_train.data.splits import SplitManifest

    out, argv, dry = sequential
    # Dry run: nothing was finished, so it trained the first run to time it.
    assert "2 runs (2 strategies x 1 fold x 1 seed): 1 finished, 1 to run; about" in dry
    results = json.loads((out / "results.json").read_text())
    assert results["learner"] == "lora" and list(results["strategies"]) == ["none", "sqrt_sampling_sqrt_weights"]
    assert results["folds"] == [2]
    manifest = SplitManifest.load(out / "data" / "split_manifest.json")
    tested = {r["id"] for r in load_cls_rows(out / "data", "ssp") if manifest.assignment[r["unit"]] == 2}
    assert results["scopes"]["both"]["n"] == len(tested)
    tests = results["scopes"]["both"]["strategies"]["sqrt_sampling_sqrt_weights"]["vs_none"]["macro_f1"]
    assert tests["test"] == f"exact: all 2^{results['scopes']['both']['units']} = " \
                            f"{2 ** results['scopes']['both']['units']} unit swap patterns"
    assert tests["p_holm"] >= tests["p_value"]
    record = json.loads((out / "runs" / "sqrt_sampling_sqrt_weights" / "fold2_seed0.json").read_text())
    assert record["learner_info"]["balance"] == ["balance.strategy=sqrt_sampling_sqrt_weights"]
    assert record["learner_info"]["manifest_hash"] == manifest.hash
    assert {p["id"] for p in record["predictions"]} <= tested
    first = record["predictions"][0]
    assert sorted(first["prediction"]) == sorted(first["label_scores"]) and first["parse_status"] == "ok"
    run_dir = out / "work" / "sqrt_sampling_sqrt_weights" / "fold2_seed0"
    log = (run_dir.parent / "fold2_seed0.train.log").read_text()
    assert f"--config_file {CPU_CONFIG}" in log and "data.test_fold=2" in log
    assert (run_dir / "adapter" / "adapter_config.json").exists() and not (run_dir / "checkpoints").exists()
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["status"] == "finished" and provenance["global_step"] == 1
    assert "Holm" in (out / "results.md").read_text()
    # Resume: every run is read back, nothing is trained again.
    stamp = (out / "runs" / "none" / "fold2_seed0.json").stat().st_mtime_ns
    assert cli(["compare", *argv]) == 0
    assert (out / "runs" / "none" / "fold2_seed0.json").stat().st_mtime_ns == stamp
    assert json.loads((out / "results.json").read_text())["scopes"] == results["scopes"]
    # Killed after a run finished training but before its record was written: the job's training step is skipped
    # (its provenance says finished), and its rank evaluation resumes on the same adapter.
    record_file = out / "runs" / "none" / "fold2_seed0.json"
    recorded = json.loads(record_file.read_text())
    adapter = (out / "work" / "none" / "fold2_seed0" / "adapter" / "adapter_model.safetensors").read_bytes()
    record_file.unlink()
    assert cli(["compare", *argv]) == 0
    again = json.loads(record_file.read_text())
    assert again["learner_info"]["rank_eval"] == recorded["learner_info"]["rank_eval"]
    assert (out / "work" / "none" / "fold2_seed0" / "adapter" / "adapter_model.safetensors").read_bytes() == adapter
    train_log = (out / "work" / "none" / "fold2_seed0.train.log").read_text()
    assert train_log.count("$ ") == 1 and train_log.count("-m rescue_train launch") == 1  # launched once only
    # Classifiers and LLMs in one table, each strategy tested against the `none` of its own kind.
    cls_argv = ["recipe=ssp_cls", "strategies=[inverse_freq]", "data.folds=3", "test_folds=[2]", f"output_dir={tmp_path / 'cls'}",
                "evaluation.bootstrap=50", "evaluation.permutations=100", "plots=false"]
    assert cli(["compare", *cls_argv]) == 0
    assert cli(["compare", f"merge=[{out},{tmp_path / 'cls'}]", f"output_dir={tmp_path / 'all'}", "plots=false"]) == 0
    merged = json.loads((tmp_path / "all" / "results.json").read_text())
    assert list(merged["strategies"]) == ["lora:none", "lora:sqrt_sampling_sqrt_weights", "sklearn:none",
                                          "sklearn:inverse_freq"]
    both = merged["scopes"]["both"]
    assert both["n"] == len(tested) and both["strategies"]["lora:none"]["estimate"] == \
        results["scopes"]["both"]["strategies"]["none"]["estimate"]
    assert both["strategies"]["sklearn:inverse_freq"]["vs_none"]["macro_f1"]["reference"] == "sklearn:none"


STRATEGY = "sqrt_sampling_sqrt_weights"


def _records(out: Path) -> dict:
    return {name: json.loads((out / "runs" / name / "fold2_seed0.json").read_text()) for name in ("none", STRATEGY)}


def _without_scores(predictions: list[dict]) -> list[dict]:
    return [{k: v for k, v in p.items() if k != "label_scores"} for p in predictions]


def _rerun(out: Path, extra: list[str]) -> dict:
    """The sequential comparison's two runs done again in its own folder (so every path is the same) under other
    launch settings; the folder is put back as it was afterwards. Returns the new records after checking that they
    predict exactly what the sequential ones did: the same prediction hash (it covers the adapter's weights, byte
    for byte, and every setting) and the same ranked predictions, every log-likelihood equal to float32 rounding
    (runs sharing the machine get fewer threads each, and a float32 matrix product split over another number of
    threads may round its last bit otherwise)."""
    import shutil

    theirs = _records(out)
    kept = out.with_name(out.name + "-kept")
    shutil.copytree(out, kept, symlinks=True)
    try:
        shutil.rmtree(out / "runs")
        shutil.rmtree(out / "work")
        assert cli(["compare", *TINY_LORA, f"strategies=[{STRATEGY}]", f"output_dir={out}", *extra]) == 0
        mine = _records(out)
        for name in mine:
            assert mine[name]["learner_info"]["rank_eval"]["prediction_hash"] == \
                theirs[name]["learner_info"]["rank_eval"]["prediction_hash"]
            assert _without_scores(mine[name]["predictions"]) == _without_scores(theirs[name]["predictions"])
            for new, old in zip(mine[name]["predictions"], theirs[name]["predictions"]):
                assert new["label_scores"] == pytest.approx(old["label_scores"], rel=1e-6, abs=1e-5)
            mine[name]["provenance"] = json.loads((out / "work" / name / "fold2_seed0" / "provenance.json").read_text())
            mine[name]["rank_results"] = json.loads(Path(mine[name]["learner_info"]["rank_eval"]["results"]).read_text())
        return mine
    finally:
        shutil.rmtree(out)
        kept.rename(out)


@pytest.mark.slow
def test_lora_runs_in_parallel_predict_what_they_predict_one_after_another(sequential):
    from rescue_train.devices import usable_cpus

    records = _rerun(sequential[0], ["launch.parallel=2", "launch.gpus_per_run=0"])
    threads = str(max(1, len(usable_cpus()) // 2))
    for record in records.values():
        executor = record["learner_info"]["executor"]
        assert (executor["kind"], executor["threads"], executor["gpus"]) == ("local", threads, [])
        assert record["provenance"]["executor"] == record["rank_results"]["executor"] == executor


@pytest.mark.slow
def test_lora_runs_on_slurm_predict_what_they_predict_locally(sequential, slurm):
    records = _rerun(sequential[0], slurm)
    jobs = set()
    for record in records.values():
        executor = record["learner_info"]["executor"]
        assert executor["kind"] == "slurm" and executor["threads"] == "1" and executor["job_id"]
        assert record["provenance"]["executor"]["job_id"] == executor["job_id"]
        jobs.add(executor["job_id"])
    assert len(jobs) == 2
