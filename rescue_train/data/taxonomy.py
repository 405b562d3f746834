"""Label taxonomy of RESCUE-Bench: relation patterns and therapist support strategies.

The label names and their order follow the paper's Tables 7-10 (couple/family relation patterns,
couple/family support strategies).  Definitions, cues and disambiguation notes are our own paraphrase
of Appendix D (D.1 labels, D.2 strategies, D.3 boundaries between neighbouring labels); they are meant
to be dropped into prompts and to document what each label stands for.

Public API
----------
``Label``                             frozen dataclass (name, definition, use_when, not_when)
``COUPLE_RELATION_PATTERNS`` (6)      ``FAMILY_RELATION_PATTERNS`` (8)
``COUPLE_STRATEGIES`` (10)            ``FAMILY_STRATEGIES`` (8)
``SCENARIOS``, ``KINDS``, ``GROUP_LABEL``, ``THERAPIST``
``relation_patterns(scenario)``, ``strategies(scenario)``, ``labels(kind, scenario)``,
``label_names(kind, scenario)``, ``get_label(kind, scenario, name)``,
``disambiguation_rules(kind, scenario)``, ``describe(kind, scenario, style)``
"""

from __future__ import annotations

from dataclasses import dataclass

# Speaker / target label used for the whole group (multi-person targets collapse to it): one home, schema.
from .schema import GROUP_LABEL, SCENARIOS, THERAPIST

__all__ = [
    "Label",
    "COUPLE_RELATION_PATTERNS",
    "FAMILY_RELATION_PATTERNS",
    "COUPLE_STRATEGIES",
    "FAMILY_STRATEGIES",
    "GROUP_LABEL",
    "THERAPIST",
    "SCENARIOS",
    "KINDS",
    "relation_patterns",
    "strategies",
    "labels",
    "label_names",
    "get_label",
    "disambiguation_rules",
    "describe",
]

KINDS = ("relation", "strategy")


@dataclass(frozen=True)
class Label:
    """One taxonomy label.

    ``definition``: one or two sentences, own wording.
    ``use_when``: short positive cues.
    ``not_when``: boundary notes (mostly from Appendix D.3) saying when a neighbouring label fits better.
    """

    name: str
    definition: str
    use_when: tuple[str, ...] = ()
    not_when: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------------
# Shared boundary notes (worded once, reused by several labels)
# --------------------------------------------------------------------------------------------------

_MIXED_NOT_FALLBACK = (
    "the only reason is uncertainty or thin evidence: it is not a catch-all",
    "one pattern clearly organizes the exchange: give that pattern instead",
)
_TRACK_VS_REFRAME = (
    "the therapist recasts the sequence from one person's fault into a shared relational, "
    "attachment or systemic account: use reframe"
)
_REFRAME_VS_TRACK = (
    "the therapist just lays out or points to the sequence and leaves its meaning as it was: use track"
)
_COUNTERBALANCE_VS_SAFEGUARD = (
    "the turn mainly has to shield someone right now (from being flooded, humiliated, made the "
    "scapegoat, attacked or caught in escalation): use safeguard"
)
_SAFEGUARD_VS_COUNTERBALANCE = (
    "the aim is to give a quieter or weaker participant their say and weight back, with no urgent "
    "need to protect them: use counterbalance"
)

# --------------------------------------------------------------------------------------------------
# Relation patterns (Tables 7 and 8, in table order)
# --------------------------------------------------------------------------------------------------

