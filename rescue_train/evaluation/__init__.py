"""Evaluation: backends, protocols, the paper's metrics, judge, BERTScore, reports."""
