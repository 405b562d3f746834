"""Aggregation as RELATE does it, with unit-clustered bootstrap CIs and Holm-corrected comparisons.

Per sentence (values 1, 0, or None = no usable label):

* each criterion: 1 MET, 0 NOT_MET, None for PARSE_FAIL or not asked;
* ``IF``: 1 when any IF criterion is MET, else 0, even when some IF labels are missing (RELATE's rule); a
  sentence with no IF label at all (every one failed to parse, or none was asked) leaves the IF rates;
* ``IF_gated`` (ours): IF and our referent gate (the move is about the supporter-person bond, asked in its
  own call): 0 when IF is 0, the gate's value when IF is 1; a sentence whose gate was asked but failed to
  parse leaves it when IF is 1; none has it when the gate was not asked (``criteria=relate``);
* ``OS``: the Outward-Scaffolding label; a sentence without one leaves the OS rate only;
* composition (sentences with an OS label): IF-only, OS-only, both, neither; ``IF among OS`` = both / OS;
* per turn: pooled rates per supporter turn; and RELATE's turn-1-to-6 change generalised to each dialogue's
  first and last labelled turn, averaged over dialogues (each one weight).

A rate pools sentences (one weight each) over the sentences labelled for it. Its CI resamples units with
replacement (a sentence's ``unit``: the couple or family of a benchmark turn, whose segments share people,
or the dialogue of a dialogue file) and takes the ratio of summed numerators to summed denominators (2.5 and
97.5 percentiles); the turn change resamples units too, each carrying its dialogues' changes. Two systems
are compared by the bootstrap distribution of their difference (the same draws of units when both audited
the same units), p = 2 (smaller tail + 1) / (draws + 1); p values are Holm-corrected within each measure.
The draws are scoring.uncertainty's cluster bootstrap, the project's one implementation of clustered
intervals.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from ..scoring.uncertainty import Bootstrap, cluster_bootstrap, holm, stream_seed
from .criteria import CRITERIA, EXPLORATORY_KEYS, GATE_KEY, IF_KEYS, MET, NOT_MET, OS_KEY

HEADLINE = ("IF", "IF_gated", "OS")
COMPOSITION = ("IF_only", "OS_only", "both", "neither")


def sentence_values(labels: dict[str, dict[str, Any]]) -> dict[str, int | None]:
    values: dict[str, int | None] = {}
    for key, answer in labels.items():
        label = answer.get("label")
        values[key] = 1 if label == MET else 0 if label == NOT_MET else None
    observed_if = any(values.get(k) is not None for k in IF_KEYS)
    values["IF"] = int(any(values.get(k) == 1 for k in IF_KEYS)) if observed_if else None
    if GATE_KEY not in labels or values["IF"] is None:
        values["IF_gated"] = None
    else:
        values["IF_gated"] = 0 if values["IF"] == 0 else values[GATE_KEY]
    values["OS"] = values.get(OS_KEY)
    if values["OS"] is not None and values["IF"] is not None:
        values["composition"] = {(1, 1): "both", (1, 0): "IF_only", (0, 1): "OS_only", (0, 0): "neither"}[
            (values["IF"], values["OS"])]
    return values


def measures(criteria: Iterable[str]) -> list[str]:
    return [*HEADLINE, *(k for k in CRITERIA if k in set(criteria) and k != OS_KEY)]


def cluster_counts(rows: list[tuple[str, float | None]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per unit: (ids, numerators, denominators) over the rows that have a value."""
    num: dict[str, float] = defaultdict(float)
    den: dict[str, int] = defaultdict(int)
    for unit, value in rows:
        if value is not None:
            num[unit] += value
            den[unit] += 1
    ids = sorted(den)
    return ids, np.array([num[i] for i in ids], float), np.array([den[i] for i in ids], float)


def _ratio_interval(num: np.ndarray, den: np.ndarray, resamples: int, seed: int, *names: str) -> list[float] | None:
    """The percentile interval of sum(num) / sum(den) over draws of units with replacement
    (scoring.uncertainty's cluster bootstrap, the project's one implementation); None under two units."""
    drawn = cluster_bootstrap(lambda counts: (counts @ num) / (counts @ den), ["all"] * len(num), draws=resamples,
                              seed=stream_seed(seed, *names), stratum_name="audit")
    return drawn.interval(0) if isinstance(drawn, Bootstrap) else None


def rate(rows: list[tuple[str, int | None]], resamples: int, seed: int, *names: str) -> dict[str, Any]:
    ids, num, den = cluster_counts(rows)
    total = float(den.sum())
    return {"n": int(total), "met": int(num.sum()), "rate": float(num.sum() / total) if total else None,
            "units": len(ids), "ci": _ratio_interval(num, den, resamples, seed, *names) if total else None}


