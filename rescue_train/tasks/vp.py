"""VP, viewpoint prediction: what does the current speaker think of whom?

Checkpoints are client rows with at least one viewpoint item whose source is the speaker and which has a
target and a viewpoint text; the gold is every such item. At most five evenly spaced checkpoints per
sample (the first one when only one is kept); no early-row discard and no word minimum.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..data.schema import Sample
from .base import BuildOptions, BuildResult, Instance, Parsed, count, find_json
from .generation import GenerationTask, first_value


class ViewpointPrediction(GenerationTask):
    name = "vp"

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: BuildOptions) -> BuildResult:
        result = BuildResult([])
        for sample in samples:
            candidates = []
            for row in sample.rows:
                if not row.is_client:
                    continue
                gold = [v for v in row.viewpoints if v.source == row.speaker and v.target and v.viewpoint]
                if gold:
                    candidates.append((row, gold))
                elif row.viewpoints:
                    count(result.excluded, sample.scenario, "no speaker-matched viewpoint with target and text")
            self.add_checkpoints(result, sample, units[sample.sample_id], candidates, options, lambda items: [
                {"source": v.source, "target": v.target, "viewpoint": v.viewpoint, "attitude": v.attitude}
                for v in items])
        return result

    def instruction(self, inst: Instance, fmt: str) -> str:
        speaker = inst.given_value("speaker")
        key = "viewpoints" if fmt == "label" else "predicted_viewpoints"
        return (f"Question: in the current turn, what viewpoint does {speaker} express about another person "
                f"present (the partner, a family member or the therapist)? Give the person the view is about "
                f"and the view as a short concrete phrase, e.g. \"she is never satisfied with anything I do\". "
                f"If {speaker} expresses distinct views about several people, list each.\n\n"
                f'Answer with JSON only: {{"{key}": [{{"source": "{speaker}", "target": "<person>", '
                f'"viewpoint": "<short phrase>"}}]}}')

    def answer_payload(self, value: list[dict[str, Any]], fmt: str) -> dict[str, Any]:
        key = "viewpoints" if fmt == "label" else "predicted_viewpoints"
        return {key: [{"source": v["source"], "target": v["target"], "viewpoint": v["viewpoint"]} for v in value]}

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        payload = find_json(text)
        items = first_value(payload, ("viewpoints", "predicted_viewpoints")) if isinstance(payload, dict) else payload
        if not isinstance(items, list):
            return Parsed("failed", [], "no viewpoint list in the answer")
        speaker = inst.given_value("speaker")
        viewpoints = [
            {"source": _text(item.get("source")) or str(speaker), "target": _text(item.get("target")),
             "viewpoint": _text(item.get("viewpoint"))}
            for item in items if isinstance(item, dict) and _text(item.get("target")) and _text(item.get("viewpoint"))
        ]
        if not viewpoints:
            return Parsed("failed", [], "no viewpoint with a target and a text")
        return Parsed("ok", viewpoints)


def _text(value: Any) -> str:
    """A field's text: strings and numbers only (a nested value is no viewpoint field)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return str(value).strip()
