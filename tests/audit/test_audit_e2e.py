"""End to end: `rescue-train audit` of a dialogue file, the bundled reference turns and an eval results folder,
with a rule-following judge behind a real local HTTP server (openai backend) and with the tiny model (hf)."""

from __future__ import annotations

import json
import re

import pytest
from evaluation_helpers import FakeOpenAIServer

from rescue_train.audit.config import load_config
from rescue_train.audit.criteria import OURS_SCHEMA, PUBLISHED_SCHEMA
from rescue_train.audit.runner import BOOTSTRAP_UNIT, run
from rescue_train.cli import main
from rescue_train.data import load_benchmark

DIALOGUES = [
    {"id": "d1", "messages": [
        {"role": "user", "content": "I feel alone."},
        {"role": "assistant", "content": "I am here for you. Have you told your sister?"},
        {"role": "user", "content": "No."},
        {"role": "assistant", "content": "What does that bring up for you? GARBAGE here."}]},
    {"id": "d2", "messages": [
        {"role": "user", "content": "Work is hard."},
        {"role": "assistant", "content": "That sounds tiring. A friend could help."}]},
]


def rule_judge(content: str) -> str:
    """A judge that follows fixed rules, so every aggregate can be worked out by hand."""
    target = re.search(r"Target sentence: (.*)", content).group(1)
    criterion = re.search(r"Criterion to judge: (.*)", content).group(1)
    if "GARBAGE" in target:
        return "I cannot decide."
    met, referent = False, "none"
    if criterion == "Outward-Scaffolding" and re.search(r"sister|friend", target):
        met, referent = True, "other_person"
    elif criterion == "Bond Anchoring" and "here for you" in target:
        met, referent = True, "supporter_dyad"
    elif criterion == "Intimate Dyad" and target.endswith("?") and " you" in target:
        met, referent = True, "other_person" if "sister" in target else "supporter_dyad"
    elif criterion == "Inter-member Scaffolding" and "directly" in target:
        met, referent = True, "other_person"
    elif criterion == "Supporter Referent" and re.search(r"here for you|bring up for you", target):
        met, referent = True, "supporter_dyad"
    answer = {"label": "MET" if met else "NOT_MET", "span": target[:10] if met else "", "reason": "rule"}
    if criterion in ("Supporter Referent", "Hub Orientation", "Inter-member Scaffolding"):  # ours name a referent
        answer["referent"] = referent
    return f"<think>checking</think>```json\n{json.dumps(answer)}\n```"


@pytest.fixture()
def dialogue_file(tmp_path):
    path = tmp_path / "chatbot.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES))
    return path


