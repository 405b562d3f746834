"""TF-IDF + logistic regression (scikit-learn), without and with balanced class weights.

Features: the words of the rows the task shows (its context window and, when shown, the current turn),
at most the last ``FEATURE_ROWS`` of them, each prefixed by a role token instead of a name
(``__therapist__``, ``__client__``, ``__group__``; ``__current__`` marks the current turn) and led by a
scenario token. Names are left out because they never recur across units; the task instruction is left
out because it is the same for every instance of a task. STP learns the support-target roles (see
``baselines.base``). A test instance's ranking is its candidates ordered by predicted probability;
labels the model never saw get 0 and come last in candidate order. One model per task pools both
scenarios (the family data are too few for a model of their own); the scenario token lets it tell them
apart, and each instance is ranked over its own scenario's candidates.
"""

from __future__ import annotations

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from rescue_train.data.schema import GROUP_SPEAKERS, THERAPIST

from .base import ClosedSetBaseline, candidate_scores, class_of, rank_candidates

FEATURE_ROWS = 10


def speaker_token(speaker: str) -> str:
    if speaker == THERAPIST:
        return "__therapist__"
    return "__group__" if speaker in GROUP_SPEAKERS else "__client__"


def feature_text(inst) -> str:
    parts = [f"__{inst.scenario}__"]
    for index in inst.context[-FEATURE_ROWS:]:
        row = inst.sample.row(index)
        parts.append(f"{speaker_token(row.speaker)} {row.dialogue}")
    if inst.current is not None:
        row = inst.sample.row(inst.current)
        parts.append(f"__current__ {speaker_token(row.speaker)} {row.dialogue}")
    return "\n".join(parts)


class TfidfLogReg(ClosedSetBaseline):
    name = "tfidf_lr"
    class_weight: str | None = None

    def _fit(self, train):
        labels = [class_of(inst) for inst in train]
        self.only_class = labels[0] if len(set(labels)) == 1 else None
        if len(set(labels)) < 2:
            self.model = None  # scikit-learn needs two classes; one class (or none) ranks that class first
            return
        self.model = make_pipeline(
            TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2),
            LogisticRegression(max_iter=2000, class_weight=self.class_weight, random_state=self.seed),
        )
        self.model.fit([feature_text(inst) for inst in train], labels)

    def _predict(self, test):
        if self.model is None:
            scores = [{self.only_class: 1.0} if self.only_class else {} for _ in test]
        elif test:
            classes = list(self.model.classes_)
            probabilities = self.model.predict_proba([feature_text(inst) for inst in test])
            scores = [dict(zip(classes, row)) for row in probabilities]
        else:
            scores = []
        return [rank_candidates(inst, candidate_scores(inst, score)) for inst, score in zip(test, scores)]


class TfidfLogRegBalanced(TfidfLogReg):
    name = "tfidf_lr_balanced"
    class_weight = "balanced"

