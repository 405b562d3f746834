"""Support targets shared by STP and SSP: whom a therapist move addresses, as a candidate label.

The gold comes from the first ``support_strategy`` item's target, else the row's own target, with the
therapist removed. Several people either collapse to the group label (``collapse``, the reference's
behaviour) or stay an exact set written ``"A & B"`` in participant order (``set``, since the paper allows
pairs and subgroups); the whole group is always the group label.
"""

from __future__ import annotations

from collections import Counter

from ..data.schema import GROUP_SPEAKERS, THERAPIST, Row, Sample
from .task import count


def raw_target(row: Row) -> tuple[tuple[str, ...], str]:
    """Names the first strategy item targets (else the row's addressees), and which of the two was used."""
    names = tuple(n for n in row.support_strategy[0].target if n != THERAPIST)
    if names:
        return names, "strategy"
    return tuple(n for n in row.target if n != THERAPIST), "row"


def target_label(names: tuple[str, ...], sample: Sample, mode: str) -> str | None:
    """The candidate label for ``names``; None when a name is not a participant of the sample."""
    if any(n in GROUP_SPEAKERS for n in names):
        return sample.group_label
    people = set(names)
    if not people or not people <= set(sample.participants):
        return None
    if len(people) == 1:
        return names[0]
    if mode == "collapse" or people == set(sample.participants):
        return sample.group_label
    return " & ".join(p for p in sample.participants if p in people)


def candidate_targets(sample: Sample, mode: str) -> tuple[str, ...]:
    """Participants, the group label and (set mode) every subset targeted on this sample's therapist rows."""
    labels = [*sample.participants, sample.group_label]
    if mode == "set":
        for row in sample.rows:
            if row.is_therapist and row.support_strategy:
                label = target_label(raw_target(row)[0], sample, mode)
                if label is not None and label not in labels:
                    labels.append(label)
    return tuple(labels)


def support_rows(sample: Sample, mode: str, excluded: Counter) -> list[tuple[Row, str, str, str]]:
    """Therapist rows with a strategy and a resolvable target: (row, strategy, target label, target source).
    Rows left out are counted in ``excluded`` per reason."""
    kept = []
    for row in sample.rows:
        if not row.is_therapist:
            continue
        if not row.support_strategy:
            count(excluded, sample.scenario, "therapist row without a support_strategy item")
            continue
        strategy = row.support_strategy[0].strategy_type
        if not strategy:
            count(excluded, sample.scenario, "first strategy item has an empty strategy_type")
            continue
        names, source = raw_target(row)
        if not names:
            count(excluded, sample.scenario, "no target in the strategy item or the row")
            continue
        label = target_label(names, sample, mode)
        if label is None:
            count(excluded, sample.scenario, "target is not a participant of the sample")
            continue
        kept.append((row, strategy, label, source))
    return kept
