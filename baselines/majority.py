"""Majority: every instance gets the labels ordered by their training frequency in its scenario
(STP: the support-target roles ordered by frequency). Ties keep the candidate order."""

from __future__ import annotations

from .base import ClosedSetBaseline, by_scenario, candidate_scores, class_of, rank_candidates, scenario_counts


class Majority(ClosedSetBaseline):
    name = "majority"

    def _fit(self, train):
        self.counts = by_scenario(train, class_of)

    def _predict(self, test):
        return [rank_candidates(inst, candidate_scores(inst, scenario_counts(self.counts, inst))) for inst in test]

