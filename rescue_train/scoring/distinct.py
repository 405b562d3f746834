"""Distinct-n (Li et al. 2016) of generated texts: over a result, and on each cluster-bootstrap draw of it."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..tasks.answers import WORD


def ngrams(text: str | None, n: int) -> list[tuple[str, ...]]:
    words = [w.lower() for w in WORD.findall(text or "")]
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Distinct-n across ``texts``: distinct word n-grams / all word n-grams (lower-cased words), None when
    there is no n-gram at all. Low values expose generations that repeat themselves or each other."""
    grams = [gram for text in texts for gram in ngrams(text, n)]
    return len(set(grams)) / len(grams) if grams else None


def distinct_draws(texts: list[str], n: int, clusters: np.ndarray, n_clusters: int):
    """Distinct-n of each draw: an n-gram counts once when any drawn cluster has it, the n-grams of a
    cluster drawn twice count twice in the denominator. n-grams held by the same clusters are counted
    together, which keeps the product small."""
    totals = np.zeros(n_clusters)
    holders: dict[tuple[str, ...], set[int]] = {}
    for text, cluster in zip(texts, clusters):
        grams = ngrams(text, n)
        totals[cluster] += len(grams)
        for gram in grams:
            holders.setdefault(gram, set()).add(int(cluster))
    together: dict[frozenset[int], int] = {}
    for held_by in holders.values():
        together[frozenset(held_by)] = together.get(frozenset(held_by), 0) + 1
    holders_of_group = np.zeros((n_clusters, len(together)), dtype=np.float32)
    for column, held_by in enumerate(together):
        holders_of_group[list(held_by), column] = 1.0
    sizes = np.array(list(together.values()), dtype=float)

    def value(counts: np.ndarray) -> np.ndarray:
        distinct = (((counts > 0).astype(np.float32) @ holders_of_group) > 0) @ sizes
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(counts @ totals > 0, distinct / (counts @ totals), np.nan)
    return value
