"""`rescue-train train recipe=*_cls`: one classifier trained on the train folds and kept, with a run folder
that the evaluator's metrics and `rescue-train baselines --predictions` read (bundled data)."""

import json
import subprocess
import sys

import joblib
import numpy as np
from cli_helpers import command
import pytest
from rescue_train.baselines.runner import load_records
from sft_helpers import ROOT

from rescue_train.classifiers.classifier import LabelSpace, Split, load_cls_rows
from rescue_train.classifiers.classify_run import check_no_leak, fold_data
from rescue_train.data.splits import LeakageError, SplitManifest
from rescue_train.scoring.metrics import aggregate, task_labels

baselines_cli = command("baselines")
main = command("train")

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FILES = ("config.yaml", "provenance.json", "predictions.jsonl", "metrics.json", "data/split_manifest.json")


def train(out, *extra) -> int:
    return main(["recipe=rpp_cls", f"output_dir={out}", *extra])


def fold_rows(run_dir, test_fold: int = 0):
    """The run's converted rows, its manifest, and the rows of the test fold by the manifest."""
    rows = load_cls_rows(run_dir / "data", "rpp")
    manifest = SplitManifest.load(run_dir / "data" / "split_manifest.json")
    test = [r for r in rows if manifest.assignment[manifest.samples[r["sample_id"]]] == test_fold]
    return rows, manifest, test


def ranked(logits: np.ndarray, rows: list[dict], labels: list[str], offset) -> list[list[str]]:
    """The saved model's ranking: logits in the label space + offset, candidates only (ties keep order)."""
    scores = np.asarray(logits) + np.asarray(offset)
    index = {name: i for i, name in enumerate(labels)}
    return [sorted(r["label_names"], key=lambda n: -s[index[f"{r['scenario']}:{n}"]]) for r, s in zip(rows, scores)]


def check_run_folder(run_dir, strategy: str, learner: str) -> list[dict]:
    for name in FILES:
        assert (run_dir / name).is_file(), name
    rows, manifest, test = fold_rows(run_dir)
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert (prov["kind"], prov["strategy"], prov["learner"], prov["seed"]) == ("classifier", strategy, learner, 0)
    assert prov["manifest_hash"] == manifest.hash and prov["data_fingerprint"] and prov["source_fingerprint"]
    assert "git_commit" in prov and prov["versions"]["scikit-learn"]
    # No unit of the test fold is fitted on (training, or validation choosing tau).
    test_units = {u for u, fold in manifest.assignment.items() if fold == 0}
    assert set(prov["units"]["test"]) == {r["unit"] for r in test} and set(prov["units"]["test"]) <= test_units
    assert not test_units & (set(prov["units"]["train"]) | set(prov["units"]["validation"]))
    assert prov["sizes"] == {"train": sum(manifest.assignment[r["unit"]] not in (0, 1) for r in rows),
                             "validation": sum(manifest.assignment[r["unit"]] == 1 for r in rows), "test": len(test)}
    # Predictions: exactly the test fold's instances, once each, as evaluator prediction records.
    records = load_records(run_dir / "predictions.jsonl")
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in test)
    by_id = {r["id"]: r for r in test}
    for record in records:
        row = by_id[record["id"]]
        assert (record["task"], record["scenario"], record["unit"], record["sample_id"], record["gold"]) == (
            "rpp", row["scenario"], row["unit"], row["sample_id"], row["label"])
        assert sorted(record["prediction"]) == sorted(row["label_names"])
        assert record["parse_status"] == "ok" and record["raw"] is None
    # metrics.json is the evaluator's aggregate of predictions.jsonl.
    expected = json.loads(json.dumps(aggregate("rpp", records, task_labels("rpp"))))
    assert json.loads((run_dir / "metrics.json").read_text()) == expected
    return records


@pytest.fixture(scope="module")
def sklearn_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cls") / "run"
    assert train(run_dir, "strategy=posthoc_la") == 0
    return run_dir


def test_sklearn_run_folder_predictions_metrics_and_saved_pipeline(sklearn_run, capsys):
    records = check_run_folder(sklearn_run, "posthoc_la", "sklearn")
    prov = json.loads((sklearn_run / "provenance.json").read_text())
    assert str(prov["tau"]) in prov["tau_scores"]  # chosen on the validation fold
    # The kept pipeline, its label map and logit offset reproduce every test prediction.
    bundle = joblib.load(sklearn_run / "model.joblib")
    _, _, test = fold_rows(sklearn_run)
    pipeline, labels = bundle["pipeline"], bundle["labels"]
    logits = np.full((len(test), len(labels)), -np.inf)
    logits[:, pipeline.named_steps["logreg"].classes_] = pipeline.decision_function([r["text"] for r in test])
    predicted = dict(zip([r["id"] for r in test], ranked(logits, test, labels, bundle["logit_offset"])))
    assert {r["id"]: r["prediction"] for r in records} == predicted


