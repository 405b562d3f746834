"""Random rankings: drawn from the training label prior of the instance's scenario (``prior``), or
uniformly (``uniform``). Seeded per instance, so a prediction does not depend on the order of the run.

A ranking is drawn without replacement with probabilities proportional to the prior (the
Efraimidis-Spirakis keys u**(1/w)); labels with no training mass come last, in candidate order. For STP a
role's mass is shared equally among the candidates holding that role."""

from __future__ import annotations

import zlib

import numpy as np

from .base import ClosedSetBaseline, by_scenario, class_of, rank_candidates, scenario_counts, stp_role


def draw_ranking(inst, weights: dict[str, float], seed: int) -> list[str]:
    rng = np.random.default_rng([seed, zlib.crc32(inst.id.encode("utf-8"))])
    draws = rng.random(len(inst.candidates))
    keys = {c: (u ** (1.0 / weights[c]) if weights.get(c, 0) > 0 else -1.0)
            for c, u in zip(inst.candidates, draws)}
    return rank_candidates(inst, keys)


class LabelPrior(ClosedSetBaseline):
    name = "prior"

    def _fit(self, train):
        self.counts = by_scenario(train, class_of)

    def weights(self, inst) -> dict[str, float]:
        counts = scenario_counts(self.counts, inst)
        if inst.task != "stp":
            return {c: float(counts.get(c, 0)) for c in inst.candidates}
        roles = {c: stp_role(inst, c) for c in inst.candidates}
        holders = {r: sum(1 for v in roles.values() if v == r) for r in roles.values()}
        return {c: counts.get(r, 0) / holders[r] for c, r in roles.items()}

    def _predict(self, test):
        return [draw_ranking(inst, self.weights(inst), self.seed) for inst in test]


class Uniform(LabelPrior):
    name = "uniform"

    def weights(self, inst) -> dict[str, float]:
        return {c: 1.0 for c in inst.candidates}

