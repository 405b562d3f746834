"""Baselines for RSG, the therapist's next turn, scored by the evaluator's metrics like a model's turns.

* ``repeat_client``: the last client turn the instance shows, word for word (a therapist who only echoes);
* ``generic_reply``: one fixed, even-handed supportive reply for every instance;
* ``tfidf_retrieval``: the real therapist reply of the most similar training context, by TF-IDF cosine over
  the shown rows' words (the features of ``tfidf_lr``: role tokens instead of names, a scenario token);
  ties go to the earliest training instance. Fitted on the training folds only.

They cover every task scored as a support turn (``Task.metric == "support"``).
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

from rescue_train.tasks import TASKS

from .base import Baseline
from .tfidf import feature_text

GENERIC_REPLY = ("It sounds like this is really hard for both of you right now. Can you each say a little more "
                 "about what is happening for you as we talk about it?")


class SupportBaseline(Baseline):
    @classmethod
    def covers(cls, task: str) -> bool:
        return task in TASKS and TASKS[task].metric == "support"

    def _fit(self, train):
        pass


class RepeatClient(SupportBaseline):
    name = "repeat_client"

    def _predict(self, test):
        return [next((inst.sample.row(i).dialogue for i in reversed(inst.context)
                      if inst.sample.row(i).is_client), "") for inst in test]


class GenericReply(SupportBaseline):
    name = "generic_reply"

    def _predict(self, test):
        return [GENERIC_REPLY for _ in test]


class TfidfRetrieval(SupportBaseline):
    name = "tfidf_retrieval"

    def _fit(self, train):
        if not train:
            raise ValueError(f"{self.name} for {self.task}: no training turns to retrieve from")
        self.replies = [inst.gold for inst in train]
        self.vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2))
        self.matrix = self.vectorizer.fit_transform([feature_text(inst) for inst in train])

    def _predict(self, test):
        if not test:
            return []
        similarity = cosine_similarity(self.vectorizer.transform([feature_text(inst) for inst in test]), self.matrix)
        return [self.replies[int(np.argmax(row))] for row in similarity]  # argmax keeps the earliest among equals
