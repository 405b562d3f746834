"""Paper-style tables and plots from results files (hand-computed rows beside the paper's)."""

from __future__ import annotations

import json

from rescue_train.cli import main
from rescue_train.evaluation.report import render
from rescue_train.scoring.metrics import aggregate, table5_row


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
    # ITP: 1 TP, 1 FP, 1 FN -> P = R = F1 = 50; RPP: 1 of 2 right (the failure counts as wrong) -> 50.
    assert "| my-lora [sft] | 50.00 | 50.00 | 50.00 | 50.00 | – | – | – | – | – | – | – | – |" in text
    assert "| Qwen-Plus (paper) | 55.78 | 89.99 | 68.87 | 38.27 |" in text
    couple, family = text.split("#### Couple")[1].split("#### Family")
    assert "| my-lora [sft] | 50.00 | 50.00 | 50.00 | – |" in couple
    assert "| my-lora [sft] | – | – | – | 50.00 |" in family.split("#### Both")[0]
    assert "| my-lora [sft] | rpp | 2 | 1 | 0 | 0 | – | – |" in text


def test_report_command_writes_markdown_and_plots(tmp_path, capsys):
    path = tmp_path / "run" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_results()))
    assert main(["report", str(path.parent), "--out", str(tmp_path / "rep")]) == 0
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert "report.md" in names
    assert "my-lora__sft_itp_couple_confusion.png" in names and "my-lora__sft_rpp_family_recall.png" in names
    assert main(["report", str(tmp_path / "missing")]) == 2