COUPLE_RELATION_PATTERNS: tuple[Label, ...] = (
    Label(
        name="pursue_withdraw",
        definition=(
            "An uneven negative cycle: one partner keeps pushing for contact, explanations or an "
            "emotional reply while the other backs off, plays it down, changes the subject or goes quiet."
        ),
        use_when=(
            "one partner presses, complains or demands a response",
            "the other deflects, minimizes, changes topic or shuts down",
            "pressure and retreat keep feeding each other",
        ),
        not_when=(
            "both partners are actively blaming or counterattacking: use attack_attack",
            "nobody is pursuing and both partners pull away: use withdraw_withdraw",
        ),
    ),
    Label(
        name="attack_attack",
        definition=(
            "A symmetric escalation in which both partners stay in the fight and answer each other with "
            "blame, criticism, defensiveness or counterattack."
        ),
        use_when=(
            "both partners criticize, accuse or defend",
            "each reply raises the heat of the previous one",
        ),
        not_when=(
            "only one partner pushes while the other dodges, closes off or backs away: use pursue_withdraw",
        ),
    ),
    Label(
        name="withdraw_withdraw",
        definition=(
            "Both partners stay away from emotional contact and from the core issue; neither one is "
            "trying to draw the other in."
        ),
        use_when=(
            "silence or short, flat answers from both",
            "the central topic is sidestepped on both sides",
            "parallel disengagement",
        ),
        not_when=("one partner is still actively seeking engagement: use pursue_withdraw",),
    ),
    Label(
        name="repair_softening",
        definition=(
            "The negative cycle starts to loosen: defenses drop and vulnerability, apology, validation, "
            "recognition of hurt or a wish to reconnect begin to show, though the change is new and fragile."
        ),
        use_when=(
            "softer tone or lowered defensiveness",
            "apology, validation or acknowledging the other's hurt",
            "a first, tentative reach toward reconnection",
        ),
        not_when=(
            "the partners already keep up a sustained shared stance on the problem: use constructive_alignment",
            "the fight has only paused while hostility or withdrawal still drives the segment",
        ),
    ),
    Label(
        name="constructive_alignment",
        definition=(
            "A steadier cooperative stance in which the partners treat the problem as shared and workable, "
            "take each other's perspective and work on it together."
        ),
        use_when=(
            "partners speak of the problem as something they share",
            "perspective-taking that holds over several turns",
            "joint planning or problem solving",
        ),
        not_when=(
            "the movement is only an early, still-fragile softening: use repair_softening",
            "a lull in the conflict while hostility or withdrawal still organizes the segment",
        ),
    ),
    Label(
        name="mixed_transition",
        definition=(
            "Two strong relational signals are present at once, or the segment sits at a visible turning "
            "point between patterns, so no single cycle captures it faithfully."
        ),
        use_when=(
            "one partner turns vulnerable while the other stays defensive",
            "escalation shifting into partial repair without a new stable pattern",
        ),
        not_when=_MIXED_NOT_FALLBACK,
    ),
)

