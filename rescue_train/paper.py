"""Published RESCUE-Bench numbers, kept as data so that our own results can be printed beside them.

Values are transcribed exactly as printed in the paper (percentages as percentages, e.g. 55.78; ER/VP
LLM-as-judge scores on the 1-5 scale; BERTScore F1 as a fraction, e.g. 0.8167).  Each table is kept as
printed even where two tables disagree: the "Both" rows of Table 11 differ from Table 5 in the fourth
decimal of a few BERTScore cells (see ``TABLE5_TABLE11_DIFFERENCES``).

Public names
------------
``SOURCE``, ``TASKS``, ``BENCHMARK_SAMPLES``, ``TABLE6_COLUMNS``, ``TABLE6``,
``TABLE5_COLUMNS``, ``TABLE5_MODELS``, ``TABLE5``, ``SECTION53_AVERAGES``,
``TABLE11_SCENARIOS``, ``TABLE11``, ``TABLE5_TABLE11_DIFFERENCES``,
``LABEL_SHARES``, ``TABLE12_COLUMNS``, ``TABLE12``
"""

from __future__ import annotations

SOURCE = "RESCUE-Bench paper, Tables 5, 6, 11, 12 and Appendix E.2"

TASKS = ("itp", "rpp", "stp", "ssp", "er", "vp")

# Appendix C: samples in the benchmark after dropping the empty manifest file.
BENCHMARK_SAMPLES = {"couple": 174, "family": 17}

# --------------------------------------------------------------------------------------------------
# Table 6 (Appendix C): task instances and covered samples after filtering
# --------------------------------------------------------------------------------------------------

TABLE6_COLUMNS = ("couple_instances", "family_instances", "couple_samples", "family_samples")

TABLE6: dict[str, dict[str, int]] = {
    "itp": {"couple_instances": 2722, "family_instances": 284, "couple_samples": 168, "family_samples": 16},
    "rpp": {"couple_instances": 1608, "family_instances": 525, "couple_samples": 172, "family_samples": 17},
    "stp": {"couple_instances": 1290, "family_instances": 347, "couple_samples": 172, "family_samples": 17},
    "ssp": {"couple_instances": 1290, "family_instances": 347, "couple_samples": 172, "family_samples": 17},
    "er": {"couple_instances": 844, "family_instances": 82, "couple_samples": 174, "family_samples": 17},
    "vp": {"couple_instances": 775, "family_instances": 80, "couple_samples": 170, "family_samples": 17},
}

# --------------------------------------------------------------------------------------------------
# Table 5 (Section 5.3): ten LLMs, both scenarios pooled
# --------------------------------------------------------------------------------------------------

# ITP precision/recall/F1, RPP accuracy, STP and SSP Recall@1 and MRR: percent.
# ER/VP "llm": LLM-as-judge score, 1-5.  ER/VP "bert": BERTScore F1, 0-1.
TABLE5_COLUMNS = (
    "itp_precision",
    "itp_recall",
    "itp_f1",
    "rpp_accuracy",
    "stp_recall",
    "stp_mrr",
    "ssp_recall",
    "ssp_mrr",
    "er_llm",
    "er_bert",
    "vp_llm",
    "vp_bert",
)

