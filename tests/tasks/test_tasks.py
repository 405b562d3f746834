"""Each construction rule on hand-made samples; expected instances worked out by hand in the comments."""

from collections import Counter

import pytest
from factory import emotion, row, sample, strategy, viewpoint

from rescue_train.tasks import BuildOptions
from rescue_train.tasks import TASKS, build, render
from rescue_train.tasks.task import evenly_spaced, window

T = "Therapist"
SIX_WORDS = "I just feel so alone here."


def by_row(result):
    return {i.row_index: i for i in result.instances}


# ---------------------------------------------------------------- even spacing (reference rules)

@pytest.mark.parametrize("n, limit, expected", [
    (6, 3, [0, 2, 5]),        # round(2.5) = 2: half to even, not 3
    (8, 3, [0, 4, 7]),        # round(3.5) = 4
    (7, 5, [0, 2, 3, 4, 6]),  # 0, round(1.5)=2, 3, round(4.5)=4, 6
    (4, 5, [0, 1, 2, 3]),     # fewer than the limit: all kept
    (3, 0, [0, 1, 2]),        # no limit
])
def test_evenly_spaced_matches_reference_rounding(n, limit, expected):
    assert evenly_spaced(list(range(n)), limit, single="first") == expected


def test_evenly_spaced_single_pick_is_middle_for_itp_and_first_for_checkpoints():
    assert evenly_spaced([10, 11, 12, 13], 1, single="middle") == [12]   # items[4 // 2]
    assert evenly_spaced([10, 11, 12, 13, 14], 1, single="middle") == [12]
    assert evenly_spaced([10, 11, 12, 13], 1, single="first") == [10]


def test_window_sizes():
    assert tuple(window(7, 0)) == ()
    assert tuple(window(7, -1)) == (1, 2, 3, 4, 5, 6)
    assert tuple(window(7, 3)) == (4, 5, 6)
    assert tuple(window(2, 5)) == (1,)


# ---------------------------------------------------------------- ITP

def itp_sample():
    # rows:     1  2  3  4  5  6  7  8  9  10
    speakers = ["Ann", "Ben", T, "Ann", "Ann", T, "Ben", "Ann", "Ben", T]
    return sample("ann_and_ben/001", [row(s, ["Ben" if s == "Ann" else "Ann"]) for s in speakers])


def test_itp_positives_negatives_and_balancing():
    # positives (therapist row after a client row) -> decision rows 2, 5, 9
    # negatives (client row followed by a client row) -> decision rows 1, 4, 7, 8
    # balance to 3: negatives picked at round(i*3/2) = 0, 2, 3 -> rows 1, 7, 8
    result = build("itp", [itp_sample()])
    assert [(i.row_index, i.gold) for i in result.instances] == [
        (1, "no"), (2, "yes"), (5, "yes"), (7, "no"), (8, "no"), (9, "yes")]
    assert result.excluded == Counter({("couple", "balanced away (no)"): 1, ("couple", "balanced away (yes)"): 0})


def test_itp_cap_thins_each_class_first():
    # cap 2: positives [2,5,9] -> rows 2, 9; negatives [1,4,7,8] -> round(i*3) = 0, 3 -> rows 1, 8
    result = build("itp", [itp_sample()], BuildOptions(itp_cap_per_class=2))
    assert [(i.row_index, i.gold) for i in result.instances] == [(1, "no"), (2, "yes"), (8, "no"), (9, "yes")]
    assert result.excluded[("couple", "above the per-class cap")] == 3


def test_itp_sample_without_negatives_contributes_nothing():
    s = sample("ann_and_ben/002", [row("Ann"), row(T), row("Ben"), row(T)])
    result = build("itp", [s])
    assert result.instances == []
    assert result.excluded[("couple", "sample lacks one of the classes")] == 2


