"""An evaluation's run folder: its identity (what decides the predictions, what decides the scores), and the
predictions and scores it holds, read back (see :mod:`rescue_train.evaluation.runner` for the files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io import read_json, read_jsonl, write_json_atomic
from ..provenance import weights_digest
from ..scoring.metrics import RECORD_FIELDS
from ..settings import flatten, identity
from .config import EvalConfig
from .models import ModelSpec
from .plan import EvalData, Variant

RESULTS_FORMAT = "rescue-train/eval-results/v1"
# What the evaluator's records hold, read back: the metrics', and what the judge, the report and the audit read.
PREDICTION_FIELDS = {**RECORD_FIELDS, "id": str, "unit": str, "sample_id": str, "parse_status": str,
                     "scores": dict}
SCORE_FIELDS = {"id": str}


def prediction_identity(cfg: EvalConfig, spec: ModelSpec, variant: Variant, data: EvalData) -> dict[str, Any]:
    config = identity(cfg)
    if cfg.calibration != "none":  # the candidates' scores without the dialogue are kept; any method re-ranks them
        config["calibration_scores"] = True
    adapter_path = spec.adapters.get(variant.adapter) if variant.adapter else None
    return {"config": config, "model": spec.model, "tokenizer": spec.tokenizer, "adapter": adapter_path,
            "adapter_weights": weights_digest(adapter_path) if adapter_path and Path(adapter_path).is_dir() else None,
            "data_fingerprint": data.fingerprint, "manifest_hash": data.split["manifest_hash"],
            "test_folds": data.split["test_folds"]}


def scoring_identity(cfg: EvalConfig) -> dict[str, Any]:
    """What decides the scores: the judge's and BERTScore's identities (their keys declared hashed=False, such as
    the judge's retries and on_failure, keep the scores when they change)."""
    return {"judge": identity(cfg.judge), "bertscore": identity(cfg.bertscore)}


def differing_keys(old: dict, new: dict) -> list[str]:
    """The dotted keys whose values differ between two identities."""
    a, b = flatten(old), flatten(new)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class RunFolder:
    def __init__(self, path: Path, prediction_hash: str, scoring_hash: str, overwrite: bool,
                 identity: dict | None = None):
        self.path = path
        self.predictions = path / "predictions.jsonl"
        self.scores = path / "scores.jsonl"
        path.mkdir(parents=True, exist_ok=True)
        run_file = path / "run.json"
        if run_file.exists():
            known = read_json(run_file, {"prediction_hash": str}, "an evaluation's run.json")
            if known.get("prediction_hash") != prediction_hash:
                if not overwrite:
                    differ = differing_keys(known.get("identity") or {}, identity or {}) if known.get("identity") \
                        else []
                    shown = "; ".join(f"{k}: {flatten(known['identity']).get(k)!r} there, "
                                      f"{flatten(identity or {}).get(k)!r} here" for k in differ[:3])
                    shown = shown or f"hash {known.get('prediction_hash')}, this one {prediction_hash}"
                    raise ValueError(f"{path} holds a run with another configuration ({shown}); pass overwrite=true "
                                     "to start over, or choose another output_dir=")
                for stale in (self.predictions, self.scores, path / "results.json"):
                    stale.unlink(missing_ok=True)
            elif known.get("scoring_hash") != scoring_hash and self.scores.exists():
                print(f"note: judge/BERTScore settings changed; the old scores in {self.scores} are discarded")
                self.scores.unlink()
        write_json_atomic(run_file, {"format": RESULTS_FORMAT, "prediction_hash": prediction_hash,
                                     "scoring_hash": scoring_hash, "identity": identity})

    def done_predictions(self) -> dict[str, dict]:
        return {r["id"]: r for r in read_jsonl(self.predictions, PREDICTION_FIELDS, "a prediction record")}

    def done_scores(self) -> dict[str, dict]:
        merged: dict[str, dict] = {}
        for line in read_jsonl(self.scores, SCORE_FIELDS, "a score line"):
            merged.setdefault(line["id"], {}).update({k: v for k, v in line.items() if k != "id"})
        return merged
