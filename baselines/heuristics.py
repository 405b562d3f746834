"""Simple heuristics, one per task where a trivial rule makes sense (ITP, STP, ER, VP).

* ITP: logistic regression on four surface features of the decision turn: it contains a question mark,
  log(1 + its word count), it addresses the therapist, and the therapist spoke the row before it.
* STP: the group label first when two or more clients speak in the shown rows (or none does), otherwise
  the last client speaker first; then the other of the two, then the remaining people, latest speaker
  first. Nothing is fitted.
* ER: the most frequent training emotion phrase with the training median intensity (the lower median),
  per scenario.
* VP: the speaker's view of the first person the current turn addresses (else the first other
  participant), worded as the most typical training viewpoint of the scenario.

"Most typical" phrase: the most frequent one (case and surrounding space ignored); ties, such as all
phrases being distinct, go to the phrase with the highest mean TF-IDF cosine similarity to all training
phrases, then to the earliest.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import cosine_similarity

from rescue_train.data.schema import THERAPIST
from rescue_train.tasks.er import word_count
from rescue_train.tasks.itp import NO, YES

from .base import Baseline, clients_by_recency, rank_candidates


def typical_phrase(texts: Sequence[str]) -> str:
    if not texts:
        raise ValueError("no training phrases to choose from")
    keys = [t.strip().lower() for t in texts]
    counts = Counter(keys)
    first_index: dict[str, int] = {}
    for i, key in enumerate(keys):
        first_index.setdefault(key, i)
    best = max(counts.values())
    tied = sorted(first_index[k] for k, n in counts.items() if n == best)
    if len(tied) > 1:
        try:
            matrix = TfidfVectorizer().fit_transform(keys)
            centrality = np.asarray(cosine_similarity(matrix[tied], matrix).mean(axis=1)).ravel()
        except ValueError:  # phrases without a single word token: keep the earliest
            centrality = np.zeros(len(tied))
        tied = [tied[int(np.argmax(centrality))]]  # argmax keeps the earliest among equals
    return texts[tied[0]].strip()


def itp_features(inst) -> list[float]:
    row = inst.sample.row(inst.current)
    previous = inst.sample.row(inst.current - 1) if inst.current > 1 else None
    return [float("?" in row.dialogue), math.log1p(word_count(row.dialogue)), float(THERAPIST in row.target),
            float(previous is not None and previous.is_therapist)]


def addressee(inst) -> str:
    row = inst.sample.row(inst.current)
    speaker = row.speaker
    for name in row.target:
        if name != speaker:
            return name
    others = [p for p in inst.sample.participants if p != speaker]
    return others[0] if others else THERAPIST


class Heuristic(Baseline):
    name = "heuristic"
    tasks = ("itp", "stp", "er", "vp")

    def _fit(self, train):
        getattr(self, f"_fit_{self.task}")(train)

    def _predict(self, test):
        return [getattr(self, f"_predict_{self.task}")(inst) for inst in test]

    # ITP
    def _fit_itp(self, train):
        labels = [inst.gold for inst in train]
        self.model = None
        self.constant = labels[0] if labels else NO
        if len(set(labels)) == 2:
            self.model = LogisticRegression(random_state=self.seed).fit([itp_features(i) for i in train], labels)

    def _predict_itp(self, inst):
        if self.model is None:
            top = self.constant
        else:
            p_yes = self.model.predict_proba([itp_features(inst)])[0][list(self.model.classes_).index(YES)]
            top = YES if p_yes > 0.5 else NO
        return [top, NO if top == YES else YES]

    # STP
    def _fit_stp(self, train):
        pass

    def _predict_stp(self, inst):
        recent = clients_by_recency(inst)
        group = inst.sample.group_label
        order = [recent[0], group] if len(recent) == 1 else [group, *recent[:1]]
        score = {label: float(len(order) - i) for i, label in enumerate(order)}
        return rank_candidates(inst, {c: score.get(c, 0.0) for c in inst.candidates})

    # ER
    def _fit_er(self, train):
        self.er = {}
        for scope in ("both", "couple", "family"):
            chosen = [i for i in train if scope == "both" or i.scenario == scope]
            if chosen:
                self.er[scope] = {"emotion": typical_phrase([i.gold["emotion"] for i in chosen]),
                                  "intensity": statistics.median_low(i.gold["intensity"] for i in chosen)}

    def _predict_er(self, inst):
        return dict(self._constant(self.er, inst))

    # VP
    def _fit_vp(self, train):
        self.vp = {}
        for scope in ("both", "couple", "family"):
            texts = [v["viewpoint"] for i in train if scope == "both" or i.scenario == scope for v in i.gold]
            if texts:
                self.vp[scope] = typical_phrase(texts)

    def _predict_vp(self, inst):
        speaker = inst.sample.row(inst.current).speaker
        return [{"source": speaker, "target": addressee(inst), "viewpoint": self._constant(self.vp, inst)}]

    def _constant(self, table: dict, inst):
        if not table:
            raise ValueError(f"{self.name} for {self.task}: no training instances to take a constant from")
        return table.get(inst.scenario, table["both"])

