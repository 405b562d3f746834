"""Class-balanced classifiers (torch and scikit-learn), the rebalancing strategies, and the strategy comparison
(``compare/``). Import-disjoint from the LoRA half (:mod:`rescue_train.sft`)."""

from . import balance  # noqa: F401  (registers the sklearn and torch learners with rescue_train.rebalance)