FAMILY_RELATION_PATTERNS: tuple[Label, ...] = (
    Label(
        name="escalation_conflict",
        definition=(
            "Open conflict in which two or more family members push disagreement upward through blame, "
            "interruptions, criticism, defensiveness or emotional confrontation."
        ),
        use_when=(
            "intensity rises across several members",
            "members talk over, accuse or confront one another",
        ),
        not_when=(
            "one member presses while another pulls back: use pursue_withdraw",
            "the segment is shaped by withdrawal or by repair rather than by rising intensity",
        ),
    ),
    Label(
        name="pursue_withdraw",
        definition=(
            "One family member seeks engagement, explanations or a reply while another evades, minimizes, "
            "falls silent or disengages; the same press-and-retreat cycle seen in couples, e.g. between "
            "parent and child."
        ),
        use_when=(
            "one member repeatedly asks, pushes or demands",
            "another member dodges, goes quiet or disengages",
        ),
        not_when=(
            "broad reciprocal escalation involving several members: use escalation_conflict",
            "members withdraw together and nobody pursues: use mutual_disengagement",
        ),
    ),
    Label(
        name="mutual_disengagement",
        definition=(
            "Key family members pull back together: they avoid the central issue, say little and show "
            "low emotional involvement with one another."
        ),
        use_when=(
            "silence or very brief answers",
            "topic avoidance",
            "flat affect and little willingness to engage",
        ),
        not_when=("someone is still actively pursuing engagement: use pursue_withdraw",),
    ),
    Label(
        name="cross_generational_coalition",
        definition=(
            "Members of different generations line up together in a way that sidelines, opposes or puts "
            "pressure on another member; a triangle, not a simple two-person conflict, shapes the exchange."
        ),
        use_when=(
            "a parent and a child side together against another member",
            "a member is drawn into a triangle",
        ),
        not_when=(
            "the problem is a general blurring of roles and lines (a child acting as parent, a wobbly "
            "hierarchy) with no single alliance in charge: use boundary_hierarchy_strain",
        ),
    ),
    Label(
        name="boundary_hierarchy_strain",
        definition=(
            "The exchange is shaped by blurred boundaries, an unstable hierarchy, confused roles or "
            "tension between subsystems."
        ),
        use_when=(
            "parent-child role reversal or parentification",
            "a child pulled into the adults' conflict",
            "generational or relational lines being crossed",
        ),
        not_when=(
            "the exchange is driven by one particular alliance or triangle spanning generations: "
            "use cross_generational_coalition",
        ),
    ),
    Label(
        name="repair_softening",
        definition=(
            "A rigid or conflictual family exchange begins to ease: less blame, a softer tone, apology, "
            "validation, recognition of hurt or openness to reconnect, while the repair is still forming."
        ),
        use_when=(
            "blame or rigidity visibly decreases",
            "apology, validation or acknowledging someone's hurt",
            "a first expressed wish to reconnect",
        ),
        not_when=(
            "several members already keep up a sustained shared stance: use cooperative_family_alliance",
            "the conflict has only paused while hostility, withdrawal, a coalition or strained structure "
            "still holds the segment together",
        ),
    ),
    Label(
        name="cooperative_family_alliance",
        definition=(
            "Several family members pull in the same direction: they back each other and work on the "
            "problem together from a common understanding, and this cooperation has taken hold."
        ),
        use_when=(
            "members build on each other's contributions",
            "a shared view of the problem across the family",
            "joint problem solving",
        ),
        not_when=(
            "only an early, still-fragile easing: use repair_softening",
            "a pause in conflict while hostility, withdrawal, a coalition or strained structure still dominates",
        ),
    ),
    Label(
        name="mixed_transition",
        definition=(
            "Several family dynamics are strongly present at once, or the exchange is visibly moving from "
            "one pattern to another without a single stable one."
        ),
        use_when=(
            "coalition and repair signals side by side",
            "escalation turning toward partial cooperation",
        ),
        not_when=_MIXED_NOT_FALLBACK,
    ),
)

# --------------------------------------------------------------------------------------------------
# Support strategies (Tables 9 and 10, in table order); annotated on therapist turns only
# --------------------------------------------------------------------------------------------------

