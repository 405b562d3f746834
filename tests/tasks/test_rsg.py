"""RSG, the therapist's next turn: instances, prompts and parsing on a hand-made sample, its metrics, judge
checks and baselines on hand-worked values, and the real fixtures (gold turns; no prompt holds its gold)."""

from __future__ import annotations

import json

import pytest
from factory import row, sample, strategy
from test_judge import Scripted

from rescue_train.data import load_samples, taxonomy
from rescue_train.tasks import BuildOptions
from rescue_train.scoring.judge import Judge
from rescue_train.scoring.metrics import aggregate, distinct_n, table5_row
from rescue_train.tasks import TASKS, build, render
from rescue_train.tasks.answers import word_count
from rescue_train.tasks.rsg import JUDGE_SYSTEM

T = "Therapist"
RSG = TASKS["rsg"]
EVOKE = taxonomy.get_label("strategy", "couple", "evoke").definition


def couple():
    return sample("c1/001", [
        row(T, ["Ann", "Ben"], "Welcome back, what brings you both here today?"),  # 1: no row before it
        row("Ann", [T], "He never listens to me when I talk."),
        row(T, ["Ann"], "Mm, okay.", support_strategy=[strategy(["Ann"], "track")]),  # 3: two words
        row("Ben", [T], "That is not fair, I do listen."),
        row(T, ["Ben"], "  Ben, what happens inside you when she says that?  ",  # 5: kept, spaces and all
            support_strategy=[strategy(["Ben"], "evoke")]),
        row("Ann", ["Ben"], "You always go quiet."),
        row(T, ["Ann", "Ben"], "Let us slow down and look at this cycle together."),  # 7: no strategy item
        row("Couple", [T], "We both want that, we really do."),
        row(T, ["Couple"], "So you both want to feel close again, right now.",  # 9: the whole couple
            support_strategy=[strategy(["Couple"], "goal_align")]),
        row(T, [], "And that matters a great deal to me too.",  # 10: no target anywhere
            support_strategy=[strategy([], "track")]),
        row(T, ["Ann"], "Ann, tell him what you need from him.",  # 11: strategy outside the taxonomy
            support_strategy=[strategy(["Ann"], "made_up")]),
    ])


def rsg(samples, **options):
    return build("rsg", samples, BuildOptions(**options), units={s.sample_id: s.sample_id for s in samples})


def rows_and_exclusions(result):
    return [i.row_index for i in result.instances], dict(result.excluded)


FIRST, SHORT = ("couple", "no row before the therapist turn"), ("couple", "fewer than 5 words")


def test_instances_per_condition_with_counted_exclusions():
    assert rows_and_exclusions(rsg([couple()])) == ([5, 7, 9, 10, 11], {FIRST: 1, SHORT: 1})
    assert rows_and_exclusions(rsg([couple()], rsg_condition="target")) == ([5, 9, 11], {
        FIRST: 1, SHORT: 1, ("couple", "therapist row without a support_strategy item"): 1,
        ("couple", "no target in the strategy item or the row"): 1})
    assert rows_and_exclusions(rsg([couple()], rsg_condition="target_strategy")) == ([5, 9], {
        FIRST: 1, SHORT: 1, ("couple", "therapist row without a support_strategy item"): 1,
        ("couple", "no target in the strategy item or the row"): 1,
        ("couple", "strategy outside the couple taxonomy: made_up"): 1})
    # Three words is enough at rsg_min_words=2; rows 1..3 then differ only by having a row before them.
    assert rows_and_exclusions(rsg([couple()], rsg_min_words=2))[0] == [3, 5, 7, 9, 10, 11]
    # At most 2 evenly spaced turns of the five: positions round(0) and round(4), the first and the last.
    assert rows_and_exclusions(rsg([couple()], rsg_per_sample=2)) == ([5, 11], {
        FIRST: 1, SHORT: 1, ("couple", "not among the evenly spaced turns"): 3})


def test_gold_is_the_stored_utterance_and_inputs_follow_the_condition():
    by_row = {i.row_index: i for i in rsg([couple()], rsg_condition="target_strategy").instances}
    five, nine = by_row[5], by_row[9]
    assert five.gold == "  Ben, what happens inside you when she says that?  "
    assert tuple(five.context) == (1, 2, 3, 4) and five.current is None and five.id == "c1/001::rsg::row5"
    assert dict(five.given) == {"condition": "target_strategy", "targets": ("Ben",), "strategy": "evoke",
                                "strategy_definition": EVOKE}
    assert tuple(nine.context) == (4, 5, 6, 7, 8)
    user = render(nine)[1]["content"]
    assert "The turn addresses the whole couple (Couple).\nIts main strategy is goal_align: " in user
    assert "So you both want to feel close" not in user and "row 9" in user
    prompt = render(five)[1]["content"]
    assert f"The turn addresses Ben.\nIts main strategy is evoke: {EVOKE}" in prompt
    assert "what happens inside you" not in prompt
    plain = render(rsg([couple()]).instances[0])[1]["content"]
    assert "addresses" not in plain and "strategy" not in plain and "what happens inside you" not in plain
    assert render(nine, fmt="json")[1]["content"].endswith('Answer with JSON only: {"response": "<the therapist\'s words>"}')
    assert len(rsg([couple()], context=-1).instances[-1].context) == 10


