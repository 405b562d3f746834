"""The bundled synthetic mini-benchmark and the generator that scales it (stdlib + pytest only)."""

from __future__ import annotations

import collections
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # the generator lives beside make_synthetic.py, not in the package

from synthetic import BUNDLED_PATH, mini_benchmark, scaled_benchmark, write_jsonl  # noqa: E402

# Paper Tables 7-10, written out here so that this test does not depend on the taxonomy module.
TAXONOMY = {
    ("couple", "relation"): ["pursue_withdraw", "attack_attack", "withdraw_withdraw", "repair_softening",
                             "constructive_alignment", "mixed_transition"],
    ("family", "relation"): ["escalation_conflict", "pursue_withdraw", "mutual_disengagement",
                             "cross_generational_coalition", "boundary_hierarchy_strain", "repair_softening",
                             "cooperative_family_alliance", "mixed_transition"],
    ("couple", "strategy"): ["track", "reframe", "evoke", "enact", "join", "detach", "repair", "counterbalance",
                             "safeguard", "goal_align"],
    ("family", "strategy"): ["join", "track", "counterbalance", "enact", "boundary", "reframe", "repair", "safeguard"],
}

# Gold labels of the bundled set, counted by reading the scene scripts (scripts/synthetic_scenes.txt).
EXPECTED_GOLD = {
    ("couple", "relation"): {"pursue_withdraw": 16, "repair_softening": 15, "constructive_alignment": 9,
                             "attack_attack": 7, "mixed_transition": 4, "withdraw_withdraw": 3},
    ("family", "relation"): {"cooperative_family_alliance": 13, "cross_generational_coalition": 5,
                             "boundary_hierarchy_strain": 5, "repair_softening": 5, "escalation_conflict": 5,
                             "mixed_transition": 3, "pursue_withdraw": 2, "mutual_disengagement": 2},
    ("couple", "strategy"): {"track": 19, "evoke": 15, "reframe": 8, "goal_align": 8, "join": 6, "enact": 6,
                             "counterbalance": 5, "safeguard": 5, "repair": 4, "detach": 3},
    ("family", "strategy"): {"join": 13, "track": 9, "counterbalance": 6, "boundary": 6, "enact": 5, "reframe": 5,
                             "safeguard": 3, "repair": 3},
}

ROW_KEYS = {"row_index", "start_time", "end_time", "primary_speaker", "target", "dialogue_cleaned", "utterance_type",
            "background_dialogue", "tone_of_voice", "body_posture", "facial_expressions", "self_directed_behavior",
            "interaction_behavior", "internal_emotion", "viewpoints_attitudes", "support_strategy",
            "relation_pattern", "relation_pattern_reason", "relation_pattern_evidence_rows"}
CYCLE_KEYS = {"relation_cycle_state", "relation_cycle_reason", "relation_cycle_evidence_rows"}
COUPLE_ID = re.compile(r"^[a-z]+_and_[a-z]+/\d{3}_synthetic_segment\d{2}$")
FAMILY_ID = re.compile(r"^family_therapy/\d{3}/merged$")


def therapist_rows(sample):
    return [r for r in sample["rows"] if r["primary_speaker"] == "Therapist"]


def gold_relation(row):
    return row.get("relation_cycle_state") or row.get("relation_pattern") or ""


def gold_strategy(row):
    return row["support_strategy"][0]["strategy_type"] if row["support_strategy"] else ""


def gold_counts(samples):
    counts = {key: collections.Counter() for key in TAXONOMY}
    for s in samples:
        for r in therapist_rows(s):
            if gold_relation(r):
                counts[(s["scenario"], "relation")][gold_relation(r)] += 1
            if gold_strategy(r):
                counts[(s["scenario"], "strategy")][gold_strategy(r)] += 1
    return counts


@pytest.fixture(scope="module")
def bundled():
    return mini_benchmark()


