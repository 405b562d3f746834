"""`rescue-train export lm-eval`: the exported multiple-choice tasks, run by lm-evaluation-harness itself,
score the same strings as our rank protocol, so the harness's accuracy is our Recall@1."""

import json

import pytest

from rescue_train.cli import main as cli
from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.protocols import predict
from rescue_train.evaluation.plan import load_instances
from rescue_train.export.lm_eval import export
from rescue_train.inference.hf import HFBackend
from rescue_train.tiny import tiny_model_path

LIMIT = 4


def test_export_writes_a_group_with_one_task_per_closed_set_task(tmp_path, capsys):
    assert cli(["export", "lm-eval", "--output-dir", str(tmp_path), f"limit={LIMIT}", "tasks=[itp,stp,er]"]) == 0
    assert "rescue_itp: 4 instances" in capsys.readouterr().out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["export_meta.json", "lm_eval_loader.py", "rescue.yaml", "rescue_itp.jsonl", "rescue_itp.yaml",
                     "rescue_stp.jsonl", "rescue_stp.yaml"]  # ER has no candidates: not exported
    assert "task: [rescue_itp, rescue_stp]" in (tmp_path / "rescue.yaml").read_text()
    doc = json.loads((tmp_path / "rescue_itp.jsonl").read_text().splitlines()[0])
    assert doc["candidates"] == ["yes", "no"]
    # The tiny model's ChatML: the prompt ends with the generation prompt, a choice is answer + end of turn.
    assert doc["prompt"].endswith("<|im_start|>assistant\n")
    assert doc["choices"] == ["yes<|im_end|>", "no<|im_end|>"]
    meta = json.loads((tmp_path / "export_meta.json").read_text())
    assert meta["tasks"] == {"itp": 4, "stp": 4} and meta["split"]["scheme"] == "none"


def test_export_refuses_a_task_list_without_closed_set_tasks(tmp_path, capsys):
    assert cli(["export", "lm-eval", "--out", str(tmp_path), "tasks=[er,vp]"]) == 2
    assert "holds no closed-set task" in capsys.readouterr().err
    assert cli(["export", "csv", "--out", str(tmp_path)]) == 2
    assert "unknown format 'csv'" in capsys.readouterr().err


@pytest.mark.slow
def test_lm_eval_accuracy_equals_our_rank_recall_at_1(tmp_path, one_torch_thread):
    import lm_eval
    from lm_eval.tasks import TaskManager

    cfg = load_config(["model=tiny", f"limit={LIMIT}", "tasks=[itp,rpp,stp,ssp]"])
    export(cfg, tmp_path)
    instances = load_instances(cfg).instances
    model = str(tiny_model_path())
    ours = predict(HFBackend(model, dtype="float32", device="cpu"),
                   [i for task in cfg.tasks for i in instances[task]], protocol="rank", mode="dialogue", adapter=None)
    harness = lm_eval.simple_evaluate(
        model="hf", model_args={"pretrained": model, "dtype": "float32", "device": "cpu"}, tasks=["rescue"],
        task_manager=TaskManager(include_path=str(tmp_path)), log_samples=True, batch_size=4)
    for task in cfg.tasks:
        mine = [r for r in ours if r["task"] == task]
        recall_at_1 = sum(r["scores"]["recall@1"] for r in mine) / len(mine)
        assert harness["results"][f"rescue_{task}"]["acc,none"] == pytest.approx(recall_at_1)
        for record, sample in zip(mine, sorted(harness["samples"][f"rescue_{task}"], key=lambda s: s["doc_id"])):
            theirs = [ll for ll, _ in sample["filtered_resps"]]
            assert record["prediction"][0] == sample["doc"]["candidates"][theirs.index(max(theirs))]
            # The harness also scores the prompt's trailing newline (it moves trailing whitespace into the
            # continuation): a constant per prompt, so differences between candidates are ours exactly.
            lls = [record["loglik"][c] for c in sample["doc"]["candidates"]]
            assert [a - lls[0] for a in lls] == pytest.approx([b - theirs[0] for b in theirs], abs=1e-4)