COUPLE_STRATEGIES: tuple[Label, ...] = (
    Label(
        name="track",
        definition=(
            "The therapist traces and puts words to the live exchange or recurring cycle between the "
            "partners, making it visible without changing what it means."
        ),
        use_when=(
            "mapping who does what in the cycle",
            "showing that the more one partner chases, the more the other retreats",
        ),
        not_when=(_TRACK_VS_REFRAME,),
    ),
    Label(
        name="reframe",
        definition=(
            "The therapist gives an event, feeling or exchange a new meaning, typically moving it from one "
            "partner's fault to a pattern both are caught in."
        ),
        use_when=(
            "blame is recast as a shared cycle",
            "a reaction is explained through attachment fears or needs",
        ),
        not_when=(_REFRAME_VS_TRACK,),
    ),
    Label(
        name="evoke",
        definition=(
            "The therapist helps a partner look past surface anger or defensiveness and reach the primary "
            "feelings and attachment needs underneath (e.g. longing, loneliness, fear, shame or hurt)."
        ),
        use_when=(
            "questions that deepen one partner's underlying feeling",
            "slowing down on a vulnerable emotion",
        ),
        not_when=(
            "the main aim is for that emotion to be heard and received by the other partner: use join",
        ),
    ),
    Label(
        name="enact",
        definition=(
            "The therapist asks one partner to turn and tell the other, not the therapist, what they feel, "
            "need, want or recognize."
        ),
        use_when=(
            "'can you tell him/her that directly?'",
            "staging a face-to-face exchange in the session",
        ),
    ),
    Label(
        name="join",
        definition=(
            "The therapist fosters empathic contact between the partners, helping each one take in what "
            "the other feels and answer it more gently and with more engagement."
        ),
        use_when=(
            "helping a partner receive the other's feeling",
            "building warmth or working alliance between the partners",
        ),
        not_when=("the therapist is deepening one partner's own primary emotion: use evoke",),
    ),
    Label(
        name="detach",
        definition=(
            "The therapist helps the partners step back from blame and reactivity so that together they "
            "can look at their interaction as a shared cycle instead of one partner's defect."
        ),
        use_when=(
            "inviting both partners to observe their pattern from the outside",
            "naming the cycle as the common opponent",
        ),
    ),
    Label(
        name="repair",
        definition=(
            "The therapist guides the partners toward apology, clarifying intentions, acknowledging hurt "
            "or reconnecting, so that trust can be restored after a rupture or conflict."
        ),
        use_when=(
            "an injury is being addressed",
            "inviting apology or acknowledgment after conflict",
        ),
    ),
    Label(
        name="counterbalance",
        definition=(
            "The therapist gives voice, room or participation back to a partner who is less heard or at an "
            "interactional disadvantage, e.g. when the other dominates, dismisses or interrupts."
        ),
        use_when=(
            "one partner dominates the floor",
            "explicitly inviting the quieter partner in",
        ),
        not_when=(_COUNTERBALANCE_VS_SAFEGUARD,),
    ),
    Label(
        name="safeguard",
        definition=(
            "The therapist shields an exposed partner so that they are not humiliated, attacked or swamped "
            "by emotion, for instance by slowing the pace or cutting off a harmful exchange."
        ),
        use_when=(
            "a partner is being attacked or humiliated",
            "signs of emotional flooding",
            "interrupting a harmful exchange",
        ),
        not_when=(_SAFEGUARD_VS_COUNTERBALANCE,),
    ),
    Label(
        name="goal_align",
        definition=(
            "The therapist steers the partners away from blame, defensiveness or side quarrels and back to "
            "the joint work of therapy: a goal both of them hold or a task they share."
        ),
        use_when=(
            "the conversation drifts off the joint work",
            "restating what both partners want from therapy",
        ),
    ),
)

FAMILY_STRATEGIES: tuple[Label, ...] = (
    Label(
        name="join",
        definition=(
            "The therapist builds contact, trust and a working alliance with the family so that members "
            "are willing to take part in the therapeutic work."
        ),
        use_when=(
            "warm acknowledgment of a member's experience",
            "establishing rapport with the family",
        ),
    ),
    Label(
        name="track",
        definition=(
            "The therapist traces and names sequences that keep recurring in the family, e.g. escalation, "
            "pulling away, triangles, members siding together, or the same parent-child fight."
        ),
        use_when=(
            "describing the sequence that keeps repeating in the family",
            "pointing out who sides with whom",
        ),
        not_when=(
            _TRACK_VS_REFRAME,
            "the therapist actively reorganizes roles, generational lines, subsystems or hierarchy: "
            "use boundary",
        ),
    ),
    Label(
        name="counterbalance",
        definition=(
            "The therapist draws back into the conversation a family member who has less power, gets "
            "less airtime or is pushed to the margins by the family's structure."
        ),
        use_when=(
            "a member is being talked over, ignored or left out",
            "explicitly inviting the sidelined member's view",
        ),
        not_when=(_COUNTERBALANCE_VS_SAFEGUARD,),
    ),
    Label(
        name="enact",
        definition=(
            "The therapist has family members speak and respond to each other directly in the session, so "
            "that the live pattern can be observed and steered toward a different response."
        ),
        use_when=(
            "asking members to talk to each other rather than to the therapist",
            "setting up an in-session exchange between two members",
        ),
    ),
    Label(
        name="boundary",
        definition=(
            "A structural move: the therapist redraws or clarifies who is in charge, who plays which role, "
            "and where the lines between subsystems and generations run."
        ),
        use_when=(
            "a child is placed back out of the adults' conflict",
            "restoring parental authority or the parental subsystem",
            "addressing role confusion",
        ),
        not_when=(
            "the therapist only describes escalation, disengagement, triangulation or a coalition without "
            "acting on the structure: use track",
        ),
    ),
    Label(
        name="reframe",
        definition=(
            "The therapist takes the problem out of the frame of one member's fault and presents it as a "
            "process the whole family takes part in."
        ),
        use_when=(
            "a symptom or behaviour is recast as part of the family pattern",
            "blame on one member is redistributed to the system",
        ),
        not_when=(_REFRAME_VS_TRACK,),
    ),
    Label(
        name="repair",
        definition=(
            "The therapist helps family members apologize, acknowledge one another, mend emotional "
            "injuries and reconnect."
        ),
        use_when=(
            "an opening to acknowledge hurt",
            "lowering defensiveness to rebuild trust",
        ),
    ),
    Label(
        name="safeguard",
        definition=(
            "The therapist steps in for a family member at risk, so that they are not blamed for "
            "everything, attacked, humiliated or swamped by emotion, e.g. by slowing or halting the exchange."
        ),
        use_when=(
            "one member is being made the scapegoat",
            "signs of emotional overwhelm",
            "interrupting a harmful exchange",
        ),
        not_when=(_SAFEGUARD_VS_COUNTERBALANCE,),
    ),
)