def test_sklearn_run_prints_a_line_per_scope_and_is_deterministic(sklearn_run, tmp_path, capsys):
    assert train(tmp_path / "again", "strategy=posthoc_la") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["rpp couple", "rpp family", "rpp both"]
    assert "macro_f1=" in lines[0] and "mrr=" in lines[2]
    assert lines[2].startswith("rpp both: n=53 RPP Acc ") and " [" in lines[2]  # as report.md writes the cell
    for name in ("predictions.jsonl", "metrics.json"):
        assert (tmp_path / "again" / name).read_bytes() == (sklearn_run / name).read_bytes()
    first, second = (json.loads((d / "provenance.json").read_text()) for d in (sklearn_run, tmp_path / "again"))
    assert first["data_fingerprint"] == second["data_fingerprint"] and first["tau"] == second["tau"]
    # The same folder with other settings is refused, naming what changed.
    assert train(sklearn_run, "strategy=inverse_freq") == 2
    assert "other settings (changed: ['strategy'])" in capsys.readouterr().err


def test_leak_check_refuses_test_fold_rows_among_fitted_ones(sklearn_run):
    rows, manifest, test = fold_rows(sklearn_run)
    space = LabelSpace.from_rows(rows)
    splits = fold_data(rows, manifest, space, 0)
    check_no_leak(splits, manifest, 0)  # the run's own splits pass
    leaked = dict(splits, train=Split.of(splits["train"].rows + test[:1], space))
    with pytest.raises(LeakageError, match=f"instance {test[0]['id']} is in train"):
        check_no_leak(leaked, manifest, 0)
    relabelled = dict(splits, train=Split.of([{**splits["train"].rows[0], "unit": test[0]["unit"]}], space))
    with pytest.raises(LeakageError, match="puts sample"):  # a row whose unit disagrees with the manifest
        check_no_leak(relabelled, manifest, 0)


def test_baselines_score_the_run_beside_themselves(sklearn_run, capsys):
    argv = ["bundled", "--test-fold", "0", "--tasks", "rpp", "--baselines", "majority", "--json",
            "--predictions", f"mycls={sklearn_run / 'predictions.jsonl'}"]
    assert baselines_cli(argv) == 0
    results = json.loads(capsys.readouterr().out)
    mine = results["models"]["mycls"]["aggregates"]["rpp"]
    assert mine == json.loads((sklearn_run / "metrics.json").read_text())
    majority = results["baselines"]["majority"]["aggregates"]["rpp"]
    assert {s: m["n"] for s, m in mine.items()} == {s: m["n"] for s, m in majority.items()}  # same test fold


@pytest.mark.slow
@pytest.mark.parametrize("model, extra", [("tiny-bert", []), ("tiny", ["torch.lora=true"])])
def test_torch_run_keeps_a_loadable_model(tmp_path, model, extra):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rescue_train.classifiers.classifier import _Encoded, _logits, encode_inputs

    run_dir = tmp_path / "run"
    assert train(run_dir, "learner=torch", "strategy=posthoc_la", f"torch.model={model}", "torch.steps=3",
                 "torch.batch_size=4", "torch.max_length=96", *extra) == 0
    records = check_run_folder(run_dir, "posthoc_la", "torch")
    folder = run_dir / "model"
    meta = json.loads((folder / "classifier.json").read_text())
    assert (folder / ("adapter_config.json" if extra else "config.json")).is_file()
    if extra:  # LoRA: the adapter goes on the base model, with its trained classification head
        from peft import AutoPeftModelForSequenceClassification

        loaded = AutoPeftModelForSequenceClassification.from_pretrained(folder, num_labels=len(meta["labels"]))
    else:
        loaded = AutoModelForSequenceClassification.from_pretrained(folder)
        assert list(loaded.config.id2label.values()) == meta["labels"]
    tok = AutoTokenizer.from_pretrained(folder)
    _, _, test = fold_rows(run_dir)
    space = LabelSpace([tuple(name.split(":", 1)) for name in meta["labels"]])
    split = Split.of(test, space)
    assert meta["max_length"] == 96
    encoded = _Encoded(encode_inputs(tok, test, meta["max_length"])[0], split.y, split.mask)
    predicted = ranked(_logits(loaded, tok, encoded, 64), test, meta["labels"], meta["logit_offset"])
    assert {r["id"]: r["prediction"] for r in records} == dict(zip([r["id"] for r in test], predicted))


def test_train_entry_points_dispatch_classifier_recipes(capsys):
    assert main(["recipe=rpp_cls", "strategy=focal"]) == 2  # torch-only strategy on the sklearn default
    assert "do not apply to learner=sklearn" in capsys.readouterr().err
    assert main(["recipe=rpp_cls", "seeds=[0,1]"]) == 2  # compare's keys are not train settings
    assert "unknown key seeds; did you mean seed?" in capsys.readouterr().err
    done = subprocess.run([sys.executable, "train.py", "recipe=ssp_cls", "strategy=inverse_freq", "data.test_fold=2",
                           "--cfg"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "task: ssp" in done.stdout and "strategy: inverse_freq" in done.stdout
    assert "output_dir: runs/ssp_cls/sklearn-inverse_freq/fold2" in done.stdout
