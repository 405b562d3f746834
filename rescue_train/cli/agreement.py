"""``rescue-train agreement RESULTS --human FILE``: how well an LLM judge agrees with human raters, for eval results
(instance scores, rescue_train.scoring.agreement) or an audit's folder (sentence labels, rescue_train.audit.agreement)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..settings import ConfigError, compose, meaning
from .base import Command

USAGE = """usage: rescue-train agreement RESULTS --human FILE [--weights linear|quadratic] [--json]

RESULTS is an eval results.json (or its run folder) with judge scores, or an audit's folder. The human file is
CSV or JSONL: id, score[, rater] for eval results; dialogue_id, turn_id, sentence_id[, system, rater, text] and
IF/OS (or criterion) columns for an audit."""


@dataclass
class AgreementConfig:
    results: Optional[str] = field(default=None, metadata=meaning("results.json (or its folder), or an audit's"))
    human: Optional[str] = field(default=None, metadata=meaning("the human labels: CSV or JSONL"))
    weights: str = field(default="linear", metadata=meaning("Cohen's kappa weights: linear | quadratic"))
    json: bool = field(default=False, metadata=meaning("print JSON"))


def load(inputs: list[str], overrides: list[str]) -> AgreementConfig:
    if len(inputs) > 1:
        raise ConfigError(f"agreement reads one RESULTS, got {len(inputs)}")
    config: AgreementConfig = compose(AgreementConfig, overrides, "agreement",
                                      base={"results": inputs[0]} if inputs else {})
    if not config.results or not config.human:
        raise ConfigError("agreement needs RESULTS and --human FILE")
    if config.weights not in ("linear", "quadratic"):
        raise ConfigError(f"weights: expected linear or quadratic, got {config.weights!r}")
    return config


def run(config: AgreementConfig) -> None:
    from ..audit.agreement import compare as compare_audit
    from ..audit.agreement import read_results, table
    from ..evaluation.report import load_results
    from ..scoring.agreement import compare, read_human

    human = Path(config.human)
    audit = read_results(config.results)
    if audit is not None:  # sentence labels of `rescue-train audit`
        report = compare_audit(audit, human)
        print(json.dumps(report, indent=2) if config.json else table(report))
        return
    results = load_results(config.results, {"id": str, "task": str}, need_records=True)  # what compare reads
    report = compare(results, read_human(human), config.weights, str(human))
    if config.json:
        print(json.dumps(report, indent=2))
        return
    kappa = f"kappa_{config.weights}"
    print(f"| Task | Rater | n | Exact | MAE | κ ({config.weights}) | AC1 |\n|---|---|---:|---:|---:|---:|---:|")
    for task, by_rater in report.items():
        for rater, m in by_rater.items():
            values = [m["exact_agreement"], m["mae"], m[kappa], m["gwet_ac1"]]
            print(f"| {task} | {rater} | {m['n']} | " + " | ".join("–" if v is None else f"{v:.3f}" for v in values)
                  + " |")


COMMAND = Command("agreement", USAGE, load, run, schema=AgreementConfig, inputs=True)
