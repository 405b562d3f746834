"""The paper's metrics on small examples worked out by hand (comments give the arithmetic)."""

import pytest

from rescue_train.scoring.metrics import aggregate, gold_rank, instance_scores, intensity_score, table5_row, task_labels


def rec(task, scenario, gold, prediction, status="ok", **scores):
    return {"task": task, "scenario": scenario, "gold": gold, "prediction": prediction, "parse_status": status,
            "scores": scores}


def itp_records():
    return [
        rec("itp", "couple", "yes", ["yes"]),            # TP
        rec("itp", "couple", "yes", ["no"]),             # FN
        rec("itp", "couple", "yes", [], "failed"),       # FN: an unparsed answer is not a yes
        rec("itp", "family", "no", ["yes"]),             # FP
        rec("itp", "family", "no", ["no"]),              # TN
    ]


def test_itp_precision_recall_f1_of_yes():
    both = aggregate("itp", itp_records())["both"]
    # P = 1/2, R = 1/3, F1 = 2PR/(P+R) = (1/3)/(5/6) = 0.4; accuracy 2/5; balanced (1/3 + 1/2)/2 = 5/12
    assert (both["tp"], both["fp"], both["fn"], both["tn"]) == (1, 1, 2, 1)
    assert both["precision"] == pytest.approx(0.5)
    assert both["recall"] == pytest.approx(1 / 3)
    assert both["f1"] == pytest.approx(0.4)
    assert both["accuracy"] == pytest.approx(0.4)
    assert both["balanced_accuracy"] == pytest.approx(5 / 12)
    assert (both["n"], both["parse_failures"]) == (5, 1)


def test_itp_per_scenario_scopes():
    result = aggregate("itp", itp_records())
    couple, family = result["couple"], result["family"]
    assert (couple["precision"], couple["f1"]) == (pytest.approx(1.0), pytest.approx(0.5))   # P 1/1, R 1/3
    assert couple["balanced_accuracy"] is None                                              # no gold "no"
    assert (family["precision"], family["recall"], family["f1"], family["accuracy"]) == (0.0, 0.0, 0.0, 0.5)


def test_ranking_recall_at_k_and_mrr_within_the_top_three():
    records = [
        rec("stp", "couple", "Ann", ["Ann", "Ben", "Couple"]),        # rank 1
        rec("stp", "couple", "Ann", ["Ben", "Ann"]),                  # rank 2
        rec("stp", "couple", "Ann", ["Ben", "Couple", "Cal", "Ann"]),  # 4th: outside the top 3 -> 0
        rec("stp", "couple", "Ann", [], "failed"),                     # no answer -> 0
    ]
    both = aggregate("stp", records)["both"]
    assert [both[f"recall@{k}"] for k in (1, 2, 3)] == [0.25, 0.5, 0.5]
    assert both["mrr"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)
    assert both["parse_failures"] == 1
    assert [gold_rank("Ann", r["prediction"]) for r in records] == [1, 2, 0, 0]
    assert instance_scores("stp", "Ann", ["Ben", "Ann"]) == {
        "rank": 2, "correct": 0.0, "mrr": 0.5, "recall@1": 0.0, "recall@2": 1.0, "recall@3": 1.0}


def test_rpp_accuracy_macro_f1_and_per_class():
    records = [
        rec("rpp", "couple", "pursue_withdraw", ["pursue_withdraw"]),
        rec("rpp", "couple", "pursue_withdraw", ["attack_attack"]),
        rec("rpp", "couple", "attack_attack", ["attack_attack", "pursue_withdraw"]),
        rec("rpp", "couple", "repair_softening", [], "failed"),
    ]
    space = {"couple": ("pursue_withdraw", "attack_attack", "withdraw_withdraw", "repair_softening")}
    couple = aggregate("rpp", records, space)["couple"]
    # pw: P 1/1 R 1/2 F1 2/3; aa: P 1/2 R 1/1 F1 2/3; rs: 0 -> macro-F1 4/9 over the labels present in gold
    assert couple["accuracy"] == 0.5
    assert couple["macro_f1"] == pytest.approx(4 / 9)
    assert couple["balanced_accuracy"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert list(couple["per_class"]) == ["pursue_withdraw", "attack_attack", "repair_softening"]
    assert couple["per_class"]["attack_attack"] == {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3),
                                                    "support": 1}
    assert couple["recall@2"] == 0.5   # rows 1 and 3 find the gold within two


