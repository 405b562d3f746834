"""How well an LLM judge agrees with human raters (``rescue-train agreement RESULTS --human FILE``).

The human file (CSV with a header, or JSONL) has one judged instance per line: ``id`` and ``score``, and
optionally ``rater`` (agreement is then also reported per rater). Judge scores come from the results'
records. Reported per task and rater: n, exact agreement, MAE, Cohen's kappa with linear (or quadratic)
weights (scikit-learn) and Gwet's AC1 over the scale's categories.

RESULTS may also be the folder of ``rescue-train audit``: then the human file holds sentence labels (IF, OS)
and the agreement is sentence-level (see rescue_train/audit/agreement.py).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from ..io import iter_jsonl


def gwet_ac1(a: Sequence[int], b: Sequence[int], categories: Sequence[int]) -> float | None:
    """Gwet's first-order agreement coefficient for two raters: (pa - pe) / (1 - pe), with chance agreement
    pe = sum_k pi_k (1 - pi_k) / (q - 1), pi_k the mean share of category k over both raters."""
    n, q = len(a), len(categories)
    if n == 0 or q < 2:
        return None
    pa = sum(x == y for x, y in zip(a, b)) / n
    pi = [(sum(x == k for x in a) + sum(y == k for y in b)) / (2 * n) for k in categories]
    pe = sum(p * (1 - p) for p in pi) / (q - 1)
    return 1.0 if pe == 1 else (pa - pe) / (1 - pe)


def agreement(judge: Sequence[int], human: Sequence[int], low: int, high: int, weights: str = "linear"
              ) -> dict[str, Any]:
    from sklearn.metrics import cohen_kappa_score

    categories = list(range(low, high + 1))
    n = len(judge)
    kappa = cohen_kappa_score(judge, human, labels=categories, weights=weights) if n > 1 else None
    return {"n": n, "exact_agreement": sum(j == h for j, h in zip(judge, human)) / n if n else None,
            "mae": sum(abs(j - h) for j, h in zip(judge, human)) / n if n else None,
            f"kappa_{weights}": None if kappa is None or kappa != kappa else float(kappa),
            "gwet_ac1": gwet_ac1(judge, human, categories),
            "within_1": sum(abs(j - h) <= 1 for j, h in zip(judge, human)) / n if n else None}


def read_human(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        rows = list(iter_jsonl(path))
    else:
        rows = list(enumerate(csv.DictReader(path.read_text(encoding="utf-8").splitlines()), start=2))
    out = []
    for line, row in rows:
        try:
            score = float(row["score"])
            if not score.is_integer():
                raise ValueError
            out.append({"id": str(row["id"]), "score": int(score), "rater": str(row.get("rater") or "all"),
                        "line": line})
        except (KeyError, ValueError, TypeError):
            raise ValueError(f"{path}:{line}: need an 'id' and an integer 'score', got {row!r}") from None
    return out


def compare(results: dict[str, Any], human: list[dict[str, Any]], weights: str = "linear",
            source: str = "human file") -> dict[str, dict[str, dict[str, Any]]]:
    """{task: {rater | 'all raters': agreement}} over instances both scored."""
    records = {r["id"]: r for r in results["records"]}
    pairs: dict[str, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    scales: dict[str, tuple[int, int]] = {}
    for row in human:
        record = records.get(row["id"])
        if record is None:
            raise ValueError(f"{source}:{row['line']}: id {row['id']!r} is not in the results")
        judged = (record.get("scores") or {}).get("judge_score")
        if judged is None:
            raise ValueError(f"{source}:{row['line']}: instance {row['id']!r} has no judge score in the results")
        low, high = map(int, record["scores"].get("judge_scale", "1-5").split("-"))
        if not low <= row["score"] <= high:
            raise ValueError(f"{source}:{row['line']}: score {row['score']} outside the judge scale {low}-{high}")
        scales[record["task"]] = (low, high)
        pairs[record["task"]][row["rater"]].append((int(judged), row["score"]))
        if row["rater"] != "all":
            pairs[record["task"]]["all raters"].append((int(judged), row["score"]))
    return {task: {rater: agreement([j for j, _ in p], [h for _, h in p], *scales[task], weights)
                   for rater, p in by_rater.items()} for task, by_rater in pairs.items()}
