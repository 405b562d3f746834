"""RPP, relation pattern: which relational cycle organises the interaction at a labelled row?

The release stores the label in two fields, inconsistently (DATA_FORMAT.md), so the gold is a choice:

* ``D`` (default): therapist rows; ``relation_cycle_state`` if non-empty, else ``relation_pattern``;
* ``A``: therapist rows, ``relation_cycle_state`` only (the reference scripts' default);
* ``B``: any row, ``relation_cycle_state``;
* ``C``: any row, ``relation_pattern`` (the paper's wording; empty in most couple samples);
* ``BC``: any row, ``relation_cycle_state`` if non-empty, else ``relation_pattern``.

A row is kept when its label is non-empty and in the scenario's taxonomy. The context defaults to every
prior row with the labelled turn itself hidden (``rpp_include_current`` shows it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..data import taxonomy
from ..data.schema import Row, Sample
from .options import Options, option
from .task import ClosedSetTask, count, window
from .types import BuildResult, Instance, ReportColumn, instance_id

DEFINITIONS = {
    "D": ("therapist", ("relation_cycle_state", "relation_pattern")),
    "A": ("therapist", ("relation_cycle_state",)),
    "B": ("any", ("relation_cycle_state",)),
    "C": ("any", ("relation_pattern",)),
    "BC": ("any", ("relation_cycle_state", "relation_pattern")),
}
# What each gold definition reads, as --help says it.
READS = {
    "D": "therapist rows, relation_cycle_state else relation_pattern",
    "A": "therapist rows, relation_cycle_state only (the reference scripts)",
    "B": "any row, relation_cycle_state",
    "C": "any row, relation_pattern (the paper's wording)",
    "BC": "any row, relation_cycle_state else relation_pattern",
}


@dataclass(frozen=True)
class RppOptions:
    rpp_definition: str = option("D", "RPP gold rows: " + "; ".join(f"{k} = {v}" for k, v in READS.items()),
                                 choices=tuple(DEFINITIONS), prompt=True)
    rpp_include_current: bool = option(False, "show the labelled RPP turn itself", prompt=True)


def row_label(row: Row, fields: tuple[str, ...]) -> str | None:
    """The first non-empty of ``fields``; "" when one is present but empty; None when none is annotated."""
    values = [getattr(row, f) for f in fields]
    for value in values:
        if value:
            return value
    return "" if any(v == "" for v in values) else None


class RelationPattern(ClosedSetTask):
    name = "rpp"
    headline = "rpp_accuracy"
    default_context = -1
    json_key = "relation_top3"
    taxonomy_kind = "relation"
    options = RppOptions
    report_columns = (ReportColumn("rpp_accuracy", "accuracy", "RPP Acc", 100),)

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        speakers, fields = DEFINITIONS[options.rpp_definition]
        result = BuildResult([])
        k = self.context_size(options)
        for sample in samples:
            allowed = taxonomy.label_names("relation", sample.scenario)
            for row in sample.rows:
                label = row_label(row, fields)
                if label is None:
                    continue  # not annotated: the ordinary case for most rows, not an exclusion
                if speakers == "therapist" and not row.is_therapist:
                    if label:  # an empty field on a client row is no label at all
                        count(result.excluded, sample.scenario, "label on a non-therapist row (definition "
                              f"{options.rpp_definition} uses therapist rows)")
                    continue
                if label == "":
                    count(result.excluded, sample.scenario, "empty label (annotators saw no clear pattern)")
                    continue
                if label not in allowed:
                    count(result.excluded, sample.scenario, f"label outside the {sample.scenario} taxonomy: {label}")
                    continue
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, row.row_index),
                    task=self.name, sample_id=sample.sample_id, unit=units[sample.sample_id],
                    scenario=sample.scenario, row_index=row.row_index, context=window(row.row_index, k),
                    current=row.row_index if options.rpp_include_current else None,
                    candidates=allowed, gold=label, given=(("speaker", row.speaker),), sample=sample,
                ))
        return result

    def ask(self, inst: Instance) -> str:
        shown = "shown above as the current turn" if inst.current is not None else "not shown"
        unit = "couple" if inst.scenario == "couple" else "family"
        return (
            f"Question: which relation pattern dominates the {unit}'s interaction at row {inst.row_index} "
            f"(spoken by {inst.given_value('speaker')}; the turn itself is {shown})? Judge the relational "
            f"organisation between the participants, not one person's emotion."
        )

    def label_guide(self, inst: Instance) -> str:
        return taxonomy.describe("relation", inst.scenario, style="short")