def test_er_intensity_match_and_combined_score():
    assert [intensity_score(p, 7) for p in (7, 6, 3, 11, None)] == [5, 4, 1, 1, 1]   # max(1, 5 - |d|)
    gold = {"emotion": "feels hurt", "intensity": 7}
    ok, unread = {"judge_status": "ok", "judge_scale": "1-5"}, {"judge_status": "failed", "judge_scale": "1-5"}
    records = [
        rec("er", "couple", gold, {"emotion": "hurt", "intensity": 7}, judge_score=5, bertscore_f1=0.9, **ok),
        rec("er", "couple", gold, {"emotion": "calm", "intensity": 3}, judge_score=2, bertscore_f1=0.5, **ok),
        # an unreadable verdict: S_emo 1; S_int is the formula on the intensities whatever the judge said
        # (|9 - 7| = 2 -> 3); BERTScore needs no judge and stays
        rec("er", "family", gold, {"emotion": "sad", "intensity": 9}, judge_score=None, bertscore_f1=0.7, **unread),
        # a failed answer that half parsed: S_int 1 (not 5), S_emo 1 (not judged), BERTScore 0 (not 0.8)
        rec("er", "family", gold, {"emotion": "feels hurt", "intensity": 7}, "failed", judge_score=1,
            judge_status="not judged: the prediction did not parse", judge_scale="1-5", bertscore_f1=0.8),
    ]
    both = aggregate("er", records)["both"]
    assert both["s_int"] == pytest.approx((5 + 1 + 3 + 1) / 4)
    assert both["s_emo"] == pytest.approx((5 + 2 + 1 + 1) / 4)
    assert both["s_er"] == pytest.approx(((5 + 5) / 2 + (2 + 1) / 2 + (1 + 3) / 2 + (1 + 1) / 2) / 4)
    assert both["s_er"] == pytest.approx((both["s_emo"] + both["s_int"]) / 2)   # one instance set
    assert both["judge"] == both["s_er"] and (both["judged"], both["judge_failures"]) == (2, 1)
    assert both["bertscore_f1"] == pytest.approx((0.9 + 0.5 + 0.7 + 0.0) / 4)
    assert both["judge_on_failure"] == "floor"
    assert aggregate("er", records[:2] + [rec("er", "couple", gold, {"emotion": "x", "intensity": 7})])["both"][
        "s_emo"] is None   # an instance without a verdict: no S_emo rather than one over fewer instances
    # exclude: the unreadable verdict leaves S_emo and S_ER; S_int (no judge in it) and BERTScore keep it
    excluded = aggregate("er", records, judge_on_failure="exclude")["both"]
    assert excluded["s_emo"] == pytest.approx((5 + 2 + 1) / 3)
    assert excluded["s_er"] == pytest.approx(((5 + 5) / 2 + (2 + 1) / 2 + (1 + 1) / 2) / 3)
    assert excluded["s_int"] == both["s_int"] and excluded["bertscore_f1"] == both["bertscore_f1"]
    assert (excluded["judged"], excluded["judge_failures"], excluded["judge_on_failure"]) == (2, 1, "exclude")
    only_unread = aggregate("er", records[2:3], judge_on_failure="exclude")["both"]
    assert (only_unread["s_emo"], only_unread["s_er"], only_unread["s_int"]) == (None, None, 3.0)
    with pytest.raises(ValueError, match="judge.on_failure must be one of floor, exclude, got 'skip'"):
        aggregate("er", records, judge_on_failure="skip")


def test_vp_unreadable_verdict_scores_the_bottom_of_the_scale_or_leaves_the_mean():
    gold = [{"source": "A", "target": "B", "viewpoint": "x"}]
    records = [rec("vp", "couple", gold, gold, judge_score=4, judge_status="ok", judge_scale="0-6"),
               rec("vp", "couple", gold, gold, judge_score=None, judge_status="failed", judge_scale="0-6")]
    both = aggregate("vp", records)["both"]
    assert (both["judge"], both["judge_failures"], both["judged"]) == ((4 + 0) / 2, 1, 1)
    excluded = aggregate("vp", records, judge_on_failure="exclude")["both"]
    assert (excluded["judge"], excluded["judge_failures"], excluded["n"]) == (4, 1, 2)


def test_table5_row_uses_the_papers_units():
    aggregates = {"itp": aggregate("itp", itp_records()),
                  "stp": aggregate("stp", [rec("stp", "couple", "Ann", ["Ben", "Ann"])])}
    row = table5_row(aggregates, "both")
    assert row["itp_precision"] == pytest.approx(50.0) and row["itp_f1"] == pytest.approx(40.0)
    assert (row["stp_recall"], row["stp_mrr"]) == (0.0, 50.0)
    assert row["rpp_accuracy"] is None and row["er_llm"] is None
    assert "family" not in aggregates["stp"]           # scopes without instances are left out
    assert table5_row(aggregates, "family")["stp_mrr"] is None


def test_task_labels_are_the_fixed_label_sets():
    assert task_labels("itp") == {"couple": ("yes", "no"), "family": ("yes", "no")}
    assert len(task_labels("rpp")["couple"]) == 6 and len(task_labels("rpp")["family"]) == 8
    assert len(task_labels("ssp")["couple"]) == 10 and "evoke" not in task_labels("ssp")["family"]
    assert task_labels("stp") is None and task_labels("er") is None


def test_tail_metrics_and_the_label_collapse_line():
    gold = ["a", "a", "a", "b", "b", "c"]
    # few: the rarest classes holding at most a third (2 of 6): c (1); b would make 3 > 2
    collapsed = aggregate("rpp", [rec("rpp", "couple", g, [p]) for g, p in zip(gold, "aaaaaa")])["both"]
    assert (collapsed["few_classes"], collapsed["few_recall"]) == (["c"], 0.0)
    assert (collapsed["predicted_labels"], collapsed["gold_labels"], collapsed["prediction_entropy"]) == (1, 3, 0.0)
    # recall a 2/3, b 1/2, c 1/1: balanced (2/3 + 1/2 + 1)/3; predicted a, b, c twice each: entropy log2 3
    spread = aggregate("rpp", [rec("rpp", "couple", g, [p]) for g, p in zip(gold, "abacbc")])["both"]
    assert (spread["few_recall"], spread["predicted_labels"]) == (1.0, 3)
    assert spread["prediction_entropy"] == pytest.approx(1.5849625)
    assert spread["balanced_accuracy"] == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    # ITP: macro-F1 of yes and no; few is the rarer gold class (no: 2 of 5 > 5/3, yet the rarest is always in)
    itp = aggregate("itp", itp_records())["both"]
    assert itp["few_classes"] == ["no"] and itp["few_recall"] == 0.5
    # F1 of yes 0.4 (above); of no: P 1/2 (one of the two "no" answers), R 1/2, F1 1/2
    assert itp["macro_f1"] == pytest.approx((0.4 + 0.5) / 2)