def test_answers_round_trip_and_parse_failures():
    inst = rsg([couple()]).instances[0]
    assert RSG.answer(inst, "label") == inst.gold
    assert RSG.parse(inst, RSG.answer(inst, "json"), "json").value == inst.gold.strip()
    assert RSG.parse(inst, "Therapist: Ben, say more.\n", "label").value == "Ben, say more."
    for text, fmt in (("\n\n\n", "label"), ("Ben, say more.", "json"), ('{"response": "  "}', "json")):
        assert RSG.parse(inst, text, fmt).status == "failed"
    assert RSG.answer_schema(inst, "label") is None
    assert RSG.answer_schema(inst, "json")["json"]["required"] == ["response"]
    assert RSG.bertscore_texts(" The turn. ", " Hi there ") == ("Hi there", "The turn.")


def test_distinct_n_counts_unique_ngrams_over_all_outputs():
    # words a b a | a b: five unigrams, two distinct; bigrams (a,b) (b,a) | (a,b): three, two distinct
    assert distinct_n(["a b a", "A, b"], 1) == pytest.approx(2 / 5)
    assert distinct_n(["a b a", "A, b"], 2) == pytest.approx(2 / 3)
    assert distinct_n(["", "one"], 2) is None


def verdicts(**scores):
    """Score keys as the judge writes them: <check>_score, <check>_status and <check>_scale."""
    out = {}
    for check, value in scores.items():
        out.update({f"{check}_score": value, f"{check}_status": "ok",
                    f"{check}_scale": "0-1" if "adherence" in check else "1-5"})
    return out


def test_aggregate_scores_the_model_and_the_real_turns_alike():
    records = [
        {"task": "rsg", "scenario": "couple", "gold": "Ben, what happens now?", "parse_status": "ok",
         "prediction": "I hear you, I hear you",
         "scores": {"bertscore_f1": 0.8, **verdicts(judge=4, adherence=1, human_judge=5, human_adherence=1)}},
        {"task": "rsg", "scenario": "family", "gold": "Say more", "parse_status": "failed", "prediction": "",
         "scores": {"bertscore_f1": 0.0, **verdicts(judge=1, adherence=0, human_judge=3, human_adherence=1)}},
    ]
    both = aggregate("rsg", records)["both"]
    # length and distinct-n over the answered turn only (the failed one is counted in parse_failures):
    # 6 words; unigrams i hear you i hear you (3 of 6 distinct), bigrams 3 of 5 distinct; the real turn at the
    # same row: "Ben, what happens now?", 4 words, all distinct
    expected = {"bertscore_f1": pytest.approx(0.4), "judge": 2.5, "judged": 2, "adherence": 0.5,
                "length_words": 6.0, "distinct_1": 0.5, "distinct_2": pytest.approx(0.6),
                "judge_failures": 0, "adherence_failures": 0, "judge_on_failure": "floor",
                "human": {"bertscore_f1": 1.0, "judge": 4.0, "adherence": 1.0, "length_words": 4.0,
                          "distinct_1": 1.0, "distinct_2": 1.0, "judge_failures": 0, "adherence_failures": 0},
                "n": 2, "parse_failures": 1}
    assert {key: both[key] for key in expected} == expected
    # unreadable verdicts, each check on its own: floored (1 and 0) or left out of that check's mean
    records[0]["scores"].update(human_judge_score=None, human_judge_status="failed", adherence_score=None,
                                adherence_status="failed")
    floor = aggregate("rsg", records)["both"]
    assert (floor["adherence"], floor["adherence_failures"], floor["judge"]) == (0.0, 1, 2.5)
    assert (floor["human"]["judge"], floor["human"]["judge_failures"]) == ((1 + 3) / 2, 1)
    excluded = aggregate("rsg", records, judge_on_failure="exclude")["both"]
    assert (excluded["adherence"], excluded["judge"], excluded["human"]["judge"]) == (0.0, 2.5, 3.0)
    assert excluded["human"]["adherence"] == 1.0 and excluded["judge_on_failure"] == "exclude"
    records[0]["scores"].update(verdicts(human_judge=5, adherence=1))
    assert aggregate("rsg", records)["family"]["judge"] == 1.0
    row = table5_row({"rsg": aggregate("rsg", records)}, "both")
    assert (row["rsg_llm"], row["rsg_adherence"], row["rsg_words"], row["rsg_unanswered"]) == (2.5, 50.0, 6.0, 1)
    human = table5_row({"rsg": aggregate("rsg", records)}, "both", source="human")
    assert (human["rsg_llm"], human["rsg_bert"], human["rsg_adherence"], human["rsg_unanswered"]) == (
        4.0, 1.0, 100.0, None)


