"""Paper-style tables and plots from results files (hand-computed rows beside the paper's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rescue_train.cli import main
from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.paired import delta_tables, reference_index
from rescue_train.evaluation.report import render
from rescue_train.evaluation.runner import run
from rescue_train.inference.hf import HFBackend
from rescue_train.scoring.metrics import aggregate, table5_row
from rescue_train.scoring.uncertainty import clustered_mean
from rescue_train.tiny import tiny_model_path


def _results():
    itp = [{"task": "itp", "scenario": "couple", "gold": g, "prediction": [p], "parse_status": "ok"}
           for g, p in (("yes", "yes"), ("yes", "no"), ("no", "yes"), ("no", "no"))]
    rpp = [{"task": "rpp", "scenario": "family", "gold": "cross_generational_coalition", "prediction": ["cross_generational_coalition"],
            "parse_status": "ok"},
           {"task": "rpp", "scenario": "family", "gold": "cross_generational_coalition", "prediction": [], "parse_status": "failed"}]
    aggregates = {"itp": aggregate("itp", itp), "rpp": aggregate("rpp", rpp)}
    return {"label": "my-lora", "config": {"protocol": "sft", "judge": {"vp_scale": "likert5"}},
            "aggregates": aggregates, "records": itp + rpp,
            "table5": {s: table5_row(aggregates, s) for s in ("couple", "family", "both")}}


def test_tables_put_our_row_beside_the_paper():
    text = render([_results()])
    # ITP: 1 TP, 1 FP, 1 FN -> P = R = F1 = 50; RPP: 1 of 2 right (the failure counts as wrong) -> 50. The records
    # carry no unit: no interval, written as absent ("[–]"), not as a bare number.
    assert "| my-lora [sft] | 50.00 [–] | 50.00 [–] | 50.00 [–] | 50.00 [–] | – | – | – | – | – | – | – | – |" in text
    assert "| Qwen-Plus (paper) | 55.78 | 89.99 | 68.87 | 38.27 |" in text
    couple, family = text.split("#### Couple")[1].split("#### Family")
    assert "| my-lora [sft] | 50.00 [–] | 50.00 [–] | 50.00 [–] | – |" in couple
    assert "| my-lora [sft] | – | – | – | 50.00 [–] |" in family.split("#### Both")[0]
    assert "| my-lora [sft] | rpp | 2 | 1 | 0 | 0 | – | – |" in text


def test_report_command_writes_markdown_and_plots(tmp_path, capsys):
    path = tmp_path / "run" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_results()))
    assert main(["report", str(path.parent), "--out", str(tmp_path / "rep")]) == 0
    names = sorted(p.relative_to(tmp_path / "rep").as_posix() for p in (tmp_path / "rep").rglob("*"))
    assert "report.md" in names
    # each result's figures in its own folder, linked from report.md next to the tables they illustrate
    assert "plots/my-lora__sft/itp_couple_confusion.png" in names and "plots/my-lora__sft/rpp_family_recall.png" in names
    report = (tmp_path / "rep" / "report.md").read_text()
    table5, table11 = report.split("## Table 11 layout (per scenario)\n\n")
    assert table5.split("## Table 5 layout (couple and family pooled)\n\n")[1].startswith(
        "![every model per column, with its interval](plots/models.png)\n")
    assert table11.startswith("Per-class recall and confusion, my-lora [sft]: [itp_couple_confusion]"
                              "(plots/my-lora__sft/itp_couple_confusion.png), ")
    assert all(f"({name})" in report for name in names if name.endswith(".png"))  # every figure is linked
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_report_without_units_says_why_there_is_no_interval():
    text = render([_results()])
    # Records written without their unit (cluster) get no interval: every cell says so ("[–]", never a bare
    # number that reads as no uncertainty) and the reason is given under the table.
    assert "No interval: the records carry no unit (cluster)" in text
    ours = [line for line in text.splitlines() if line.startswith("| my-lora [sft] |") and "50.00" in line]
    assert ours and all(cell.strip().endswith("[–]") for line in ours for cell in line.split("|")
                        if "50.00" in cell)


@pytest.mark.slow
def test_eval_writes_error_bars_and_report_compares_two_real_results(tmp_path):
    """Two evaluations of the tiny model (rank protocol, bundled data) that differ in their prompts (the
    second sees no context): results.json carries every metric's interval, and ``report A B`` pairs them."""
    hf = HFBackend(str(tiny_model_path()))
    folders = []
    for name, extra in (("with_context", []), ("no_context", ["data.context=0"])):
        cfg = load_config(["model=tiny", "protocol=rank", "bertscore=none", "progress=false", "limit=10",
                           "tasks=[itp,rpp,ssp]", f"output_dir={tmp_path / name}", *extra])
        run(cfg, backend=hf)
        folders.append(tmp_path / name)
    first = json.loads((folders[0] / "results.json").read_text())
    rpp = first["uncertainty"]["rpp"]["couple"]
    # The first ten RPP instances come from two couples: fewer than MIN_CLUSTERS (5), so no interval, and why.
    accuracy = rpp["accuracy"]
    assert accuracy["clusters"] == 2 and accuracy["n"] == 10 and accuracy["method"].startswith("CR2")
    assert accuracy["ci"] is None and accuracy["reason"] == "2 clusters in couple: an interval needs at least 5"
    assert accuracy["estimate"] == first["aggregates"]["rpp"]["couple"]["accuracy"]
    assert rpp["macro_f1"]["ci"] is None and rpp["macro_f1"]["reason"] == accuracy["reason"]
    # The first ten ITP instances are one couple's.
    assert first["uncertainty"]["itp"]["couple"]["f1"]["reason"] == "1 cluster in couple: an interval needs at least 5"

    out = tmp_path / "report"
    assert main(["report", *map(str, folders), "--out", str(out), "--against", str(folders[1]), "--power"]) == 0
    cells = json.loads((out / "comparisons.json").read_text())
    second = json.loads((folders[1] / "results.json").read_text())
    accuracy = next(c for c in cells if (c["task"], c["scenario"], c["metric"]) == ("rpp", "couple", "accuracy"))
    assert set(accuracy) >= {"task", "scenario", "metric", "diff", "se", "ci", "p", "p_holm", "n_shared", "clusters"}
    assert accuracy["diff"] == pytest.approx(first["aggregates"]["rpp"]["couple"]["accuracy"]
                                             - second["aggregates"]["rpp"]["couple"]["accuracy"])
    assert (accuracy["n_shared"], accuracy["clusters"]) == (10, 2) and accuracy["ci"] is None
    assert accuracy["p"] is None and "2 clusters in couple" in accuracy["reason"]
    itp = next(c for c in cells if c["task"] == "itp")
    assert itp["ci"] is None and itp["p"] is None and "1 cluster in couple" in itp["reason"]
    report = (out / "report.md").read_text()
    assert "## Paired comparisons" in report and "## Power: the smallest detectable difference" in report
    assert (out / "plots" / "forest_rpp.png").exists() and json.loads((out / "power.json").read_text())
    figures = report.split("## Paired comparisons\n\n")[1].split("Each result minus")[0]  # under the heading
    assert figures.startswith("![forest_") and "![forest_rpp](plots/forest_rpp.png)" in figures