# --------------------------------------------------------------------------------------------------
# General disambiguation rules (Appendix D.3, own words); each applies to some (kind, scenario) pairs
# --------------------------------------------------------------------------------------------------

_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # (kind, scenarios, text)
    (
        "strategy",
        ("couple", "family"),
        "track vs reframe: both describe an interaction. Choose track when the therapist lays out or "
        "points to the sequence but leaves its meaning untouched; choose reframe when the therapist gives "
        "that sequence a new meaning, moving it away from one person's fault toward a relational, "
        "attachment-based or systemic understanding.",
    ),
    (
        "strategy",
        ("couple",),
        "evoke vs join: both work with emotion. evoke deepens one participant's primary feeling (longing, "
        "shame, fear or hurt); join helps that feeling reach the other partner, be taken in and bring "
        "the two closer.",
    ),
    (
        "strategy",
        ("family",),
        "track vs boundary: track only names escalation, disengagement, triangulation or a coalition; "
        "boundary acts on the structure itself (roles, generational lines, subsystems, hierarchy, "
        "parent-child organization).",
    ),
    (
        "strategy",
        ("couple", "family"),
        "counterbalance vs safeguard: both answer an imbalance. counterbalance gives a quieter or weaker "
        "participant their say and weight back; safeguard is kept for turns that mainly have to shield "
        "someone right now from being flooded, humiliated, scapegoated, attacked or caught in escalation.",
    ),
    (
        "relation",
        ("couple",),
        "repair_softening vs constructive_alignment: both mark movement out of a negative cycle, at "
        "different stages. repair_softening is a first, still-fragile step away from blaming, shutting down, "
        "rupture or distance; constructive_alignment requires that a common stance on the problem has "
        "held for a while. A simple lull in the fight is not enough for either while hostility or "
        "withdrawal still drives the segment.",
    ),
    (
        "relation",
        ("family",),
        "repair_softening vs cooperative_family_alliance: both mark movement out of a negative cycle, at "
        "different stages. repair_softening is a first, still-fragile step away from blaming, shutting down, "
        "rupture or distance; cooperative_family_alliance requires that a common stance on the problem "
        "has held for a while. A simple lull in conflict is not enough for either while hostility, "
        "withdrawal, a coalition or strained structure still drives the segment.",
    ),
    (
        "relation",
        ("couple",),
        "attack_attack vs pursue_withdraw: the question is whether both sides escalate. attack_attack "
        "means both partners trade blame, criticism, defensiveness or counterattacks; pursue_withdraw "
        "means one partner pushes to engage and the other dodges, downplays, closes off or backs away.",
    ),
    (
        "relation",
        ("family",),
        "escalation_conflict vs pursue_withdraw: broad reciprocal escalation among several members is "
        "escalation_conflict; pursue_withdraw needs one member pushing to engage while another dodges, "
        "downplays, closes off or backs away.",
    ),
    (
        "relation",
        ("family",),
        "cross_generational_coalition vs boundary_hierarchy_strain: both concern family structure. Choose "
        "cross_generational_coalition when the exchange is driven by one particular alliance or triangle "
        "spanning generations; choose boundary_hierarchy_strain when the more pressing issue is a general "
        "blurring of roles and lines (a child acting as parent, a wobbly hierarchy, fuzzy subsystems) "
        "with no single alliance in charge.",
    ),
    (
        "relation",
        ("couple", "family"),
        "mixed_transition is not a fallback for uncertainty or thin evidence. Reserve it for segments where "
        "two strong patterns stand out together, or that sit at a clinically visible turning point between "
        "patterns; when a single pattern plainly shapes the interaction, give that pattern.",
    ),
)

