"""A backend is one class plus its registration: a toy backend defined and registered here alone runs
``rescue-train eval backend=toy`` end to end, and every caller asks its capabilities, never its name."""

from __future__ import annotations

import json
import re

import pytest

from rescue_train.inference import BACKENDS, Backend
from rescue_train.inference.factory import backend_class, reasons
from rescue_train.inference.options import ApiOptions

NAME = "toy"


class FirstCandidate(Backend):
    """Answers every closed-set question with the first candidate its prompt lists; a served model (nothing
    local to load), with no log-likelihoods and one instance per resumable step."""

    name = NAME
    remote = True
    can_rank = False
    default_chunk = 1
    started: list[str] = []

    def __init__(self, model: str):
        self.model = model

    @classmethod
    def start(cls, spec):
        cls.started.append(spec.model)
        return cls(spec.model)

    def generate(self, prompts, *, max_new_tokens, constraints=None, adapter=None, on_answers=None):
        answers = [re.search(r"Candidates: ([^,\n]+)", p[-1]["content"]).group(1) for p in prompts]
        if on_answers is not None:
            on_answers(list(enumerate(answers)))
        return answers


@pytest.fixture
def registered():
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(BACKENDS, NAME, FirstCandidate)
        FirstCandidate.started.clear()
        yield FirstCandidate


def test_eval_backend_toy_from_the_command_line(registered, tmp_path):
    from rescue_train.cli import main

    assert main(["eval", f"backend={NAME}", "model=toy-model", "tasks=[itp]", "protocol=paper", "limit=3",
                 "bertscore=none", "progress=false", f"output_dir={tmp_path}"]) == 0
    assert registered.started == ["toy-model"]  # started once, through the factory
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["parse_status"] == "ok" for r in records)
    # the first listed candidate of each prompt, read back as that label
    assert all(r["prediction"][0] == r["raw"].strip() for r in records)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["backend"]["backend"] == NAME


def test_callers_ask_the_capabilities(registered):
    from rescue_train.evaluation.config import load_config

    assert backend_class(NAME) is FirstCandidate
    assert reasons(ApiOptions(), NAME) is False and reasons(ApiOptions(reasoning=True), NAME) is True
    with pytest.raises(ValueError, match="protocol=rank needs the log-likelihood of given text: use backend=hf or "
                                         "vllm"):
        load_config([f"backend={NAME}", "model=m", "protocol=rank"])
    with pytest.raises(ValueError, match="more than one engine only with backend=vllm"):
        load_config([f"backend={NAME}", "model=m", "data_parallel=2"])
    with pytest.raises(ValueError, match=r"backend: expected one of hf, vllm, openai, toy, got 'tyo'; "
                                         r"did you mean toy\?"):
        load_config(["backend=tyo", "model=m"])
