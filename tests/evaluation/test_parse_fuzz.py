"""Parsers never raise: generated model and judge answers (fixed seed) through every task's parser, the
judge parser and BERTScore's text joining; the records they give are written and read back as a resumed
run reads them."""

from __future__ import annotations

import json
import random

import pytest

from rescue_train.data import load_benchmark
from rescue_train.data.config import ANSWER_FORMATS
from rescue_train.evaluation.protocols import generated_record, messages
from rescue_train.inference import Completion
from rescue_train.io import append_jsonl, read_jsonl, write_json_atomic
from rescue_train.scoring.bertscore import texts
from rescue_train.scoring.judge import parse as judge_parse
from rescue_train.scoring.judge import verdict
from rescue_train.tasks import TASKS, build

SEED = 20261130
MB = 1 << 20
TOKENS = ['{', '}', '[', ']', '"', ':', ',', ' ', '\n', 'null', 'true', 'false', '-', '0', '7', '1e400', '-1e400',
          'NaN', 'Infinity', '-Infinity', '9' * 80, '\\u', '\\ud800', '\\udfff', '\\ud83d\\ude00', '\\"', '\\\\',
          '"score"', '"emotion"', '"intensity"', '"viewpoints"', '"target"', '"viewpoint"', '"source"',
          '"should_speak"', '"relation_top3"', '"strategy_top3"', '"target_top3"', '"source_target_score"',
          '"viewpoint_score"', '"reason"', 'yes', 'no', '<think>', '</think>', '```', '```json\n', '\x00', '\x1b',
          '\u2028', '\ud800', '\udc00', 'é', '😀']


def valid_answers(inst) -> list[str]:
    task = TASKS[inst.task]
    return [task.answer(inst, fmt) for fmt in ANSWER_FORMATS]


def fuzzed(rng: random.Random, seeds: list[str]) -> list[str]:
    """At least 1,000 strings: structural extremes, then random token soups and mutated valid answers."""
    k = rng.randint(2000, 5000)
    out = [
        "[" * MB, '{"emotion": "' + "y" * MB + '", "intensity": 5}', "{" * 100_000, "x" * 100_000,
        '{"a":' * 20_000 + "1" + "}" * 20_000, "```" * 30_000, "<think>" * 10_000 + "</think>" * 9_999,
        '{"intensity": ' + "9" * k + '}', '{"score": ' + "1" * 5000 + "}", '{"score": 1' + "0" * 400 + "}",
        '{"score": NaN}', '{"score": Infinity, "reason": -Infinity}', '{"emotion": "x", "intensity": NaN}',
        '{"emotion": "x", "intensity": 1e999}', '[1e999]', '{"should_speak": ' + "[" * 900 + "]" * 900 + "}",
        '{"emotion": "\\ud800", "intensity": 5}', '{"viewpoints": [{"target": "\\udfff", "viewpoint": "\\ud800x"}]}',
        '{"score": "\\ud800"}', "\ud800\udc00\udfff", "".join(map(chr, range(32))) * 100, "", " ", "\x00",
        '{"viewpoints": [{"target": ' + "[" * 800 + "]" * 800 + ', "viewpoint": {"a": {"b": []}}}]}',
        '{"relation_top3": [' + ",".join(['"pursue_withdraw"'] * 10_000) + "]}",
    ]
    for _ in range(700):
        out.append("".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 60))))
    for _ in range(500):
        text = list(rng.choice(seeds))
        for _ in range(rng.randint(1, 6)):
            where = rng.randint(0, len(text))
            action = rng.random()
            if action < 0.4:
                text[where:where] = rng.choice(TOKENS)
            elif action < 0.7:
                del text[where:where + rng.randint(1, 8)]
            else:
                text = text[:where]  # cut short, as a budget would
        wrapped = "".join(text)
        if rng.random() < 0.3:
            wrapped = f"<think>{rng.choice(TOKENS)}</think>```json\n{wrapped}\n```"
        out.append(wrapped)
    return out


@pytest.fixture(scope="module")
def instances():
    bench = load_benchmark("bundled")
    return {name: build(name, bench.samples).instances[0] for name in TASKS}