_GENERAL_PRINCIPLE = {
    "relation": (
        "Choose the label by the interactional organization that dominates the moment, not by surface wording."
    ),
    "strategy": (
        "Choose the label by the primary intervention function of the therapist turn, not by surface wording."
    ),
}

_TABLES = {
    ("relation", "couple"): COUPLE_RELATION_PATTERNS,
    ("relation", "family"): FAMILY_RELATION_PATTERNS,
    ("strategy", "couple"): COUPLE_STRATEGIES,
    ("strategy", "family"): FAMILY_STRATEGIES,
}

_TITLES = {
    "relation": "relation patterns",
    "strategy": "support strategies",
}

_STYLES = ("full", "short")


def _check_scenario(scenario: str) -> str:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {', '.join(SCENARIOS)}")
    return scenario


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown label kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def relation_patterns(scenario: str) -> tuple[Label, ...]:
    """Relation-pattern labels of ``scenario`` ("couple" or "family"), in the order of the paper's tables."""
    return _TABLES[("relation", _check_scenario(scenario))]


def strategies(scenario: str) -> tuple[Label, ...]:
    """Support-strategy labels of ``scenario`` ("couple" or "family"), in the order of the paper's tables."""
    return _TABLES[("strategy", _check_scenario(scenario))]


def labels(kind: str, scenario: str) -> tuple[Label, ...]:
    """Labels of ``kind`` ("relation" or "strategy") for ``scenario``."""
    _check_kind(kind)
    return _TABLES[(kind, _check_scenario(scenario))]


def label_names(kind: str, scenario: str) -> tuple[str, ...]:
    """Label names of ``kind`` ("relation" or "strategy") for ``scenario``, in table order."""
    return tuple(label.name for label in labels(kind, scenario))


def get_label(kind: str, scenario: str, name: str) -> Label:
    """The label called ``name``; ValueError listing the valid names if it is not in the set."""
    for label in labels(kind, scenario):
        if label.name == name:
            return label
    raise ValueError(
        f"{name!r} is not a {scenario} {_TITLES[kind][:-1]}; expected one of "
        f"{', '.join(label_names(kind, scenario))}"
    )


def disambiguation_rules(kind: str, scenario: str) -> tuple[str, ...]:
    """The general boundary rules (Appendix D.3) that concern ``kind`` in ``scenario``."""
    _check_kind(kind)
    _check_scenario(scenario)
    return tuple(text for rule_kind, scens, text in _RULES if rule_kind == kind and scenario in scens)


def describe(kind: str, scenario: str, style: str = "full") -> str:
    """Prompt-ready text block for one label set.

    Each label appears as ``- name: definition``; ``style="full"`` adds indented ``Use when:`` and
    ``Not when:`` lines.  The block ends with the general disambiguation rules relevant to this
    kind and scenario.  The output is deterministic.
    """
    if style not in _STYLES:
        raise ValueError(f"unknown style {style!r}; expected one of {', '.join(_STYLES)}")
    label_set = labels(kind, scenario)
    lines = [f"{GROUP_LABEL[scenario]} {_TITLES[kind]} ({len(label_set)} labels):"]
    for label in label_set:
        lines.append(f"- {label.name}: {label.definition}")
        if style == "full":
            if label.use_when:
                lines.append(f"  Use when: {'; '.join(label.use_when)}.")
            if label.not_when:
                lines.append(f"  Not when: {'; '.join(label.not_when)}.")
    lines.append("")
    lines.append(f"Disambiguation rules. {_GENERAL_PRINCIPLE[kind]}")
    for text in disambiguation_rules(kind, scenario):
        lines.append(f"- {text}")
    return "\n".join(lines)