def test_itp_context_counts_the_decision_row_and_hides_nothing_label_related():
    result = build("itp", [itp_sample()])
    inst = by_row(result)[5]
    assert (tuple(inst.context), inst.current) == ((3, 4), 5)   # k=3: rows 3, 4 and the decision row 5
    assert by_row(build("itp", [itp_sample()], BuildOptions(context=-1)))[5].context == range(1, 5)
    assert by_row(build("itp", [itp_sample()], BuildOptions(context=0)))[5].context == range(5, 5)
    for inst in result.instances:
        text = inst.id + "".join(m["content"] for m in render(inst))
        assert "pos" not in inst.id and "neg" not in inst.id
        assert f"[{inst.row_index + 1}]" not in text   # the next row (the therapist's or not) is never shown


def test_itp_prompts_of_yes_and_no_instances_share_the_same_template():
    result = build("itp", [itp_sample()])
    yes, no = by_row(result)[2], by_row(result)[1]
    strip = lambda inst: render(inst)[1]["content"].split("Current turn:")[1].split("\n", 2)[2]  # noqa: E731
    assert strip(yes) == strip(no)


# ---------------------------------------------------------------- RPP

def rpp_couple():
    return sample("ann_and_ben/003", [
        row("Ann", relation_pattern=None),                       # 1
        row("Ben", relation_pattern="attack_attack"),            # 2 copy of row 3's state
        row(T, relation_cycle_state="attack_attack"),            # 3
        row("Ann", relation_pattern=""),                         # 4 copy of row 5's empty state
        row(T, relation_cycle_state=""),                         # 5 no clear pattern
        row("Ben"),                                              # 6
        row(T, relation_cycle_state="pursue_withdraw"),          # 7
        row("Ann"),                                              # 8
        row(T, relation_cycle_state="not_a_label"),              # 9
        row(T, relation_pattern=None),                           # 10 not annotated
    ])


def rpp_family():
    return sample("family_therapy/001/merged", [
        row(T, ["Family"], relation_cycle_state="", relation_pattern="cross_generational_coalition"),  # 1
        row("Mia", ["Joe"], relation_cycle_state="", relation_pattern=None),                           # 2
        row(T, ["Mia"], relation_cycle_state="cooperative_family_alliance",
            relation_pattern="cooperative_family_alliance"),                                           # 3
        row(T, ["Joe"], relation_pattern="pursue_withdraw"),                                           # 4
    ], scenario="family", participants=["Mia", "Joe", "Kim"])


@pytest.mark.parametrize("definition, couple_rows, family_rows", [
    ("D", [3, 7], [1, 3, 4]),
    ("A", [3, 7], [3]),
    ("B", [3, 7], [3]),
    ("C", [2], [1, 3, 4]),
    ("BC", [2, 3, 7], [1, 3, 4]),
])
def test_rpp_definitions(definition, couple_rows, family_rows):
    result = build("rpp", [rpp_couple(), rpp_family()], BuildOptions(rpp_definition=definition))
    got = {sc: [i.row_index for i in result.instances if i.scenario == sc] for sc in ("couple", "family")}
    assert got == {"couple": couple_rows, "family": family_rows}


def test_rpp_default_gold_exclusions_and_context():
    result = build("rpp", [rpp_couple(), rpp_family()])
    assert [(i.sample_id[:3], i.row_index, i.gold) for i in result.instances] == [
        ("ann", 3, "attack_attack"), ("ann", 7, "pursue_withdraw"),
        ("fam", 1, "cross_generational_coalition"), ("fam", 3, "cooperative_family_alliance"),
        ("fam", 4, "pursue_withdraw")]
    assert result.excluded == Counter({
        ("couple", "label on a non-therapist row (definition D uses therapist rows)"): 1,   # row 2
        ("couple", "empty label (annotators saw no clear pattern)"): 1,                     # row 5
        ("couple", "label outside the couple taxonomy: not_a_label"): 1,                    # row 9
    })
    inst = by_row(result)[7]
    assert (tuple(inst.context), inst.current) == ((1, 2, 3, 4, 5, 6), None)
    assert "[7]" not in render(inst)[1]["content"]
    shown = by_row(build("rpp", [rpp_couple()], BuildOptions(rpp_include_current=True)))[7]
    assert shown.current == 7 and "[7] Therapist" in render(shown)[1]["content"]
    assert inst.candidates[:2] == ("pursue_withdraw", "attack_attack") and len(inst.candidates) == 6
    assert len(by_row(result)[4].candidates) == 8


