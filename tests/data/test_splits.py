"""Leak-free grouping and folds, worked out by hand on small samples."""

import pytest
from factory import row, sample

from rescue_train.data.splits import (
    LeakageError,
    SplitManifest,
    assign_units,
    check_leakage,
    fold_notes,
    load_or_make_manifest,
    make_manifest,
    units_text,
)


def couple(sample_id, names, n_rows=2):
    return sample(sample_id, [row(names[i % 2], [names[(i + 1) % 2]]) for i in range(n_rows)], participants=names)


def family(sample_id, names, n_rows=2):
    return sample(sample_id, [row(names[0], ["Family"])] * n_rows, scenario="family", participants=names)


def test_units_join_shared_folders_and_shared_people():
    samples = [
        couple("ann_and_ben/001", ["Ann", "Ben"]), couple("ann_and_ben/002", ["Ann", "Ben"]),
        couple("cal_and_dee/001", ["Cal", "Dee"]),
        couple("dee_and_eli/001", ["Dee", "Eli"]),   # shares "Dee" with another couple: joined, no leak
        family("family_therapy/003/merged", ["Mia", "Joe", "Kim"]),
        family("family_therapy/005/merged", ["Nat", "Joe", "Mia"]),   # same family, other episode
        family("other_family/001/merged", ["Uma", "Vic"]),
    ]
    assert assign_units(samples) == {
        "ann_and_ben/001": "ann_and_ben", "ann_and_ben/002": "ann_and_ben",
        "cal_and_dee/001": "cal_and_dee+dee_and_eli", "dee_and_eli/001": "cal_and_dee+dee_and_eli",
        "family_therapy/003/merged": "family_therapy", "family_therapy/005/merged": "family_therapy",
        "other_family/001/merged": "other_family",
    }


def sized_couples():
    # unit sizes in rows: 10, 8, 6, 4, 2
    return [couple(f"c{i}_and_d{i}/001", [f"C{i}", f"D{i}"], n) for i, n in enumerate([10, 8, 6, 4, 2])]


def test_kfold_deals_units_largest_first_to_the_lightest_fold():
    # k=2: 10->f0, 8->f1, 6->f1 (8<10), 4->f0 (10<14), 2->f0 (tie 14/14 -> lower fold)
    manifest = make_manifest(sized_couples(), "kfold", k=2, seed=0)
    assert manifest.assignment == {"c0_and_d0": 0, "c1_and_d1": 1, "c2_and_d2": 1, "c3_and_d3": 0, "c4_and_d4": 0}
    assert manifest.roles(0) == {"c0_and_d0": "test", "c1_and_d1": "validation", "c2_and_d2": "validation",
                                 "c3_and_d3": "test", "c4_and_d4": "test"}
    assert make_manifest(sized_couples(), "kfold", k=2, seed=0).hash == manifest.hash


def test_kfold_is_stratified_by_scenario_and_says_when_a_scenario_collapses():
    samples = sized_couples() + [family("family_therapy/001/merged", ["Mia", "Joe"]),
                                 family("family_therapy/002/merged", ["Mia", "Kim"])]
    manifest = make_manifest(samples, "kfold", k=3, seed=1)
    assert manifest.assignment["family_therapy"] in (0, 1, 2)
    # couples alone (sizes 10, 8, 6, 4, 2): 10->f0, 8->f1, 6->f2, 4->f2 (6 lightest), 2->f1 (8 lightest)
    assert {u: v for u, v in manifest.assignment.items() if u != "family_therapy"} == {
        "c0_and_d0": 0, "c1_and_d1": 1, "c2_and_d2": 2, "c3_and_d3": 2, "c4_and_d4": 1}
    assert manifest.notes == ["family: only 1 unit(s) after grouping by shared folder and people, so its samples "
                              "fill 1 fold(s) and the other folds have no family data"]


def test_none_and_holdout_schemes():
    none = make_manifest(sized_couples(), "none")
    assert set(none.assignment.values()) == {"test"} and none.roles() == {u: "test" for u in none.assignment}
    holdout = make_manifest(sized_couples(), "holdout", seed=0)
    assert sorted(holdout.assignment.values()) == ["test", "train", "train", "train", "validation"]


def test_leak_check_fails_loudly():
    samples = sized_couples() + [couple("c0_and_d0/002", ["C0", "D0"])]
    manifest = make_manifest(samples, "kfold", k=2)
    moved = SplitManifest(manifest.scheme, manifest.seed, manifest.k, dict(manifest.assignment),
                          {**manifest.samples, "c0_and_d0/002": "c0_and_d0_b"}, manifest.scenarios)
    moved.assignment["c0_and_d0_b"] = 1 - manifest.assignment["c0_and_d0"]
    with pytest.raises(LeakageError, match=r"person couple:C0 in \['0', '1'\]"):
        check_leakage(samples, moved)


def test_manifest_is_written_once_then_reused_and_mismatch_refused(tmp_path):
    path = tmp_path / "split_manifest.json"
    first = load_or_make_manifest(sized_couples(), path, "kfold", 2, 0)
    again = load_or_make_manifest(sized_couples(), path, "kfold", 2, 0)
    assert again.hash == first.hash == SplitManifest.load(path).hash
    with pytest.raises(ValueError, match="other samples or another scheme"):
        load_or_make_manifest(sized_couples(), path, "kfold", 3, 0)
    path.write_text(path.read_text().replace('"c0_and_d0": 0', '"c0_and_d0": 1'))
    with pytest.raises(ValueError, match="does not match its content"):
        SplitManifest.load(path)


def test_fold_notes_say_what_a_fold_holds_for_each_scenario():
    """Three couples and one family unit in three folds: fold 0 tests the family untrained, fold 1 trains on it
    and tests none, fold 2 validates on it; the couples are trained on and tested in every fold."""
    manifest = SplitManifest("kfold", 0, 3, {"a": 0, "b": 1, "c": 2, "f": 0}, {},
                             {"a": "couple", "b": "couple", "c": "couple", "f": "family"})
    per_unit = {"a": 5, "b": 4, "c": 3, "f": 7}
    assert fold_notes(manifest, 0, per_unit) == [
        "family: 0 training instances (all family data is in test fold 0): family scores measure couple-to-family "
        "transfer. To train on family data choose another data.test_fold (1, 2; then no family instance is tested), "
        "or data.split=none to test every family instance with an untrained model"]
    assert fold_notes(manifest, 1, per_unit) == [
        "family: 0 test instances (all family data is in training fold 0): no family scores. Choose data.test_fold=0 "
        "to score family"]
    assert fold_notes(manifest, 2, per_unit) == [
        "family: 0 training and 0 test instances (all family data is in validation fold 0): no family scores and no "
        "family training. Choose data.test_fold=0 to score family, or another (1) to train on it"]
    assert fold_notes(manifest, [0, 1, 2], per_unit) == [
        "family: 0 training instances in the run of test fold 0, which tests 7 of the 7 pooled family instances (all "
        "family data is in fold 0): family scores measure couple-to-family transfer. While all family data is in one "
        "fold, no fold both trains on and tests it"]
    assert fold_notes(manifest, [1, 2], {**per_unit, "f": 0}) == []  # no family instance used: nothing to say
    holdout = SplitManifest("holdout", 0, 1, {"a": "test", "f": "train"}, {}, {"a": "couple", "f": "family"})
    assert fold_notes(holdout, 0, per_unit) == []
    assert units_text(1) == "1 unit" and units_text(40) == "40 units"
