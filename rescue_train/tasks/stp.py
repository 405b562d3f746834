"""STP, support target: whom should the therapist's next move mainly support?

Therapist rows whose first ``support_strategy`` item names a strategy (see ``targets`` for how the target
is resolved). The candidates are the sample's participants and the group label, plus the subsets the
sample's therapist rows target when targets are kept as exact sets. The therapist row itself is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..data.schema import GROUP_LABEL, Sample
from .options import Options, option
from .targets import candidate_targets, support_rows
from .task import ClosedSetTask, window
from .types import BuildResult, Instance, ReportColumn, instance_id


@dataclass(frozen=True)
class StpOptions:
    stp_targets: str = option("collapse", "multi-person STP targets: collapse to the group label, or set (keep the "
                              "exact sets)", choices=("collapse", "set"), prompt=True)


class SupportTarget(ClosedSetTask):
    name = "stp"
    headline = "stp_recall"
    options = StpOptions
    reasoning_max_new_tokens = 4096
    default_context = 3
    json_key = "target_top3"
    report_columns = (ReportColumn("stp_recall", "recall@1", "STP Rec", 100),
                      ReportColumn("stp_mrr", "mrr", "STP MRR", 100))

    def class_key(self, gold: Any) -> str:
        """Golds are people's names, which differ from sample to sample: balance the kind of target (the
        whole group, one person, or with exact target sets several people) instead."""
        groups = set(GROUP_LABEL.values())
        if isinstance(gold, (list, tuple)):
            return "group" if len(gold) == 1 and gold[0] in groups else "subset"
        return "group" if gold in groups else "subset" if " & " in gold else "person"

    def stats_label(self, inst: Instance) -> str:
        return self.class_key(inst.gold)

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        result = BuildResult([])
        k = self.context_size(options)
        for sample in samples:
            candidates = candidate_targets(sample, options.stp_targets)
            for row, _strategy, target, source in support_rows(sample, options.stp_targets, result.excluded):
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, row.row_index),
                    task=self.name, sample_id=sample.sample_id, unit=units[sample.sample_id],
                    scenario=sample.scenario, row_index=row.row_index, context=window(row.row_index, k),
                    current=None, candidates=candidates, gold=target, given=(("target_source", source),),
                    sample=sample,
                ))
        return result

    def question_for(self, inst: Instance) -> str:
        group = inst.sample.group_label
        return (
            f"Question: the therapist speaks next (row {inst.row_index}, not shown). Whom should that move mainly "
            f"support? Choose '{group}' when the move addresses the whole {inst.scenario}, a shared pattern or a "
            f"shared task; choose a person when it mainly invites, protects, challenges or reassures that person."
        )
