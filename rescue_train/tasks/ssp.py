"""SSP, support strategy: how should the therapist support a known target at the next turn?

The STP rows whose strategy is in the scenario's taxonomy; the target is given in the input. Optionally
(``ssp_target_emotion``) the target's latest annotated internal emotion inside the context window is given
too, as the paper does "in some instances".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..data import taxonomy
from ..data.schema import Sample
from .options import Options, option
from .targets import support_rows
from .task import ClosedSetTask, count, window
from .types import BuildResult, Instance, ReportColumn, instance_id


def latest_emotion(sample: Sample, rows: tuple[int, ...], target: str) -> str:
    """The target's emotions on the latest context row that annotates any (any participant for the group)."""
    for index in reversed(rows):
        items = [e for e in sample.row(index).internal_emotion
                 if e.description and (e.person == target or (target == sample.group_label
                                                              and e.person in sample.participants))]
        if items:
            return "; ".join(
                f"{e.person}: {e.description}" + (f" (intensity {e.intensity_0_10}/10)"
                                                  if e.intensity_0_10 is not None else "")
                for e in items)
    return ""


@dataclass(frozen=True)
class SspOptions:
    ssp_target_emotion: bool = option(False, "give SSP the target's latest emotion", prompt=True)


class SupportStrategy(ClosedSetTask):
    """Reads ``stp_targets`` too (the STP task's option): which support targets a row has."""

    name = "ssp"
    headline = "ssp_recall"
    options = SspOptions
    default_context = 3
    json_key = "strategy_top3"
    taxonomy_kind = "strategy"
    report_columns = (ReportColumn("ssp_recall", "recall@1", "SSP Rec", 100),
                      ReportColumn("ssp_mrr", "mrr", "SSP MRR", 100))

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        result = BuildResult([])
        k = self.context_size(options)
        for sample in samples:
            allowed = taxonomy.label_names("strategy", sample.scenario)
            for row, strategy, target, source in support_rows(sample, options.stp_targets, result.excluded):
                if strategy not in allowed:
                    count(result.excluded, sample.scenario, f"strategy outside the {sample.scenario} taxonomy: "
                          f"{strategy}")
                    continue
                context = window(row.row_index, k)
                given = [("target", target), ("target_source", source)]
                if options.ssp_target_emotion:
                    given.append(("target_emotion", latest_emotion(sample, context, target)))
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, row.row_index),
                    task=self.name, sample_id=sample.sample_id, unit=units[sample.sample_id],
                    scenario=sample.scenario, row_index=row.row_index, context=context, current=None,
                    candidates=allowed, gold=strategy, given=tuple(given), sample=sample,
                ))
        return result

    def ask(self, inst: Instance) -> str:
        text = (f"Question: the therapist speaks next (row {inst.row_index}, not shown) and will support "
                f"{inst.given_value('target')}. Which strategy should that move mainly use? Name its main "
                f"function; prefer the most specific label, with track only when nothing more specific fits.")
        emotion = inst.given_value("target_emotion")
        if emotion:
            text += f"\nThe target's latest annotated internal emotion: {emotion}."
        return text

    def label_guide(self, inst: Instance) -> str:
        return taxonomy.describe("strategy", inst.scenario, style="short")