def test_judge_grades_generated_and_real_turns_blind_and_checks_adherence():
    five, nine = rsg([couple()], rsg_condition="target_strategy").instances
    records = [
        {"id": five.id, "task": "rsg", "gold": five.gold, "prediction": "Ben, what do you feel?", "parse_status": "ok"},
        {"id": nine.id, "task": "rsg", "gold": nine.gold, "prediction": "", "parse_status": "failed"},
    ]
    backend = Scripted(['{"score": 4, "reason": "fits"}', '{"adheres": 1}', '{"score": 5}', '{"adheres": 1}',
                        '{"score": 3}', '{"adheres": 2}'])
    first, second = Judge(backend, model="j").judge(records, {five.id: five, nine.id: nine})
    assert (first["judge_score"], first["adherence_score"], first["human_judge_score"],
            first["human_adherence_score"]) == (4, 1, 5, 1)
    assert first["judge_scale"] == "1-5" and first["adherence_scale"] == "0-1" and first["judge_reason"] == "fits"
    # the unparsed prediction gets each scale's floor without a call; the real turn is still judged
    assert (second["judge_score"], second["adherence_score"], second["human_judge_score"]) == (1, 0, 3)
    assert second["human_adherence_score"] is None and second["human_adherence_status"] == "failed"
    assert len(backend.prompts) == 6
    judged_prediction = backend.prompts[0][1]["content"]
    assert 'Candidate next therapist turn: "Ben, what do you feel?"' in judged_prediction
    assert f"Its main strategy is evoke: {EVOKE}" in judged_prediction
    assert "what happens inside you" not in judged_prediction  # the real turn is not shown beside it
    assert 'Candidate next therapist turn: "  Ben, what happens inside you' in backend.prompts[2][1]["content"]
    assert '"adheres"' in backend.prompts[1][1]["content"] and '"adheres"' not in judged_prediction
    # RSG's own system message: no reference answer, unlike ER's and VP's
    assert {p[0]["content"] for p in backend.prompts} == {JUDGE_SYSTEM} and "no reference answer" in JUDGE_SYSTEM
    # the judge reads every row before the turn, though the model saw only the last five (rows 4-8 for row 9)
    real_nine = backend.prompts[4][1]["content"]
    assert "Conversation so far (rows 1-8):\n[1] Therapist -> Ann, Ben: Welcome back" in real_nine
    assert "Conversation so far (rows 4-8):" in render(nine)[1]["content"]
    assert "Welcome back" not in render(nine)[1]["content"]


def test_baselines_repeat_generic_and_retrieve_from_training_units_only():
    from rescue_train.baselines.registry import BASELINES
    from rescue_train.baselines.support import GENERIC_REPLY

    train = sample("t1/001", [
        row("Ann", [T], "I feel so alone in this marriage, every single day."),
        row(T, ["Ann"], "Alone. Tell me more about that alone feeling."),
        row("Ben", [T], "Money is the whole problem, the bills and the money."),
        row(T, ["Ben"], "Let us look at what the money fights are about."),
    ])
    built = rsg([couple(), train], context=1)
    test = [i for i in built.instances if i.sample_id == "c1/001"]
    fitted = {name: BASELINES[name]("rsg").fit([i for i in built.instances if i.sample_id == "t1/001"])
              for name in ("repeat_client", "generic_reply", "tfidf_retrieval")}
    # shown rows (context=1): 4 Ben, 6 Ann, 8 the couple together, 9 and 10 the therapist
    assert fitted["repeat_client"].predict(test) == ["That is not fair, I do listen.", "You always go quiet.", "",
                                                     "", ""]
    assert fitted["generic_reply"].predict(test) == [GENERIC_REPLY] * 5
    money = sample("c2/001", [row("Ann", [T], "We fight about money and the bills."),
                              row(T, ["Ann"], "What happens when the money comes up?")])
    (inst,) = rsg([money], context=1).instances
    assert fitted["tfidf_retrieval"].predict([inst]) == ["Let us look at what the money fights are about."]
    assert not BASELINES["majority"].covers("rsg") and BASELINES["tfidf_retrieval"].covers("rsg")


@pytest.mark.fixtures
def test_real_fixtures_gold_turns_and_no_prompt_holds_its_gold(real_fixtures):
    files = [real_fixtures / "real" / "four_samples.jsonl", real_fixtures / "real" / "more_samples.jsonl"]
    samples = [s for f in files for s in load_samples(f)]
    stored = {(d["sample_id"], r["row_index"]): r for f in files for line in f.read_text().splitlines()
              if line.strip() for d in [json.loads(line)] for r in d["rows"]}
    for condition in ("none", "target_strategy"):
        result = build("rsg", samples, BuildOptions(rsg_condition=condition))
        assert result.instances
        for inst in result.instances:
            raw = stored[(inst.sample_id, inst.row_index)]
            assert raw["primary_speaker"] == T and inst.gold == raw["dialogue_cleaned"]
            assert word_count(inst.gold) >= 5 and inst.context and inst.current is None
            for mode in ("dialogue", "audiovisual"):
                for fmt in ("label", "json"):
                    assert inst.gold.strip() not in "\n".join(m["content"] for m in render(inst, mode, fmt))
        therapist_turns = sum(r["primary_speaker"] == T for r in stored.values())
        assert len(result.instances) + sum(result.excluded.values()) == therapist_turns