def _cli(argv, capsys):
    code = main(["audit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_http_judge_audit_of_dialogues_reference_and_eval_results(tmp_path, dialogue_file, capsys):
    bench = load_benchmark("bundled")
    sample = bench.samples[0]
    row = [r.row_index for r in sample.rows if r.is_therapist][0]
    eval_dir = tmp_path / "eval_rsg"
    eval_dir.mkdir()
    (eval_dir / "results.json").write_text(json.dumps({
        "label": "next-turn-model", "config": {"data": {"source": "bundled", "split": "none"}}, "data": {"fingerprint": bench.fingerprint},
        "records": [{"id": "r1", "task": "rsg", "sample_id": sample.sample_id, "row_index": row, "parse_status": "ok",
                     "prediction": "Can you tell him directly what you need?", "gold": sample.row(row).dialogue}]}))
    out = tmp_path / "audit"
    with FakeOpenAIServer(answer=rule_judge) as server:
        args = [str(dialogue_file), "reference", str(eval_dir), "backend=openai", "model=judge",
                f"base_url={server.url}", f"output_dir={out}", "limit=3", "reference_rows=matched", "bootstrap=1000",
                "concurrency=1", "progress=false"]
        code, printed, err = _cli(args + ["--dry-run"], capsys)
        assert code == 0, err
        # dialogues: 3 turns, 6 sentences x (5 + the referent gate); reference (matched): 1 turn, 1 sentence x
        # (5 + gate + the exploratory pair); model: 1 x 8
        assert "chatbot: 3 turns, 6 sentences, 36 judge requests" in printed
        assert "reference: 1 turns, 1 sentences, 8 judge requests" in printed
        assert "total: 52 requests, 0 already answered in the output folder, 52 to send" in printed
        assert "chatbot | d1 | turn 2 sentence 2 | GARBAGE here." in printed
        assert server.requests == [] and not out.exists()

        code, printed, err = _cli(args, capsys)
        assert code == 0, err
        first = server.requests[0]
        # today's API rules, as for eval's judge: no temperature unless set, the answer schema (strict), and the
        # reasoning budget of an API judge
        assert len(server.requests) == 52 and "temperature" not in first and first["max_completion_tokens"] == 4096
        assert first["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": PUBLISHED_SCHEMA, "strict": True}}
        gate = next(r for r in server.requests if r["messages"][1]["content"].endswith("Supporter Referent"))
        assert gate["response_format"]["json_schema"]["schema"] == OURS_SCHEMA
        # the requests of one turn go together and in sentence order (prefix-cache order)
        targets = [re.search(r"Target sentence: (.*)", r["messages"][1]["content"]).group(1) for r in server.requests]
        assert targets[:10] == ["I am here for you."] * 5 + ["Have you told your sister?"] * 5

        results = json.loads((out / "results.json").read_text())
        chatbot = results["analysis"]["per_system"]["chatbot"]
        assert {m: (r["met"], r["n"]) for m, r in chatbot["rates"].items()} == {
            "IF": (3, 5), "IF_gated": (2, 5), "OS": (2, 5), "bond_anchoring": (1, 5), "intimate_dyad": (2, 5),
            "inner_life": (0, 5), "return_hooks": (0, 5), "supporter_referent": (2, 5),
            "hub_orientation": (0, 0), "inter_member_scaffolding": (0, 0)}  # our pair is not asked of one user
        assert chatbot["rates"]["IF"]["ci"] == [0.0, 1.0]
        assert chatbot["labels"] == {"MET": 7, "NOT_MET": 23, "PARSE_FAIL": 6, "missing": 0}
        assert chatbot["composition"]["counts"] == {"IF_only": 2, "OS_only": 1, "both": 1, "neither": 1}
        # d1: IF 2/2 at turn 1 and 1/1 at turn 2 -> change 0; d2 has one turn only
        assert chatbot["turn_change"]["IF"] == {"dialogues": 1, "units": 1, "mean": 0.0, "ci": None}
        model = results["analysis"]["per_system"]["next-turn-model"]
        assert model["rates"]["inter_member_scaffolding"]["met"] == 1 and model["rates"]["IF"]["met"] == 1
        reference = results["analysis"]["per_system"]["reference"]
        assert reference["sentences"] == 1 and reference["rates"]["inter_member_scaffolding"]["met"] == 0
        pair = next(c for c in results["analysis"]["comparisons"]["inter_member_scaffolding"]
                    if {c["a"], c["b"]} == {"reference", "next-turn-model"})
        assert pair["difference"] in (1.0, -1.0) and pair["ci"] is None  # one dialogue: no interval
        failed = next(s for s in results["sentences"] if s["text"] == "GARBAGE here.")
        assert failed["labels"]["outward_scaffolding"] == {"label": "PARSE_FAIL", "span": None, "referent": None,
                                                           "reason": None, "error": "no JSON object in the answer"}
        assert results["bootstrap"] == {"resamples": 1000, "seed": 20260913, "unit": BOOTSTRAP_UNIT}
        assert results["judge"]["backend"] == "openai" and results["versions"]["python"]
        report = (out / "report.md").read_text()
        assert "| reference |" in report.split("## Rates")[1].split("\n")[4]  # real therapists first
        assert "| chatbot | 2 | 2 | 3 | 6 | 60.0 [0.0, 100.0] (n=5) | 40.0 [0.0, 66.7] (n=5) |" in report
        assert "κ" in report and "PARSE_FAIL" in report
        for plot in ("rates.png", "composition.png", "trajectories.png"):
            assert (out / plot).stat().st_size > 1000

        # resume after a kill: the lost answers are asked again, nothing else
        lines = (out / "labels.jsonl").read_text().splitlines()
        (out / "labels.jsonl").write_text("\n".join(lines[:30]) + "\n" + lines[30][:20])
        code, printed, err = _cli(args + ["plots=false"], capsys)
        assert code == 0, err
        assert len(server.requests) == 52 + 22
        assert json.loads((out / "results.json").read_text())["analysis"] == results["analysis"]
        # the cache: the reference turns again, alone, cost nothing more
        code, printed, err = _cli(["reference", *args[3:], "limit=1", "reference_rows=all", "plots=false"], capsys)
        assert code == 0 and len(server.requests) == 74, err
        assert json.loads((out / "results.json").read_text())["judge"] == results["judge"]
        # another judge into the same folder is refused
        code, printed, err = _cli(args[:-1] + ["model=other-judge"], capsys)
        assert code == 2 and "holds labels from another judge" in err
        code, printed, err = _cli(args + ["model=other-judge", "overwrite=true", "plots=false"], capsys)
        assert code == 0 and len(server.requests) == 74 + 52  # a new judge: every request asked again
        assert json.loads((out / "run.json").read_text())["judge_hash"] != results["judge_hash"]


def test_cli_errors_exit_2_with_a_message(tmp_path, capsys):
    code, _, err = _cli(["no_such.jsonl", "model=m"], capsys)
    assert code == 2 and "no_such.jsonl: no such file or folder" in err
    code, _, err = _cli(["reference", "model=m", "splitter=bad"], capsys)
    assert code == 2 and "splitter: expected one of default, relate, got 'bad'" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": "hi"}\n')
    code, _, err = _cli([str(bad), "model=m", "--dry-run"], capsys)
    assert code == 2 and "bad.jsonl:1: expected an object with a 'messages' list" in err
    code, _, err = _cli(["reference", "model=m", "reference_rows=matched", "--dry-run"], capsys)
    assert code == 2 and "reference_rows=matched needs an eval results INPUT" in err
    # data.source= and context= reach the reference turns: the last 2 rows only, from the bundled file by path
    from rescue_train.data.load import bundled_path

    code, out, err = _cli(["reference", f"data.source={bundled_path()}", "context=2", "limit=1", "--dry-run"], capsys)
    assert code == 0 and "reference: 1 turns, 1 sentences, 8 judge requests" in out, err
    code, out, _ = _cli(["--help"], capsys)
    assert code == 0 and "splitter" in out
    assert re.search(r"\n  data\.source +str += 'bundled' +the benchmark of INPUT=reference", out)
    assert re.search(r"\n  token_param +str += 'auto' +auto \| max_completion_tokens", out)
    code, out, err = _cli(["reference", "model=m", "limt=3", "--dry-run"], capsys)
    assert code == 2 and "unknown key limt; did you mean limit?" in err
    code, out, err = _cli(["model=m", "data.source=x.jsonl", "--cfg"], capsys)
    assert code == 0 and "data:\n  source: x.jsonl\n" in out and "output_dir: runs/audit\n" in out, err


def test_api_judge_stops_resumes_and_counts_refusals(tmp_path, capsys):
    chats = tmp_path / "chatbot.jsonl"
    chats.write_text(json.dumps({"id": "d1", "messages": [
        {"role": "user", "content": "Hi."}, {"role": "assistant", "content": "I am here for you. REJECT this."}]}))
    out = tmp_path / "audit"
    with FakeOpenAIServer(fail_first=1, answer=rule_judge) as server:
        args = [str(chats), "backend=openai", "model=judge", f"base_url={server.url}", f"output_dir={out}",
                "criteria=[bond_anchoring]", "concurrency=1", "max_retries=0", "bootstrap=100", "plots=false",
                "progress=false", "token_param=max_tokens", "temperature=0", "reasoning=false",
                "structured=json_object"]
        # a server error with no retries left stops the audit, naming the request, as it stops eval
        code, _, err = _cli(args, capsys)
        assert code == 2 and len(server.requests) == 1
        assert "judging chatbot dialogue 'd1' turn 1 sentence 1, criterion bond_anchoring: " in err
        assert "answered HTTP 500: try again" in err and "rerun the same command to resume" in err
        code, _, err = _cli(args, capsys)
        assert code == 0, err
        assert len(server.requests) == 3
        body = server.requests[1]
        assert (body["max_tokens"], body["temperature"], body["response_format"]) == (256, 0, {"type": "json_object"})
    results = json.loads((out / "results.json").read_text())
    labels = {s["text"]: s["labels"]["bond_anchoring"] for s in results["sentences"]}
    assert labels["I am here for you."]["label"] == "MET"
    # the server's content-filter refusal (HTTP 400) is a counted failure with its reason, not a stop
    assert labels["REJECT this."] == {"label": "PARSE_FAIL", "span": None, "referent": None, "reason": None,
                                      "error": "refused: content filter"}
    assert results["judge"]["token_param"] == "max_tokens"
    assert results["config"]["data"] == {"source": "bundled"}


def test_the_relate_recipe_asks_as_the_paper_did(tmp_path, dialogue_file, capsys):
    """recipe=relate (configs/audit/relate.yaml, found by name) with a served judge: temperature 0, 2,048 tokens, no
    schema (the judge reasons first), RELATE's five criteria with the published prompt, the published splitter."""
    out = tmp_path / "audit"
    with FakeOpenAIServer(answer=rule_judge) as server:
        code, _, err = _cli([str(dialogue_file), "recipe=relate", "backend=openai", "model=judge",
                             f"base_url={server.url}", f"output_dir={out}", "bootstrap=200", "plots=false",
                             "progress=false"], capsys)
    assert code == 0, err
    assert len(server.requests) == 6 * 5  # six sentences, RELATE's five criteria each
    for body in server.requests:
        assert (body["temperature"], body["max_completion_tokens"], "response_format" in body) == (0, 2048, False)
        assert "referent" not in json.dumps(body["messages"]).lower()
    assert len({body["messages"][0]["content"] for body in server.requests}) == 1
    results = json.loads((out / "results.json").read_text())
    assert results["criteria"] == ["bond_anchoring", "intimate_dyad", "inner_life", "return_hooks",
                                   "outward_scaffolding"]
    assert (results["config"]["splitter"], results["config"]["constrained"]) == ("relate", False)
    per = results["analysis"]["per_system"]["chatbot"]["rates"]
    assert per["IF_gated"]["n"] == 0 and per["IF"]["n"] == 5  # no gate asked: the gated IF is not computed


@pytest.mark.slow
def test_tiny_model_hf_judge_audits_dialogues_and_reference(tmp_path, dialogue_file):
    out = tmp_path / "audit"
    cfg = load_config(["model=tiny", "backend=hf", f"output_dir={out}", "limit=1", "max_new_tokens=8",
                       "bootstrap=200", "progress=false", "splitter=relate"])
    results = run([str(dialogue_file), "reference"], cfg)
    per = results["analysis"]["per_system"]
    # limit=1: the first turn of each INPUT; 2 sentences x 6 criteria, and 1 reference sentence x 8
    assert per["chatbot"]["sentences"] == 2 and per["reference"]["sentences"] == 1
    for system, calls in (("chatbot", 12), ("reference", 8)):
        labels = per[system]["labels"]
        assert sum(labels.values()) == calls and labels["missing"] == 0  # every answer counted, none dropped
    assert len((out / "labels.jsonl").read_text().splitlines()) == 20
    assert results["judge"]["backend"] == "hf"


@pytest.mark.vllm
def test_vllm_judge_with_structured_outputs(tmp_path, dialogue_file):
    pytest.importorskip("vllm")
    out = tmp_path / "audit"
    cfg = load_config(["model=tiny", "backend=vllm", "dtype=float32", "max_model_len=8192", f"output_dir={out}",
                       "limit=1", "max_new_tokens=64", "bootstrap=200", "progress=false", "criteria=relate"])
    results = run([str(dialogue_file), "reference"], cfg)
    per = results["analysis"]["per_system"]
    for system, calls in (("chatbot", 10), ("reference", 5)):
        assert sum(per[system]["labels"].values()) == calls and per[system]["labels"]["missing"] == 0
    assert results["judge"]["backend"] == "vllm"
    assert set(results["criteria"]) == {"bond_anchoring", "intimate_dyad", "inner_life", "return_hooks",
                                        "outward_scaffolding"}


@pytest.mark.slow
def test_audit_reads_a_real_rsg_eval_folder(tmp_path, capsys):
    """The chain a user runs: `eval tasks=[rsg]` writes the generated turns (here a model behind a local
    OpenAI-compatible server that always says TURN), `audit` judges them in their dialogue context beside the
    real therapists' turns at the same rows."""
    turn = "Can you tell him directly what you need? I am here for you."
    evaluated, out = tmp_path / "eval", tmp_path / "audit"
    with FakeOpenAIServer(answer=lambda content: turn) as model:
        assert main(["eval", "backend=openai", "model=next-turn", f"base_url={model.url}", "tasks=[rsg]",
                     "limit=2", "bertscore=none", "progress=false", f"output_dir={evaluated}"]) == 0
    (results_file,) = evaluated.rglob("results.json")
    assert [r["prediction"] for r in json.loads(results_file.read_text())["records"]] == [turn, turn]
    capsys.readouterr()
    with FakeOpenAIServer(answer=rule_judge) as judge:
        code, printed, err = _cli([str(evaluated), "reference", "backend=openai", "model=judge",
                                   f"base_url={judge.url}", f"output_dir={out}", "reference_rows=matched",
                                   "bootstrap=200", "concurrency=1", "progress=false", "plots=false"], capsys)
    assert code == 0, err
    systems = json.loads((out / "results.json").read_text())["analysis"]["per_system"]
    (name,) = [n for n in systems if n != "reference"]  # the real therapists and the evaluated model
    model_rates = systems[name]["rates"]
    # two couple turns of two sentences each; the rule judge marks "directly" as inter-member scaffolding (asked
    # of multi-party turns) and "here for you" as bond anchoring
    assert (systems[name]["turns"], systems[name]["sentences"]) == (2, 4)
    assert (model_rates["inter_member_scaffolding"]["met"], model_rates["inter_member_scaffolding"]["n"]) == (2, 4)
    assert (model_rates["bond_anchoring"]["met"], model_rates["bond_anchoring"]["n"]) == (2, 4)
    assert systems["reference"]["turns"] == 2  # the real therapists' turns at the same two rows
