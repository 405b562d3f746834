"""A task is one module: a toy task defined and registered here alone runs through build, convert, eval (hf,
tiny model), report, stats, baselines and training weights, with no other module knowing its name."""

from __future__ import annotations

import json

import pytest

from rescue_train.data import load_samples
from rescue_train.data.taxonomy import SCENARIOS
from rescue_train.tasks import TASKS, BuildResult, Instance, ReportColumn, build
from rescue_train.tasks.task import ClosedSetTask, window
from rescue_train.tasks.types import instance_id

NAME = "toy_next"


class NextSpeaker(ClosedSetTask):
    """Toy task: does the therapist or a client speak the row after the current one?"""

    name = NAME
    json_key = "next_speaker"
    json_top = 1
    question = "Question: who speaks the row right after the current turn, the therapist or a client?"
    report_columns = (ReportColumn("toy_recall", "recall@1", "Toy Rec", 100),
                      ReportColumn("toy_mrr", "mrr", "Toy MRR", 100))
    max_new_tokens = {"label": 4, "json": 12}

    def label_space(self):
        return {sc: ("therapist", "client") for sc in SCENARIOS}

    def build(self, samples, units, options):
        result = BuildResult([])
        for sample in samples:
            for current, following in zip(sample.rows, sample.rows[1:]):
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, current.row_index), task=self.name,
                    sample_id=sample.sample_id, unit=units[sample.sample_id], scenario=sample.scenario,
                    row_index=current.row_index, context=window(current.row_index, 2), current=current.row_index,
                    candidates=("therapist", "client"), gold="therapist" if following.is_therapist else "client",
                    sample=sample))
        return result


@pytest.fixture(scope="module")
def registered():
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(TASKS, NAME, NextSpeaker())
        yield TASKS[NAME]


def expected_golds():
    samples = load_samples("bundled")
    return [("therapist" if b.is_therapist else "client") for s in samples for b in s.rows[1:]]


def test_build_convert_stats_and_weights(registered, tmp_path):
    import datasets

    from rescue_train.convert import ConvertConfig, convert
    from rescue_train.sft.weighting import class_key
    from rescue_train.stats import compute_stats

    golds = expected_golds()
    assert [i.gold for i in build(NAME, load_samples("bundled")).instances] == golds
    meta = convert(ConvertConfig(output_dir=str(tmp_path), tasks=[NAME]))
    assert sum(meta["tasks"][NAME]["instances"].values()) == len(golds)
    cls = datasets.load_from_disk(str(tmp_path / NAME / "cls"))
    assert cls["train"][0]["label_names"] == ["therapist", "client"]
    stats = compute_stats(load_samples("bundled"))["tasks"][NAME]
    assert sum(s["labels"].get("therapist", 0) for s in stats.values()) == golds.count("therapist")
    assert stats["couple"]["paper_instances"] is None
    assert class_key(NAME, "client") == "client"


def test_eval_with_hf_then_report(registered, tmp_path):
    from rescue_train.evaluation.config import load_config
    from rescue_train.evaluation.protocols import constraint, max_new_tokens
    from rescue_train.evaluation.plots import plot
    from rescue_train.evaluation.report import render
    from rescue_train.evaluation.runner import run
    from rescue_train.inference.hf import HFBackend
    from rescue_train.tiny import tiny_model_path

    cfg = load_config(["model=tiny", f"tasks=[{NAME}]", "protocol=rank", "limit=6", "bertscore=none",
                       "progress=false", f"output_dir={tmp_path}"])
    (results,) = run(cfg, backend=HFBackend(str(tiny_model_path())))
    records = results["records"]
    assert len(records) == 6 and all(r["parse_status"] == "ok" for r in records)
    correct = [r["prediction"][0] == r["gold"] for r in records]
    both = results["aggregates"][NAME]["both"]
    assert both["recall@1"] == pytest.approx(sum(correct) / 6)  # scored as a ranking, not as free text
    assert both["mrr"] == pytest.approx(sum(1.0 if c else 0.5 for c in correct) / 6)
    assert set(both["per_class"]) <= {"therapist", "client"}
    assert results["table5"]["both"]["toy_recall"] == pytest.approx(100 * sum(correct) / 6)
    inst = build(NAME, load_samples("bundled")).instances[0]
    assert max_new_tokens(inst, "paper", None) == 12 and constraint(inst, "sft") == {"choice": ["therapist", "client"]}

    text = render([results])
    pooled = text.split(f"#### {NAME.upper()}, both", 1)[1]
    assert "| Toy Rec | Toy MRR |" in pooled and f"| {100 * sum(correct) / 6:.2f} [–]" in pooled  # one cluster: no interval, said
    assert "real therapists" not in text  # the toy task scores no human reference
    written = plot(results, tmp_path / "plots")
    assert any(p.name.startswith(f"{NAME}_") and p.name.endswith("confusion.png") for p in written)


def test_closed_set_baselines_cover_it(registered):
    from rescue_train.baselines.runner import RunConfig, run

    results, records = run(RunConfig(tasks=[NAME], baselines=["majority", "tfidf_lr"]))
    assert {r["task"] for r in records["majority"]} == {NAME}
    majority = results["baselines"]["majority"]["aggregates"][NAME]["both"]
    predicted = records["majority"]
    assert majority["n"] == len(expected_golds()) and all(sorted(r["prediction"]) == ["client", "therapist"]
                                                          for r in predicted)
    assert majority["recall@1"] == pytest.approx(sum(r["prediction"][0] == r["gold"] for r in predicted)
                                                 / len(predicted))
    assert json.loads(json.dumps(results))["baselines"]["tfidf_lr"]["table"]["both"]["toy_recall"] is not None