def test_fuzzed_answers_parse_to_ok_or_a_counted_failure(instances, tmp_path):
    rng = random.Random(SEED)
    strings = fuzzed(rng, [a for inst in instances.values() for a in valid_answers(inst)]
                       + ['{"score": 4, "reason": "close"}', '{"source_target_score": 2, "viewpoint_score": 3}'])
    assert len(strings) >= 1000
    predictions = tmp_path / "predictions.jsonl"
    prompts = {(name, protocol): messages(inst, protocol, "dialogue") for name, inst in instances.items()
               for protocol in ("sft", "paper")}
    batch = []
    for n, text in enumerate(strings):
        finish = rng.choice(["stop", "length", None])
        for name, inst in instances.items():
            for protocol in ("sft", "paper"):
                record = generated_record(inst, protocol, prompts[name, protocol], Completion(text, finish))
                assert record["parse_status"] in ("ok", "failed")
                assert record["parse_status"] == "ok" or record["parse_error"], (name, text[:80])
                if not TASKS[name].closed_set:
                    candidate, reference = texts(name, inst.gold, record["prediction"])
                    assert isinstance(candidate, str) and isinstance(reference, str)
                    candidate.encode("utf-8")  # what a tokenizer needs
                if len(text) < 10_000:  # keep the file small; megabyte answers are written below
                    batch.append(record)
        for task, scale in (("er", "likert5"), ("vp", "likert5"), ("vp", "ref0to6")):
            out = judge_parse(task, text, scale)
            assert out["judge_status"] in ("ok", "failed")
            assert (out["judge_score"] is None) == (out["judge_status"] == "failed")
            json.dumps(out)
            verdict(task, Completion(text, finish), scale)
        if n == 1:  # a megabyte answer in a results file
            write_json_atomic(tmp_path / "results.json", {"records": [record]})
            assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["records"][0]["raw"] == text
    append_jsonl(predictions, batch)
    # what a resumed run reads: the same records (a surrogate pair in a str reads back as its one character)
    assert read_jsonl(predictions) == [json.loads(json.dumps(r)) for r in batch]
    statuses = {r["parse_status"] for r in batch}
    assert statuses == {"ok", "failed"}   # the mutated valid answers still parse now and then


def test_an_escaped_lone_surrogate_survives_the_files_and_the_resume(instances, tmp_path):
    inst = instances["er"]
    record = generated_record(inst, "paper", messages(inst, "paper", "dialogue"),
                              '{"predicted_internal_emotion": "hurt \\ud800", "predicted_intensity_score": 5}')
    assert record["prediction"] == {"emotion": "hurt \ud800", "intensity": 5}
    append_jsonl(tmp_path / "p.jsonl", [record])
    append_jsonl(tmp_path / "p.jsonl", [record])
    assert read_jsonl(tmp_path / "p.jsonl") == [record, record]
    assert texts("er", inst.gold, record["prediction"])[0] == "hurt \ufffd"


def test_reasoning_fences_truncation_and_failed_answers(instances):
    er, itp = instances["er"], instances["itp"]

    def record(inst, protocol, text, finish="stop"):
        return generated_record(inst, protocol, messages(inst, protocol, "dialogue"), Completion(text, finish))

    answer = '{"emotion": "feels hurt", "intensity": 7}'
    thought = f'<think>maybe {{"emotion": "decoy", "intensity": 1}}</think>\n```json\n{answer}\n```'
    assert record(er, "paper", thought)["prediction"] == {"emotion": "feels hurt", "intensity": 7}
    assert record(itp, "sft", "<think>no?</think>```yes```")["prediction"] == ["yes"]
    # cut short: while reasoning (any protocol), or at the budget under the paper protocol
    cut = record(er, "sft", '<think>{"emotion": "decoy", "intensity": 1}')
    assert (cut["parse_status"], cut["parse_error"], cut["prediction"]) == ("failed", "truncated",
                                                                            {"emotion": "", "intensity": None})
    assert record(er, "paper", answer, "length")["parse_error"] == "truncated"
    assert record(itp, "sft", "yes, because the", "length")["prediction"] == ["yes"]   # labels come first
    # a half-parsed failure keeps what it said, but is scored as the empty answer (S_int 1, not 5)
    half = record(er, "sft", '{"emotion": "", "intensity": 7}')
    assert half["parse_status"] == "failed" and half["prediction"]["intensity"] == 7
    assert half["scores"]["intensity_score"] == 1.0
