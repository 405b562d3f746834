"""``eval run=RUN_DIR`` asks a trained model exactly what it learnt from: the same prompts, byte for byte, on
the run's own held-out test fold, for a LoRA run and a classifier run trained with non-default settings."""

from __future__ import annotations

import json
from pathlib import Path

import evaluation_helpers  # noqa: F401  (offline settings)
from cli_helpers import command
import pytest

from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.protocols import messages, prompt_hash
from rescue_train.evaluation.plan import load_instances
from rescue_train.evaluation.report import render
from rescue_train.evaluation.runner import run
from rescue_train.tasks import render_for_classifier

# settings that change the prompts (mode, answer format, context, RPP rules) and the split
DATA = ["data.answer_format=json", "data.mode=audiovisual", "data.rpp_definition=A", "data.rpp_include_current=true",
        "data.context=4", "data.split_seed=3", "data.folds=3", "data.test_fold=1"]


def _test_rows(run_dir: Path, task: str, kind: str) -> dict[str, dict]:
    import datasets

    test = datasets.load_from_disk(str(run_dir / "data" / task / kind))["test"]
    return {row["id"]: row for row in test}


def _training_prompt(row: dict) -> list[dict]:
    """The prompt part of a converted SFT row (chat messages with the answer last, or prompt/completion)."""
    return row["prompt"] if "prompt" in row else row["messages"][:-1]


def _eval_prompts(cfg) -> dict[str, list[dict]]:
    data = load_instances(cfg)
    return {inst.id: messages(inst, cfg.protocol, cfg.data.mode, cfg.data.answer_format)
            for task in cfg.tasks for inst in data.instances[task]}


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory) -> Path:
    main = command("train")

    out = tmp_path_factory.mktemp("lora") / "run"
    assert main(["recipe=ssp_lora", "+tasks.rpp=1.0", *DATA, "train.max_steps=1", "train.batch_size=1",
                 "train.grad_accum=1", "train.eval_steps=0", "train.report_to=[none]", f"output_dir={out}"]) == 0
    return out


@pytest.mark.slow
def test_lora_run_is_evaluated_on_its_own_prompts_and_test_fold(lora_run, tmp_path):
    cfg = load_config([f"run={lora_run}", "tasks=[ssp,rpp]", "bertscore=none", "progress=false",
                       "max_new_tokens=2", f"output_dir={tmp_path / 'eval'}"])
    assert (cfg.data.answer_format, cfg.data.mode, cfg.data.test_fold, cfg.data.folds) == ("json", "audiovisual", 1, 3)
    assert cfg.adapter == [str(lora_run.resolve())]
    prompts = _eval_prompts(cfg)
    trained = {i: _training_prompt(r) for task in ("ssp", "rpp") for i, r in _test_rows(lora_run, task, "sft").items()}
    assert prompts and set(prompts) == set(trained)
    for key, prompt in prompts.items():
        assert json.dumps(prompt, ensure_ascii=False) == json.dumps(trained[key], ensure_ascii=False), key
    (results,) = run(cfg)
    assert {r["id"]: r["prompt_hash"] for r in results["records"]} == {k: prompt_hash(p) for k, p in trained.items()}
    assert results["model"]["tokenizer"] == str(lora_run.resolve() / "adapter")  # the run's chat template
    # fold 1 of this split holds no family instance (all are in its training fold 0): train and eval say so
    note = ("family: 0 test instances (all family data is in training fold 0): no family scores. Choose "
            "data.test_fold=0 to score family")
    assert json.loads((lora_run / "provenance.json").read_text())["data"]["fold_notes"] == [note]
    assert results["split"]["fold_notes"] == [note] and f": {note}" in render([results])
    # an override of an inherited prompt setting is allowed, and named
    with pytest.warns(UserWarning, match=r"data.answer_format='label' overrides the run's data.answer_format='json'"):
        label = load_config([f"run={lora_run}", "tasks=[ssp,rpp]", "data.answer_format=label"])
    relabelled = _eval_prompts(label)
    assert set(relabelled) == set(prompts) and all(relabelled[k] != prompts[k] for k in prompts)