@pytest.fixture(scope="module")
def by_id(bundled):
    return {s["sample_id"]: s for s in bundled}


@pytest.fixture(scope="module")
def scaled():
    return scaled_benchmark(191)


# ---------------------------------------------------------------------------------------------- file


def test_bundled_file_is_the_generator_output_byte_for_byte(bundled):
    expected = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in bundled).encode("utf-8")
    assert BUNDLED_PATH.read_bytes() == expected
    assert BUNDLED_PATH == ROOT / "rescue_train" / "data" / "sample" / "mini_benchmark.jsonl"


def test_generator_is_deterministic(bundled):
    assert json.dumps(mini_benchmark(), ensure_ascii=False) == json.dumps(bundled, ensure_ascii=False)


def test_write_jsonl_round_trips(tmp_path, bundled):
    path = write_jsonl(bundled[:2], tmp_path / "sub" / "two.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == bundled[:2]


# ------------------------------------------------------------------------------------------- counts


def test_units_and_samples(bundled):
    couples = [s for s in bundled if s["scenario"] == "couple"]
    families = [s for s in bundled if s["scenario"] == "family"]
    assert len(bundled) == 15 and len(couples) == 12 and len(families) == 3
    assert all(COUPLE_ID.match(s["sample_id"]) for s in couples)
    assert all(FAMILY_ID.match(s["sample_id"]) for s in families)
    units = collections.Counter(s["sample_id"].split("/")[0] for s in couples)
    assert len(units) == 5 and min(units.values()) >= 2
    family_casts = collections.Counter(frozenset(s["participants"]) for s in families)
    assert sorted(family_casts.values()) == [1, 2]  # two episodes of one family + another family
    # a person belongs to one unit only
    owners = collections.defaultdict(set)
    for s in bundled:
        unit = s["sample_id"].split("/")[0] if s["scenario"] == "couple" else frozenset(s["participants"])
        for name in s["participants"]:
            owners[name].add(unit)
    assert all(len(u) == 1 for u in owners.values())


def test_every_label_is_gold_at_least_twice(bundled):
    counts = gold_counts(bundled)
    for key, labels in TAXONOMY.items():
        assert set(counts[key]) == set(labels), key
        assert min(counts[key].values()) >= 2, key
        assert dict(counts[key]) == EXPECTED_GOLD[key], key
    # long tail: the paper's most frequent labels lead
    assert counts[("couple", "relation")].most_common(2)[0][0] in ("pursue_withdraw", "repair_softening")
    assert counts[("family", "relation")].most_common(1)[0][0] == "cooperative_family_alliance"


def test_gold_of_one_sample_by_hand(by_id):
    # leah_and_omar/002_synthetic_segment01: therapist rows "Four months." (no strategy, no state),
    # track(pw), evoke(pw), safeguard(pw), enact(mixed), enact(no state), ""(state "")
    s = by_id["leah_and_omar/002_synthetic_segment01"]
    rows = therapist_rows(s)
    assert [gold_relation(r) for r in rows] == ["", "pursue_withdraw", "pursue_withdraw", "pursue_withdraw",
                                                "mixed_transition", "", ""]
    assert [gold_strategy(r) for r in rows] == ["", "track", "evoke", "safeguard", "enact", "enact", ""]
    assert [("relation_cycle_state" in r) for r in rows] == [False, True, True, True, True, False, True]


# ---------------------------------------------------------------------------------------------- rows


def test_rows_follow_the_release_format(bundled):
    therapist = total = 0
    for s in bundled:
        assert set(s) == {"sample_id", "scenario", "participants", "source_file", "rows"}
        assert s["source_file"] == f"synthetic/{s['sample_id']}.json"
        low, high = (14, 30) if s["scenario"] == "couple" else (35, 60)
        assert low <= len(s["rows"]) <= high, s["sample_id"]
        for pos, r in enumerate(s["rows"], start=1):
            assert r["row_index"] == pos
            assert ROW_KEYS <= set(r) <= ROW_KEYS | CYCLE_KEYS
            assert isinstance(r["start_time"], float) and r["end_time"] > r["start_time"]
            assert isinstance(r["target"], list) and r["target"]
            assert r["dialogue_cleaned"] and "SYNTHETIC" not in r["dialogue_cleaned"].upper()
            assert "{" not in json.dumps(r["dialogue_cleaned"])
            is_t = r["primary_speaker"] == "Therapist"
            assert (r["utterance_type"] == "") == is_t
            assert bool(r["support_strategy"]) <= is_t
            for e in r["internal_emotion"]:
                assert isinstance(e["intensity"], int) and 0 <= e["intensity"] <= 10
            for v in r["viewpoints_attitudes"]:
                assert v["source"] == r["primary_speaker"] and v["target"] and v["viewpoint"]
            for item in r["support_strategy"]:
                assert item["provider"] == "Therapist" and isinstance(item["target"], list)
            therapist += is_t
            total += 1
    assert 0.35 <= therapist / total <= 0.45


def test_itp_candidates_exist(bundled):
    for s in bundled:
        speakers = [r["primary_speaker"] == "Therapist" for r in s["rows"]]
        positives = sum(1 for a, b in zip(speakers, speakers[1:]) if b and not a)
        negatives = sum(1 for a, b in zip(speakers, speakers[1:]) if not a and not b)
        assert positives >= 3 and negatives >= 2, s["sample_id"]


def test_short_client_replies_exist(bundled):
    short = [r for s in bundled for r in s["rows"]
             if r["primary_speaker"] != "Therapist" and len(r["dialogue_cleaned"].split()) <= 3]
    assert len(short) >= 30
    assert any(r["dialogue_cleaned"] == "Yeah." for r in short)


def test_lines_not_sorted(bundled):
    ids = [s["sample_id"] for s in bundled]
    assert ids != sorted(ids)
    scenarios = [s["scenario"] for s in bundled]
    assert scenarios[0] == "couple" and scenarios[-1] == "family" and "family" in scenarios[1:-1]


# -------------------------------------------------------------------------------------------- layouts


def test_couple_layout_1(by_id):
    for sid, s in by_id.items():
        if s["scenario"] != "couple" or sid.startswith("dana_and_marcus/"):
            continue
        for r in s["rows"]:
            assert not (CYCLE_KEYS - {"relation_cycle_state"}) & set(r)
            assert r["relation_pattern"] is None and r["relation_pattern_reason"] is None
            assert r["relation_pattern_evidence_rows"] == []
            if r["primary_speaker"] != "Therapist":
                assert "relation_cycle_state" not in r
        with_state = [("relation_cycle_state" in r) for r in therapist_rows(s)]
        assert any(with_state)
    # some therapist rows have no state, some have ""
    rows = [r for sid, s in by_id.items() if s["scenario"] == "couple" for r in therapist_rows(s)]
    assert any("relation_cycle_state" not in r for r in rows)
    assert any(r.get("relation_cycle_state") == "" for r in rows)


def test_couple_layout_2_copies_the_state_to_the_client_row_before(by_id):
    samples = [s for sid, s in by_id.items() if sid.startswith("dana_and_marcus/")]
    assert len(samples) == 3
    copied_empty = False
    for s in samples:
        rows = s["rows"]
        for i, r in enumerate(rows):
            if r["primary_speaker"] == "Therapist":
                assert r["relation_pattern"] is None
                if "relation_cycle_state" in r and i > 0 and rows[i - 1]["primary_speaker"] != "Therapist":
                    before = rows[i - 1]
                    assert before["relation_pattern"] == r["relation_cycle_state"]
                    assert before["relation_pattern_reason"] and before["relation_pattern_evidence_rows"]
                    copied_empty |= before["relation_pattern"] == ""
            elif i + 1 < len(rows) and "relation_cycle_state" not in rows[i + 1]:
                assert r["relation_pattern"] is None
    assert copied_empty
    reasons = [r["relation_pattern_reason"] for s in samples for r in s["rows"] if r["relation_pattern_reason"]]
    assert any("\u00e2\u20ac\u2122" in reason for reason in reasons)  # "doesnâ€™t"


def test_family_layout_1(by_id):
    for sid in ("family_therapy/001/merged", "family_therapy/002/merged"):
        for r in by_id[sid]["rows"]:
            assert CYCLE_KEYS <= set(r)
            if r["primary_speaker"] != "Therapist":
                assert (r["relation_cycle_state"], r["relation_cycle_reason"], r["relation_cycle_evidence_rows"]) == ("", "", [])
                assert r["relation_pattern"] is None
            elif r["relation_cycle_state"]:
                assert r["relation_pattern"] == r["relation_cycle_state"]
    diverging = [r for sid in ("family_therapy/001/merged", "family_therapy/002/merged")
                 for r in therapist_rows(by_id[sid]) if r["relation_cycle_state"] == "" and r["relation_pattern"]]
    assert [r["relation_pattern"] for r in diverging] == ["cross_generational_coalition"]
    assert by_id["family_therapy/001/merged"]["participants"] == by_id["family_therapy/002/merged"]["participants"]


def test_family_layout_2(by_id):
    s = by_id["family_therapy/003/merged"]
    assert not any(CYCLE_KEYS & set(r) for r in s["rows"])
    rows = therapist_rows(s)
    assert [r["relation_pattern"] for r in rows[:4]] == ["", "", None, "cross_generational_coalition"]
    assert all(r["relation_pattern_reason"] for r in rows[:2])
    assert all(r["relation_pattern"] is None for r in s["rows"] if r["primary_speaker"] != "Therapist")
    assert any("\u00e2\u0080\u0099" in (r["relation_pattern_reason"] or "") for r in rows)
    assert not set(s["participants"]) & set(by_id["family_therapy/001/merged"]["participants"])


def test_quirks_are_present(bundled, by_id):
    t_rows = [(s, r) for s in bundled for r in therapist_rows(s)]
    assert 3 <= sum(1 for _, r in t_rows if not r["support_strategy"]) <= 10
    assert any(r["support_strategy"] and r["support_strategy"][0]["strategy_type"] == "" for _, r in t_rows)
    items = [(s, r, item) for s, r in t_rows for item in r["support_strategy"]]
    assert any(len(item["target"]) == 2 and "Couple" not in item["target"] for s, r, item in items
               if s["scenario"] == "couple")
    assert any(item["target"] == ["Couple"] for _, _, item in items)
    assert any(item["target"] == ["Family"] for _, _, item in items)
    empty = [(r, item) for _, r, item in items if item["target"] == []]
    assert empty and all(r["target"] for r, _ in empty)  # the row target is the fallback
    assert any(len(r["target"]) == 3 for s in bundled if s["scenario"] == "family" for r in s["rows"])
    assert any(r["internal_emotion"] for _, r in t_rows)
    client_rows = [r for s in bundled for r in s["rows"] if r["primary_speaker"] != "Therapist"]
    assert sum(any(e["person"] != r["primary_speaker"] for e in r["internal_emotion"]) for r in client_rows) >= 3
    assert any(r["primary_speaker"] == "Couple" for r in client_rows)
    assert any(len(r["support_strategy"]) > 1 for _, r in t_rows)
    assert any(r["background_dialogue"] for r in client_rows)
    for s in bundled:
        overlaps = any(b["start_time"] < a["end_time"] for a, b in zip(s["rows"], s["rows"][1:]))
        assert overlaps == (s["scenario"] == "family"), s["sample_id"]
    orders = {tuple(e) for s in bundled for r in s["rows"] for e in r["internal_emotion"]}
    assert orders == {("person", "emotion_description", "intensity"), ("person", "intensity", "emotion_description")}
    assert {next(iter(r)) for s in bundled for r in s["rows"]} == {"start_time", "row_index"}


# ---------------------------------------------------------------------------------------------- scaled


def test_scaled_191(scaled):
    assert len(scaled) == 191
    ids = [s["sample_id"] for s in scaled]
    assert len(set(ids)) == 191
    families = [s for s in scaled if s["scenario"] == "family"]
    assert len(families) == 17
    assert all(FAMILY_ID.match(s["sample_id"]) for s in families)
    assert all(re.match(r"^couple_\d{4}/\d{3}_synthetic_segment\d{2}$", s["sample_id"])
               for s in scaled if s["scenario"] == "couple")
    assert ids != sorted(ids)
    for s in scaled:
        assert s["source_file"] == f"synthetic/{s['sample_id']}.json"
        low, high = (14, 30) if s["scenario"] == "couple" else (35, 60)
        assert low <= len(s["rows"]) <= high
        assert [r["row_index"] for r in s["rows"]] == list(range(1, len(s["rows"]) + 1))
        assert all(b["start_time"] >= a["start_time"] for a, b in zip(s["rows"], s["rows"][1:]))
        text = json.dumps(s, ensure_ascii=False)
        assert not re.search(r"\{[A-Z]\}", text)
        names = set(s["participants"])
        speakers = {r["primary_speaker"] for r in s["rows"]} - {"Therapist", "Couple", "Family"}
        assert speakers <= names
    counts = gold_counts(scaled)
    for key, labels in TAXONOMY.items():
        assert set(counts[key]) == set(labels), key


def test_scaled_names(scaled):
    bundled_names = {n for s in mini_benchmark() for n in s["participants"]}
    casts = collections.defaultdict(set)
    for s in scaled:
        unit = s["sample_id"].split("/")[0] if s["scenario"] == "couple" else frozenset(s["participants"])
        casts[unit].add(frozenset(s["participants"]))
        assert not set(s["participants"]) & bundled_names
    assert all(len(c) == 1 for c in casts.values())  # a unit keeps its names
    owners = collections.Counter(n for c in casts.values() for cast in c for n in cast)
    assert max(owners.values()) == 1  # and nobody is in two units
    family_casts = collections.Counter(frozenset(s["participants"]) for s in scaled if s["scenario"] == "family")
    assert max(family_casts.values()) >= 2  # episodes of one family


def test_scaled_is_deterministic(scaled):
    assert json.dumps(scaled_benchmark(191), ensure_ascii=False) == json.dumps(scaled, ensure_ascii=False)
    assert scaled_benchmark(191, seed=1) != scaled


@pytest.mark.parametrize("n, n_family", [(0, 0), (1, 0), (12, 1), (40, 4), (400, 36)])
def test_scaled_sizes(n, n_family):
    samples = scaled_benchmark(n, seed=5)
    assert len(samples) == n and len({s["sample_id"] for s in samples}) == n
    assert sum(s["scenario"] == "family" for s in samples) == n_family


def test_scaled_rejects_negative():
    with pytest.raises(ValueError):
        scaled_benchmark(-1)


# ------------------------------------------------------------------------------------------------ cli


def _cli():
    spec = importlib.util.spec_from_file_location("make_synthetic", ROOT / "scripts" / "make_synthetic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli(tmp_path, capsys):
    cli = _cli()
    out = tmp_path / "s.jsonl"
    assert cli.main(["--samples", "20", "--seed", "2", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == "".join(
        json.dumps(s, ensure_ascii=False) + "\n" for s in scaled_benchmark(20, seed=2))
    mini = tmp_path / "mini.jsonl"
    assert cli.main(["--out", str(mini)]) == 0
    assert mini.read_bytes() == BUNDLED_PATH.read_bytes()
    assert "wrote 15 samples" in capsys.readouterr().out