# ---------------------------------------------------------------- STP / SSP

def support_couple():
    return sample("ann_and_ben/004", [
        row("Ann", ["Ben"], internal_emotion=[emotion("Ann", "feels hurt", 7)]),                   # 1
        row(T, ["Ann"], support_strategy=[strategy(["Ann"], "evoke")]),                             # 2 -> Ann
        row("Ben", [T], internal_emotion=[emotion("Ben", "feels unheard", 6)]),                     # 3
        row(T, ["Ann", "Ben"], support_strategy=[strategy(["Ann", "Ben"], "reframe")]),             # 4 -> Couple
        row(T, ["Ben"]),                                                                            # 5 no item
        row(T, ["Ann"], support_strategy=[strategy([], "track")]),                                  # 6 row target
        row(T, ["Couple"], support_strategy=[strategy(["Couple"], "join")]),                        # 7 -> Couple
        row(T, ["Ann"], support_strategy=[strategy(["Ann"], "")]),                                  # 8 no strategy
        row(T, ["Zed"], support_strategy=[strategy(["Zed"], "track")]),                             # 9 not present
        row(T, ["Ann"], support_strategy=[strategy(["Ann", T], "boundary"), strategy(["Ben"], "evoke")]),  # 10
        row(T, [], support_strategy=[strategy([], "track")]),                                       # 11 no target
    ])


def support_family():
    return sample("family_therapy/002/merged", [
        row("Mia", ["Joe"]),
        row(T, ["Mia", "Joe"], support_strategy=[strategy(["Mia", "Joe"], "boundary")]),
        row(T, ["Joe", "Mia", "Kim"], support_strategy=[strategy(["Kim", "Joe", "Mia"], "join")]),
    ], scenario="family", participants=["Mia", "Joe", "Kim"])


def test_stp_targets_collapse_and_exclusions():
    result = build("stp", [support_couple()])
    assert [(i.row_index, i.gold, i.given_value("target_source")) for i in result.instances] == [
        (2, "Ann", "strategy"), (4, "Couple", "strategy"), (6, "Ann", "row"), (7, "Couple", "strategy"),
        (10, "Ann", "strategy")]
    assert result.excluded == Counter({
        ("couple", "therapist row without a support_strategy item"): 1,
        ("couple", "first strategy item has an empty strategy_type"): 1,
        ("couple", "target is not a participant of the sample"): 1,
        ("couple", "no target in the strategy item or the row"): 1,
    })
    assert result.instances[0].candidates == ("Ann", "Ben", "Couple")
    assert tuple(result.instances[0].context) == (1,) and result.instances[0].current is None


def test_stp_exact_sets_keep_pairs_and_add_observed_subsets():
    collapse = build("stp", [support_family()])
    assert [i.gold for i in collapse.instances] == ["Family", "Family"]
    assert collapse.instances[0].candidates == ("Mia", "Joe", "Kim", "Family")
    exact = build("stp", [support_family()], BuildOptions(stp_targets="set"))
    assert [i.gold for i in exact.instances] == ["Mia & Joe", "Family"]   # all three people = the group
    assert exact.instances[0].candidates == ("Mia", "Joe", "Kim", "Family", "Mia & Joe")


def test_ssp_strategy_in_taxonomy_known_target_and_optional_emotion():
    result = build("ssp", [support_couple()], BuildOptions(ssp_target_emotion=True))
    assert [(i.row_index, i.gold, i.given_value("target")) for i in result.instances] == [
        (2, "evoke", "Ann"), (4, "reframe", "Couple"), (6, "track", "Ann"), (7, "join", "Couple")]
    assert result.excluded[("couple", "strategy outside the couple taxonomy: boundary")] == 1
    emotions = {i.row_index: i.given_value("target_emotion") for i in result.instances}
    assert emotions[2] == "Ann: feels hurt (intensity 7/10)"          # row 1, inside the window (1,)
    assert emotions[4] == "Ben: feels unheard (intensity 6/10)"       # group target: any participant, row 3
    assert emotions[7] == ""                                          # window rows 4-6 annotate no emotion
    text = render(result.instances[0])[1]["content"]
    assert "will support Ann" in text and "feels hurt (intensity 7/10)" in text
    assert "evoke" in result.instances[0].candidates and len(result.instances[0].candidates) == 10


