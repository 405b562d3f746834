"""A resumed training run is the run it would have been: for each kind of balance strategy and with task mixing (weighted
draws in length-grouped batches, the default batching), a run stopped after a checkpoint and resumed writes the
uninterrupted run's adapter byte for byte (CPU) and reports the whole run (its sessions, seconds and loss), at a
checkpoint inside an epoch after the first and at an epoch's end, and after a real ``kill -9`` (eval and merge refuse
the killed run until it is resumed); a finished run is left alone, and a run of another configuration is refused."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import command
from sft_helpers import ROOT

from rescue_train.sft.weighting import STRATEGIES

# STP's bundled fold 0 has 34 training instances (two classes of target, short prompts): 9 batches of 4 per
# epoch (the last one of 2), so checkpoint 12 lies 3 batches into the second epoch and checkpoint 9 ends the first.
SHORT = ["model=tiny", "train.max_steps=14", "train.batch_size=4", "train.grad_accum=1", "train.eval_steps=3",
         "train.save_total_limit=10", "train.logging_steps=1", "train.lr=1e-2", "train.report_to=[none]"]
# Each way a strategy shapes training once: none, drawn samples (square-root; balanced, whose epoch end is checked
# too), answer-token weights and a loss over the candidate answers (balanced_softmax; logit_adjusted and
# candidate_ce are its mechanism with another prior term); inverse_freq is sqrt_weights' mechanism with other
# weights, sampling with weights at once is the kill -9 test's, and posthoc_la trains nothing.
KINDS = ("none", "sqrt_sampling", "balanced_sampling", "sqrt_weights", "balanced_softmax")
CASES = {name: ("stp_lora", [f"balance.strategy={name}"]) for name in KINDS}
# Two tasks mixed 3:1 (draws by mixing weight), two batches per step: 88 instances, 11 steps per epoch.
CASES["mixing"] = ("stp_lora", ["tasks={stp: 3.0, itp: 1.0}", "train.grad_accum=2", "train.eval_steps=4"])


def test_every_strategy_has_its_kind_resumed():
    """A new strategy fails here until a resume test covers its mechanism."""
    assert set(STRATEGIES) - set(KINDS) == {"inverse_freq", "sqrt_sampling_sqrt_weights", "logit_adjusted",
                                            "candidate_ce", "posthoc_la"}


def adapter_bytes(run_dir: Path) -> bytes:
    return (run_dir / "adapter" / "adapter_model.safetensors").read_bytes()


def train(args: list[str], run_dir: Path) -> None:
    from rescue_train.sft.config import load_config
    from rescue_train.sft.runner import run

    recipe, overrides = args[0], args[1:]
    run(load_config(recipe, [*overrides, f"output_dir={run_dir}"]))


def stopped_after(finished: Path, step: int, folder: Path) -> Path:
    """What a kill right after checkpoint ``step`` leaves: the run folder up to that checkpoint (and a later one
    cut short, without its trainer state), no adapter, provenance saying the run is still going."""
    shutil.copytree(finished, folder)
    for checkpoint in (folder / "checkpoints").glob("checkpoint-*"):
        later = int(checkpoint.name.rsplit("-", 1)[1]) > step
        if later:
            shutil.rmtree(checkpoint)
    cut = folder / "checkpoints" / f"checkpoint-{step + 1}"
    cut.mkdir()
    (cut / "adapter_config.json").write_text("{}")
    shutil.rmtree(folder / "adapter")
    provenance = json.loads((folder / "provenance.json").read_text())
    (folder / "provenance.json").write_text(json.dumps({**provenance, "status": "running"}))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_run_resumed_after_a_checkpoint_writes_the_uninterrupted_runs_adapter(case, tmp_path, one_torch_thread):
    recipe, extra = CASES[case]
    args = [recipe, *SHORT, *extra]
    uninterrupted = tmp_path / "whole"
    train(args, uninterrupted)
    state = json.loads((uninterrupted / "provenance.json").read_text())
    steps = sorted(int(p.name.rsplit("-", 1)[1]) for p in (uninterrupted / "checkpoints").glob("checkpoint-*"))
    epoch_steps = round(steps[0] / json.loads((uninterrupted / "checkpoints" / f"checkpoint-{steps[0]}" /
                                                "trainer_state.json").read_text())["epoch"])
    # a checkpoint inside an epoch after the first (the sampler must draw that epoch's sequence, then skip)
    inside = next(s for s in steps if s > epoch_steps and s % epoch_steps)
    points = [inside] + ([s for s in steps if s % epoch_steps == 0 and s < state["global_step"]][:1]
                         if case == "balanced_sampling" else [])
    assert [s["steps"] for s in state["sessions"]] == [[1, state["global_step"]]]
    assert state["train_loss"] == pytest.approx(state["metrics"]["train_loss"], rel=1e-9)
    for step in points:
        resumed = stopped_after(uninterrupted, step, tmp_path / f"stopped{step}")
        train(args, resumed)
        provenance = json.loads((resumed / "provenance.json").read_text())
        assert provenance["resumed_from"] == str(resumed / "checkpoints" / f"checkpoint-{step}")
        assert provenance["global_step"] == state["global_step"]
        assert adapter_bytes(resumed) == adapter_bytes(uninterrupted), f"resumed from step {step}"
        # weighted draws are length-grouped by default (the order a resumed run must rebuild)
        assert provenance["batching"] == ("shuffled" if case in ("none", "sqrt_weights", "balanced_softmax") else "length_grouped")
        assert 0 < provenance["non_pad_share"] <= 1
        assert_covers_the_run(provenance, state, step)


def assert_covers_the_run(provenance: dict, whole: dict, step: int) -> None:
    """A run resumed at ``step`` reports the whole run: both sessions, their seconds summed, and the mean loss per
    step of the uninterrupted run (the same steps on the same batches), not its last session's."""
    sessions = provenance["sessions"]
    assert [s["steps"] for s in sessions] == [[1, step], [step + 1, whole["global_step"]]]
    assert provenance["train_seconds"] == pytest.approx(sum(s["seconds"] for s in sessions), abs=0.02)
    assert provenance["train_seconds"] > provenance["metrics"]["train_runtime"]  # more than the last session
    assert provenance["train_loss"] == pytest.approx(whole["train_loss"], rel=1e-5)
    mean = (step * sessions[0]["train_loss"] + (whole["global_step"] - step) * sessions[1]["train_loss"]) \
        / whole["global_step"]
    assert provenance["train_loss"] == pytest.approx(mean, rel=1e-9)