# Rows in the printed order; values in TABLE5_COLUMNS order.
_TABLE5_ROWS: dict[str, tuple[float, ...]] = {
    "Qwen-Plus":           (55.78, 89.99, 68.87, 38.27, 65.61, 79.21, 26.21, 36.95, 3.58, 0.8167, 3.20, 0.8587),
    "Qwen3-Max":           (79.81, 70.99, 75.14, 43.22, 61.09, 76.28, 31.89, 45.76, 4.04, 0.8224, 3.35, 0.8647),
    "Qwen3.5-Plus":        (98.00, 91.42, 94.60, 40.27, 69.40, 81.57, 31.70, 44.98, 4.22, 0.8321, 3.94, 0.8642),
    "DeepSeek-R1":         (90.71, 72.12, 80.36, 37.89, 61.88, 76.88, 29.38, 39.71, 4.08, 0.8227, 3.35, 0.8635),
    "DeepSeek-V3.2":       (93.42, 81.17, 86.86, 36.08, 62.68, 77.14, 33.05, 46.17, 4.13, 0.8259, 3.86, 0.8588),
    "DeepSeek-V4-Flash":   (91.10, 78.31, 84.22, 39.39, 62.61, 77.61, 30.12, 44.13, 4.04, 0.8153, 4.08, 0.8577),
    "DeepSeek-V4-Pro":     (92.24, 75.91, 83.28, 45.60, 71.04, 82.23, 37.26, 52.00, 4.17, 0.8246, 3.90, 0.8574),
    "Kimi K2.5":           (88.01, 84.03, 85.98, 45.26, 59.13, 75.60, 34.15, 47.66, 4.18, 0.8225, 3.64, 0.8620),
    "MiniMax M2.5":        (89.64, 75.98, 82.25, 39.85, 62.55, 77.01, 29.08, 42.89, 4.01, 0.8201, 3.25, 0.8561),
    "GPT-4o":              (86.67, 82.63, 84.60, 38.69, 67.38, 80.00, 35.92, 49.36, 4.01, 0.8206, 3.24, 0.8674),
}

TABLE5_MODELS: tuple[str, ...] = tuple(_TABLE5_ROWS)

TABLE5: dict[str, dict[str, float]] = {
    model: dict(zip(TABLE5_COLUMNS, row)) for model, row in _TABLE5_ROWS.items()
}

# Averages over the ten models quoted in the prose of Section 5.3 (Table 5 itself has no average row).
SECTION53_AVERAGES: dict[str, float] = {
    "itp_f1": 82.62,
    "rpp_accuracy": 40.45,
    "stp_recall": 64.34,
    "stp_mrr": 78.35,
    "ssp_recall": 31.88,
    "ssp_mrr": 44.96,
    "er_llm": 4.05,
    "vp_llm": 3.58,
    "vp_bert": 0.8611,
}

# --------------------------------------------------------------------------------------------------
# Table 11 (Appendix E.1): per scenario; "both" = pooled; "Average" = mean over the ten models
# --------------------------------------------------------------------------------------------------

TABLE11_SCENARIOS = ("couple", "family", "both")