def turn_change(rows: list[tuple[str, str, int, int | None]], resamples: int, seed: int, *names: str
                ) -> dict[str, Any]:
    """RELATE's turn-1-to-turn-6 change, generalised: per dialogue, the rate at its last labelled turn minus the
    rate at its first, averaged over dialogues with at least two labelled turns (each dialogue one weight).
    ``rows`` are (unit, dialogue, turn, value); the CI resamples units, each with its dialogues' changes."""
    per_turn: dict[tuple[str, str], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for unit, dialogue, turn, value in rows:
        if value is not None:
            per_turn[(unit, dialogue)][turn].append(value)
    changes = []
    for (unit, _), turns in per_turn.items():
        if len(turns) >= 2:
            first, last = turns[min(turns)], turns[max(turns)]
            changes.append((unit, sum(last) / len(last) - sum(first) / len(first)))
    mean = sum(c for _, c in changes) / len(changes) if changes else None
    ids, num, den = cluster_counts(changes)
    return {"dialogues": len(changes), "units": len(ids), "mean": mean,
            "ci": _ratio_interval(num, den, resamples, seed, *names) if changes else None}


def compare(rows_a: list[tuple[str, int | None]], rows_b: list[tuple[str, int | None]], resamples: int, seed: int,
            *names: str) -> dict[str, Any]:
    """Difference a - b with its bootstrap CI and p; paired draws (the same units for both) when both cover the
    same units, else each system's units drawn on their own (strata)."""
    ids_a, num_a, den_a = cluster_counts(rows_a)
    ids_b, num_b, den_b = cluster_counts(rows_b)
    diff = (num_a.sum() / den_a.sum() - num_b.sum() / den_b.sum()) if den_a.sum() and den_b.sum() else None
    paired = ids_a == ids_b
    result = {"difference": None if diff is None else float(diff), "ci": None, "p": None, "paired": paired}
    if diff is None or len(ids_a) < 2 or len(ids_b) < 2:
        return result
    if paired:
        def difference(counts):
            return (counts @ num_a) / (counts @ den_a) - (counts @ num_b) / (counts @ den_b)
        strata = ["all"] * len(ids_a)
    else:
        cut = len(ids_a)

        def difference(counts):
            a, b = counts[:, :cut], counts[:, cut:]
            return (a @ num_a) / (a @ den_a) - (b @ num_b) / (b @ den_b)
        strata = ["a"] * len(ids_a) + ["b"] * len(ids_b)
    drawn = cluster_bootstrap(difference, strata, draws=resamples, seed=stream_seed(seed, *names),
                              stratum_name="system")
    if isinstance(drawn, Bootstrap):
        result["ci"], result["p"] = drawn.interval(0), drawn.p_value(0)
    return result


def analyse(sentences: list[dict[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    """Everything the report shows, per system (in first-seen order)."""
    systems: list[str] = list(dict.fromkeys(s["system"] for s in sentences))
    criteria = sorted({k for s in sentences for k in s["criteria"]}, key=list(CRITERIA).index)
    names = measures(criteria)
    values = [sentence_values(s["labels"]) for s in sentences]
    by_system: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for s, v in zip(sentences, values):
        by_system[s["system"]].append((s, v))

    def rows(pairs, measure) -> list[tuple[str, int | None]]:
        return [(s["unit"], v.get(measure)) for s, v in pairs
                if measure not in EXPLORATORY_KEYS or measure in s["criteria"]]

    out: dict[str, Any] = {"systems": systems, "measures": names, "per_system": {}, "comparisons": {}}
    for system in systems:
        pairs = by_system[system]
        labels = [a.get("label") for s, _ in pairs for a in s["labels"].values()]
        composition = {c: sum(v.get("composition") == c for _, v in pairs) for c in COMPOSITION}
        labelled = sum(composition.values())
        os_positive = composition["OS_only"] + composition["both"]
        turns: dict[int, dict[str, Any]] = {}
        for turn in sorted({s["turn_id"] for s, _ in pairs}):
            at = [(s, v) for s, v in pairs if s["turn_id"] == turn]
            turns[turn] = {m: _pooled(rows(at, m)) for m in HEADLINE}
            turns[turn]["sentences"] = len(at)
        out["per_system"][system] = {
            "sentences": len(pairs),
            "turns": len({(s["dialogue_id"], s["turn_id"]) for s, _ in pairs}),
            "dialogues": len({s["dialogue_id"] for s, _ in pairs}),
            "units": len({s["unit"] for s, _ in pairs}),
            "labels": {"MET": labels.count(MET), "NOT_MET": labels.count(NOT_MET),
                       "PARSE_FAIL": labels.count("PARSE_FAIL"), "missing": labels.count(None)},
            "rates": {m: rate(rows(pairs, m), resamples, seed, system, m) for m in names},
            "composition": {"counts": composition, "labelled": labelled,
                            "shares": {c: composition[c] / labelled if labelled else None for c in COMPOSITION},
                            "IF_among_OS": composition["both"] / os_positive if os_positive else None},
            "per_turn": turns,
            "turn_change": {m: turn_change([(s["unit"], s["dialogue_id"], s["turn_id"], v.get(m)) for s, v in pairs],
                                           resamples, seed, system, m, "change") for m in HEADLINE},
        }
    for measure in names:
        family = []
        for a, b in itertools.combinations(systems, 2):
            result = compare(rows(by_system[a], measure), rows(by_system[b], measure), resamples, seed, a, b, measure)
            family.append({"a": a, "b": b, **result})
        tested = [c for c in family if c["p"] is not None]
        for c, adjusted in zip(tested, holm([c["p"] for c in tested])):
            c["p_holm"] = adjusted
        if family:
            out["comparisons"][measure] = family
    return out


def _pooled(rows: list[tuple[str, int | None]]) -> dict[str, Any]:
    seen = [v for _, v in rows if v is not None]
    return {"n": len(seen), "rate": sum(seen) / len(seen) if seen else None}