def test_table_cells_carry_the_half_width_of_their_interval():
    # Recall@1 of STP over five couples holding 2, 3, 1, 1 and 2 instances, 3 of 9 right (a 1 of 2, b 1 of 3,
    # c 1 of 1): the cell shows half the width of the interval uncertainty.clustered_mean gives these 0/1 values
    # (its numbers are worked out by hand in tests/evaluation/test_uncertainty.py), in points, marked * for
    # resting on fewer than 10 clusters.
    pattern = [("a", 1), ("a", 0), ("b", 1), ("b", 0), ("b", 0), ("c", 1), ("d", 0), ("e", 0), ("e", 0)]
    records = [{"id": f"s{i}", "task": "stp", "scenario": "couple", "unit": unit, "gold": "Ann",
                "prediction": ["Ann", "Ben"] if right else ["Ben", "Ann"], "parse_status": "ok"}
               for i, (unit, right) in enumerate(pattern)]
    low, high = clustered_mean([float(r) for _, r in pattern], [u for u, _ in pattern])["ci"]
    aggregates = {"stp": aggregate("stp", records)}
    results = {"label": "m", "config": {"protocol": "rank"}, "aggregates": aggregates, "records": records,
               "table5": {s: table5_row(aggregates, s) for s in ("couple", "family", "both")}}
    assert f"| m [rank] | – | – | – | – | 33.33 [{100 * low:.2f}, {100 * high:.2f}]* | " in render([results], with_paper=False)


def test_delta_table_bolds_only_holm_significant_cells():
    def cell(metric, diff, ci, p_holm):
        return {"result": "b", "against": "a", "task": "stp", "scenario": "couple", "metric": metric, "diff": diff,
                "ci": ci, "p": p_holm / 2, "p_holm": p_holm, "few_clusters": False}

    text = delta_tables([cell("recall@1", 0.12, [0.02, 0.22], 0.01), cell("mrr", 0.05, [-0.01, 0.11], 0.2)])
    assert "| STP | STP Rec | **+12.00 [+2.00, +22.00] (Holm p 0.01)** |" in text
    assert "| STP | STP MRR | +5.00 [-1.00, +11.00] (Holm p 0.2) |" in text


