"""End-to-end LoRA training on the tiny model: accelerate launch, the run folder, merge, learning (resuming:
test_resume.py)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import command
import pytest
from sft_helpers import ROOT, chat_rows, make_trainer, tiny_model

from rescue_train.tiny import CHAT_TEMPLATE

FAST = ["model=tiny", "train.max_steps=2", "train.batch_size=2", "train.grad_accum=1", "train.eval_steps=2",
        "train.logging_steps=1", "train.lr=1e-2"]


@pytest.fixture(scope="module")
def launched_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "ssp"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "train.py", "recipe=ssp_lora", *FAST,
           f"output_dir={out}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out.parent / "console.txt").write_text(done.stdout)
    return out


@pytest.mark.slow
def test_a_run_ends_with_its_summary_its_loss_plot_and_the_evaluation_it_is_scored_by(launched_run):
    """The last lines: steps, time and losses; the next step ranks the closed-set task (protocol=rank); loss.png
    (train and validation loss over the steps) is in the run folder."""
    prov = json.loads((launched_run / "provenance.json").read_text())
    metrics = prov["metrics"]
    *_, summary, _, next_step = (launched_run.parent / "console.txt").read_text().splitlines()
    assert summary == (f"finished: 2 steps in {prov['train_seconds']:.0f} s, train loss {prov['train_loss']:.4g}, "
                       f"validation loss {metrics['eval_loss']:.4g}")
    assert next_step == f"evaluate it on its test fold: rescue-train eval run={launched_run} protocol=rank"
    assert (launched_run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


LAUNCH = ["--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def test_a_bad_key_under_the_launcher_is_one_line_and_status_2():
    """rescue-train launch (accelerate launch's options and launcher) ends as the training ends: a setting error is
    its one line and status 2, with no launcher traceback."""
    done = subprocess.run([sys.executable, "-m", "rescue_train", "launch", *LAUNCH, "train.py", "recipe=ssp_lora",
                           "train.learning_rate=1e-4"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "rescue-train train: error: unknown key train.learning_rate; did you mean train.lr?"]


def test_ctrl_c_under_accelerate_launch_is_one_line_and_status_130(tmp_path):
    """Ctrl-C (SIGINT to the launcher and the training, as a terminal sends it) while training: the launcher exits
    130 and the training, which the launcher also stops with SIGTERM, says in one line where it stopped."""
    import re
    import signal

    cmd = [sys.executable, "-m", "accelerate.commands.launch", *LAUNCH, "train.py", "recipe=ssp_lora", "model=tiny",
           "train.max_steps=1000", "train.batch_size=1", "train.grad_accum=1", "train.logging_steps=1",
           "train.eval_steps=0", "train.report_to=[none]", f"output_dir={tmp_path / 'run'}"]
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in process.stdout:  # the first logged step: training has begun
        if "'loss'" in line:
            break
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130
    said = re.findall(r"rescue-train train: interrupted at step (\d+); rerun the same command to resume\n", err)
    assert len(said) == 1 and int(said[0]) >= 1 and "Traceback" not in err, err[-3000:]


@pytest.mark.slow
def test_accelerate_launch_leaves_a_loadable_adapter_and_its_provenance(launched_run):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    prov = json.loads((launched_run / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["global_step"] == 2 and prov["adapter"] == "adapter"
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(prov["base_model"]),
                                      str(launched_run / "adapter"))
    assert model.peft_config["default"].r == 16
    assert (launched_run / "adapter" / "chat_template.jinja").read_text() == CHAT_TEMPLATE  # the model's own
    assert prov["chat_template_sha256"] == hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest()[:16]
    meta = json.loads((launched_run / "data" / "convert_meta.json").read_text())
    assert prov["data"]["train_instances"] == meta["tasks"]["ssp"]["splits"]["train"]
    assert prov["data"]["validation_instances"] == meta["tasks"]["ssp"]["splits"]["validation"]
    assert prov["manifest_hash"] == meta["manifest_hash"]
    assert {"torch", "transformers", "trl", "peft"} <= set(prov["versions"])
    assert "eval_loss" in prov["metrics"] and prov["seed"] == 0
    assert "name: ssp_lora" in (launched_run / "config.yaml").read_text()


@pytest.mark.slow
def test_tensorboard_logs_carry_loss_lr_throughput_and_non_pad_share(launched_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(launched_run / "logs"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/learning_rate", "train/tokens_per_second", "train/non_pad_share",
            "eval/loss"} <= tags
    shares = [e.value for e in events.Scalars("train/non_pad_share")]
    assert all(0 < s <= 1 for s in shares)
    # 0.03 warmup of 2 steps is one step, counted from the first: both steps at lr 1e-2 (cosine at its start)
    assert [e.value for e in events.Scalars("train/learning_rate")] == pytest.approx([1e-2, 1e-2])


@pytest.mark.slow
def test_merge_equals_base_plus_adapter(launched_run, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    main = command("merge")

    assert main([str(launched_run), "--out", str(tmp_path / "merged")]) == 0
    prov = json.loads((launched_run / "provenance.json").read_text())
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    base = AutoModelForCausalLM.from_pretrained(prov["base_model"])
    with torch.no_grad():
        base_logits = base(ids).logits
        adapted = PeftModel.from_pretrained(base, str(launched_run / "adapter"))(ids).logits
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")(ids).logits
    assert not torch.allclose(base_logits, adapted, atol=1e-4)  # the adapter learnt something
    assert torch.allclose(merged, adapted, atol=1e-4)
    assert (tmp_path / "merged" / "tokenizer.json").exists()


def test_resume_true_without_checkpoint_is_an_error(tmp_path):
    from rescue_train.sft.runner import last_checkpoint

    with pytest.raises(ValueError, match="resume=true but .* holds no checkpoint"):
        last_checkpoint(tmp_path, True)
    assert last_checkpoint(tmp_path, "auto") is None


@pytest.mark.slow
def test_loss_falls_when_overfitting_one_batch(tmp_path):
    rows = chat_rows([("yes", "Speak now?"), ("no", "Wait?"), ("reframing", "Strategy?"), ("Couple", "Target?")])
    trainer = make_trainer(rows, tmp_path, max_steps=30,
                           per_device_train_batch_size=4, learning_rate=1e-2, logging_steps=1,
                           gradient_checkpointing=False, lr_scheduler_type="constant")
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    # from ln(vocab) ~ 7.6 at random init; the tiny model's small tied embeddings cap how far it can go
    assert sum(losses[-5:]) / 5 < losses[0] - 1.2  # 7.66 -> 5.99 here


def test_packed_instances_do_not_attend_to_each_other():
    """trl's padding-free packing passes position_ids that restart per instance; the model must then give
    each instance the same log-probabilities as alone."""
    import torch
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    model = tiny_model().eval()
    first, second = [5, 17, 42, 99, 7], [8, 13, 21, 34, 55, 89, 144]
    packed = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(
        [{"input_ids": first}, {"input_ids": second}])
    assert "attention_mask" not in packed
    with torch.no_grad():
        # as in training: no KV cache (with one, transformers does not look for packed sequences)
        together = model(input_ids=packed["input_ids"], position_ids=packed["position_ids"], use_cache=False).logits[0]
        alone = [model(input_ids=torch.tensor([ids])).logits[0] for ids in (first, second)]
    assert torch.allclose(together[:5], alone[0], atol=1e-5)
    assert torch.allclose(together[5:], alone[1], atol=1e-5)


@pytest.mark.slow
def test_two_process_cpu_ddp_splits_the_batches(tmp_path):
    """--multi_gpu with 2 CPU processes is real DDP (gloo) only because the trainer sets use_cpu; rank 0
    converts the data while rank 1 waits, and each step consumes 2 ranks x 2 instances."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "train.py", "recipe=itp_lora",
           *FAST, "train.eval_steps=0", f"output_dir={tmp_path}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["global_step"] == 2
    # an epoch is ceil(n / (2 ranks x 2)) steps; a single process would need ceil(n / 2)
    assert prov["metrics"]["epoch"] == pytest.approx(2 / math.ceil(prov["data"]["train_instances"] / 4))


@pytest.mark.slow
def test_any_model_by_name_trains_packed(tmp_path):
    """model=any with model.path (here the tiny model's name) and packing, through the whole run (the packed
    rows' loss: tests/sft/test_sft_templates.py)."""
    from rescue_train.sft.config import load_config
    from rescue_train.sft.runner import run

    cfg = load_config("ssp_lora", [*FAST, "model=any", "model.path=tiny", "train.packing=true", "balance.strategy=none",
                               "train.eval_steps=0", "train.report_to=[none]", f"output_dir={tmp_path}"])
    assert cfg.model.name == "tiny" and cfg.lora.target_modules == "all-linear"
    run(cfg)
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["global_step"] == 2 and prov["model_preset"] == "tiny"


@pytest.mark.slow
def test_class_weighted_answer_tokens_train_through_the_run(tmp_path):
    from rescue_train.sft.config import load_config
    from rescue_train.sft.runner import run

    run(load_config("ssp_lora", [*FAST, "balance.strategy=inverse_freq", "train.eval_steps=0", "train.report_to=[none]",
                             f"output_dir={tmp_path}"]))
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["global_step"] == 2 and prov["metrics"]["train_loss"] > 0
