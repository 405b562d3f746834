"""ITP, intervention timing: should the therapist take the next turn right after the current one?

Positives are actual therapist entries: a therapist row right after a non-therapist row, whose decision
point is that previous row. Negatives are places where the therapist kept listening: a non-therapist row
followed by another non-therapist row (group speakers count as non-therapist). Each sample is balanced to
min(#yes, #no) per class by the reference's deterministic even spacing (the middle item when one is kept).

The model sees the decision row as the current turn plus earlier rows; the context size k counts the
decision row itself, so k=3 shows the same rows as the reference (which repeats the decision row inside
its prior context). Nothing shown depends on the label: the id names only the decision row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..data import taxonomy
from ..data.schema import Sample
from .answers import find_json
from .options import Options, option
from .task import ClosedSetTask, count, evenly_spaced, window
from .types import BuildResult, Instance, Parsed, ReportColumn, instance_id

YES, NO = "yes", "no"
_YES_WORDS = {"yes", "y", "true", "1", "speak", "should_speak", "intervene"}
_NO_WORDS = {"no", "n", "false", "0", "listen", "keep_listening", "do_not_speak", "wait"}


@dataclass(frozen=True)
class ItpOptions:
    itp_cap_per_class: int = option(0, "ITP keeps at most this many evenly spaced instances per class and sample "
                                    "(0: all)", key=False, low=0)


class InterventionTiming(ClosedSetTask):
    name = "itp"
    headline = "itp_f1"
    options = ItpOptions
    reasoning_max_new_tokens = 4096
    default_context = 3
    metric = "binary"
    json_key = "should_speak"
    json_top = 1
    report_columns = (ReportColumn("itp_precision", "precision", "ITP P", 100),
                      ReportColumn("itp_recall", "recall", "ITP R", 100), ReportColumn("itp_f1", "f1", "ITP F1", 100))

    def label_space(self) -> dict[str, tuple[str, ...]]:
        return {sc: (YES, NO) for sc in taxonomy.SCENARIOS}
    question = "Question: should the therapist take the next turn, right after the current turn?"
    guide = (
        "- yes: an intervention is timely and clinically useful now (a question, reflection, validation, "
        "containment, reframe or process comment would help at this point);\n"
        "- no: the therapist should keep listening (a speaker is still developing a thought, vulnerable "
        "material is still emerging, or the exchange between the clients is moving productively)."
    )

    def question_for(self, inst: Instance) -> str:
        return f"{self.question}\n{self.guide}"

    def options_text(self, inst: Instance) -> str:
        return "Candidates: yes, no"

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        result = BuildResult([])
        k = self.context_size(options)
        for sample in samples:
            therapist = [row.is_therapist for row in sample.rows]  # therapist[i] is row i + 1
            positives = [r for r in range(1, len(therapist)) if therapist[r] and not therapist[r - 1]]
            negatives = [r for r in range(1, len(therapist)) if not therapist[r - 1] and not therapist[r]]
            if options.itp_cap_per_class > 0:
                kept_pos = evenly_spaced(positives, options.itp_cap_per_class, single="middle")
                kept_neg = evenly_spaced(negatives, options.itp_cap_per_class, single="middle")
                count(result.excluded, sample.scenario, "above the per-class cap", len(positives) + len(negatives)
                      - len(kept_pos) - len(kept_neg))
                positives, negatives = kept_pos, kept_neg
            balance = min(len(positives), len(negatives))
            if balance == 0:
                if positives or negatives:
                    count(result.excluded, sample.scenario, "sample lacks one of the classes",
                          len(positives) + len(negatives))
                continue
            kept = {d: YES for d in evenly_spaced(positives, balance, single="middle")}
            kept.update({d: NO for d in evenly_spaced(negatives, balance, single="middle")})
            count(result.excluded, sample.scenario, "balanced away (yes)", len(positives) - balance)
            count(result.excluded, sample.scenario, "balanced away (no)", len(negatives) - balance)
            for decision in sorted(kept):
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, decision),
                    task=self.name, sample_id=sample.sample_id, unit=units[sample.sample_id],
                    scenario=sample.scenario, row_index=decision,
                    context=window(decision, k - 1 if k > 0 else k),
                    current=decision, candidates=(YES, NO), gold=kept[decision], sample=sample,
                ))
        return result

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        payload = find_json(text)
        value = payload.get(self.json_key) if isinstance(payload, dict) else None
        if isinstance(value, bool):
            return Parsed("ok", (YES if value else NO,))
        words = [str(value)] if isinstance(value, (str, int, float)) else []  # never str() a nested value
        words.append(text.strip().split("\n", 1)[0] if text.strip() else "")
        for word in words:
            key = word.strip().strip("\"'.!`*").lower().replace(" ", "_")
            if key in _YES_WORDS:
                return Parsed("ok", (YES,))
            if key in _NO_WORDS:
                return Parsed("ok", (NO,))
        return super().parse(inst, text, fmt)