# ---------------------------------------------------------------- ER

def er_sample():
    return sample("ann_and_ben/005", [
        row("Ann", dialogue=SIX_WORDS, internal_emotion=[emotion("Ann", "lonely", 5)]),              # 1 early
        row(T, dialogue=SIX_WORDS, internal_emotion=[emotion("Ann", "guarded", 4)]),                 # 2 therapist
        row("Ben", dialogue=SIX_WORDS, internal_emotion=[emotion("Ben", "tense", 6)]),               # 3 early
        row("Ann", dialogue="Yes.", internal_emotion=[emotion("Ann", "resigned", 4)]),               # 4 1 word
        row("Ben", dialogue=SIX_WORDS, internal_emotion=[emotion("Ann", "hurt", 6)]),                # 5 not Ben's
        row("Ann", dialogue=SIX_WORDS, internal_emotion=[emotion("Ann", "furious", 11)]),            # 6 > 10
        row("Ben", dialogue=SIX_WORDS, internal_emotion=[emotion("Ben", "ashamed", 6.6)]),           # 7 -> 7
        row("Ann", dialogue=SIX_WORDS, internal_emotion=[emotion("Ann", "hopeful", "3")]),           # 8
        row("Couple", dialogue=SIX_WORDS, internal_emotion=[emotion("Couple", "relieved", 3)]),      # 9 group
        row("Ben", dialogue=SIX_WORDS, internal_emotion=[emotion("Ben", "", 8), emotion("Ben", "sad", 2),
                                                         emotion("Ben", "angry", 9)]),               # 10
    ])


def test_er_rules():
    # N = 10: rows 1..ceil(3.0) = 1..3 discarded; candidates 7, 8, 10; the first valid speaker item is gold
    result = build("er", [er_sample()])
    assert [(i.row_index, i.gold) for i in result.instances] == [
        (7, {"emotion": "ashamed", "intensity": 7}), (8, {"emotion": "hopeful", "intensity": 3}),
        (10, {"emotion": "sad", "intensity": 2})]
    assert result.excluded == Counter({
        ("couple", "in the first 30% of rows"): 2,                       # rows 1, 3
        ("couple", "fewer than 5 words"): 1,                             # row 4
        ("couple", "no emotion item for the speaker"): 1,                # row 5
        ("couple", "speaker's intensity missing or outside 0-10"): 1,    # row 6
        ("couple", "not among the evenly spaced checkpoints"): 0,
    })
    inst = result.instances[0]
    assert (tuple(inst.context), inst.current, inst.given_value("speaker")) == ((4, 5, 6), 7, "Ben")
    assert by_row(build("er", [er_sample()], BuildOptions(context=-1)))[7].context == range(1, 7)


def test_er_keeps_five_evenly_spaced_checkpoints():
    rows = [row("Ann", dialogue=SIX_WORDS)] * 3 + [
        row("Ann" if i % 2 else "Ben", dialogue=SIX_WORDS,
            internal_emotion=[emotion("Ann" if i % 2 else "Ben", f"feeling {i}", i)]) for i in range(7)]
    # N = 10: rows 1-3 discarded; candidates rows 4..10 (7 items) -> positions 0, 2, 3, 4, 6 -> rows 4, 6, 7, 8, 10
    result = build("er", [sample("ann_and_ben/006", rows)])
    assert [i.row_index for i in result.instances] == [4, 6, 7, 8, 10]
    assert result.excluded[("couple", "not among the evenly spaced checkpoints")] == 2


# ---------------------------------------------------------------- VP