def test_against_must_name_exactly_one_result():
    results = [_results(), {**_results(), "label": "other"}]
    assert reference_index(results, ["x", "y"], "other") == 1 and reference_index(results, ["x", "y"], None) == 0
    with pytest.raises(ValueError, match="names no result"):
        reference_index(results, ["x", "y"], "nobody")


def _adapter_results(base: str, split: dict, limit: int | None = None, **extra) -> dict:
    """An adapter's results as eval writes them: the base model's path and short name, the adapter's label."""
    results = _results()
    results.update(label="rpp_lora-fold2", split=split, **extra)
    results["config"] = {**results["config"], "protocol": "rank", "limit": limit}
    results["model"] = {"base": f"/models/{base}", "name": base, "adapter": f"/runs/{base}/fold2/adapter"}
    return results


def test_report_reads_the_default_layout_skips_unfinished_runs_and_names_rows_fully(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    fold2 = {"scheme": "kfold", "test_fold": 2, "test_folds": [2]}
    written = {"runs/eval/tiny+rpp_lora-fold2/rank": _adapter_results("tiny", fold2, limit=4),
               "runs/eval/Qwen2.5-7B+rpp_lora-fold2/rank": _adapter_results("Qwen2.5-7B", fold2),
               "runs/eval/Qwen2.5-7B/paper": {**_results(), "split": {"scheme": "none"}, "label": "Qwen2.5-7B",
                                              "includes_training_data": True}}
    for folder, results in written.items():
        Path(folder).mkdir(parents=True)
        Path(folder, "results.json").write_text(json.dumps(results))
    Path("runs/eval/broken/rank").mkdir(parents=True)
    Path("runs/eval/broken/rank/run.json").write_text("{}")  # killed before its results were written
    inputs = sorted(str(p) for p in Path("runs/eval").iterdir())  # what the shell makes of runs/eval/*
    assert main(["report", *inputs, "--out", "runs/report"]) == 0
    out, err = capsys.readouterr()
    assert "note: skipped runs/eval/broken/rank: an unfinished evaluation" in err
    assert "wrote runs/report/report.md (3 results)" in out and Path("runs/report/plots/models.png").is_file()
    table5 = Path("runs/report/report.md").read_text().split("## Table 11")[0]
    # n: 4 ITP + 2 RPP instances; the paper's rows rest on its Table 6 counts of the whole benchmark: 3,006 + 2,133 + 1,637 + 1,637 + 926 + 855 = 10,194.
    assert "| tiny + rpp_lora-fold2 [rank] | 50.00 [–] | 50.00 [–] | 50.00 [–] | 50.00 [–] |" in table5
    assert table5.count("| 6 | test fold 2, limit 4 |") == 1 and "| 6 | test fold 2 |" in table5
    assert "| Qwen2.5-7B + rpp_lora-fold2 [rank] |" in table5
    assert "| Qwen2.5-7B [sft] (includes training data) |" in table5
    assert "| 6 | whole benchmark, includes training data |" in table5
    assert "| 10,194 | whole benchmark |" in table5

    # NAME=PATH names the rows of PATH; a folder of several results names each by its subfolder
    assert main(["report", "mine=runs/eval/tiny+rpp_lora-fold2", "qwen=runs/eval"]) == 0
    text = capsys.readouterr().out
    assert "| mine [rank] |" not in text and "| mine |" in text
    assert "| qwen/Qwen2.5-7B/paper (includes training data) |" in text and "| qwen/tiny+rpp_lora-fold2/rank |" in text
    assert main(["report", "runs/eval/broken"]) == 2
    assert "no evaluation results in runs/eval/broken" in capsys.readouterr().err


def test_eval_summary_reads_like_the_report():
    from rescue_train.cli.eval import summary

    results = {**_adapter_results("tiny", {"scheme": "kfold", "test_fold": 2}, limit=4), "backend": {"backend": "hf"}}
    assert summary(results).splitlines() == [
        "tiny + rpp_lora-fold2 [rank]: hf backend, test fold 2, limit 4",
        "  itp: n=4 parse failures=0  ITP P 50.00 [–], ITP R 50.00 [–], ITP F1 50.00 [–]",  # percent, as the tables
        "  rpp: n=2 parse failures=1  RPP Acc 50.00 [–]"]


def test_split_words_name_the_folds_of_a_pooled_cross_validation():
    from rescue_train.provenance import describe_split

    pooled = {"split": {"scheme": "kfold", "test_fold": None, "folds": [0, 1, 2]}}
    assert describe_split(pooled) == "test folds 0, 1, 2, pooled"  # not "test fold " with nothing after it
    assert describe_split({"split": {"scheme": "kfold", "test_fold": 3}}) == "test fold 3"
    assert describe_split({"split": {"scheme": "kfold", "test_fold": None}}) == "?"
