"""Trivial baselines for RESCUE-Bench, scored by the same metric code as the models.

Each baseline is fitted on training instances only and predicts in the evaluator's prediction-record
format (rankings for the closed-set tasks), so ``rescue_train.scoring.metrics`` scores it like any
model. ``rescue-train baselines DATA`` runs them all over grouped folds (see ``baselines.runner``).
"""
