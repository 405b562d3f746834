"""Prompts, answer constraints and records of the three protocols; the eval command line."""

from __future__ import annotations

import json

import evaluation_helpers  # noqa: F401  (offline settings)
import pytest

from rescue_train.cli import main
from rescue_train.data import load_samples
from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.protocols import constraint, generated_record, messages, ranked_record
from rescue_train.inference import Scored
from rescue_train.settings import shipped
from rescue_train.tasks import TASKS, build, render


@pytest.fixture(scope="module")
def instances():
    samples = load_samples("bundled")
    return {task: build(task, samples).instances[0] for task in TASKS}


def test_sft_is_the_training_prompt_and_paper_one_user_message(instances):
    for inst in instances.values():
        assert messages(inst, "sft", "dialogue") == render(inst, "dialogue", "label")
        paper = messages(inst, "paper", "dialogue")
        system, user = render(inst, "dialogue", "json")
        assert paper == [{"role": "user", "content": system["content"] + "\n\n" + user["content"]}]
        assert "JSON" in paper[0]["content"] and inst.id not in paper[0]["content"]


def test_constraints(instances):
    itp, rpp, er = instances["itp"], instances["rpp"], instances["er"]
    assert constraint(itp, "sft") == {"choice": ["yes", "no"]}
    assert constraint(itp, "paper")["json"]["properties"] == {"should_speak": {"type": "string", "enum": ["yes", "no"]}}
    top3 = constraint(rpp, "paper")["json"]["properties"]["relation_top3"]
    assert top3["items"]["enum"] == list(rpp.candidates) and top3["maxItems"] == 3
    assert constraint(er, "sft")["json"]["required"] == ["emotion", "intensity"]
    assert constraint(er, "paper")["json"]["required"] == ["predicted_internal_emotion", "predicted_intensity_score"]


def test_records_from_text_and_from_scores(instances):
    rpp = instances["rpp"]
    gold, other = rpp.gold, next(c for c in rpp.candidates if c != rpp.gold)
    ok = generated_record(rpp, "paper", [], json.dumps({"relation_top3": [other, gold]}))
    assert ok["prediction"] == [other, gold] and ok["scores"]["mrr"] == 0.5 and ok["parse_status"] == "ok"
    bad = generated_record(rpp, "sft", [], "I am not sure")
    assert bad["prediction"] == [] and bad["parse_status"] == "failed" and bad["scores"]["mrr"] == 0.0
    assert bad["raw"] == "I am not sure" and bad["parse_error"]
    # Sum of log-probabilities ranks; 'mean' divides by the answer's token count.
    scored = [Scored(-2.0, 1) if c == gold else Scored(-3.0, 4) for c in rpp.candidates]
    assert ranked_record(rpp, [], scored, "sum")["prediction"][0] == gold
    by_mean = ranked_record(rpp, [], scored, "mean")["prediction"]
    assert by_mean[-1] == gold and by_mean[:-1] == [c for c in rpp.candidates if c != gold]


def test_config_errors_are_clear():
    with pytest.raises(ValueError, match="protocol: expected one of sft, paper, rank, got 'zero'"):
        load_config(["protocol=zero"])
    with pytest.raises(ValueError, match="tasks must be one of"):
        load_config(["tasks=[itp,xyz]"])
    with pytest.raises(ValueError, match="key=value"):
        load_config(["tiny"])
    cfg = load_config(["recipe=vllm_gpu", "tasks=er", "judge=none", "bertscore=none", "max_model_len=4096"])
    assert (cfg.backend, cfg.data.split, cfg.max_model_len, cfg.dtype) == ("vllm", "none", 4096, "bfloat16")
    by_path = load_config([f"recipe={shipped('configs/eval') / 'vllm_gpu.yaml'}", "tasks=er", "max_model_len=4096"])
    assert (by_path.backend, by_path.max_model_len) == ("vllm", 4096)
    with pytest.raises(ValueError, match="unknown key max_model_lenn; did you mean max_model_len"):
        load_config(["max_model_lenn=1"])
    with pytest.raises(ValueError, match="data.folds: expected an int, got 'x'"):
        load_config(["data.folds=x"])
    assert cfg.tasks == ["er"] and cfg.judge.backend == "none" and cfg.bertscore.model == "none"


def test_eval_command(tmp_path, capsys):
    args = ["eval", "model=tiny", "tasks=[itp]", "protocol=rank", "limit=2", "bertscore=none", "progress=false",
            f"output_dir={tmp_path}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "itp: n=2 parse failures=0" in out and f"{tmp_path}/results.json" in out
    assert main(["eval", "model=tiny", "backend=nope"]) == 2
    assert "backend: expected one of hf, vllm, openai, got 'nope'" in capsys.readouterr().err


def test_sft_on_hf_is_constrained_to_the_candidates_and_says_so(tmp_path, capsys):
    """The hf backend decodes sft answers with the candidates' grammar, as vLLM does: the random tiny model, which
    answers nothing parseable when free, answers a candidate; the result says which decoding it had, and a free
    run's row name says so."""
    from rescue_train.evaluation.report import name_of

    common = ["eval", "model=tiny", "tasks=[itp]", "protocol=sft", "limit=2", "bertscore=none", "progress=false"]
    assert main([*common, f"output_dir={tmp_path / 'constrained'}"]) == 0
    results = json.loads((tmp_path / "constrained" / "results.json").read_text())
    assert results["decoding"] == "constrained" and name_of(results) == "tiny [sft]"
    assert [r["raw"] in ("yes", "no") for r in results["records"]] == [True, True]
    assert main([*common, "constrained=false", f"output_dir={tmp_path / 'free'}"]) == 0
    free = json.loads((tmp_path / "free" / "results.json").read_text())
    assert free["decoding"] == "free" and name_of(free) == "tiny [sft, free]"


def test_decoding_of_each_backend():
    from rescue_train.evaluation.protocols import decoding

    local = {"backend": "hf", "structured_outputs": True}
    assert decoding("sft", True, local) == "constrained" and decoding("paper", False, local) == "free"
    api = {"backend": "openai", "structured": "json_schema"}
    assert decoding("paper", True, api) == "constrained" and decoding("sft", True, api) == "free labels"
    assert decoding("sft", True, api, "json") == "constrained"
    assert decoding("paper", True, {**api, "structured": "none"}) == "free"
