"""Format tests on the eight real samples beside the checkout (skipped where ../shared/fixtures is absent)."""

import json

import pytest

from rescue_train.data import load_samples
from rescue_train.data.splits import assign_units
from rescue_train.tasks import build

pytestmark = pytest.mark.fixtures


@pytest.fixture(scope="module")
def real(real_fixtures):
    samples = load_samples(real_fixtures / "real" / "four_samples.jsonl")
    samples += load_samples(real_fixtures / "real" / "more_samples.jsonl")
    return {s.sample_id: s for s in samples}


def per_sample(result):
    counts = {}
    for inst in result.instances:
        counts[inst.sample_id] = counts.get(inst.sample_id, 0) + 1
    return counts


def test_all_real_samples_load(real, real_fixtures):
    assert len(real) == 8
    assert {s.scenario for s in real.values()} == {"couple", "family"}
    (single,) = load_samples(real_fixtures / "real_couple_sample.json")   # one object, read as a one-line file
    assert single.sample_id == "alan_and_evelyn/001_s01e01_ct25_segment04"
    assert single == real[single.sample_id]


def test_rpp_default_definition_counts(real):
    # DATA_FORMAT.md: definition D gives 4, 3, 4, 6, 9 (couples) and 59, 64, 26 (families) on these samples
    counts = per_sample(build("rpp", list(real.values())))
    assert [counts.get(sid, 0) for sid in (
        "alan_and_evelyn/001_s01e01_ct25_segment04", "alan_and_evelyn/002_s01e02_ct81_segment01",
        "brock_and_kristi/002_s03e11_ct12_segment03", "erica_and_sean/009_s03e18_ct25_segment10",
        "ping_and_will/002_s03e02_ct62_segment02", "family_therapy/003/merged", "family_therapy/004/merged",
        "family_therapy/005/merged")] == [4, 3, 4, 6, 9, 59, 64, 26]


def test_itp_on_the_first_sample_by_hand(real):
    # speakers A A T A T E E E E T E T E T A T: positives after rows 2 4 9 11 13 15, negatives 1 6 7 8;
    # balance 4: positives at round(i*5/3) = 0, 2, 3, 5 -> rows 2, 9, 11, 15
    first = real["alan_and_evelyn/001_s01e01_ct25_segment04"]
    assert [(i.row_index, i.gold) for i in build("itp", [first]).instances] == [
        (1, "no"), (2, "yes"), (6, "no"), (7, "no"), (8, "no"), (9, "yes"), (11, "yes"), (15, "yes")]


def test_er_and_vp_match_the_released_checkpoint_files(real, real_fixtures):
    first = real["alan_and_evelyn/001_s01e01_ct25_segment04"]
    er = build("er", [first]).instances
    vp = build("vp", [first]).instances
    assert [i.row_index for i in er] == [6, 8, 9]          # er.jsonl holds rows 6, 8, 9
    assert [i.row_index for i in vp] == [2, 6, 7, 8, 9]    # vp.jsonl holds rows 2, 6, 7, 8, 9
    er_record = json.loads((real_fixtures / "real" / "er_first_record.json").read_text())
    vp_record = json.loads((real_fixtures / "real" / "vp_first_record.json").read_text())
    assert er[0].gold == {"emotion": er_record["gold_internal_emotion"], "intensity": er_record["gold_intensity_score"]}
    assert er[0].sample_id == er_record["sample_id"] and er[0].row_index == er_record["row_index"]
    assert vp[0].gold == vp_record["gold_viewpoints"]


def test_family_episodes_share_one_unit(real):
    units = assign_units(list(real.values()))
    assert {units[s] for s in real if s.startswith("family_therapy/")} == {"family_therapy"}
    assert units["alan_and_evelyn/002_s01e02_ct81_segment01"] == "alan_and_evelyn"


def test_every_task_finds_instances_in_every_scenario(real):
    for task in ("itp", "rpp", "stp", "ssp", "er", "vp"):
        scenarios = {i.scenario for i in build(task, list(real.values())).instances}
        assert scenarios == {"couple", "family"}, task