def test_vp_rules():
    s = sample("ann_and_ben/007", [
        row("Ann", ["Ben"], viewpoints_attitudes=[viewpoint("Ann", "Ben", "he never listens"),
                                                  viewpoint("Ann", "Therapist", "she takes his side"),
                                                  viewpoint("Ben", "Ann", "not Ann's view")]),      # 1
        row(T, ["Ann"], viewpoints_attitudes=[viewpoint(T, "Ann", "she is hurting")]),              # 2 therapist
        row("Ben", ["Ann"], viewpoints_attitudes=[viewpoint("Ann", "Ben", "wrong source")]),        # 3 excluded
        row("Ben", ["Ann"], viewpoints_attitudes=[viewpoint("Ben", "", "no target"),
                                                  viewpoint("Ben", "Ann", "")]),                    # 4 excluded
        row("Ben", ["Ann"], dialogue="No.", viewpoints_attitudes=[viewpoint("Ben", "Ann", "she exaggerates")]),
    ])
    result = build("vp", [s])
    assert [(i.row_index, [v["viewpoint"] for v in i.gold]) for i in result.instances] == [
        (1, ["he never listens", "she takes his side"]), (5, ["she exaggerates"])]   # no word minimum, no discard
    assert result.excluded == Counter({("couple", "no speaker-matched viewpoint with target and text"): 2,
                                       ("couple", "not among the evenly spaced checkpoints"): 0})
    assert result.instances[0].gold[1] == {"source": "Ann", "target": "Therapist", "viewpoint": "she takes his side",
                                           "attitude": "critical"}


def test_vp_single_checkpoint_is_the_first_candidate():
    rows = [row("Ann", ["Ben"], viewpoints_attitudes=[viewpoint("Ann", "Ben", f"view {i}")]) for i in range(3)]
    result = build("vp", [sample("ann_and_ben/008", rows)], BuildOptions(checkpoints_per_sample=1))
    assert [i.row_index for i in result.instances] == [1]


# ---------------------------------------------------------------- answers and parsing

def test_answers_round_trip_through_parse_for_every_task_and_format():
    samples = [itp_sample(), rpp_couple(), support_couple(), er_sample(), rpp_family()]
    for name, task in TASKS.items():
        for inst in build(name, samples).instances:
            for fmt in ("label", "json"):
                parsed = task.parse(inst, task.answer(inst, fmt), fmt)
                assert parsed.ok, (name, fmt, parsed)
                expected = (inst.gold,) if task.closed_set else (
                    [{k: v[k] for k in ("source", "target", "viewpoint")} for v in inst.gold]
                    if name == "vp" else inst.gold)
                assert parsed.value == expected


@pytest.mark.parametrize("text, expected", [
    ('```json\n{"relation_top3": ["Attack-Attack", "bogus", "pursue_withdraw", "attack_attack"]}\n```',
     ("attack_attack", "pursue_withdraw")),
    ("I think it is pursue withdraw, maybe repair_softening.", ("pursue_withdraw", "repair_softening")),
    ("mixed_transition", ("mixed_transition",)),
])
def test_closed_set_parsing_keeps_valid_labels_in_order(text, expected):
    inst = build("rpp", [rpp_couple()]).instances[0]
    assert TASKS["rpp"].parse(inst, text, "json").value == expected


def test_parse_failures_are_reported_never_filled_with_gold():
    rpp = build("rpp", [rpp_couple()]).instances[0]
    failed = TASKS["rpp"].parse(rpp, '{"relation_top3": ["nonsense"]}', "json")
    assert (failed.status, failed.value) == ("failed", ())
    itp = build("itp", [itp_sample()]).instances[0]
    assert TASKS["itp"].parse(itp, '{"should_speak": true}', "json").value == ("yes",)
    assert TASKS["itp"].parse(itp, "Keep listening.", "label").value == ("no",)   # reference synonyms
    assert TASKS["itp"].parse(itp, "Hard to say at this point.", "label").status == "failed"
    er = build("er", [er_sample()]).instances[0]
    bad = TASKS["er"].parse(er, '{"emotion": "sad", "intensity": 14}', "label")
    assert (bad.status, bad.value) == ("failed", {"emotion": "sad", "intensity": None})