@pytest.mark.slow
def test_classifier_run_is_evaluated_on_its_own_texts_and_test_fold(tmp_path):
    main = command("train")

    out = tmp_path / "cls"
    assert main(["recipe=rpp_cls", "strategy=none", *[d for d in DATA if "answer_format" not in d],
                 f"output_dir={out}"]) == 0
    cfg = load_config([f"run={out}", "model=tiny", "tasks=[rpp]"])
    assert (cfg.data.mode, cfg.data.rpp_definition, cfg.data.test_fold, cfg.adapter) == ("audiovisual", "A", 1, None)
    instances = {inst.id: inst for inst in load_instances(cfg).instances["rpp"]}
    rows = _test_rows(out, "rpp", "cls")
    predicted = {json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()}
    assert instances and set(instances) == set(rows) == predicted
    for key, inst in instances.items():  # the classifier's own input, from the instances eval builds
        assert {k: rows[key][k] for k in ("text", "query", "conversation")} == \
            render_for_classifier(inst, cfg.data.mode), key


@pytest.mark.slow
def test_chat_shows_one_instance_its_answer_and_every_candidates_probability(lora_run, capsys):
    """rescue-train chat RUN: the run's own prompt for the instance asked, the constrained answer (in the run's JSON
    answer format), the gold, and a probability per candidate summing to 1."""
    cfg = load_config([f"run={lora_run}", "tasks=[ssp]"])
    inst = load_instances(cfg).instances["ssp"][2]
    capsys.readouterr()
    assert command("chat")([str(lora_run), "tasks=[ssp]", "instance=2"]) == 0
    shown = capsys.readouterr().out
    prompt, rest = shown.split("--- answer (sft, constrained)\n")
    assert prompt == "".join(f"--- {m['role']}\n{m['content']}\n"
                             for m in messages(inst, "sft", cfg.data.mode, cfg.data.answer_format))
    answer, rest = rest.split("--- gold\n")
    assert answer.startswith('{"strategy_top3":')  # held to the answer's schema (the random model then idles)
    rows = rest.split("normalised over the candidates)\n")[1].splitlines()[:-1]
    assert sorted(row.split()[1] for row in rows) == sorted(inst.candidates)
    assert sum(float(row.split()[0].rstrip("%")) for row in rows) == pytest.approx(100, abs=0.01 * len(rows))
    assert f"({inst.id}, ssp, instance 2 of" in shown


@pytest.mark.slow
def test_prior_calibration_of_a_trained_run(lora_run, tmp_path):
    """calibration=prior: the class prior of the run's training fold, tau chosen on its validation fold (ranked
    once more); a fixed calibration_tau asks no validation instance."""
    from rescue_train.evaluation.calibrate import training_prior
    from rescue_train.evaluation.plan import Benchmark
    from rescue_train.evaluation.trained import read_run

    args = [f"run={lora_run}", "tasks=[ssp]", "protocol=rank", "calibration=prior", "limit=2", "progress=false",
            "bertscore=none"]
    (chosen,) = run(load_config([*args, f"output_dir={tmp_path / 'chosen'}"]))
    about = chosen["calibration"]
    assert chosen["label"].endswith("[prior]") and about["training_run"] == str(lora_run.resolve())
    cfg = load_config(args)
    assert about["prior"] == training_prior(read_run(lora_run), Benchmark(cfg).built)
    choice = about["tau_choice"]["ssp"]
    assert about["tau"] == {"ssp": choice["tau"]} and len(about["validation"]) == choice["validation_instances"] == 2
    best = max(choice["validation_balanced_accuracy"].values())
    assert choice["validation_balanced_accuracy"][str(choice["tau"])] == best
    (fixed,) = run(load_config([*args, "calibration_tau=1.0", f"output_dir={tmp_path / 'fixed'}"]))
    assert fixed["calibration"]["tau"] == 1.0 and "validation" not in fixed["calibration"]
    assert all(r["calibration"] == "prior" for r in fixed["records"])
