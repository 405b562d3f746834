"""The relational-orientation audit: splitter rules, prompts, parsing and aggregation on hand-made cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rescue_train.audit import criteria as C
from rescue_train.audit.config import AuditConfig, load_config
from rescue_train.audit.inputs import Turn, load_dialogues, load_eval_results, load_reference, prediction_text
from rescue_train.audit.runner import plan
from rescue_train.audit.split import split_sentences
from rescue_train.audit.stats import analyse, compare, holm, rate, sentence_values
from rescue_train.data import load_benchmark
from rescue_train.data.splits import assign_units

# ---------------------------------------------------------------- splitter, one rule per case

@pytest.mark.parametrize("text, relate, default", [
    # end punctuation followed by a space or the end ends a sentence; ?! stays together
    ("I hear you. Really?! Yes", ["I hear you.", "Really?!", "Yes"], ["I hear you.", "Really?!", "Yes"]),
    # no space after the period: no boundary (numbers, URLs)
    ("It costs 3.50 now. Ok.", ["It costs 3.50 now.", "Ok."], ["It costs 3.50 now.", "Ok."]),
    # newlines: not boundaries in relate; default splits after end punctuation + newline and on blank lines
    ("That is hard for you.\n\nHave you told your sister?", ["That is hard for you.\n\nHave you told your sister?"],
     ["That is hard for you.", "Have you told your sister?"]),
    ("Done.\nNext one.", ["Done.\nNext one."], ["Done.", "Next one."]),
    ("A heading\n\nSome text", ["A heading\n\nSome text"], ["A heading", "Some text"]),
    # abbreviations split in relate, are protected in default
    ("Dr. Lee agreed, e.g. about sleep. Fine.", ["Dr.", "Lee agreed, e.g.", "about sleep.", "Fine."],
     ["Dr. Lee agreed, e.g. about sleep.", "Fine."]),
    # a word merely ending like an abbreviation is not one
    ("Call Mrs. Dr. Smith. Go.", ["Call Mrs.", "Dr.", "Smith.", "Go."], ["Call Mrs. Dr. Smith.", "Go."]),
    # inside a quotation end punctuation does not split; a quote closed on end punctuation ends the sentence
    ('She said, "I am done. Bye." Then she left.', ['She said, "I am done. Bye."', "Then she left."],
     ['She said, "I am done. Bye."', "Then she left."]),
    # ... which strands a lower-case continuation in relate; default keeps it in the sentence
    ('You could say, "I miss you." and see.', ['You could say, "I miss you."', "and see."],
     ['You could say, "I miss you." and see.']),
    # a closing quote just before end punctuation also ends the sentence there: relate strands the mark
    ('Did she say "fine"? Then go.', ['Did she say "fine"', "?", "Then go."], ['Did she say "fine"?', "Then go."]),
    # a straight quote after a letter does not open a quotation: the period splits
    ('The 6" board. Ok.', ['The 6" board.', "Ok."], ['The 6" board.', "Ok."]),
    # a curly opening quote always opens one
    ("He wrote\u201cstay. please.\u201d Then.", ["He wrote\u201cstay. please.\u201d", "Then."],
     ["He wrote\u201cstay. please.\u201d", "Then."]),
    # end punctuation then a closing quote outside a quotation: the end moves after the quote
    ("It was over.\u201d Then.", ["It was over.\u201d", "Then."], ["It was over.\u201d", "Then."]),
    # empty pieces are dropped, fragments are kept
    ("  Ok.   . Yes.  ", ["Ok.", ".", "Yes."], ["Ok.", ".", "Yes."]),
])
def test_splitter_rules(text, relate, default):
    assert split_sentences(text, "relate") == relate
    assert split_sentences(text, "default") == default


def test_splitter_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="splitter must be one of default, relate"):
        split_sentences("x", "spacy")


# ---------------------------------------------------------------- prompts

def _turn(text, prior=(("user", "I feel alone."),), setting="single", turn_id=1, dialogue="d1"):
    return Turn("sys", dialogue, turn_id, setting, list(prior), text, "test", dialogue)


def test_user_message_layout_and_nothing_later():
    sentences, requests = plan([_turn("I am here for you. Have you told your sister?")], AuditConfig(model="m"))
    assert [s["text"] for s in sentences] == ["I am here for you.", "Have you told your sister?"]
    assert len(requests) == 2 * 6  # single-user turn: the five published criteria and our referent gate
    second_os = next(r for r in requests if r.sentence == 1 and r.criterion == "outward_scaffolding")
    assert second_os.prompt[1]["content"] == (
        "Prior dialogue:\nuser: I feel alone.\n\n"
        "Earlier sentences of the supporter's current turn:\n[1] I am here for you.\n\n"
        "Target sentence: Have you told your sister?\n\n"
        "Criterion to judge: Outward-Scaffolding")
    first = [r for r in requests if r.sentence == 0]
    assert all("sister" not in r.prompt[1]["content"] for r in first)  # the judge never sees later sentences
    assert "(none)" in first[0].prompt[1]["content"]
    system = second_os.prompt[0]["content"]
    assert "the assistant (an AI supporter)" in system and "Hub Orientation" not in system
    assert all(C.CRITERIA[k].name in system for k in (*C.IF_KEYS, C.OS_KEY))
    assert "Supporter Referent" not in system  # ours goes under its own system message


def test_criteria_relate_sends_the_published_prompt_whatever_else_is_asked():
    turns = [_turn("I am here for you. Have you told your sister?"),
             _turn("Can you tell him directly?", setting="multi", dialogue="d2")]
    by_set = {}
    for criteria in ("relate", "auto", ("outward_scaffolding",), ("outward_scaffolding", "hub_orientation")):
        _, requests = plan(turns, AuditConfig(model="m", criteria=criteria))
        by_set[criteria] = {(r.sentence, r.criterion): r for r in requests}
    relate = by_set["relate"]
    assert len(relate) == 3 * 5 and {c for _, c in relate} == {*C.IF_KEYS, C.OS_KEY}
    for request in relate.values():
        # RELATE's prompt as published: no referent paragraph, no referent field, in neither message
        assert "referent" not in json.dumps(request.prompt).lower()
        system = request.prompt[0]["content"]
        assert system.count("\n- ") == 5 and '"span"' in system and '"reason"' in system
    for criteria, requests in by_set.items():
        for key, request in requests.items():
            if key in relate:  # the same prompt, so the same cache key, whatever else is asked
                assert request.prompt == relate[key].prompt and request.key == relate[key].key, criteria
    assert {r.prompt[0]["content"] for r in relate.values() if r.sentence < 2} == {
        C.system_message("single", "published")}
    # ours: its own system message (the gate, and on multi-party turns the exploratory pair), with a referent
    ours = [r for r in by_set["auto"].values() if r.criterion not in relate_keys()]
    assert {r.criterion for r in ours} == {C.GATE_KEY, *C.EXPLORATORY_KEYS}
    assert all(r.prompt[0]["content"] == C.system_message(sentences_setting(r), "ours") for r in ours)
    multi_ours = C.system_message("multi", "ours")
    assert '"referent"' in multi_ours and all(C.CRITERIA[k].name in multi_ours for k in C.EXPLORATORY_KEYS)
    assert "Hub Orientation" not in C.system_message("single", "ours")
    assert C.answer_schema("bond_anchoring")["required"] == ["label", "span", "reason"]
    assert C.answer_schema(C.GATE_KEY)["required"] == ["label", "span", "referent", "reason"]


def relate_keys():
    return {*C.IF_KEYS, C.OS_KEY}


def sentences_setting(request):
    return "multi" if request.sentence == 2 else "single"


def test_requests_are_ordered_for_the_prefix_cache_and_multi_party_turns_get_our_pair():
    turns = [_turn("Tell me more.", setting="multi", turn_id=2, dialogue="a"),
             _turn("Hello there.", setting="multi", turn_id=1, dialogue="a", prior=()),
             _turn("One. Two.", dialogue="b")]
    sentences, requests = plan(turns, AuditConfig(model="m"))
    assert [(s["dialogue_id"], s["turn_id"], s["sentence_id"]) for s in sentences] == [
        ("a", 1, 1), ("a", 2, 1), ("b", 1, 1), ("b", 1, 2)]
    # RELATE's five for every sentence in dialogue order, then ours (the gate, and on multi-party turns the
    # exploratory pair) for every sentence in dialogue order
    published, ours = [*C.IF_KEYS, C.OS_KEY], [C.GATE_KEY, *C.EXPLORATORY_KEYS]
    assert [(r.sentence, r.criterion) for r in requests] == [
        *((i, k) for i in range(4) for k in published),
        *((0, k) for k in ours), *((1, k) for k in ours), (2, C.GATE_KEY), (3, C.GATE_KEY)]
    multi_system = requests[0].prompt[0]["content"]
    assert "the therapist" in multi_system and "Inter-member Scaffolding" not in multi_system
    assert "Inter-member Scaffolding" in requests[20].prompt[0]["content"]
    # a sentence's requests under one system message share everything up to the criterion (prefix cache)
    contents = [r.prompt[1]["content"] for r in requests[:5]]
    assert len({c.rsplit("Criterion to judge:", 1)[0] for c in contents}) == 1
    relate_only = plan(turns, AuditConfig(model="m", criteria="relate"))[1]
    assert len(relate_only) == 4 * 5


def test_context_option_keeps_the_last_rows():
    turn = _turn("Yes.", prior=(("user", "a"), ("assistant", "b"), ("user", "c")))
    _, requests = plan([turn], AuditConfig(model="m", context=1))
    assert requests[0].prompt[1]["content"].startswith("Prior dialogue:\nuser: c\n\n")
    _, requests = plan([turn], AuditConfig(model="m", context=0))
    assert requests[0].prompt[1]["content"].startswith("Prior dialogue:\n(none)\n\n")


# ---------------------------------------------------------------- parsing

@pytest.mark.parametrize("text, label, referent, span", [
    ('{"label": "MET", "span": "here for you", "referent": "supporter_dyad", "reason": "r"}', "MET",
     "supporter_dyad", "here for you"),
    ('<think>It says {"label": "MET"}</think>\n```json\n{"label": "not met", "span": "", "referent": "none"}\n```',
     "NOT_MET", "none", ""),
    ('reasoning ...</think>{"label": "NOT-MET", "linguistic marker": "x", "referent": "assistant_dyad"}', "NOT_MET",
     "supporter_dyad", "x"),
    ('{"label": "MET", "span": "s", "referent": "the moon"}', "MET", None, "s"),
    ("MET", "PARSE_FAIL", None, None),
    ('{"label": "YES"}', "PARSE_FAIL", None, None),
    ('{"label": "MET",}', "PARSE_FAIL", None, None),
    ("[1, 2]", "PARSE_FAIL", None, None),
    ("", "PARSE_FAIL", None, None),
])
def test_parse_answer(text, label, referent, span):
    parsed = C.parse_answer(text)
    assert (parsed["label"], parsed["referent"], parsed["span"]) == (label, referent, span)
    assert ("error" in parsed) == (label == "PARSE_FAIL")


# ---------------------------------------------------------------- aggregation

def _values(labels):
    return sentence_values(_sentence("d", 1, 1, labels)["labels"])


def _sentence(dialogue, turn, sentence, labels, system="m", setting="single", unit=None):
    full = {k: ({"label": v[0], "referent": v[1]} if isinstance(v, tuple) else {"label": v}) for k, v in labels.items()}
    return {"system": system, "dialogue_id": dialogue, "unit": unit or dialogue, "turn_id": turn,
            "sentence_id": sentence, "setting": setting, "criteria": list(labels), "labels": full, "text": "."}


NO = "NOT_MET"


def test_sentence_values_follow_relate_table_6():
    gate = C.GATE_KEY
    # Yes, No, Missing, Missing | OS Yes -> IF positive, OS positive; the gate says not about the dyad
    v = _values({"bond_anchoring": "MET", "intimate_dyad": NO, "inner_life": None, "return_hooks": "PARSE_FAIL",
                 "outward_scaffolding": "MET", gate: NO})
    assert (v["IF"], v["IF_gated"], v["OS"], v["composition"]) == (1, 0, 1, "both")
    # No x4 | OS Yes -> negative, positive
    v = _values({k: NO for k in C.IF_KEYS} | {"outward_scaffolding": "MET", gate: "MET"})
    assert (v["IF"], v["IF_gated"], v["OS"], v["composition"]) == (0, 0, 1, "OS_only")
    # No, No, Missing, Missing | OS No -> negative (missing IF labels do not stop a negative), negative
    v = _values({"bond_anchoring": NO, "intimate_dyad": NO, "inner_life": None,
                 "return_hooks": None, "outward_scaffolding": NO, gate: "PARSE_FAIL"})
    assert (v["IF"], v["IF_gated"], v["OS"], v["composition"]) == (0, 0, 0, "neither")
    # Yes, No, No, No | OS missing -> IF positive (gated when about the dyad), excluded from OS
    v = _values({"bond_anchoring": "MET", "intimate_dyad": NO, "inner_life": NO, "return_hooks": NO,
                 "outward_scaffolding": "PARSE_FAIL", gate: ("MET", "supporter_dyad")})
    assert (v["IF"], v["IF_gated"], v["OS"], "composition" in v) == (1, 1, None, False)
    # IF positive but the gate unreadable, or not asked (criteria=relate): no gated value
    assert _values({"bond_anchoring": "MET", gate: "PARSE_FAIL"})["IF_gated"] is None
    assert _values({"bond_anchoring": ("MET", "supporter_dyad"), "intimate_dyad": NO})["IF_gated"] is None
    assert _values({"bond_anchoring": NO, "intimate_dyad": NO})["IF_gated"] is None
    # every IF label failed: no IF value at all
    v = _values({k: "PARSE_FAIL" for k in C.IF_KEYS} | {"outward_scaffolding": NO, gate: "MET"})
    assert v["IF"] is None and v["IF_gated"] is None and "composition" not in v


def test_analyse_rates_composition_turns_on_a_hand_computed_case():
    asked = (*C.IF_KEYS, C.OS_KEY, C.GATE_KEY)

    def labels(met: dict, failed=False):
        return {k: ("PARSE_FAIL" if failed else met.get(k, NO)) for k in asked}

    about_the_dyad = {C.GATE_KEY: ("MET", "supporter_dyad")}
    sentences = [
        _sentence("d1", 1, 1, labels({"bond_anchoring": "MET", **about_the_dyad})),
        _sentence("d1", 1, 2, labels({"intimate_dyad": "MET", "outward_scaffolding": "MET"})),
        _sentence("d1", 2, 1, labels({"intimate_dyad": "MET", **about_the_dyad})),
        _sentence("d1", 2, 2, labels({}, failed=True)),
        _sentence("d2", 1, 1, labels({})),
        _sentence("d2", 1, 2, labels({"outward_scaffolding": "MET"})),
    ]
    out = analyse(sentences, 2000, 7)["per_system"]["m"]
    rates = {m: (r["met"], r["n"]) for m, r in out["rates"].items()}
    assert rates == {"IF": (3, 5), "IF_gated": (2, 5), "OS": (2, 5), "bond_anchoring": (1, 5),
                     "intimate_dyad": (2, 5), "inner_life": (0, 5), "return_hooks": (0, 5),
                     "supporter_referent": (2, 5)}
    assert out["labels"] == {"MET": 7, "NOT_MET": 23, "PARSE_FAIL": 6, "missing": 0}
    assert out["composition"]["counts"] == {"IF_only": 2, "OS_only": 1, "both": 1, "neither": 1}
    assert out["composition"]["IF_among_OS"] == 0.5
    assert out["per_turn"][1]["IF"] == {"n": 4, "rate": 0.5} and out["per_turn"][1]["IF_gated"]["rate"] == 0.25
    assert out["per_turn"][2]["IF"] == {"n": 1, "rate": 1.0} and out["per_turn"][2]["sentences"] == 2
    # two dialogues at IF 3/3 and 0/2: the resamples are 0, 0.6 or 1 -> the 95% interval spans 0 to 1
    assert out["rates"]["IF"]["ci"] == [0.0, 1.0] and out["rates"]["IF"]["units"] == 2
    assert (out["sentences"], out["turns"], out["dialogues"], out["units"]) == (6, 3, 2, 2)


def test_turn_change_is_per_dialogue_last_minus_first():
    from rescue_train.audit.stats import turn_change

    rows = [("a", 1, 0), ("a", 1, 1), ("a", 2, 1), ("a", 3, 1),  # 0.5 -> 1.0: +0.5 (turn 2 is not used)
            ("b", 2, 1), ("b", 5, 0), ("b", 5, None),  # 1 -> 0: -1
            ("c", 1, 1)]  # one turn: left out
    result = turn_change([(d, d, t, v) for d, t, v in rows], 1000, 0, "x")  # each dialogue its own unit
    assert (result["dialogues"], result["units"], result["mean"]) == (2, 2, -0.25)
    assert result["ci"] == [-1.0, 0.5]  # resamples: both a (+0.5), both b (-1), or one each (-0.25)
    assert turn_change([("a", d, t, v) for d, t, v in rows[:4]], 1000, 0, "x") == {
        "dialogues": 1, "units": 1, "mean": 0.5, "ci": None}
    # a and b one couple's two segments: every resample draws them together, so the change cannot move
    together = turn_change([("ab" if d in "ab" else d, d, t, v) for d, t, v in rows], 1000, 0, "x")
    assert (together["dialogues"], together["units"], together["mean"], together["ci"]) == (2, 1, -0.25, None)


def test_the_bootstrap_draws_couples_not_their_segments():
    """Two segments of one couple (s1: 1 of 1 sentences IF, s2: 0 of 1) and a second couple (s3: 1 of 2). Drawn
    by couple, every resample is couple A (1/2), couple B (1/2) or a mix (2/4): the rate is 0.5 in every one,
    so the interval is [0.5, 0.5]. Drawn by segment it would spread (s1 alone: 1.0, s2 alone: 0.0)."""
    rows = [("coupleA", 1), ("coupleA", 0), ("coupleB", 1), ("coupleB", 0)]
    assert rate(rows, 1000, 5, "x") == {"n": 4, "met": 2, "rate": 0.5, "units": 2, "ci": [0.5, 0.5]}
    by_segment = rate([("s1", 1), ("s2", 0), ("s3", 1), ("s3", 0)], 1000, 5, "x")
    assert by_segment["ci"][0] < 0.5 < by_segment["ci"][1]
    # the same through analyse: the sentences carry their unit, the dialogues stay counted as dialogues
    five = (*C.IF_KEYS, C.OS_KEY)
    sentences = [_sentence("s1", 1, 1, {k: NO for k in five} | {"bond_anchoring": "MET"}, unit="coupleA"),
                 _sentence("s2", 1, 1, {k: NO for k in five}, unit="coupleA"),
                 _sentence("s3", 1, 1, {k: NO for k in five} | {"bond_anchoring": "MET"}, unit="coupleB"),
                 _sentence("s3", 1, 2, {k: NO for k in five}, unit="coupleB")]
    per = analyse(sentences, 1000, 5)["per_system"]["m"]
    assert (per["dialogues"], per["units"]) == (3, 2)
    assert per["rates"]["IF"] == {"n": 4, "met": 2, "rate": 0.5, "units": 2, "ci": [0.5, 0.5]}
    # a comparison pairs its draws when both systems cover the same units
    other = [{**s, "system": "o"} for s in sentences]
    (pair,) = analyse(sentences + other, 1000, 5)["comparisons"]["IF"]
    assert pair["paired"] and pair["difference"] == 0.0 and pair["ci"] == [0.0, 0.0]


def test_bootstrap_ci_and_comparisons():
    same = [("a", 1), ("a", 0), ("b", 1), ("b", 0), ("c", 1), ("c", 0)]
    assert rate(same, 1000, 1, "x")["ci"] == [0.5, 0.5]  # every dialogue at 50%: no spread
    assert rate([("a", 1)], 1000, 1, "x")["ci"] is None  # one dialogue: no interval
    higher = [("a", 1), ("a", 1), ("b", 1), ("b", 1), ("c", 1), ("c", 0)]
    result = compare(higher, same, 1000, 1, "x")
    assert result["paired"] and result["difference"] == pytest.approx(5 / 6 - 0.5)
    # paired draws: the difference is 0 only when all three draws are dialogue c, chance (1/3)^3
    assert result["p"] == pytest.approx(2 / 27, abs=0.025) and result["ci"][0] == 0.0
    always = compare([(d, 1) for d, _ in same], same, 1000, 1, "x")
    # no resample reaches 0: p at its floor, 2 (0 + 1) / (1000 + 1)
    assert always["p"] == 2 / 1001 and always["ci"] == [0.5, 0.5]
    again = compare(higher, same, 1000, 1, "x")
    assert again == result  # the seed fixes the result
    assert compare(same, same, 1000, 1, "x")["p"] == 1.0
    assert not compare([("z", 1), ("y", 0)], same, 1000, 1, "x")["paired"]


def test_holm_matches_hand_computation():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_analyse_compares_systems_with_holm_per_measure():
    five = (*C.IF_KEYS, C.OS_KEY)
    sentences = []
    for system, met in (("A", "MET"), ("B", NO), ("C", NO)):
        for d in range(4):
            sentences.append(_sentence(f"d{d}", 1, 1, {k: NO for k in five} | {"outward_scaffolding": met},
                                       system=system))
    comps = analyse(sentences, 500, 3)["comparisons"]["OS"]
    assert [(c["a"], c["b"], c["difference"]) for c in comps] == [("A", "B", 1.0), ("A", "C", 1.0), ("B", "C", 0.0)]
    # A and B differ in every draw: p = 2 (0 + 1) / (500 + 1); B and C never: the tails hold every draw, p = 1
    assert [c["p"] for c in comps] == [2 / 501, 2 / 501, 1.0]
    assert [c["p_holm"] for c in comps] == pytest.approx([6 / 501, 6 / 501, 1.0])


# ---------------------------------------------------------------- inputs

def test_dialogue_file_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "bot", "content": "x"}]})
                    + "\n")
    with pytest.raises(ValueError, match=r"d.jsonl:1: dialogue 'd:1': messages\[1\].role: expected user, assistant"):
        load_dialogues(path)
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n')
    with pytest.raises(ValueError, match=r"d.jsonl:2: not valid JSON \(Expecting value\)$"):
        load_dialogues(path)
    path.write_text('{"id": 1, "messages": []}\n\n{"id": 1, "messages": []}\n')
    with pytest.raises(ValueError, match="d.jsonl:3: dialogue id '1' repeats line 1"):
        load_dialogues(path)


def test_dialogue_file_turns_and_context(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps({"id": "x", "messages": [
        {"role": "system", "content": "be kind"}, {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a2"}]}) + "\n")
    turns, source = load_dialogues(path)
    assert [(t.system, t.dialogue_id, t.turn_id, t.text, t.setting, t.unit) for t in turns] == [
        ("chats", "x", 1, "a1", "single", "x"), ("chats", "x", 2, "a2", "single", "x")]  # a dialogue is its unit
    assert turns[1].prior == [("user", "u1"), ("assistant", "a1"), ("user", "u2")]  # no system message
    path.write_text(json.dumps({"model": "llama", "messages": [{"role": "assistant", "content": ""},
                                                               {"role": "user", "content": "u"},
                                                               {"role": "assistant", "content": "a"}]}) + "\n")
    turns, _ = load_dialogues(path)  # an empty turn is not audited but keeps its number
    assert [(t.system, t.dialogue_id, t.turn_id) for t in turns] == [("llama", "chats:1", 2)]


def _eval_results(tmp_path, records, task="rsg", name="eval", data=None):
    bench = load_benchmark("bundled")
    folder = tmp_path / name
    folder.mkdir(parents=True)
    data = {"source": "bundled", "split": "none"} if data is None else data
    (folder / "results.json").write_text(json.dumps({
        "label": "my-model", "config": {"data": data}, "data": {"fingerprint": bench.fingerprint},
        "records": [{"task": task, "parse_status": "ok", **r} for r in records]}))
    return folder


def test_variant_folders_of_one_model_stay_apart(tmp_path):
    sample = load_benchmark("bundled").samples[0]
    row = [r.row_index for r in sample.rows if r.is_therapist][0]
    record = {"id": "a", "sample_id": sample.sample_id, "row_index": row, "prediction": "Go on."}
    _eval_results(tmp_path, [record], name="runs/base")
    _eval_results(tmp_path, [record], name="runs/lora", data="bundled")  # results written before data.source
    turns, sources, _ = load_eval_results(tmp_path / "runs")
    assert [s["system"] for s in sources] == ["my-model", "my-model (lora)"]
    assert [t.system for t in turns] == ["my-model", "my-model (lora)"]


def test_eval_results_turns_stand_in_the_real_dialogue(tmp_path):
    bench = load_benchmark("bundled")
    sample = bench.samples[0]
    therapist_rows = [r.row_index for r in sample.rows if r.is_therapist]
    second = therapist_rows[1]
    folder = _eval_results(tmp_path, [
        {"id": "a", "sample_id": sample.sample_id, "row_index": second, "prediction": "Tell her directly.",
         "gold": sample.row(second).dialogue},
        {"id": "b", "sample_id": sample.sample_id, "row_index": second, "prediction": None, "parse_status": "failed"},
        {"id": "c", "task": "itp", "sample_id": sample.sample_id, "row_index": 1, "prediction": ["yes"]}])
    turns, sources, skipped = load_eval_results(folder)
    assert len(turns) == 1 and turns[0].turn_id == 2 and turns[0].row_index == second
    assert turns[0].prior == [(r.speaker, r.dialogue) for r in sample.rows[:second - 1]]
    assert skipped == [{"system": "my-model", "id": "b", "reason": "the prediction did not parse"}]
    assert (sources[0]["system"], sources[0]["tasks"], sources[0]["ignored_tasks"]) == ("my-model", ["rsg"], ["itp"])
    reference, _ = load_reference("bundled")
    same_place = [t for t in reference if t.dialogue_id == sample.sample_id and t.row_index == second]
    assert same_place[0].prior == turns[0].prior and same_place[0].turn_id == 2
    # both carry the sample's split unit (its couple or family), the bootstrap's unit
    unit = assign_units(bench.samples)[sample.sample_id]
    assert turns[0].unit == same_place[0].unit == unit


def test_reference_turns_of_one_couples_segments_share_their_unit():
    bench = load_benchmark("bundled")
    units = assign_units(bench.samples)
    reference, _ = load_reference("bundled")
    assert {t.unit for t in reference} == {units[t.dialogue_id] for t in reference}
    segments_per_unit = {}
    for t in reference:
        segments_per_unit.setdefault(t.unit, set()).add(t.dialogue_id)
    assert any(len(segments) > 1 for segments in segments_per_unit.values())  # the bundled data has such couples
    sentences, _ = plan(reference, AuditConfig(model="m", criteria="relate"))
    assert all(s["unit"] == units[s["dialogue_id"]] for s in sentences)


def test_eval_results_of_er_are_refused(tmp_path):
    folder = _eval_results(tmp_path, [{"id": "e1", "sample_id": "s", "row_index": 1,
                                       "prediction": {"emotion": "sad", "intensity": 3}}], task="er")
    with pytest.raises(ValueError, match=r"no task with turns of text as predictions \(tasks: er\)"):
        load_eval_results(folder)
    assert prediction_text({"prediction": {"response": "Hi."}}, "x") == "Hi."
    with pytest.raises(ValueError, match="x: the prediction of task 'rsg' is not a turn of text"):
        prediction_text({"task": "rsg", "prediction": ["a"]}, "x")


def test_config_validation():
    with pytest.raises(ValueError, match="model= names the judge"):
        load_config([])
    with pytest.raises(ValueError, match="splitter: expected one of default, relate, got 'nltk'"):
        load_config(["model=m", "splitter=nltk"])
    with pytest.raises(ValueError, match="criteria must be auto, relate, or a list"):
        load_config(["model=m", "criteria=[bond_anchoring,warmth]"])
    cfg = load_config(["model=m", "criteria=[return_hooks,outward_scaffolding]"])
    from rescue_train.audit.config import chosen_criteria

    assert chosen_criteria(cfg) == ("return_hooks", "outward_scaffolding")
    assert AuditConfig().seed == 20260913 and AuditConfig().bootstrap == 10000
    # typed settings, as for eval: unknown keys refused with a suggestion, values checked against their type
    with pytest.raises(ValueError, match="unknown key splitr; did you mean splitter?"):
        load_config(["model=m", "splitr=relate"])
    with pytest.raises(ValueError, match=r"unknown key data.split \(see rescue-train audit --help\)"):
        load_config(["model=m", "data.split=kfold"])
    with pytest.raises(ValueError, match="bootstrap: expected an int, got 'many'"):
        load_config(["model=m", "bootstrap=many"])
    with pytest.raises(ValueError, match="token_param: expected one of auto, max_completion_tokens, max_tokens"):
        load_config(["model=m", "token_param=tokens"])


def test_recipe_file_then_overrides(tmp_path):
    recipe = tmp_path / "judge.yaml"
    recipe.write_text("model: from-file\nbackend: openai\ndata:\n  source: /data/b.jsonl\nlimit: 2\n")
    cfg = load_config([f"recipe={recipe}", "limit=5", "output_dir=out"])
    assert (cfg.model, cfg.backend, cfg.data.source, cfg.limit, cfg.output_dir) == (
        "from-file", "openai", "/data/b.jsonl", 5, "out")
    assert load_config(["model=m", "data=/data/b.jsonl"]).data.source == "/data/b.jsonl"  # the short form
    with pytest.raises(ValueError, match="unknown audit recipe 'judge'"):
        load_config(["recipe=judge"])


RELATE_RECIPE = Path(__file__).resolve().parents[2] / "configs" / "audit" / "relate.yaml"


def test_the_relate_recipe_sets_the_papers_judge_and_decoding():
    cfg = load_config([f"recipe={RELATE_RECIPE}"])
    assert (cfg.model, cfg.backend, cfg.dtype, cfg.max_model_len) == (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "vllm", "bfloat16", 8192)
    assert (cfg.temperature, cfg.constrained, cfg.reasoning, cfg.max_new_tokens) == (0.0, False, True, 2048)
    assert (cfg.criteria, cfg.splitter, cfg.context, cfg.bootstrap, cfg.seed) == ("relate", "relate", -1, 10000,
                                                                                   20260913)
    from rescue_train.audit.config import answer_budget

    assert answer_budget(cfg) == 2048
    served = load_config([f"recipe={RELATE_RECIPE}", "backend=openai", "model=gpt-4o"])  # the paper's second judge
    assert (served.backend, served.model, served.temperature, served.max_new_tokens) == ("openai", "gpt-4o", 0.0,
                                                                                          2048)


def test_judge_takes_eval_api_options():
    from rescue_train.audit.config import answer_budget, make_judge

    cfg = load_config(["model=judge", "backend=openai", "base_url=http://127.0.0.1:9/v1", "token_param=max_tokens",
                       "timeout=7", "temperature=0", "reasoning_effort=low", "structured=json_object",
                       "extra_body={top_k: 20}", "max_retries=1"])
    judge = make_judge(cfg)
    try:
        described = judge.describe()
    finally:
        judge.close()
    assert {k: described[k] for k in ("model", "token_param", "timeout", "temperature", "reasoning_effort",
                                      "structured", "extra_body", "max_retries")} == {
        "model": "judge", "token_param": "max_tokens", "timeout": 7.0, "temperature": 0.0, "reasoning_effort": "low",
        "structured": "json_object", "extra_body": {"top_k": 20}, "max_retries": 1}
    # eval's judge budgets: an API judge reasons unless told otherwise; max_new_tokens wins
    assert answer_budget(cfg) == 4096
    assert answer_budget(load_config(["model=j", "backend=openai", "reasoning=false"])) == 256
    assert answer_budget(load_config(["model=j", "backend=hf"])) == 256
    assert answer_budget(load_config(["model=j", "backend=openai", "max_new_tokens=900"])) == 900


def test_refused_and_truncated_answers_are_counted_parse_failures():
    from rescue_train.inference import Completion

    assert C.label_answer(Completion("", "content_filter", refusal="content filter"))["error"] == \
        "refused: content filter"
    assert C.label_answer(Completion('{"label": "MET", "span"', "length"))["error"] == "truncated"
    assert C.label_answer(Completion("<think>is it MET? let me see"))["error"] == "truncated"
    assert C.label_answer(Completion('{"label": "MET"}', "length"))["label"] == "MET"  # complete enough to read


def test_a_stopping_judge_error_keeps_the_finished_answers(tmp_path):
    from rescue_train.audit.runner import run
    from rescue_train.inference import BackendError, Completion

    class Stopping:  # answers the first request, then stops as the API backend does on a 4xx
        def generate(self, prompts, **kwargs):
            stop = BackendError("server answered HTTP 403: no access", index=1)
            stop.partial = [Completion('{"label": "MET", "span": "x", "referent": "none", "reason": "r"}'),
                            *[None] * (len(prompts) - 1)]
            raise stop

        def describe(self):
            return {"backend": "stub"}

    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"id": "d", "messages": [{"role": "user", "content": "Hi."},
                                                         {"role": "assistant", "content": "Tell me more."}]}) + "\n")
    cfg = load_config(["model=m", f"output_dir={tmp_path / 'audit'}", "criteria=[bond_anchoring,return_hooks]",
                       "progress=false"])
    with pytest.raises(BackendError) as stopped:
        run([str(chats)], cfg, backend=Stopping())
    assert str(stopped.value).startswith("judging chats dialogue 'd' turn 1 sentence 1, criterion return_hooks: "
                                         "server answered HTTP 403: no access")
    lines = [json.loads(line) for line in (tmp_path / "audit" / "labels.jsonl").read_text().splitlines()]
    assert [(line["criterion"], line["label"]) for line in lines] == [("bond_anchoring", "MET")]


# ---------------------------------------------------------------- agreement with human labels

def test_sentence_agreement_through_the_agreement_command(tmp_path, capsys):
    from rescue_train.audit.runner import RESULTS_FORMAT
    from rescue_train.cli import main

    asked = (*C.IF_KEYS, C.OS_KEY, C.GATE_KEY)
    met = [{"bond_anchoring": "MET", C.GATE_KEY: "MET"}, {"intimate_dyad": "MET"}, {},
           {"outward_scaffolding": "MET", "inner_life": "PARSE_FAIL"}]
    sentences = [_sentence("d1", 1, i + 1, {k: m.get(k, NO) for k in asked}) for i, m in enumerate(met)]
    sentences[2]["labels"]["outward_scaffolding"] = {"label": "PARSE_FAIL"}
    (tmp_path / "results.json").write_text(json.dumps({"format": RESULTS_FORMAT, "sentences": sentences}))
    human = tmp_path / "human.csv"
    human.write_text("dialogue_id,turn_id,sentence_id,rater,IF,OS\n"
                     "d1,1,1,A,o,\nd1,1,2,A,,\nd1,1,3,A,,o\nd1,1,4,A,,o\n"
                     "d1,1,1,B,1,0\nd1,1,2,B,0,0\nd1,1,3,B,0,0\nd1,1,4,B,1,1\n")
    assert main(["agreement", str(tmp_path), "--human", str(human), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # judge IF 1,1,0,0 vs A 1,0,0,0: agreement 3/4, chance (.5*.25 + .5*.75) -> kappa .5;
    # AC1: pi = 3/8, chance 2 pi (1 - pi) = .46875 -> (.75 - .46875) / .53125
    vs_a = report["judge"]["IF"]["IF"]["A"]
    assert (vs_a["n"], vs_a["agreement"], vs_a["positive_a"], vs_a["positive_b"]) == (4, 0.75, 0.5, 0.25)
    assert vs_a["kappa"] == pytest.approx(0.5) and vs_a["gwet_ac1"] == pytest.approx(0.28125 / 0.53125)
    assert report["judge"]["IF"]["IF_gated"]["A"]["kappa"] == pytest.approx(1.0)  # gated IF 1,0,0,0 = A
    assert report["judge"]["IF"]["IF"]["all raters"]["n"] == 8
    # OS: sentence 3's judge answer failed to parse, so it leaves the comparison
    assert report["judge"]["OS"]["OS"]["A"]["n"] == 3 and report["judge"]["OS"]["OS"]["A"]["agreement"] == 1.0
    assert report["raters"]["IF"]["A vs B"]["kappa"] == pytest.approx(0.5)
    assert main(["agreement", str(tmp_path), "--human", str(human)]) == 0
    assert "| IF | judge IF_gated | A | 4 |" in capsys.readouterr().out
    human.write_text("dialogue_id,turn_id,sentence_id,IF\nd1,1,9,1\n")
    assert main(["agreement", str(tmp_path), "--human", str(human)]) == 2
    assert "human.csv:2: sentence ('m', 'd1', '1', '9') is not in the audit results" in capsys.readouterr().err
    human.write_text("dialogue_id,turn_id,sentence_id,IF\nd1,1,1,maybe\n")
    assert main(["agreement", str(tmp_path), "--human", str(human)]) == 2
    assert "human.csv:2: column 'IF': expected a presence mark" in capsys.readouterr().err
