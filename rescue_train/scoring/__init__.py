"""Scoring shared by every application: the paper's metrics over prediction records, the LLM judge, BERTScore,
agreement statistics and significance tests."""