def launch(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "rescue_train", "train", *args]


@pytest.mark.slow
def test_a_run_killed_by_sigkill_is_refused_until_resumed_into_the_uninterrupted_runs_adapter(tmp_path, capsys):
    """Killed after a checkpoint: until it is resumed, eval and merge refuse the run (they would otherwise take
    that checkpoint's adapter for the model); resumed, it is the uninterrupted run."""
    from rescue_train.evaluation.models import find_adapter

    args = ["recipe=stp_lora", *SHORT, "balance.strategy=sqrt_sampling_sqrt_weights"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = subprocess.run(launch([*args, f"output_dir={whole}"]), cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    process = subprocess.Popen(launch([*args, f"output_dir={killed}"]), cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    ready = killed / "checkpoints" / "checkpoint-12" / "trainer_state.json"  # inside the second epoch
    deadline = time.time() + 300
    while process.poll() is None and not ready.exists() and time.time() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert json.loads((killed / "provenance.json").read_text())["status"] == "running"
    refusal = (f"{killed}: this training run did not finish (provenance.json says status 'running': it was "
               f"killed, or is still going); rerun the same train command to resume it")
    with pytest.raises(ValueError) as info:
        find_adapter(killed)
    assert str(info.value) == refusal
    capsys.readouterr()
    assert command("merge")([str(killed)]) == 2
    assert capsys.readouterr().err == f"rescue-train merge: error: {refusal}\n"
    resumed = subprocess.run(launch([*args, f"output_dir={killed}"]), cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    provenance = json.loads((killed / "provenance.json").read_text())
    step = int(provenance["resumed_from"].rsplit("-", 1)[1])
    assert step >= 12 and provenance["global_step"] == 14
    assert f"resuming from checkpoint-{step}, step {step} of 14\n" in resumed.stdout
    assert adapter_bytes(killed) == adapter_bytes(whole) and provenance["batching"] == "length_grouped"
    assert_covers_the_run(provenance, json.loads((whole / "provenance.json").read_text()), step)
    assert find_adapter(killed)[0] == killed / "adapter"


@pytest.mark.slow
def test_a_finished_run_is_not_trained_again_and_another_configuration_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "run"
    args = ["recipe=ssp_lora", "model=tiny", "train.max_steps=2", "train.batch_size=2", "train.grad_accum=1",
            "train.eval_steps=0", "train.scheduler=constant", "train.report_to=[none]", f"output_dir={run_dir}"]
    main = command("train")
    assert main(args) == 0
    before = {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(args) == 0
    assert capsys.readouterr().out == f"already finished: {run_dir}\n"
    assert {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
    assert main([*args, "train.max_steps=4"]) == 2
    assert capsys.readouterr().err == (
        f"rescue-train train: error: {run_dir} holds a finished training run with another configuration "
        "(train.max_steps: 2 there, 4 here); choose another output_dir, or pass resume=false to start that folder "
        "over\n")
    assert main([*args, "train.max_steps=4", "resume=false"]) == 0  # started over: four fresh steps
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["global_step"] == 4 and provenance["resumed_from"] is None
    assert [p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")] == ["checkpoint-4"]