# Same column order as TABLE5_COLUMNS.  DeepSeek-V4-Flash "both" er_bert is printed as 0.815.
_TABLE11_ROWS: dict[str, dict[str, tuple[float, ...]]] = {
    "Qwen-Plus": {
        "couple": (55.95, 90.72, 69.22, 40.58, 68.45, 81.81, 23.49, 33.81, 3.54, 0.8155, 3.18, 0.8599),
        "family": (53.66, 81.48, 64.71, 29.98, 55.04, 69.55, 36.31, 48.61, 4.04, 0.8289, 3.41, 0.8471),
        "both":   (55.78, 89.99, 68.87, 38.27, 65.61, 79.21, 26.21, 36.95, 3.58, 0.8167, 3.20, 0.8587),
    },
    "Qwen3-Max": {
        "couple": (80.30, 70.39, 75.02, 43.23, 63.64, 78.77, 30.08, 44.11, 4.05, 0.8219, 3.30, 0.8659),
        "family": (75.69, 76.76, 76.22, 43.21, 51.59, 67.00, 38.62, 51.92, 3.94, 0.8278, 3.80, 0.8516),
        "both":   (79.81, 70.99, 75.14, 43.22, 61.09, 76.28, 31.89, 45.76, 4.04, 0.8224, 3.35, 0.8646),
    },
    "Qwen3.5-Plus": {
        "couple": (97.88, 91.48, 94.57, 39.25, 72.09, 84.07, 31.16, 44.53, 4.22, 0.8316, 3.95, 0.8656),
        "family": (99.23, 90.85, 94.85, 43.92, 59.37, 72.29, 33.72, 46.64, 4.16, 0.8373, 3.84, 0.8494),
        "both":   (98.00, 91.42, 94.60, 40.27, 69.40, 81.57, 31.70, 44.98, 4.22, 0.8321, 3.94, 0.8641),
    },
    "DeepSeek-R1": {
        "couple": (90.85, 72.23, 80.47, 37.98, 63.72, 78.91, 28.68, 38.55, 4.09, 0.8221, 3.31, 0.8648),
        "family": (89.38, 71.13, 79.22, 37.57, 55.04, 69.31, 31.99, 44.00, 4.04, 0.8295, 3.71, 0.8500),
        "both":   (90.71, 72.12, 80.36, 37.89, 61.88, 76.88, 29.38, 39.71, 4.08, 0.8227, 3.35, 0.8634),
    },
    "DeepSeek-V3.2": {
        "couple": (93.64, 81.19, 86.97, 37.00, 65.04, 79.56, 31.40, 44.08, 4.14, 0.8257, 3.86, 0.8599),
        "family": (91.27, 80.99, 85.82, 32.80, 53.89, 68.16, 39.19, 53.94, 4.10, 0.8287, 3.92, 0.8482),
        "both":   (93.42, 81.17, 86.86, 36.08, 62.68, 77.14, 33.05, 46.17, 4.13, 0.8259, 3.86, 0.8588),
    },
    "DeepSeek-V4-Flash": {
        "couple": (90.85, 78.10, 84.00, 36.56, 65.66, 80.37, 28.22, 42.17, 4.05, 0.8151, 4.12, 0.8587),
        "family": (93.44, 80.28, 86.36, 49.56, 51.30, 67.34, 37.18, 51.39, 3.91, 0.8169, 3.73, 0.8478),
        "both":   (91.10, 78.31, 84.22, 39.39, 62.61, 77.61, 30.12, 44.13, 4.04, 0.815, 4.08, 0.8576),
    },
    "DeepSeek-V4-Pro": {
        "couple": (92.59, 75.24, 83.02, 43.82, 73.41, 84.46, 35.81, 50.84, 4.18, 0.8238, 3.88, 0.8582),
        "family": (89.31, 82.39, 85.71, 52.03, 62.25, 73.97, 42.65, 56.29, 4.07, 0.8324, 4.01, 0.8485),
        "both":   (92.24, 75.91, 83.28, 45.60, 71.04, 82.23, 37.26, 52.00, 4.17, 0.8246, 3.90, 0.8573),
    },
    "Kimi K2.5": {
        "couple": (88.32, 83.32, 85.75, 44.11, 61.16, 77.75, 33.33, 46.51, 4.18, 0.8222, 3.62, 0.8638),
        "family": (85.43, 90.85, 88.05, 49.38, 51.59, 67.58, 37.18, 51.92, 4.13, 0.8259, 3.81, 0.8443),
        "both":   (88.01, 84.03, 85.98, 45.26, 59.13, 75.60, 34.15, 47.66, 4.18, 0.8225, 3.64, 0.8619),
    },
    "MiniMax M2.5": {
        "couple": (90.12, 75.75, 82.32, 38.02, 65.35, 79.70, 26.98, 40.76, 4.01, 0.8195, 3.21, 0.8574),
        "family": (85.38, 78.17, 81.62, 45.15, 52.16, 67.00, 36.89, 50.82, 3.98, 0.8256, 3.59, 0.8428),
        "both":   (89.64, 75.98, 82.25, 39.85, 62.55, 77.01, 29.08, 42.89, 4.01, 0.8201, 3.25, 0.8561),
    },
    "GPT-4o": {
        "couple": (87.09, 82.29, 84.62, 41.46, 70.31, 82.52, 36.28, 49.17, 4.02, 0.8200, 3.19, 0.8684),
        "family": (82.99, 85.92, 84.43, 28.75, 56.48, 70.65, 34.58, 50.05, 3.90, 0.8258, 3.74, 0.8573),
        "both":   (86.67, 82.63, 84.60, 38.69, 67.38, 80.00, 35.92, 49.36, 4.01, 0.8206, 3.24, 0.8674),
    },
    "Average": {
        "couple": (86.76, 80.07, 82.60, 40.20, 66.88, 80.79, 30.54, 43.45, 4.05, 0.8217, 3.56, 0.8623),
        "family": (84.58, 81.88, 82.70, 41.23, 54.87, 69.28, 36.83, 50.56, 4.03, 0.8279, 3.76, 0.8487),
        "both":   (86.54, 80.25, 82.62, 40.45, 64.34, 78.35, 31.88, 44.96, 4.05, 0.8223, 3.58, 0.8610),
    },
}

