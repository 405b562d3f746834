import re

import pytest

from rescue_train.data import taxonomy as tx
from rescue_train.data.taxonomy import (
    COUPLE_RELATION_PATTERNS,
    COUPLE_STRATEGIES,
    FAMILY_RELATION_PATTERNS,
    FAMILY_STRATEGIES,
    GROUP_LABEL,
    SCENARIOS,
    THERAPIST,
    Label,
    describe,
    label_names,
    relation_patterns,
    strategies,
)

EXPECTED = {
    ("relation", "couple"): (
        "pursue_withdraw",
        "attack_attack",
        "withdraw_withdraw",
        "repair_softening",
        "constructive_alignment",
        "mixed_transition",
    ),
    ("relation", "family"): (
        "escalation_conflict",
        "pursue_withdraw",
        "mutual_disengagement",
        "cross_generational_coalition",
        "boundary_hierarchy_strain",
        "repair_softening",
        "cooperative_family_alliance",
        "mixed_transition",
    ),
    ("strategy", "couple"): (
        "track",
        "reframe",
        "evoke",
        "enact",
        "join",
        "detach",
        "repair",
        "counterbalance",
        "safeguard",
        "goal_align",
    ),
    ("strategy", "family"): (
        "join",
        "track",
        "counterbalance",
        "enact",
        "boundary",
        "reframe",
        "repair",
        "safeguard",
    ),
}
TUPLES = {
    ("relation", "couple"): COUPLE_RELATION_PATTERNS,
    ("relation", "family"): FAMILY_RELATION_PATTERNS,
    ("strategy", "couple"): COUPLE_STRATEGIES,
    ("strategy", "family"): FAMILY_STRATEGIES,
}
KEYS = sorted(EXPECTED)
SNAKE = re.compile(r"^[a-z]+(_[a-z]+)*$")


def mentions(text: str, name: str) -> bool:
    """True if ``name`` occurs as a whole label token (not as part of a longer snake_case name)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def test_constants():
    assert SCENARIOS == ("couple", "family")
    assert GROUP_LABEL == {"couple": "Couple", "family": "Family"}
    assert THERAPIST == "Therapist"


@pytest.mark.parametrize("key", KEYS)
def test_counts_and_order(key):
    kind, scenario = key
    assert tuple(label.name for label in TUPLES[key]) == EXPECTED[key]
    assert label_names(kind, scenario) == EXPECTED[key]
    getter = relation_patterns if kind == "relation" else strategies
    assert getter(scenario) is TUPLES[key]


def test_sizes():
    assert len(COUPLE_RELATION_PATTERNS) == 6
    assert len(FAMILY_RELATION_PATTERNS) == 8
    assert len(COUPLE_STRATEGIES) == 10
    assert len(FAMILY_STRATEGIES) == 8


@pytest.mark.parametrize("key", KEYS)
def test_labels_well_formed(key):
    labels = TUPLES[key]
    names = [label.name for label in labels]
    assert len(set(names)) == len(names)
    for label in labels:
        assert isinstance(label, Label)
        assert SNAKE.match(label.name), label.name
        assert label.definition.strip() and label.definition.endswith(".")
        assert isinstance(label.use_when, tuple) and label.use_when
        assert isinstance(label.not_when, tuple)
        assert all(isinstance(cue, str) and cue for cue in label.use_when + label.not_when)


def test_label_is_frozen():
    with pytest.raises(Exception):
        COUPLE_STRATEGIES[0].name = "other"


@pytest.mark.parametrize("key", KEYS)
def test_not_when_only_names_labels_of_own_set(key):
    """Any label named inside a not_when note ("use X") must belong to the same set."""
    own = set(EXPECTED[key])
    for label in TUPLES[key]:
        for note in label.not_when:
            for target in re.findall(r"\buse ([a-z_]+)", note):
                assert target in own, (label.name, target)


@pytest.mark.parametrize("style", ["full", "short"])
@pytest.mark.parametrize("key", KEYS)
def test_describe_mentions_own_labels_only(key, style):
    kind, scenario = key
    other = (kind, "family" if scenario == "couple" else "couple")
    text = describe(kind, scenario, style=style)
    for name in EXPECTED[key]:
        assert f"- {name}: " in text
    for name in set(EXPECTED[other]) - set(EXPECTED[key]):
        assert not mentions(text, name), (key, style, name)
    assert text == describe(kind, scenario, style=style)  # deterministic


def test_describe_specific_absences():
    assert not mentions(describe("strategy", "family"), "evoke")
    assert not mentions(describe("strategy", "couple"), "boundary")
    assert "boundary" not in describe("strategy", "couple").lower()
    assert not mentions(describe("relation", "family"), "constructive_alignment")
    assert not mentions(describe("relation", "couple"), "cooperative_family_alliance")


def test_describe_styles_and_rules():
    full = describe("relation", "family", "full")
    short = describe("relation", "family", "short")
    assert "Use when:" in full and "Not when:" in full
    assert "Use when:" not in short and "Not when:" not in short
    assert len(short) < len(full)
    assert describe("relation", "couple") == describe("relation", "couple", "full")
    # the rules relevant to each set
    assert "track vs reframe" in describe("strategy", "couple")
    assert "track vs reframe" in describe("strategy", "family")
    assert "evoke vs join" in describe("strategy", "couple")
    assert "track vs boundary" in describe("strategy", "family")
    assert "counterbalance vs safeguard" in describe("strategy", "family", "short")
    assert "cross_generational_coalition vs boundary_hierarchy_strain" in short
    assert "escalation_conflict vs pursue_withdraw" in short
    assert "attack_attack vs pursue_withdraw" in describe("relation", "couple", "short")
    for scenario in SCENARIOS:
        assert "mixed_transition is not a fallback" in describe("relation", scenario, "short")
        assert "mixed_transition" not in describe("strategy", scenario)
        assert "vs reframe" not in describe("relation", scenario)


@pytest.mark.parametrize("bad", ["couples", "Family", "", "group"])
def test_bad_scenario(bad):
    for call in (
        lambda: relation_patterns(bad),
        lambda: strategies(bad),
        lambda: label_names("relation", bad),
        lambda: describe("strategy", bad),
    ):
        with pytest.raises(ValueError, match="couple"):
            call()


def test_bad_kind_and_style():
    with pytest.raises(ValueError, match="relation"):
        label_names("pattern", "couple")
    with pytest.raises(ValueError, match="strategy"):
        describe("strategies", "family")
    with pytest.raises(ValueError, match="short"):
        describe("relation", "couple", style="long")


def test_get_label():
    assert tx.get_label("strategy", "family", "boundary").name == "boundary"
    with pytest.raises(ValueError, match="track"):
        tx.get_label("strategy", "couple", "boundary")