TABLE11: dict[str, dict[str, dict[str, float]]] = {
    model: {scenario: dict(zip(TABLE5_COLUMNS, row)) for scenario, row in rows.items()}
    for model, rows in _TABLE11_ROWS.items()
}

# Cells where Table 11's "both" row is printed differently from Table 5: (model, column) -> (t5, t11).
TABLE5_TABLE11_DIFFERENCES: dict[tuple[str, str], tuple[float, float]] = {
    (model, column): (TABLE5[model][column], TABLE11[model]["both"][column])
    for model in TABLE5_MODELS
    for column in TABLE5_COLUMNS
    if TABLE5[model][column] != TABLE11[model]["both"][column]
}

# Consistency notes (checked against Table 6 counts): for STP, SSP, ER and VP each model's "both" cell is
# the instance-weighted mix of its couple and family cells, to rounding.  For RPP it is not: the "both"
# cells imply a family weight of about 0.218 instead of 525 / 2133 = 0.246 (MiniMax M2.5 about 0.257).
# The "Average" rows are plain means over the ten models, column by column (so the average ITP F1 is the
# mean of F1s, not the F1 of the mean precision and recall).

# --------------------------------------------------------------------------------------------------
# Appendix E.2: long-tail label distribution and per-label RPP accuracy (average over the ten models)
# --------------------------------------------------------------------------------------------------

# All numbers in percent.  "relation_share": share of relation-pattern instances for the labels the
# paper quotes; "top_strategies"/"top_strategies_share": the most frequent strategies and their joint
# share; "rpp_accuracy": average RPP accuracy per gold label, for the labels the paper quotes.
LABEL_SHARES: dict[str, dict] = {
    "couple": {
        "relation_share": {"pursue_withdraw": 38.7, "repair_softening": 27.0},
        # the two rarest patterns together account for less than this share
        "rarest_relations": ("mixed_transition", "withdraw_withdraw"),
        "rarest_relations_share_below": 10.0,
        "top_strategies": ("reframe", "evoke", "track", "goal_align"),
        "top_strategies_share": 77.4,
        "rpp_accuracy": {
            "pursue_withdraw": 77.38,
            "mixed_transition": 2.23,
            "repair_softening": 35.45,
        },
    },
    "family": {
        "relation_share": {"cooperative_family_alliance": 41.9},
        # number of relation-pattern labels whose share is under 10%
        "relations_below_10pct": 5,
        "top_strategies": ("reframe", "join", "counterbalance", "track", "boundary"),
        "top_strategies_share": 90.2,
        "rpp_accuracy": {
            "pursue_withdraw": 72.73,
            "cooperative_family_alliance": 54.24,
            "escalation_conflict": 14.73,
            "cross_generational_coalition": 17.25,
            "mutual_disengagement": 14.81,
            "mixed_transition": 1.59,
            "repair_softening": 48.46,
        },
    },
    # strategies the paper calls rare (both scenarios)
    "rare_strategies": ("repair", "enact", "safeguard"),
}

# --------------------------------------------------------------------------------------------------
# Table 12 (Appendix F): LLM-as-judge vs human 1-5 similarity scores on ER and VP predictions
# --------------------------------------------------------------------------------------------------

# exact_match / diff_1 / diff_2: number of samples whose judge and human scores differ by 0 / 1 / 2
# points (no larger gaps occurred); mae: mean absolute difference.
TABLE12_COLUMNS = ("task", "samples", "exact_match", "diff_1", "diff_2", "mae")

TABLE12: dict[str, dict[str, object]] = {
    "Annotator1": {"task": "VP", "samples": 50, "exact_match": 39, "diff_1": 10, "diff_2": 1, "mae": 0.24},
    "Annotator2": {"task": "VP", "samples": 50, "exact_match": 42, "diff_1": 8, "diff_2": 0, "mae": 0.16},
    "Annotator3": {"task": "ER", "samples": 50, "exact_match": 38, "diff_1": 9, "diff_2": 3, "mae": 0.30},
    "Annotator4": {"task": "ER", "samples": 50, "exact_match": 40, "diff_1": 8, "diff_2": 2, "mae": 0.24},
    "Total": {"task": "VP,ER", "samples": 200, "exact_match": 159, "diff_1": 35, "diff_2": 6, "mae": 0.235},
}
