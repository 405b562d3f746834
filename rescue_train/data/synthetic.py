"""A synthetic mini-benchmark in the released RESCUE-Bench format, and a generator that scales it.

Everything in this module is SYNTHETIC: the couples, families, names and dialogue were invented for the
project and copy nothing from the research-only release. Each generated sample says so in its
``source_file`` (``synthetic/<sample_id>.json``); the word is kept out of the dialogue itself.

The bundled file ``data/sample/mini_benchmark.jsonl`` (:data:`BUNDLED_PATH`) is exactly
``write_jsonl(mini_benchmark(), BUNDLED_PATH)``; rewrite it with ``python scripts/make_synthetic.py``.

What it holds
-------------
* 12 couple samples over 5 couples (``<name>_and_<name>/<NNN>_synthetic_segmentNN``) and 3 family samples
  (``family_therapy/<NNN>/merged``): 001 and 002 are two episodes of one family, 003 another family.
* Every label of the four taxonomies (couple/family relation patterns, couple/family support strategies)
  at least twice as a gold label, with a long tail like the paper's.
* The release's quirks (see ``shared/reference/DATA_FORMAT.md``), so that loaders and task builders can be
  tested on them:

  - couple layout 1 (priya_and_tomas, rosa_and_glen, leah_and_omar, beth_and_carmen):
    ``relation_cycle_state`` only on some therapist rows (sometimes ``""``), no ``_reason``/``_evidence``;
    ``relation_pattern``/``_reason`` null and ``_evidence_rows`` ``[]`` everywhere;
  - couple layout 2 (dana_and_marcus): as layout 1, plus the client row right before each labelled
    therapist row carries that row's state as ``relation_pattern`` with a reason and evidence rows
    (``""`` copied too); one such reason has a mis-encoded apostrophe (``doesnâ€™t``);
  - family layout 1 (001, 002): every row has ``relation_cycle_state/_reason/_evidence_rows`` (empty on
    client rows); therapist rows also carry ``relation_pattern``, equal to the state except where the
    state is ``""`` and ``relation_pattern`` is ``cross_generational_coalition``;
  - family layout 2 (003): no ``relation_cycle_*`` key at all; its first two therapist rows have
    ``relation_pattern: ""`` with a reason; one reason has a latin-1 style mis-encoded apostrophe;
  - therapist rows with ``support_strategy: []``, one whose first item has ``strategy_type: ""``, support
    items targeting two people, the group (``Couple``/``Family``), nobody (``[]``: the row target is the
    fallback), a family target naming three people, therapist rows with an ``internal_emotion`` item
    about a client, client rows whose ``internal_emotion`` names someone else, ``primary_speaker``
    ``Couple``, overlapping times in family samples, key order that differs between samples
    (``intensity`` before ``emotion_description``; ``row_index`` first), short replies ("Yeah."), and
    lines not sorted by sample id (family samples in the middle).

Scripts
-------
Scenes are written below in a small line format (one row per line, fields separated by `` | ``) with role
keys instead of names (``{A}`` in text, ``A`` as speaker/target), so that :func:`scaled_benchmark` can
recombine scenes and rename people consistently. Client rows::

    SPK>TGT[,TGT] | utterance_type | tone | text | emotions | viewpoints [| extras]

Therapist rows::

    T>TGT[,TGT] | strategy | tone | text | strategy_content | label | reason [| extras]

``emotions``: ``desc ~ n`` items joined by `` && ``, optionally ``X: desc ~ n`` for another person;
``viewpoints``: ``X: viewpoint ~ attitude`` items; ``strategy``: ``-`` (no item), ``""`` (empty type),
``type``, ``type@X,Y`` (its own target), ``type@`` (empty target) or several joined by ``;`` (contents
joined by `` // ``); ``label``: ``-`` (not annotated), ``""`` (no clear pattern), a label, or
``state/pattern`` for diverging family-layout-1 fields; ``extras``: ``bg=X>Y: text``, ``emo=X: desc ~ n``
and ``overlap`` joined by `` ;; ``.

Cue fields (posture, face, self-directed and interaction behaviour), times, evidence rows and backchannel
are drawn from fixed pools with ``random.Random`` seeded by a string, so output is deterministic.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Iterable

from .schema import GROUP_LABEL, THERAPIST

__all__ = ["BUNDLED_PATH", "mini_benchmark", "scaled_benchmark", "write_jsonl"]

BUNDLED_PATH = Path(__file__).resolve().parent / "sample" / "mini_benchmark.jsonl"

# Share of family samples in the release: 17 of 191.
FAMILY_SHARE = (17, 191)
ROWS = {"couple": (14, 30), "family": (35, 60)}

# --------------------------------------------------------------------------------------------------
# Units: who is in each couple / family (role key -> (name, gender)), and its relation-field layout.
# --------------------------------------------------------------------------------------------------

_UNITS: dict[str, dict[str, Any]] = {
    "dana_and_marcus": {"scenario": "couple", "layout": 2, "roles": {"A": ("Dana", "f"), "B": ("Marcus", "m")}},
    "priya_and_tomas": {"scenario": "couple", "layout": 1, "roles": {"A": ("Priya", "f"), "B": ("Tomas", "m")}},
    "rosa_and_glen": {"scenario": "couple", "layout": 1, "roles": {"A": ("Rosa", "f"), "B": ("Glen", "m")}},
    "leah_and_omar": {"scenario": "couple", "layout": 1, "roles": {"A": ("Leah", "f"), "B": ("Omar", "m")}},
    "beth_and_carmen": {"scenario": "couple", "layout": 1, "roles": {"A": ("Beth", "f"), "B": ("Carmen", "f")}},
    # mother, son (15), daughter (12)
    "family_a": {"scenario": "family", "layout": 1,
                 "roles": {"C": ("Carla", "f"), "D": ("Devin", "m"), "I": ("Ivy", "f")}},
    # mother, son (14), grandmother (the mother's mother)
    "family_b": {"scenario": "family", "layout": 2,
                 "roles": {"S": ("Sofia", "f"), "M": ("Mateo", "m"), "H": ("Helen", "f")}},
}

# --------------------------------------------------------------------------------------------------
# Scenes
# --------------------------------------------------------------------------------------------------

_SCENES: dict[str, str] = {}

# ---- dana_and_marcus: she pursues, he withdraws (layout 2) ---------------------------------------

_SCENES["dm_open"] = """
A>T | disclosure | strained, speeding up | Every night it's the same. He comes home, he eats, and then he's gone into his phone. | feels lonely and shut out ~ 7 | B: he checks out the moment he gets home ~ hurt and resentful
T>A | track | curious, even | And what do you do, when he's gone into the phone? | follows {A}'s side of the evening sequence step by step | pursue_withdraw | {A} describes reaching for {B} every evening while he disappears into his phone.
A>T | recollection | sharp | I try to talk to him. I ask about his day, about the weekend. I get one word back. | feels ignored and increasingly angry ~ 7 | B: he gives her nothing back ~ frustrated
B>T | defense | flat, low | I'm tired. I work ten-hour days. | feels criticized and drained ~ 5 | A: she expects him to be switched on the second he walks in ~ defensive
T>B | track | neutral | Ten-hour days. And then you get home. | follows {B}'s side of the evening sequence | - |
A>B | accusation | rising | You're not tired, you're avoiding me. There's a difference. | feels frustrated and dismissed ~ 8 | B: he is avoiding her on purpose ~ accusatory
B>T | withdrawal | quiet, trailing off | See? This is what happens. | feels cornered and wants to escape ~ 6 |
T>A,B | track | calm, measured | Can I slow us down for a second? {A}, you reach for {B} and it comes out sharp. And {B}, the sharper it gets, the further you seem to pull back. | names the pursue-withdraw sequence while it is happening in the room | pursue_withdraw | {A} presses harder and {B} answers with fewer and fewer words before turning away.
A>T | validation | still tense | Yeah. | feels partly understood but wary ~ 4 |
B>T | disclosure | slow, hesitant | I guess. When she gets like that I just go quiet, because anything I say makes it worse. | feels helpless and afraid of making things worse ~ 6 | A: anything he says will be used against him ~ resigned
T>B | evoke | soft, slowing down | What happens inside you, right before you go quiet? | invites {B} to name the feeling underneath his withdrawal | pursue_withdraw | {B} says he doesnâ€™t know what to say when {A} pushes, so he goes silent; pursuit and retreat still organize the exchange.
B>T | disclosure | halting | I don't know. Like I'm failing a test nobody told me I was taking. | feels inadequate and ashamed ~ 7 |
T>B | evoke | gentle | Failing. That's a heavy word. Can you stay with it for a second? | stays with {B}'s sense of failure to deepen it rather than move past it | - |
"""

_SCENES["dm_soft"] = """
A>B | reflection | quieter, surprised | I didn't know you felt like that. I honestly thought you just didn't care. | feels surprised and a little softer ~ 5 | B: he does not care about their evenings ~ uncertain, reconsidering
B>A | disclosure | barely audible | I care. I just never know how to get it right with you. | feels exposed and unsure ~ 6 | A: she is hard to get right ~ tentative
T>B | join | gentle | {B}, I notice you said that to her, not to me. | helps {B}'s admission land as contact with {A} instead of a report to the therapist | "" | A brief process comment between two tentative statements; no dominant pattern yet.
A>T | other | uncertain | Is that good? | feels unsure and curious ~ 4 |
T>A | enact | warm, encouraging | It might be. Can you turn to him and tell him what it's like to hear that he's been feeling like he's failing you? | invites {A} to respond directly to {B}'s disclosure | mixed_transition | {A} softens for a moment while {B} is still guarded; the exchange moves between pursuit and a first opening.
A>B | request | tentative | It makes me sad. I don't want you feeling like that. I just want you with me at night. | feels sad and longing for closeness ~ 6 | B: he is trying but doesn't show it ~ softened
B>A | validation | quiet | Okay. | feels relieved but still cautious ~ 4 |
A>B | other | half-laughing, sharper | Okay? That's it? | feels a flicker of the old frustration ~ 5 |
T>A,B | reframe | light, steady | Notice what just happened. {B} gave a small yes, it felt too small, and the reaching started up again. That's not one of you failing, that's the loop you both get caught in. | recasts the slip back into pursuit as the shared cycle rather than either partner's fault | pursue_withdraw | After the brief softening {A} pushes for more and {B} goes minimal again, so the cycle reappears.
A>T | reflection | rueful | Yeah. I do that. I push. | feels a bit embarrassed, recognizing her part ~ 4 |
B>T | reflection | small laugh | And I disappear. | feels lighter and a little seen ~ 3 |
T>Couple | detach | warm, wry | So maybe the pusher and the disappearer can look at this thing together, from the outside, instead of at each other. | invites both partners to step back and observe the cycle as a pattern they share | repair_softening | Both partners name their own part with some humor; defensiveness drops and the first signs of softening appear.
"""

_SCENES["dm_money"] = """
A>T | accusation | clipped | So this week I find out he put eight hundred dollars on the card. Didn't say a word. | feels betrayed and furious ~ 8 | B: he hides things from her ~ distrustful and angry
T>A | track | neutral | Eight hundred. | follows {A}'s account of the discovery | - |
B>A | defense | heated | It was for your mother's birthday dinner! Which you asked me to organize! | feels unfairly attacked and indignant ~ 7 | A: she twists everything he does into a crime ~ indignant
A>B | accusation | loud, overlapping | You could have told me! You never tell me anything until it blows up! | feels shut out and enraged ~ 8 | B: he never tells her anything ~ contemptuous | bg=B>A: That's not true.
B>A | accusation | loud | And you never let anything go. Not once in six years. | feels cornered and resentful ~ 8 | A: she keeps score and never lets go ~ bitter
T>A,B | safeguard | firm, slower | Okay, I'm going to stop you both here. The volume went up fast and I don't want either of you saying things you'll have to undo later. | interrupts the escalating exchange to lower arousal before it turns damaging | attack_attack | Both partners blame and counterattack within seconds, each escalating the other.
A>T | withdrawal | still breathing hard | Fine. | feels shut down and still angry ~ 7 |
B>T | withdrawal | muttering | Whatever. | feels defeated and irritated ~ 6 |
T>A,B | detach | calm, curious | Let's look at what just happened like we're watching a replay. A surprise on the card statement, and within about ten seconds you were both talking about six years. | invites both partners to step back and observe the speed of their escalation together | attack_attack | The mutual escalation has only just stopped; both are still braced and blaming.
A>T | reflection | slower | It's like the card isn't really about the card. | feels a dawning recognition mixed with hurt ~ 5 |
T>A | evoke | soft | What is it about, for you? | invites {A} to reach the primary feeling underneath her anger about money | "" | {A} starts to reflect while {B} stays silent; neither escalation nor repair clearly dominates.
"""

_SCENES["dm_money2"] = """
A>T | disclosure | voice catching | Finding out last. Like I'm not on the team. | feels excluded and scared of being left out of his life ~ 7 | B: he makes decisions without her ~ hurt
T>B | enact | gentle, directive | {B}, can you turn to her? What do you hear when she says she's not on the team? | asks {B} to respond to {A} directly rather than defend himself to the therapist | pursue_withdraw | {A} reaches out with her hurt while {B} stays braced and guarded from the argument.
B>A | defense | guarded | I hear that I messed up. Again. | feels ashamed and defensive ~ 6 | A: she only sees his mistakes ~ guarded
T>B | reframe | steady, kind | I'm not sure that's what she said. I heard her say she wants to be on your team, not that you failed. | recasts {A}'s complaint from an accusation of failure into a wish for partnership | pursue_withdraw | {B} hears blame where {A} expressed longing and retreats into self-criticism.
B>A | reflection | softer | I didn't think of it like that. I thought I was handling it so you wouldn't have to worry. | feels surprised and somewhat relieved ~ 5 | A: she worries too much about money ~ protective
A>B | validation | quiet, a small smile | That's actually kind of sweet. Annoying, but sweet. | feels touched and a little amused ~ 4 | B: he was trying to protect her ~ warmer
T>A,B | goal_align | brisk, warm | So one thing we could work on is how you two make money decisions as a team, so nobody's protecting and nobody's finding out last. | redirects both partners toward a shared, concrete goal around money decisions | repair_softening | Both partners soften and acknowledge the other's intention, an early repair.
B>T | validation | nodding | Yeah. I'd like that. | feels hopeful ~ 4 |
T>A | track | checking in | {A}? | checks {A}'s response before moving on | - |
A>T | validation | warm | Yes. Let's do that. | feels hopeful and relieved ~ 5 |
"""

_SCENES["dm_repair"] = """
T>Couple | goal_align | warm | It's good to see you both. Last time we ended on the money plan. How did the week go? | reorients both partners to the shared task agreed last session | - |
A>T | recollection | lighter | Better, actually. He texted me before he bought the new tires. | feels pleasantly surprised and appreciated ~ 5 | B: he is making an effort to include her ~ appreciative
B>T | other | a little proud | I did. | feels proud and a bit shy ~ 4 |
T>B | evoke | curious, soft | What was it like for you, sending that text? | invites {B} to notice the feeling attached to his new behavior | repair_softening | {B} took a small risk toward {A} and she received it; the old cycle is loosening.
B>T | disclosure | hesitant, then steadier | Honestly? Scary. I kept thinking she'd say it was too expensive and we'd be back to fighting. | feels anxious about her reaction yet hopeful ~ 6 | A: she might criticize his choices ~ apprehensive
A>B | repair | gentle | I didn't, though. | feels tender and wants to reassure him ~ 5 |
B>A | validation | small smile | No. You said thanks for telling me. | feels relieved and warm ~ 4 | A: she responded kindly ~ grateful
T>A,B | join;repair | warm, slowing | Can you both stay here a second? He took a risk and you met it with a thank you. That's the opposite of the cycle. | helps the moment of risk and acceptance become felt and shared by both partners // marks the exchange as a small repair of the old injury | repair_softening | Risk met with warmth on both sides: vulnerability and validation replace pursuit and retreat.
A>B | disclosure | teary | I think I've been so scared you'd shut me out that I forgot to notice when you let me in. | feels vulnerable and regretful ~ 7 | B: he has been letting her in more than she noticed ~ tender
B>A | repair | quiet, warm | I'm sorry I shut you out so much. | feels remorseful and close ~ 6 |
T>B | repair | soft | Can you say a bit more about what you're sorry for? | supports {B} in elaborating his apology so it can land for {A} | "" | An apology is under way but it is still tentative; the annotators saw no single dominant pattern at this turn.
B>A | repair | slow | For going to the phone instead of to you. For making you chase me. | feels sad and sincere ~ 7 | A: she deserved more of his attention ~ remorseful
A>B | validation | softly | Thank you. | feels moved and reassured ~ 6 |
T>A,B | goal_align | grounded | What if this week you each keep one small ritual: ten minutes after dinner, phones in the drawer, just checking in? | translates the repair into a shared concrete task both can commit to | constructive_alignment | Both partners are now working on the problem together and accept a joint plan.
Couple>T | validation | together, overlapping | Yeah, okay. | A: feels hopeful ~ 5 && B: feels hopeful and a bit nervous ~ 4 |
T>Couple | track | light | I noticed you both said that at the same time. | names the moment of synchrony as part of the couple's new pattern | constructive_alignment | The couple answers in unison and agrees on a shared ritual, a stable cooperative stance.
"""

# ---- priya_and_tomas: new baby, his mother staying; mutual attack, then repair (layout 1) ---------

_SCENES["pt_fight"] = """
A>T | accusation | tight, fast | His mother has been in our house for three weeks and he hasn't once told her to back off. | feels unsupported and invaded ~ 8 | B: he always sides with his mother ~ angry
T>A | - | neutral | Three weeks. | - | - |
A>T | disclosure | fast, shaky | She rearranges the kitchen, she tells me I'm holding the baby wrong. And he just stands there. | feels judged and alone ~ 8 | B: he stands by while his mother criticizes her ~ betrayed
T>B | counterbalance | calm | {B}, I want to hear from you too. What do you see happening? | turns toward {B} so both partners have room to give their account | "" |
B>A | defense | raised | She's helping! Who do you think did the night feeds on Tuesday? | feels unappreciated and attacked ~ 7 | A: she is ungrateful for the help ~ defensive
A>B | accusation | cutting | Oh, one night. Give him a medal. | feels contemptuous and exhausted ~ 8 | B: he wants credit for the bare minimum ~ contemptuous
B>A | accusation | loud | You know what, nothing is ever enough for you. | feels humiliated and angry ~ 8 | A: she is impossible to satisfy ~ hostile
T>A,B | track | steady, a little louder | Hold on. You both just went up at the same time. {A} says something sharp, {B} fires back, and it climbs a notch each time. | names the reciprocal escalation as it unfolds | attack_attack |
A>T | defense | quick | Because he's not listening! | feels unheard ~ 7 | B: he doesn't listen ~ frustrated
B>T | defense | overlapping | I'm listening, I just don't agree! | feels misrepresented ~ 7 |
T>A,B | safeguard@ | firm, calm | I'm going to ask you both to take a breath. Nothing good gets said at this speed, and you're both running on no sleep. | slows the exchange down to protect two exhausted partners from saying more damaging things | attack_attack |
A>T | withdrawal | deflated | Fine. | feels drained and still resentful ~ 6 |
B>T | withdrawal | low | Yeah. | feels exhausted and ashamed of shouting ~ 5 |
"""

_SCENES["pt_soft"] = """
T>B | evoke | quiet | {B}, a moment ago you said nothing is ever enough. What's it like being a new dad in this house right now? | invites {B} to reach the hurt beneath his counterattack | attack_attack |
B>T | disclosure | slower, cracking | Honestly? Like I'm failing at everything. Work, the baby, her. | feels inadequate and overwhelmed ~ 8 | A: she is disappointed in him as a father ~ ashamed
T>B | evoke | soft | Failing at everything. | reflects {B}'s words back to keep him in contact with the feeling | - |
B>T | disclosure | quiet | My mom at least tells me I'm doing okay. | feels lonely and in need of reassurance ~ 7 | A: she does not think he is doing okay ~ sad
A>T | reflection | surprised | I don't think he's failing with the baby. | feels caught off guard and a bit softer ~ 5 | B: he is a good father ~ reluctant appreciation
T>A | enact | encouraging | Can you tell him that, directly? | asks {A} to speak her appreciation to {B} directly | repair_softening |
A>B | repair | soft, awkward | You're good with her. You are. I just need you with me too. | feels tender and still hurt ~ 6 | B: he is a caring father but absent as a partner ~ mixed
B>A | validation | quiet | Thanks. | feels moved but guarded ~ 5 |
T>A,B | reframe | calm | So underneath the fight there are two exhausted people who each feel alone. The argument about his mother is the stage, but the loneliness is the play. | reframes the in-law conflict as shared loneliness under strain rather than one partner's failure | "" |
A>T | reflection | thoughtful | That's... yeah. That's true. | feels understood ~ 4 |
B>T | validation | exhaling | Yeah. | feels relieved ~ 4 |
T>A,B | reframe | gentle | Two tired people, both saying yeah. That's a start. | frames the quiet agreement as a shared starting point rather than a resolution | - |
"""

_SCENES["pt_reframe"] = """
T>A,B | goal_align | warm, orienting | Last week we ended with the idea that you're both running on empty. I'd like to pick that up. Where are you today? | orients both partners to the shared working frame from last session | "" |
B>T | disclosure | tired | Still running on empty. My mom leaves Sunday, though. | feels tired but relieved ~ 5 |
A>T | other | guarded | And then we'll see. | feels skeptical ~ 5 | B: he only behaves differently when his mother is away ~ skeptical
T>A | track | curious | "We'll see." Say more about that? | follows {A}'s skepticism to see how it fits the couple's cycle | pursue_withdraw |
A>T | disclosure | sharper | Every time his mother does something, I bring it up and he changes the subject. Or he goes to the garage. | feels abandoned and angry ~ 7 | B: he avoids every difficult conversation ~ bitter
B>T | withdrawal | quiet | I don't want to be in the middle. | feels trapped between two people he loves ~ 7 | A: she puts him in the middle ~ weary
T>B | track | gentle | So when {A} brings it up, you head to the garage, and when you head to the garage, {A} brings it up louder. | maps the pursuit and withdrawal loop between the partners | pursue_withdraw |
B>T | validation | reluctant | Pretty much. | feels exposed ~ 5 |
A>B | request | pleading, rising | I just need you to say something to her. Anything. | feels desperate for backup ~ 8 | B: he could fix this with one sentence ~ pleading
B>T | withdrawal | flat | I'll think about it. | feels pressured and shuts down ~ 6 |
T>A,B | reframe | thoughtful | I wonder if the garage is {B}'s way of keeping the peace, and the pushing is {A}'s way of asking whether she still comes first. Both of those are about the marriage. | reframes withdrawal and pursuit as two protective moves aimed at the same relationship | pursue_withdraw |
"""

_SCENES["pt_mixed"] = """
A>T | reflection | quieter | Whether I come first. Yeah. | feels exposed and sad ~ 6 |
B>A | disclosure | surprised, soft | You do come first. I thought you knew that. | feels surprised and eager to reassure ~ 6 | A: she should know she comes first ~ earnest
A>B | accusation | edge returning | How would I know, when you never say it in front of her? | feels hurt and unconvinced ~ 7 | B: he never shows it in front of his mother ~ hurt
T>A,B | track | slowing | There's a softer thing and a sharper thing in the room at the same time. {B} reaching toward you, and the hurt coming right back. | names the coexisting soft and sharp signals at the pivot point | mixed_transition |
B>T | other | uncertain | So what do I do? | feels lost and eager to fix ~ 6 |
T>B | evoke | gentle | Before doing, can you tell her what it's like for you when she doubts she comes first? | moves {B} from problem-solving toward his own feeling about {A}'s doubt | pursue_withdraw |
B>A | disclosure | slow, emotional | It scares me. Like I've already let you down and didn't notice. | feels frightened and sad ~ 7 | A: she has been carrying this alone ~ remorseful
A>B | repair | softening | I don't want you scared. I want you on my side. | feels moved and still wanting reassurance ~ 6 | B: he is capable of being on her side ~ hopeful
T>A | join | warm | What's it like to hear that he's scared of letting you down? | helps {B}'s fear become something {A} can take in and respond to | repair_softening |
A>T | reflection | teary | It's... different. I thought he didn't care. | feels touched and confused ~ 6 |
T>B | reframe | soft | Maybe what looked like not caring was {B} being scared. | reframes {B}'s withdrawal as fear rather than indifference | "" |
"""

_SCENES["pt_align"] = """
T>A,B | goal_align | upbeat | You said you wanted to use today to plan for the next visit. Shall we start there? | sets the shared task for the session | constructive_alignment |
A>T | validation | calm | Yes. We actually talked in the car. | feels hopeful ~ 4 |
B>T | disclosure | steady | I'm going to tell Mom the nursery is off limits, and that I'll do bath time. | feels nervous but determined ~ 5 | A: she needs space with the baby ~ supportive
T>B | evoke | curious | How does it feel to say that out loud? | invites {B} to notice the feeling attached to setting a limit with his mother | - |
A>B | validation | warm | And I'll stop texting you at work every time she does something. | feels hopeful and committed ~ 4 | B: he needs some room to handle his mother ~ trusting
T>A,B | track | appreciative | Listen to the two of you. One of you sets a limit, the other offers to ease up. That's the team working. | names the new cooperative sequence as it happens | constructive_alignment |
B>A | reflection | a little shy | It felt better, planning it together. | feels close to her ~ 4 |
A>B | validation | soft | Yeah. | feels relieved ~ 4 |
T>A | evoke | curious | Yeah? | invites {A} to say more about how planning together feels for her | - |
A>B | request | careful | Can we have a word for when I'm at my limit? So I don't have to explain in front of her. | feels hopeful and a little vulnerable ~ 5 | B: he will respond if she signals ~ trusting
T>B | counterbalance | inviting | {B}, what do you think? You've had less room to say what you need today. | makes space for {B}'s needs so the plan is not shaped by one partner alone | "" |
B>T | disclosure | thoughtful | I'd want the same thing. Sometimes I'm at my limit too, and I just go quiet. | feels relieved to be asked ~ 5 | A: she doesn't always notice when he's overwhelmed ~ gentle
B>A | request | light | Maybe the word is garage. | feels playful and close ~ 3 |
A>B | validation | laughing | Garage. Okay. | feels amused and warm ~ 3 |
T>A,B | repair | warm, smiling | Turning the garage into a signal instead of an escape. I like that a lot. | acknowledges the old hurt and marks the couple's repair of it | repair_softening |
A>T | other | smiling | It was his idea. | feels proud of him ~ 4 | B: he is making an effort ~ appreciative
"""

# ---- rosa_and_glen: empty nest, both withdrawn (layout 1) ----------------------------------------

_SCENES["rg_quiet"] = """
T>A,B | track | gentle | When we stopped last time you'd both said the house had gone very quiet since the kids moved out. How has this week been? | opens by tracking the quiet pattern named last session | withdraw_withdraw |
A>T | other | flat | Quiet. | feels numb ~ 4 |
B>T | other | flat | Fine. | feels numb and distant ~ 3 |
T>B | - | patient | Fine. | - | - |
B>T | recollection | monotone | We had dinner. We watched the news. Same as always. | feels resigned ~ 4 | A: they are managing well enough ~ detached
A>T | recollection | monotone | He goes to bed at nine. I stay up and read. | feels lonely but accustomed to it ~ 5 | B: he goes to bed early to avoid her ~ resigned
T>A,B | track | curious, slow | It sounds like you've each found your corner of the house, and neither of you really comes out of it. | names the mutual withdrawal without blaming either partner | withdraw_withdraw |
A>T | withdrawal | quiet | I suppose so. | feels uneasy being seen ~ 5 |
B>T | withdrawal | shrugging | It's easier. | feels protective of the peace ~ 4 | A: talking would only cause arguments ~ avoidant
T>B | evoke | soft | Easier than what, {B}? | invites {B} to name what the distance protects him from | withdraw_withdraw |
B>T | disclosure | slow, reluctant | Than finding out we've got nothing left to say to each other. | feels afraid and sad ~ 7 | A: she might not want him anymore ~ fearful
A>T | reflection | surprised, quiet | I didn't know he worried about that. | feels surprised and stirred ~ 6 && B: feels exposed after saying it ~ 6 | B: he is indifferent to her ~ reconsidering
T>A | enact | inviting | Can you tell him what you're feeling right now, hearing that? | invites {A} to respond to {B} directly in the moment | mixed_transition |
A>B | disclosure | trembling | I've been scared of the same thing. For about two years. | feels frightened and relieved to say it ~ 7 | B: he has been far away for a long time ~ sad
B>A | validation | very quiet | Two years. | feels stunned and sad ~ 6 |
T>A,B | join | slow, warm | Two years of both of you holding the same fear in separate rooms. And now it's in the same room. | helps the shared fear become something both partners can take in together | repair_softening |
"""

_SCENES["rg_trip"] = """
A>T | request | more animated | I want us to go away somewhere. Just the two of us. I've asked three times. | feels eager and impatient ~ 6 | B: he keeps putting off their trip ~ impatient
B>T | withdrawal | evasive | The car needs work. | feels pressured ~ 5 |
A>B | accusation | sharper | There's always a car, {B}. | feels rejected and irritated ~ 7 | B: he makes excuses to avoid her ~ irritated
T>A,B | track | observant | Something's shifted. {A}, you're reaching now, and {B}, you're finding reasons to stay put. | tracks the new pursue-withdraw shape emerging from the old mutual withdrawal | pursue_withdraw |
B>T | defense | mumbling | I'm not finding reasons. The car does need work. | feels misunderstood ~ 5 |
T>B | counterbalance | unhurried | {B}, take your time. I don't think you've had much room today. What's it like when {A} asks about the trip? | slows the pace to give the quieter partner room to speak | pursue_withdraw |
B>T | disclosure | slow | I worry we'll go all that way and just sit there. Like at home. | feels anxious and ashamed ~ 6 | A: she will be disappointed in him ~ anxious
A>T | reflection | softening | Oh. | feels moved ~ 5 |
T>A | evoke | gentle | What's happening for you, {A}? | invites {A} to name the feeling stirred by {B}'s worry | repair_softening |
A>T | disclosure | quiet | I thought he didn't want to be alone with me. It's not that at all. | feels relieved and tender ~ 6 | B: he wants closeness but fears failing ~ tender
T>A,B | reframe | warm | So the car was never about the car. It was about both of you being afraid the silence would follow you. | reframes the excuse as a shared fear rather than a rejection | repair_softening |
Couple>T | validation | together, laughing softly | It was never the car. | A: feels relieved and amused ~ 4 && B: feels relieved and sheepish ~ 4 |
T>Couple | goal_align | light | Then maybe the trip isn't the test. Maybe it's practice. | redirects the couple toward a shared, low-stakes goal | constructive_alignment |
B>A | request | tentative | We could try the lake. Two nights. | feels hopeful and shy ~ 5 | A: she wants to be with him ~ hopeful
A>B | validation | smiling | Two nights. | feels happy ~ 5 |
T>A,B | track | warm | Two nights. You both said it. | names the couple's shared agreement as it forms | - |
"""

# ---- leah_and_omar: after his emotional affair (layout 1) ----------------------------------------

_SCENES["lo_pursue"] = """
A>T | accusation | controlled but shaking | I still don't know how long it went on. Every time I ask, he gives me a different answer. | feels betrayed and anxious ~ 9 | B: he is still hiding the truth ~ distrustful
B>T | defense | tired | I've told her. It was messages. Four months. | feels exhausted and ashamed ~ 7 | A: she won't believe anything he says ~ hopeless
T>B | - | neutral | Four months. | - | - |
A>B | accusation | sharp | Four? Last week it was three. | feels suspicious and furious ~ 8 | B: he lies to her ~ angry
B>T | withdrawal | shutting down | I can't do this again. | feels overwhelmed and wants out of the conversation ~ 8 |
T>A,B | track | calm | Let's notice where we are. {A} asks for a detail, {B} gives one, {A} finds a gap, and {B} starts to shut down. | maps the question-and-retreat sequence around the betrayal | pursue_withdraw |
A>T | defense | fast | I ask because I need to know. | feels desperate ~ 8 | B: he owes her the full truth ~ demanding
T>A | evoke | soft | I believe you. What happens inside you when an answer doesn't add up? | invites {A} to reach the fear beneath her questioning | pursue_withdraw |
A>T | disclosure | breaking | That I'm stupid. That everyone knew but me. | feels humiliated and afraid ~ 9 |
B>T | other | quiet | Nobody knew. | feels guilty ~ 7 |
A>B | accusation | bitter | How would I know that? | feels distrustful and hurt ~ 8 |
T>A | safeguard | slow, protective | {A}, I want to slow down here. You just said stupid and humiliated, and I don't want you alone with that while we argue about months. | protects the injured partner from being flooded by shame while the exchange escalates | pursue_withdraw |
A>T | withdrawal | quiet, tearful | Okay. | feels raw and exhausted ~ 8 |
T>B | enact | direct, kind | {B}, she's in a lot of pain right now. Can you turn toward her and tell her what you see? | invites {B} to respond to {A}'s pain directly instead of retreating | mixed_transition |
B>A | repair | slow, shaky | I see that I did this to you. And I keep making it worse by getting defensive. | feels remorseful and frightened ~ 8 | A: he has caused her deep pain ~ remorseful
A>B | other | guarded | I need you to stay. Not leave the room. | feels wary but hopeful ~ 7 | B: he leaves when things get hard ~ wary
T>B | enact | quiet | {B}? | invites {B} to answer {A}'s request directly | - |
B>A | validation | quiet | I'm staying. | feels committed and scared ~ 7 |
T>B | "" | warm | Mm. | brief acknowledgement of {B}'s commitment; no clear strategy | "" |
"""

_SCENES["lo_repair"] = """
T>A,B | track | grounding | Last time {B} said he'd stay in the room. I'm curious how that's gone. | tracks the couple's follow-through on the new pattern | repair_softening |
A>T | recollection | measured | He did, mostly. Tuesday he stayed when I asked about the hotel. | feels cautiously hopeful ~ 5 | B: he is trying to stay present ~ cautiously appreciative
B>T | disclosure | quiet | It was hard. I wanted to run. | feels anxious and proud of himself ~ 6 |
T>B | evoke | curious | What kept you there? | invites {B} to explore the feeling that helped him stay | "" |
B>T | disclosure | slow | I kept thinking, if I leave she's alone with it again. | feels protective and sad ~ 6 | A: she should not be alone with the pain he caused ~ caring
A>T | reflection | soft | That's the first time he's said that. | feels moved ~ 6 |
T>A | join | warm | Let that in for a second. He stayed because he didn't want you alone with it. | helps {A} receive {B}'s protective intention | repair_softening |
A>B | disclosure | teary | I've been so alone with it. | feels sad and relieved ~ 7 | B: he is beginning to understand her loneliness ~ softening
B>A | repair | gentle | I know. I'm sorry. Not for getting caught. For all of it. | feels remorseful and tender ~ 7 | A: she deserved honesty from the start ~ remorseful
T>B | repair | gentle | Say more about "all of it," {B}. | supports {B} in naming the full injury so his apology can be received | repair_softening |
B>A | repair | slow | The lying. Watching you question yourself. Letting you think it was your fault. | feels deeply ashamed and sincere ~ 8 | A: it was never her fault ~ remorseful
A>T | other | tearful, small | Yeah. | feels overwhelmed with emotion ~ 8 |
T>A | safeguard | soft, slow | Take your time, {A}. We don't need to go anywhere fast. | slows the pace to keep {A} from being flooded | - |
A>B | repair | quiet | Thank you for saying that. I don't forgive you yet. But thank you. | feels tender and guarded ~ 6 | B: his apology matters but trust is not back ~ measured
B>A | validation | quiet | That's fair. | feels accepting and sad ~ 5 |
T>A,B | goal_align | warm, steady | That's exactly where we are. Not forgiveness yet, but both of you working on the same thing. | frames the couple's stance as a shared long-term repair task | constructive_alignment |
"""

# ---- beth_and_carmen: workload, one partner louder (layout 1) ------------------------------------

_SCENES["bc_list"] = """
B>T | accusation | fast, confident | The problem is simple. I do the school run, the shopping, the bills. She does whatever she feels like. | feels overburdened and resentful ~ 7 | A: she doesn't pull her weight at home ~ resentful
T>B | - | neutral | Mm-hm. | - | - |
A>T | defense | quiet | That's not... | feels small and defensive ~ 6 |
B>T | accusation | talking over | And when I bring it up she goes silent for two days. | feels frustrated and unheard ~ 7 | A: she punishes her with silence ~ exasperated | bg=A>B: I don't go silent.
T>A | counterbalance | calm, deliberate | {B}, I'm going to pause you for a moment. {A}, you started to say something. | restores space for the quieter partner who was cut off | pursue_withdraw |
A>T | disclosure | hesitant | I work nights three times a week. When I get home I'm wrecked, and there's a list on the fridge. | feels exhausted and criticized ~ 6 | B: she treats her like an employee ~ hurt
T>A | evoke | soft | Wrecked, and then a list. | reflects {A}'s exhaustion back to bring her feeling forward | - |
B>A | accusation | sharp | The list is because nothing gets done otherwise. | feels justified and irritated ~ 6 | A: she is unreliable ~ critical
A>B | accusation | louder, surprising herself | Things get done! You just don't see them because they're not on your list! | feels angry and unseen ~ 7 | B: she never notices her contributions ~ angry
B>A | accusation | heated | Name one. | feels challenged and combative ~ 7 |
T>A,B | track | steady | Now you're both in it. {B} lists what's missing, {A} fires back about what's unseen, and it speeds up. | names the shift into reciprocal blame | attack_attack |
A>T | withdrawal | deflating | Forget it. | feels defeated ~ 6 |
T>A | safeguard | gentle, firm | I don't want to forget it, {A}. And I don't want you to disappear back into the quiet either. | protects {A} from retreating in shame after the attack while keeping her engaged | "" |
B>T | other | irritated | This is what I mean. | feels frustrated ~ 6 |
T>A,B | detach | calm, curious | What if we look at this together for a second? The list, the silence, the list getting longer. It's like a machine you're both feeding. | invites the couple to step back and look at their cycle as a shared pattern | attack_attack |
B>T | reflection | grudging | A machine. Okay. | feels skeptical but curious ~ 5 |
A>T | reflection | quiet | It does feel like that. | feels slightly hopeful ~ 4 |
T>A,B | reframe | warm | A machine neither of you built on purpose, and neither of you can switch off alone. | recasts the chore fight as a shared cycle rather than one partner's failing | - |
"""

_SCENES["bc_plan"] = """
T>A,B | goal_align | practical, warm | So today you wanted to rebuild the weekly plan, with both of your voices in it. | sets a collaborative working frame for the session | constructive_alignment |
B>T | disclosure | more measured | I've been thinking about what {A} said, that I don't see what she does. | feels uncomfortable but open ~ 5 | A: she contributes more than she realized ~ reconsidering
T>B | evoke | curious | What was that like to think about? | invites {B} to notice the feeling under her reconsideration | repair_softening |
B>T | disclosure | quiet | Embarrassing. She does the laundry at six in the morning after a shift. I'm asleep. | feels embarrassed and tender ~ 6 | A: she works hard without recognition ~ appreciative
A>B | validation | surprised, soft | You noticed. | feels seen and moved ~ 6 |
T>A | counterbalance | inviting | {A}, what would you want on the plan, if it was your list too? | gives the less-heard partner an equal voice in shaping the plan | - |
A>T | request | steadier | No list on the fridge. Can we sit down on Sundays and split things together? | feels hopeful and brave ~ 5 | B: she would be willing to plan together ~ hopeful
B>A | validation | nodding | Sundays. Yes. And I'll stop saying nothing gets done. | feels relieved and committed ~ 4 | A: she deserves acknowledgement ~ appreciative
T>A,B | track | appreciative | Notice how different this sounds. {A} asked, {B} said yes, and nobody had to win. | names the new cooperative sequence | constructive_alignment |
A>B | other | half-joking | Can we burn the list? | feels playful ~ 3 |
B>A | other | laughing | We can recycle the list. | feels amused and warm ~ 3 |
T>Couple | join | warm, amused | The two of you laughing together. I haven't seen that in here before. | helps the shared moment of warmth register for both partners | repair_softening |
B>T | reflection | soft | Me neither. Not in a while. | feels tender and a little sad ~ 5 |
A>T | validation | quiet | Not in a long while. | feels wistful and hopeful ~ 5 |
T>A,B | repair | gentle | Maybe part of Sunday is just that. Ten minutes where you're on the same side before the chores. | supports the couple in building a small ritual of reconnection | constructive_alignment |
"""

# ---- family_a: mother Carla, son Devin (15), daughter Ivy (12) (layout 1) ------------------------

_SCENES["fa_open"] = """
T>Family | join | warm, welcoming | Thanks for coming in, all three of you. I know getting everyone out the door on a school night is no small thing. | welcomes the family and acknowledges the effort of attending | cooperative_family_alliance | The family has arrived together and the therapist is building a shared working frame; no conflict yet.
C>T | other | brisk, tired | Well, it wasn't easy. Someone wouldn't get off his game. | feels exasperated ~ 5 | D: he cares more about games than family ~ irritated
T>D | join | light, friendly | What game? | makes contact with {D} through his interest to build engagement | - |
D>C | defense | mumbled | I was finishing a match. | feels picked on ~ 4 |
I>T | other | bright | I was ready first. | feels eager to please ~ 3 |
T>I | join | playful, warm | You were ready first. Thank you, {I}. | acknowledges the youngest member warmly to include her | - |
T>Family | track | curious | So what brings the three of you here? Who'd like to start? | opens the floor and begins tracking how the family organizes around the problem | "" | Members have only given brief openings; no dominant family pattern yet.
C>T | disclosure | worn out | Him. {D}'s missed eleven days of school since September. The school wants a meeting with the district. | feels anxious and overwhelmed ~ 7 | D: he is throwing away his future ~ worried and angry
D>T | withdrawal | flat | It's not eleven. | feels defensive and embarrassed ~ 5 |
C>D | accusation | sharp | It's eleven, {D}. I have the emails. | feels frustrated and disbelieved ~ 7 | D: he lies to make the problem smaller ~ distrustful | overlap
I>T | other | helpful | Mom reads them to me sometimes. | feels important ~ 4 |
T>C | track | gentle, curious | {C}, when a school email comes in, what happens next at home? | follows the sequence around the school emails to see how the family organizes around {D} | pursue_withdraw | {C} presses about the absences while {D} minimizes and goes flat; one member pursues while another retreats.
C>T | recollection | speeding up | I go to his room, I try to talk to him, and he puts his headphones on. So I get louder. | feels desperate and ignored ~ 8 | D: he shuts her out ~ hurt and angry
D>T | defense | low, irritated | Because she yells. | feels attacked ~ 6 | C: she yells instead of talking ~ resentful
T>D | counterbalance | calm, inviting | {D}, I'd like to hear your side of that. What's it like when she comes to your room? | gives {D}, who has said the least, room to describe his experience | pursue_withdraw | The mother pursues and the son retreats behind his headphones; the therapist brings the withdrawing member in.
D>T | disclosure | quiet | Like, I already know I messed up. She doesn't have to keep saying it. | feels ashamed and overwhelmed ~ 6 | C: she repeats the same criticism over and over ~ weary
I>D | accusation | quick | But you did mess up. | feels protective of her mother ~ 5 | D: he causes the problems at home ~ disapproving
D>I | accusation | snapping | Nobody asked you. | feels ganged up on and angry ~ 7 | I: she always takes Mom's side ~ resentful | overlap
C>D | accusation | raised | Don't talk to your sister like that! | feels protective and angry ~ 7 | D: he takes his anger out on his sister ~ angry
T>Family | track | steady | I want to pause on this. {I} speaks up for Mom, {D} snaps at {I}, and Mom steps in for {I}. It happens fast. | names the alignment of mother and daughter against the son as it happens | cross_generational_coalition | Mother and daughter align against {D}; the exchange is organized by that cross-generational pairing rather than by a simple argument.
"""

_SCENES["fa_coalition"] = """
C>T | defense | defensive | She's not taking sides. She just sees what I see. | feels defensive and misunderstood ~ 6 | I: she is a reliable ally ~ approving
D>T | withdrawal | muttering | Two against one. Always. | feels isolated and outnumbered ~ 7 | C: she and his sister always gang up on him ~ bitter
T>D | counterbalance | quiet, direct | Always two against one? | stays with {D}'s experience of being outnumbered so it is not brushed aside | ""/cross_generational_coalition | {D} names being outnumbered by his mother and sister; the coalition still organizes the interaction.
D>T | disclosure | low | Mom tells {I} everything. About Dad, about money, about me. Then {I} looks at me like I'm the problem. | feels betrayed and lonely ~ 7 | C: she confides in his sister instead of him ~ hurt
C>T | defense | taken aback | I don't tell her everything. | feels exposed and caught out ~ 6 |
I>C | other | small | You kind of do. | feels uneasy ~ 5 | C: she shares a lot with her ~ uneasy
T>I | counterbalance | gentle | {I}, that sounded hard to say. What's it like, hearing all of that? | brings the youngest member's own experience into the conversation | boundary_hierarchy_strain | {I} is carrying adult information about money and her father; the generational boundary is blurred.
I>T | disclosure | quiet, looking at hands | Sometimes I can't sleep. I worry about the money. | feels anxious and burdened ~ 6 | C: she is relying on her for support ~ worried
C>I | reflection | stunned, softer | You never told me that, baby. | feels guilty and worried ~ 7 && I: feels worried she has upset her mother ~ 5 | I: she has been hiding her worries ~ concerned
T>C | boundary | calm, clear | {C}, it sounds like {I} has become a bit of a partner to you since the separation. That's a lot of weight for a twelve-year-old. | names the parentified role and begins to reorganize the mother-daughter boundary | boundary_hierarchy_strain | The mother leans on her daughter as a confidante about adult matters, a role reversal across generations.
C>T | disclosure | tearful | I didn't have anyone else. | feels lonely and ashamed ~ 8 |
T>C | join | soft | That makes sense. You've been holding this family together on your own. | validates {C}'s isolation to keep her engaged while the boundary is being named | "" | The therapist validates the mother; the moment is supportive but no family pattern dominates it. | emo=C: looks relieved to be understood ~ 5
D>T | reflection | quiet, surprised | I didn't know {I} couldn't sleep. | feels surprised and concerned for his sister ~ 5 | I: she has it easy ~ reconsidering
T>D | enact | inviting | Can you tell her that yourself, {D}? | invites {D} to speak to his sister directly | repair_softening | The son's concern for his sister opens a softer moment within the sibling subsystem.
D>I | repair | awkward, quiet | I didn't know. Sorry I snapped at you. | feels awkward and caring ~ 5 | I: she is also struggling ~ caring
I>D | validation | small smile | It's okay. | feels relieved ~ 4 |
T>Family | join | warm | That was a nice moment between you two. | highlights and supports the brief sibling reconnection for the whole family | repair_softening | Apology and acceptance between the siblings; blame is loosening.
"""

_SCENES["fa_close"] = """
T>C,D,I | reframe | warm, summarizing | Here's what I'm noticing. When the school emails come, everyone's worry goes up: {C} reaches for {I}, {D} goes behind his headphones, and {I} ends up worrying about grown-up things. The absences are one piece of a bigger family pattern. | shifts the problem from {D}'s absences to a shared family process | mixed_transition | Coalition, withdrawal and a first sibling repair are all salient at once as the therapist links them.
C>T | reflection | slow | So it's not just {D}. | feels relieved and a little uneasy ~ 5 | D: he is not the only problem ~ reconsidering
D>T | other | quiet | Huh. | feels surprised ~ 4 |
T>D | track | curious, light | Huh? | follows {D}'s surprised reaction to the family-level view | - |
D>T | other | shrugging | Nobody's ever said it's not just me. | feels surprised and a little relieved ~ 5 | C: she blames him for everything ~ softening
T>Family | boundary | steady | For next week I'd like to try something. {C}, the school emails are between you and the school, and then you and {D}. Not {I}. | sets a concrete boundary that keeps school matters in the parent subsystem | boundary_hierarchy_strain | The daughter has been drawn into the parent's role with the school; the therapist restores the hierarchy.
I>T | other | relieved | Okay. | feels relieved ~ 4 |
C>T | validation | resolute | Okay. I can do that. | feels determined and a little sad ~ 5 |
T>C | boundary | warm | That's a big shift. | acknowledges {C}'s willingness to take the school role back from {I} | - |
D>T | other | guarded | And she won't read them out in front of everybody? | feels cautiously hopeful ~ 5 | C: she shames him in front of the family ~ guarded
T>C | enact | inviting | Can you answer him directly? | invites {C} to respond to {D} directly about the new arrangement | cooperative_family_alliance | The family begins to agree on a shared plan; mother and son negotiate directly.
C>D | repair | softer | Just you and me. I promise. | feels tender and committed ~ 6 | D: he deserves privacy ~ accepting
D>C | validation | mumbled | Okay. | feels cautiously relieved ~ 4 |
T>Family | reframe | warm | That's the family doing something different, right here. | frames the mother-son agreement as a new family pattern rather than a concession | cooperative_family_alliance | Mother and son settle a plan together while {I} is released from the middle; the family shares a constructive stance.
"""

_SCENES["fa_week"] = """
T>Family | join | warm | Welcome back. How has the week been with the new arrangement around the emails? | re-engages the family and checks in on the agreed plan | "" | Opening check-in; members have not yet interacted with one another.
C>T | other | tired | Fine. | feels tired ~ 4 |
D>T | other | flat | Fine. | feels disengaged ~ 3 |
I>T | other | quiet | Yeah, fine. | feels uneasy ~ 4 |
T>Family | track | curious, light | Three fines. That's a lot of fine for one family. | names the family's collective low-engagement response | mutual_disengagement | All three members answer minimally and look away; the family is collectively avoiding the central issue.
C>T | withdrawal | evasive | We're all just tired. | feels reluctant to open things up ~ 5 |
D>T | withdrawal | looking at phone | Can we just get this over with? | feels bored and irritated ~ 5 |
T>D | counterbalance | calm | {D}, you sound like you'd rather be anywhere else. I'm curious what happened this week. | draws the most disengaged member into the conversation without blaming him | mutual_disengagement | Members keep deflecting; nobody engages with the issue.
D>T | recollection | reluctant | There was another email. About Thursday. | feels anxious ~ 6 |
T>D | - | neutral | Okay. | - | - |
C>T | recollection | sharper | And I handled it with him. Like we said. Without {I}. | feels defensive and proud ~ 6 | D: he still missed Thursday ~ frustrated
D>C | accusation | heated | You handled it by taking my phone for a week! | feels angry and controlled ~ 7 | C: she punishes instead of listening ~ angry
C>D | accusation | loud | Because you skipped! What am I supposed to do, throw a party? | feels furious and helpless ~ 8 | D: he doesn't take school seriously ~ angry | overlap
I>T | withdrawal | very quiet | I'm going to the bathroom. | feels anxious and wants to leave ~ 6 |
T>Family | safeguard | calm, slower | Let's all slow down. {I}, you can stay or go, but I noticed you wanted to leave the moment the voices went up. | slows the escalation and protects the youngest member from being caught in the conflict | escalation_conflict | Mother and son trade blame at rising volume while the daughter tries to escape.
I>T | disclosure | small | I hate it when they yell. | feels scared and sad ~ 7 | C: the yelling at home upsets her ~ sad
T>I | safeguard | gentle | Thank you for telling us, {I}. That takes courage. | protects and validates the youngest member after she names her fear of the yelling | escalation_conflict | The yelling between mother and son is still in the room and {I} is frightened by it.
T>C,D | enact | firm, warm | {C}, {D}, can you look at each other for a moment? Not at me. Tell each other what Thursday was like. | invites mother and son to interact directly so the conflict can be reorganized in the room | escalation_conflict | The conflict between mother and son is still hot; the therapist moves it into a direct exchange.
D>C | disclosure | angry, then quieter | I skipped because there was a test and I knew I'd fail. | feels ashamed and afraid ~ 7 | C: she only cares about attendance ~ hurt
C>D | reflection | caught off guard | You never said that. | feels surprised and worried ~ 6 | D: he hides his struggles ~ worried | overlap
"""

_SCENES["fa_repair"] = """
T>C | repair | gentle | What happens for you, {C}, when you hear he was afraid of failing? | supports {C} in acknowledging the fear behind her son's absence | repair_softening | Mother and son shift from blame toward vulnerability after {D} names his fear.
C>T | disclosure | voice breaking | I feel awful. I've been yelling at him about the wrong thing. | feels guilty and sad ~ 8 | D: he has been struggling alone ~ remorseful
T>C | repair | soft | Can you tell him that? | supports {C} in offering acknowledgement directly to her son | repair_softening | The mother's guilt and the son's fear are out in the open; defensiveness is dropping.
C>D | repair | tearful | I'm sorry, {D}. I didn't know school was that scary right now. | feels remorseful and tender ~ 7 | D: he needs help rather than punishment ~ compassionate
D>C | validation | quiet, looking down | It's fine. | feels embarrassed and relieved ~ 5 |
I>D | validation | shy | I can help you with math. I'm good at math. | feels hopeful and wants to help ~ 4 | D: he could use help ~ supportive
D>I | other | half-smile | You're in sixth grade. | feels amused and touched ~ 3 |
T>Family | track | warm | Look at this. A minute ago there was yelling and {I} was heading for the door. Now {I}'s offering help and {D}'s almost smiling. | names the shift from escalation to cooperation as it happens | mixed_transition | The family is moving from escalation into early cooperation; both signals are present at this pivot.
C>T | reflection | thoughtful | He does smile. Sometimes. | feels fond and hopeful ~ 5 |
T>C | boundary | gentle, clear | I love that {I} wants to help. And I wonder if the help {D} needs with school should come from you and the school, so {I} gets to just be his sister. | reinforces the parent-child boundary while honoring the sibling's care | cooperative_family_alliance | The family members are coordinating around helping {D}; the therapist keeps the roles clear within that shared stance.
C>I | validation | nodding | That's fair. {I}, you're off duty. | feels relieved and a bit lighter ~ 4 | I: she has been doing too much ~ caring
I>T | other | giggling | Off duty. | feels relieved and happy ~ 3 |
T>Family | join | smiling | I like that. Off duty. | joins the family's lighter moment to strengthen the alliance | cooperative_family_alliance | The family is laughing together about the new arrangement.
"""

_SCENES["fa_plan"] = """
T>C,D,I | reframe | warm, summarizing | So the plan isn't just about {D} getting to school. It's about all three of you getting your roles back: {C} as the parent, {D} as a student who's allowed to be scared, {I} as a kid. | reframes the school problem as a shared family reorganization | cooperative_family_alliance | All three members accept a shared view of the problem and their part in it.
D>T | validation | quiet | Yeah. That sounds right. | feels understood ~ 4 |
T>D | - | soft | Mm. | - | - |
C>T | request | earnest | Can we meet with the school together? Me and {D}? | feels hopeful and determined ~ 5 | D: he can face the school with support ~ hopeful
T>D | counterbalance | inviting | {D}, what do you think? It's your school. | makes sure {D} has a say in the plan rather than having it decided for him | cooperative_family_alliance | Mother and son are planning together; the therapist keeps the son's voice in the alliance.
D>C | validation | reluctant but warm | If you don't do the talking the whole time. | feels cautiously engaged ~ 5 | C: she takes over conversations ~ wary but willing
C>D | validation | laughing | Deal. | feels relieved and warm ~ 4 |
I>T | request | hopeful | Can we get pizza after? | feels happy and included ~ 3 |
T>Family | join | smiling | That might be the best plan of the day. | joins the family's lighter mood to consolidate the alliance | cooperative_family_alliance | The family ends the session laughing and agreeing on next steps.
C>Family | other | smiling | Pizza it is. | feels content ~ 4 |
"""

# ---- family_b: mother Sofia, son Mateo (14), grandmother Helen (layout 2) ------------------------

_SCENES["fb_open"] = """
T>Family | join | warm | Welcome, all of you. {H}, thank you for coming across town for this. | welcomes the family and specifically acknowledges the grandmother's effort | "" | Opening welcome; no family interaction pattern yet.
T>M | join | friendly | And {M}, I hear you came straight from practice. | makes contact with the adolescent to build his engagement | "" | Joining with {M} at the start; the family state is not yet visible.
H>T | other | warm, proud | He scored twice on Saturday. | feels proud of her grandson ~ 5 | M: he is a talented boy ~ proud
M>T | other | shy grin | Once, really. The second was an own goal. | feels embarrassed and pleased ~ 3 |
T>M | join | laughing | An own goal still counts as excitement. | joins with {M} through humor to build his engagement | - |
S>T | disclosure | tense | That's the thing. Football is great. Everything else is a fight. Curfew, homework, his phone. | feels frustrated and outnumbered ~ 6 | M: he only cares about football ~ frustrated
T>S | track | curious | Everything else is a fight. Who's in the fight? | begins tracking how the family organizes around conflict | cross_generational_coalition | {S} describes fighting alone while {H} praises {M}; a grandmother-grandson alignment is already visible.
S>T | accusation | bitter | Me. Against both of them. I set a curfew, and Mom lets him stay out because he's "just a boy." | feels undermined and alone ~ 8 | H: she undermines her authority ~ resentful
H>S | defense | firm | He's fourteen, {S}. You were out later than that at his age. | feels defensive and protective ~ 6 | S: she is too strict with the boy ~ disapproving | overlap
M>T | other | quiet, grinning | Grandma's right. | feels smug and a little uneasy ~ 4 | H: she is on his side ~ affectionate
T>Family | track | steady, observant | Let me say what I'm seeing. {S} sets a rule, {H} softens it, {M} leans toward {H}, and {S} ends up on her own. | names the grandmother-grandson coalition around the mother's rules | cross_generational_coalition | Grandmother and grandson align against the mother's rules, leaving {S} isolated; a cross-generational coalition organizes the exchange.
S>T | validation | tearful, angry | Every single time. | feels hurt and validated ~ 7 |
H>T | defense | indignant | I'm only trying to help. She works late. Someone has to be there for him. | feels unappreciated and defensive ~ 7 | S: she is not home enough for her son ~ critical
T>H | join | respectful | You've been there for him a lot. That's a real gift to this family. | affirms the grandmother's care to keep her engaged before addressing the structure | cross_generational_coalition | The grandmother defends her alliance with {M}; the coalition is still the organizing pattern.
H>T | validation | softening | Thank you. Somebody noticed. | feels appreciated ~ 5 |
"""

_SCENES["fb_fight"] = """
S>H | accusation | loud | Noticed? You've taken over, Mom! He doesn't listen to me because he knows you'll say yes! | feels furious and undermined ~ 9 | H: she has taken over her role as a parent ~ enraged
H>S | accusation | louder | Because you're never there! Someone has to raise him! | feels insulted and angry ~ 8 | S: she is a neglectful mother ~ contemptuous | overlap
M>Family | other | uncomfortable | Can you both stop? | feels caught in the middle and anxious ~ 7 | S: she and his grandmother always fight over him ~ distressed
S>M | accusation | sharp | Stay out of it, {M}. | feels overwhelmed ~ 8 |
T>Family | safeguard | firm, calm | I'm going to stop us here. {M} just asked you both to stop, and I think he's right. This is a lot for him to sit in the middle of. | interrupts the escalating exchange to protect the adolescent caught between mother and grandmother | escalation_conflict | Mother and grandmother trade accusations at rising volume while {M} is pulled in.
M>T | withdrawal | mumbling, looking at floor | Whatever. It's always like this. | feels hopeless and withdrawn ~ 6 | S: fights are normal at home ~ resigned
T>M | counterbalance | gentle | It's always like this? Tell me what it's like for you, {M}. | brings the adolescent's perspective into the room | escalation_conflict | The adults' conflict has just peaked; {M} retreats while the therapist turns to him. | emo=M: looks startled to be asked ~ 4
M>T | disclosure | quiet | When they fight about me I just go to my room. Or to Grandma's. | feels lonely and responsible ~ 6 | H: her house is his escape ~ grateful
T>M | - | soft | Mm. | - | - |
H>T | reflection | quiet, struck | I didn't think about it from his side. | feels saddened and reflective ~ 6 | M: he is hurt by the fighting ~ concerned
T>S,H | reframe | thoughtful | So both of you are fighting for {M}. And {M} ends up running from the fight that's about him. | reframes the mother-grandmother conflict as two people caring for the same child in competing ways | mixed_transition | The grandmother softens while the mother is still angry; conflict and repair signals are both present.
S>T | reflection | slowly | I don't want him running from me. | feels sad ~ 7 | M: he avoids her ~ sad
H>S | repair | softer | I don't want that either, love. | feels remorseful ~ 6 | S: she is a good mother under pressure ~ softening
T>S | repair | gentle | {S}, did you hear what your mom just said? | helps the grandmother's softer words reach the mother | repair_softening | The grandmother offers a softer word and the mother is beginning to hear it.
"""

_SCENES["fb_roles"] = """
T>H | boundary;join@H | respectful, clear | {H}, I wonder if it would help {S} if, when it comes to curfew and the phone, you send {M} back to his mom. Still loving him, just not deciding. | reorganizes the hierarchy so the mother holds parental decisions while the grandmother keeps a warm role // keeps the grandmother engaged by honoring her care | boundary_hierarchy_strain | The grandmother has been acting as a co-parent and overriding the mother; {H}\u00e2\u0080\u0099s role and {S}\u00e2\u0080\u0099s authority are blurred.
H>T | defense | hesitant | So I just say no to him? | feels uncertain and a little hurt ~ 6 |
T>H | boundary | warm | You say "ask your mom." That's all. | clarifies the grandmother's role in a concrete, respectful way | boundary_hierarchy_strain | The generational roles are being sorted out; the grandmother is unsure of her new place.
H>M | validation | resigned, then warm | Ask your mom, sweetheart. | feels uncertain but willing ~ 5 | M: he needs to respect his mother's rules ~ accepting
M>T | other | half-smiling | That's going to be weird. | feels amused and wary ~ 4 |
S>H | disclosure | emotional | Thank you, Mom. I've needed that for a long time. | feels relieved and grateful ~ 7 | H: she can support her authority ~ grateful
T>S,M | enact | inviting | {S}, {M}, could the two of you talk about curfew right now? What would be a fair time? | invites mother and son to negotiate directly in session | cooperative_family_alliance | The family begins coordinating around a shared plan with the roles clearer.
M>S | request | tentative | Ten on weekends? | feels hopeful ~ 4 | S: she might be reasonable ~ hopeful
S>M | validation | considering | Ten thirty if you text me when you leave. | feels pleased and generous ~ 5 | M: he can be trusted with a bit more freedom ~ trusting
M>S | validation | surprised | Seriously? Deal. | feels happy and surprised ~ 5 |
H>T | reflection | proud | Look at that. | feels proud and moved ~ 5 && S: feels relieved and proud of her son ~ 5 |
T>Family | track | warm | Did everyone see what just happened? {M} asked his mom, {S} said yes with a condition, and {H} got to watch instead of referee. | names the new cooperative sequence in which each member holds their own role | cooperative_family_alliance | Each member holds their own role and they reach an agreement together.
S>T | reflection | soft | It was easier. | feels relieved ~ 5 |
T>Family | reframe | warm | It was easier because nobody had to fight alone. | reframes the new arrangement as the family working together rather than anyone giving in | cooperative_family_alliance | The family shares a constructive stance toward the curfew problem.
"""

_SCENES["fb_close"] = """
H>T | request | quiet | Can I still pick him up after practice? | feels worried about losing her place ~ 6 | S: she might push her away now ~ anxious
T>S | enact | gentle | {S}, what do you think? | invites the mother to answer the grandmother directly | cooperative_family_alliance | Mother and grandmother renegotiate their roles cooperatively.
S>H | repair | warm | Of course, Mom. We need you. Just on the same team. | feels warm and reassured ~ 5 | H: she is an important part of the family ~ loving
M>Family | other | grinning | Team Grandma. | feels playful ~ 3 |
T>Family | join | laughing | Team family, maybe. | joins the family's humor while reinforcing the shared stance | cooperative_family_alliance | The session closes with shared humor and a joint stance.
H>T | validation | laughing | Team family. | feels happy ~ 4 |
"""

# --------------------------------------------------------------------------------------------------
# The bundled samples, in file order (not sorted; family samples in the middle).
# options: participants (role keys in order), ie_order ("ipe": intensity before emotion_description),
# vp_order ("stav": attitude before viewpoint), row_index_first, start (first start_time)
# --------------------------------------------------------------------------------------------------

_BUNDLED: list[tuple[str, str, list[str], dict[str, Any]]] = [
    ("dana_and_marcus/001_synthetic_segment01", "dana_and_marcus", ["dm_open", "dm_soft"], {"participants": "AB"}),
    ("priya_and_tomas/001_synthetic_segment01", "priya_and_tomas", ["pt_fight", "pt_soft"], {"participants": "BA"}),
    ("dana_and_marcus/001_synthetic_segment02", "dana_and_marcus", ["dm_money", "dm_money2"], {"participants": "AB"}),
    ("rosa_and_glen/001_synthetic_segment01", "rosa_and_glen", ["rg_quiet"], {"participants": "AB"}),
    ("family_therapy/001/merged", "family_a", ["fa_open", "fa_coalition", "fa_close"], {"participants": "CDI"}),
    ("leah_and_omar/002_synthetic_segment01", "leah_and_omar", ["lo_pursue"], {"participants": "BA"}),
    ("priya_and_tomas/001_synthetic_segment02", "priya_and_tomas", ["pt_reframe", "pt_mixed"], {"participants": "BA"}),
    ("beth_and_carmen/001_synthetic_segment02", "beth_and_carmen", ["bc_list"], {"participants": "AB"}),
    ("rosa_and_glen/001_synthetic_segment02", "rosa_and_glen", ["rg_trip"], {"participants": "AB"}),
    ("family_therapy/003/merged", "family_b", ["fb_open", "fb_fight", "fb_roles", "fb_close"],
     {"participants": "MSH", "vp_order": "stav"}),
    ("dana_and_marcus/002_synthetic_segment01", "dana_and_marcus", ["dm_repair"], {"participants": "AB"}),
    ("leah_and_omar/002_synthetic_segment03", "leah_and_omar", ["lo_repair"],
     {"participants": "BA", "row_index_first": True}),
    ("priya_and_tomas/003_synthetic_segment01", "priya_and_tomas", ["pt_align"],
     {"participants": "BA", "ie_order": "ipe"}),
    ("beth_and_carmen/004_synthetic_segment01", "beth_and_carmen", ["bc_plan"], {"participants": "AB"}),
    ("family_therapy/002/merged", "family_a", ["fa_week", "fa_repair", "fa_plan"],
     {"participants": "CDI", "ie_order": "ipe"}),
]

# Scenes that end an episode: the scaler keeps them last.
_CLOSING = {"fa_close", "fa_plan", "fb_close"}

# Invented first names for scaled samples; none is used by the bundled units.
_NAMES = {
    "f": ("Abby Adele Alma Amara Anika Aria Bea Bianca Celia Clara Cora Daisy Della Dina Edie Elena Elsa "
          "Esme Eva Faye Fiona Gemma Gina Greta Hana Hazel Hope Ines Iris Jade Jana Joy June Kara Kate "
          "Kira Lana Lena Lila Lottie Lucia Mae Maren Mara Maya Mina Nell Noor Nora Olga Opal Paula Petra "
          "Pia Quinn Rena Rhea Ruth Sade Sana Selma Tara Tess Uma Vera Wren Yara Zara Zoe Alba Bree Cleo "
          "Dora Effie Freya Gwen Hilde Isla Jolene Keira").split(),
    "m": ("Aaron Abel Ahmed Alvin Amos Anton Arlo Ben Boris Caleb Cyrus Dario Dean Eli Emil Ezra Felix "
          "Finn Gabe Gus Hugo Ian Ira Jonas Kai Karl Leo Luca Milo Nate Neil Nico Noah Oren Oscar Owen "
          "Pablo Paul Quentin Rafael Reid Rex Rory Ruben Sami Saul Seth Silas Tariq Theo Toby Umar Victor "
          "Wade Wes Yusuf Zane Arjun Bram Cal Eddie Frank Hal Jude Len Max Otto Pedro Ravi Stellan").split(),
}

# --------------------------------------------------------------------------------------------------
# Parsing the scene scripts
# --------------------------------------------------------------------------------------------------

_PERSON_PREFIX = re.compile(r"^([A-Z]):\s*(.*)$", re.S)


def _split(text: str, sep: str) -> list[str]:
    return [p.strip() for p in text.split(sep) if p.strip()]


def _parse_label(field: str) -> Any:
    if field in ("", "-"):
        return None
    if field == '""':
        return ""
    if "/" in field:
        state, pattern = field.split("/", 1)
        return ("" if state == '""' else state, "" if pattern == '""' else pattern)
    return field


def _parse_emotion(item: str) -> tuple[str | None, str, int]:
    match = _PERSON_PREFIX.match(item)
    person, rest = (match.group(1), match.group(2)) if match else (None, item)
    desc, _, num = rest.rpartition("~")
    return person, desc.strip(), int(num)


def _parse_extras(field: str) -> dict[str, Any]:
    extras: dict[str, Any] = {"bg": [], "emo": [], "overlap": False}
    for item in _split(field, " ;; "):
        if item == "overlap":
            extras["overlap"] = True
        elif item.startswith("bg="):
            head, _, content = item[3:].partition(":")
            spk, _, tgt = head.partition(">")
            extras["bg"].append((spk.strip(), _split(tgt, ","), content.strip()))
        elif item.startswith("emo="):
            extras["emo"].append(_parse_emotion(item[4:]))
        else:
            raise ValueError(f"unknown extra {item!r}")
    return extras


def _parse_scene(name: str) -> list[dict[str, Any]]:
    rows = []
    for raw in _SCENES[name].split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in (line + " ").split(" | ")]  # a trailing "|" ends an empty field
        spk, _, tgt = parts[0].partition(">")
        row: dict[str, Any] = {"speaker": spk, "targets": _split(tgt, ",")}
        if spk == "T":
            parts += [""] * (8 - len(parts))
            strat, tone, text, content, label, reason, extras = parts[1:8]
            items = []
            if strat != "-":
                contents = [c.strip() for c in content.split(" // ")]
                for k, spec in enumerate(strat.split(";")):
                    stype, has_at, tg = spec.partition("@")
                    items.append((
                        "" if stype == '""' else stype,
                        _split(tg, ",") if has_at else None,
                        contents[k] if k < len(contents) else contents[-1],
                    ))
            row.update(kind="therapist", tone=tone, text=text, strategies=items, label=_parse_label(label),
                       reason=reason, utype="", emotions=[], viewpoints=[])
        else:
            parts += [""] * (7 - len(parts))
            utype, tone, text, emotions, viewpoints, extras = parts[1:7]
            vps = []
            for item in _split(viewpoints, " && "):
                match = _PERSON_PREFIX.match(item)
                if not match:
                    raise ValueError(f"viewpoint without target in {name}: {item!r}")
                vp, _, att = match.group(2).rpartition("~")
                vps.append((match.group(1), vp.strip(), att.strip()))
            row.update(kind="client", tone=tone, text=text, utype=utype, strategies=[], label=None, reason="",
                       emotions=[_parse_emotion(e) for e in _split(emotions, " && ")], viewpoints=vps)
        if not row["text"]:
            raise ValueError(f"empty text in scene {name}: {line!r}")
        row.update(_parse_extras(extras))
        row["scene"] = name
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------
# Cue pools (person = the speaker; {tgt} = the first addressee)
# --------------------------------------------------------------------------------------------------

_MOOD = {
    "accusation": "heated", "defense": "heated", "withdrawal": "withdrawn", "disclosure": "open",
    "recollection": "open", "reflection": "open", "other": "open", "validation": "soft", "repair": "soft",
    "request": "soft", "": "therapist",
}

_POSTURE = {
    "heated": ["sitting forward on the edge of the seat", "shoulders squared, turned toward {tgt}",
               "upright and rigid, arms tight at the sides", "leaning in, one hand raised"],
    "withdrawn": ["turned slightly away, arms crossed", "slumped back into the couch",
                  "angled toward the door, knees pulled in", "leaning back with hands tucked under thighs"],
    "open": ["leaning forward, elbows on knees", "sitting still, hands folded in lap",
             "shifting position, then settling back", "head tilted down, shoulders rounded"],
    "soft": ["turned toward {tgt}, shoulders relaxed", "leaning slightly toward {tgt}",
             "posture loosened, sitting a little closer", "uncrossing arms and resting hands on knees"],
    "therapist": ["leaning forward, hands open on knees", "sitting upright, oriented toward {tgt}",
                  "still, relaxed posture", "turning the chair slightly toward {tgt}"],
}
_FACE = {
    "heated": ["jaw tight, eyes narrowed", "brow furrowed, lips pressed together", "flushed, eyes wide",
               "tight half-smile of disbelief"],
    "withdrawn": ["flat expression, avoiding eye contact", "eyes fixed on the floor",
                  "blank stare toward the window", "lips pressed, face unreadable"],
    "open": ["eyes lowered, brow slightly creased", "eyes glistening, blinking quickly", "thoughtful frown",
             "searching look toward the therapist"],
    "soft": ["softened eyes, small nod", "faint smile, eyes moist", "gentle, open expression",
             "tearful but steady gaze"],
    "therapist": ["attentive, warm expression", "calm, steady gaze", "slight nod, eyebrows raised in interest",
                  "serious and focused"],
}
_SELF = {
    "heated": ["tapping foot rapidly", "gripping the armrest", "rubbing forehead hard", "tugging at a sleeve cuff"],
    "withdrawn": ["picking at a loose thread on the sleeve", "turning a ring around a finger",
                  "thumb moving over a closed phone", "rubbing the back of the neck"],
    "open": ["twisting a tissue in both hands", "wiping eyes with the back of a hand", "rubbing palms together slowly",
             "touching the collar of the shirt"],
    "soft": ["exhaling slowly", "pressing a hand to the chest", "wiping a tear away", "releasing clenched hands"],
    "therapist": ["resting the notepad on the lap"],
}
_INTERACT = {
    "heated": ["points toward {tgt} while speaking", "cuts across {tgt} with a raised hand", "glares at {tgt}",
               "turns the whole body toward {tgt} to confront"],
    "withdrawn": ["glances at {tgt} briefly, then looks away", "turns a shoulder away from {tgt}",
                  "answers without looking at {tgt}"],
    "open": ["looks toward {tgt} for a response", "holds eye contact with {tgt} while explaining",
             "gestures with open palms toward {tgt}"],
    "soft": ["reaches a hand toward {tgt}", "holds the gaze of {tgt}", "nods slowly at {tgt}",
             "leans toward {tgt} while speaking"],
    "therapist": ["looks from one person to the next, inviting a response", "gestures toward {tgt} to hand over the floor",
                  "holds eye contact with {tgt}", "raises a hand gently to pause the exchange"],
}
_BACKCHANNEL = ["Mm-hm.", "Okay.", "Right.", "Mm."]


def _display(target: str) -> str:
    if target == THERAPIST:
        return "the therapist"
    if target in GROUP_LABEL.values():
        return "everyone" if target == GROUP_LABEL["family"] else "both partners"
    return target


# --------------------------------------------------------------------------------------------------
# Rendering a sample
# --------------------------------------------------------------------------------------------------


def _fill(text: str, names: dict[str, str]) -> str:
    for key, name in names.items():
        text = text.replace("{" + key + "}", name)
    return text


def _who(key: str, names: dict[str, str]) -> str:
    if key == "T":
        return THERAPIST
    return names.get(key, key)  # group labels (Couple, Family) pass through


def _emotion(person: str, desc: str, n: int, order: str) -> dict[str, Any]:
    if order == "ipe":
        return {"person": person, "intensity": n, "emotion_description": desc}
    return {"person": person, "emotion_description": desc, "intensity": n}


def _viewpoint(source: str, target: str, vp: str, att: str, order: str) -> dict[str, str]:
    if order == "stav":
        return {"source": source, "target": target, "attitude": att, "viewpoint": vp}
    return {"source": source, "target": target, "viewpoint": vp, "attitude": att}


def _render(sample_id: str, unit_key: str, scene_names: list[str], names: dict[str, str],
            options: dict[str, Any], seed: str) -> dict[str, Any]:
    unit = _UNITS[unit_key]
    scenario, layout = unit["scenario"], unit["layout"]
    rng = random.Random(f"{seed}|{sample_id}")
    specs = [row for scene in scene_names for row in _parse_scene(scene)]
    ie_order = options.get("ie_order", "pei")
    vp_order = options.get("vp_order", "stva")
    decimals = 3 if scenario == "family" else 2

    rows: list[dict[str, Any]] = []
    prev_start, prev_end = 0.0, round(rng.uniform(0.0, 1.5), decimals) if options.get("start") is None else options["start"]
    for i, spec in enumerate(specs, start=1):
        speaker = _who(spec["speaker"], names)
        targets = [_who(t, names) for t in spec["targets"]]
        text = _fill(spec["text"], names)
        mood = _MOOD[spec["utype"]]
        tgt_display = _display(targets[0]) if targets else "the room"

        # times
        words = len(text.split())
        duration = 0.45 + 0.34 * words + rng.uniform(0.1, 1.4)
        if i == 1:
            start = prev_end
        elif scenario == "family" and (spec["overlap"] or rng.random() < 0.08):
            start = max(prev_start + 0.2, prev_end - rng.uniform(0.4, 2.5))
        elif rng.random() < 0.3:
            start = prev_end
        else:
            start = prev_end + rng.uniform(0.05, 2.2)
        start = round(start, decimals)
        end = round(max(start + 0.3, start + duration), decimals)
        prev_start, prev_end = start, end

        def cue(pool: dict[str, list[str]], p: float) -> list[dict[str, str]]:
            if rng.random() >= p:
                return []
            return [{"person": speaker, "description": rng.choice(pool[mood]).replace("{tgt}", tgt_display)}]

        background = [{"speaker": _who(s, names), "target": [_who(t, names) for t in tg], "content": _fill(c, names)}
                      for s, tg, c in spec["bg"]]
        if spec["kind"] == "client" and words > 12 and not background and rng.random() < 0.15:
            background.append({"speaker": THERAPIST, "target": [speaker], "content": rng.choice(_BACKCHANNEL)})

        is_therapist = spec["kind"] == "therapist"
        group_voice = speaker in GROUP_LABEL.values()  # several people at once: no single body to describe
        posture = [] if group_voice else cue(_POSTURE, 0.45 if is_therapist else 0.6)
        face = [] if group_voice else cue(_FACE, 0.55 if is_therapist else 0.75)
        self_directed = [] if group_voice else cue(_SELF, 0.05 if is_therapist else 0.3)
        interaction = []
        if rng.random() < (0.55 if is_therapist else 0.5) and targets and not group_voice:
            pool = _INTERACT["open" if not is_therapist and targets[0] == THERAPIST else mood]
            interaction = [{"initiator": speaker, "target": list(targets),
                            "description": rng.choice(pool).replace("{tgt}", tgt_display)}]

        emotions = [_emotion(_who(p, names) if p else speaker, _fill(d, names), n, ie_order)
                    for p, d, n in spec["emotions"] + spec["emo"]]
        viewpoints = [_viewpoint(speaker, _who(t, names), _fill(v, names), _fill(a, names), vp_order)
                      for t, v, a in spec["viewpoints"]]
        support = [{"provider": THERAPIST,
                    "target": list(targets) if tg is None else [_who(t, names) for t in tg],
                    "strategy_type": stype, "strategy_content": _fill(content, names)}
                   for stype, tg, content in spec["strategies"]]

        row: dict[str, Any] = {
            "start_time": start, "end_time": end, "primary_speaker": speaker, "target": targets,
            "dialogue_cleaned": text, "utterance_type": spec["utype"], "background_dialogue": background,
            "tone_of_voice": spec["tone"], "body_posture": posture, "facial_expressions": face,
            "self_directed_behavior": self_directed, "interaction_behavior": interaction,
            "internal_emotion": emotions, "viewpoints_attitudes": viewpoints, "support_strategy": support,
        }
        rows.append(row)

    n = len(rows)
    evidence: list[list[int]] = []
    for i, spec in enumerate(specs, start=1):
        if spec["label"] is None:
            evidence.append([])
            continue
        ev = [j for j in (i - 2, i - 1, i) if j >= 1]
        if i < n and rng.random() < 0.5:
            ev.append(i + 1)
        evidence.append(ev)

    # relation fields, by layout
    relation: list[dict[str, Any]] = [{} for _ in rows]
    pattern: list[tuple[Any, Any, list[int]]] = [(None, None, []) for _ in rows]
    for idx, spec in enumerate(specs):
        label, reason, ev = spec["label"], _fill(spec["reason"], names), evidence[idx]
        therapist = spec["kind"] == "therapist"
        state, patt = (label if isinstance(label, tuple) else (label, label))
        if scenario == "couple":
            if therapist and label is not None:
                relation[idx] = {"relation_cycle_state": state}
                if layout == 2 and idx > 0 and specs[idx - 1]["kind"] != "therapist":
                    pattern[idx - 1] = (state, reason, list(ev))
        elif layout == 1:
            if therapist and label is not None:
                relation[idx] = {"relation_cycle_state": state, "relation_cycle_reason": reason,
                                 "relation_cycle_evidence_rows": list(ev)}
                pattern[idx] = (patt, reason, list(ev))
            else:
                relation[idx] = {"relation_cycle_state": "", "relation_cycle_reason": "",
                                 "relation_cycle_evidence_rows": []}
        else:
            if therapist and label is not None:
                pattern[idx] = (patt, reason, list(ev))

    out_rows = []
    for idx, row in enumerate(rows):
        row.update(relation[idx])
        row["row_index"] = idx + 1
        row["relation_pattern"], row["relation_pattern_reason"], row["relation_pattern_evidence_rows"] = pattern[idx]
        if options.get("row_index_first"):
            row = {"row_index": idx + 1, **{k: v for k, v in row.items() if k != "row_index"}}
        out_rows.append(row)

    order = options.get("participants") or "".join(unit["roles"])
    return {
        "sample_id": sample_id,
        "scenario": scenario,
        "participants": [names[k] for k in order],
        "source_file": f"synthetic/{sample_id}.json",
        "rows": out_rows,
    }


def _bundled_names(unit_key: str) -> dict[str, str]:
    return {key: name for key, (name, _) in _UNITS[unit_key]["roles"].items()}


def mini_benchmark() -> list[dict[str, Any]]:
    """The bundled synthetic samples (15: 12 couple, 3 family), in file order."""
    return [_render(sample_id, unit, scenes, _bundled_names(unit), options, seed="bundled")
            for sample_id, unit, scenes, options in _BUNDLED]


# --------------------------------------------------------------------------------------------------
# Scaling
# --------------------------------------------------------------------------------------------------


def _scene_pools() -> dict[str, dict[str, list[str]]]:
    pools: dict[str, dict[str, list[str]]] = {}
    for _, unit, scenes, _ in _BUNDLED:
        pool = pools.setdefault(unit, {"open": [], "body": [], "close": []})
        pool["open"].append(scenes[0])
        for scene in scenes[1:]:
            pool["close" if scene in _CLOSING else "body"].append(scene)
    return pools


def _scene_len(name: str, cache: dict[str, int] = {}) -> int:  # noqa: B006 - deliberate memo
    if name not in cache:
        cache[name] = len(_parse_scene(name))
    return cache[name]


def _pick_scenes(pool: dict[str, list[str]], scenario: str, rng: random.Random) -> list[str]:
    low, high = ROWS[scenario]
    opening = rng.choice(pool["open"])
    closing = rng.choice(pool["close"]) if pool["close"] else None
    reserve = _scene_len(closing) if closing else 0
    chosen, total = [opening], _scene_len(opening) + reserve
    bodies = list(pool["body"])
    rng.shuffle(bodies)
    for scene in bodies:
        if total >= low and rng.random() < 0.5:
            break
        if total + _scene_len(scene) <= high:
            chosen.append(scene)
            total += _scene_len(scene)
    if closing:
        chosen.append(closing)
    return chosen


class _NameDealer:
    """Hands out unused names per gender; starts a new (shuffled) round when a pool runs out."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.left: dict[str, list[str]] = {g: [] for g in _NAMES}

    def take(self, gender: str) -> str:
        if not self.left[gender]:
            names = list(_NAMES[gender])
            self.rng.shuffle(names)
            self.left[gender] = names
        return self.left[gender].pop()

    def cast(self, unit_key: str) -> dict[str, str]:
        return {key: self.take(g) for key, (_, g) in _UNITS[unit_key]["roles"].items()}


def scaled_benchmark(n_samples: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n_samples`` samples recombined from the bundled scenes (about 9% family, as 17 of 191).

    Couple units are ``couple_NNNN`` with 2-7 segments ``<episode>_synthetic_segmentNN``; family samples
    are ``family_therapy/NNN/merged``, 1-3 consecutive numbers per family sharing its names. Each sample
    takes its unit's layout, an opening scene, a shuffled choice of its other scenes (and a closing scene
    for families) within the release's row ranges; labels, cues and quirks come with the scenes. Names
    are fresh per unit (unique while the name pools last, ~80 per gender). Deterministic for a seed.
    """
    if n_samples < 0:
        raise ValueError("n_samples must be >= 0")
    rng = random.Random(f"scaled|{seed}")
    dealer = _NameDealer(rng)
    pools = _scene_pools()
    couple_units = [k for k, u in _UNITS.items() if u["scenario"] == "couple"]
    family_units = [k for k, u in _UNITS.items() if u["scenario"] == "family"]
    n_family = round(n_samples * FAMILY_SHARE[0] / FAMILY_SHARE[1])
    n_couple = n_samples - n_family

    samples: list[dict[str, Any]] = []
    unit_no = 0
    while sum(1 for s in samples if s["scenario"] == "couple") < n_couple:
        unit_no += 1
        template = rng.choice(couple_units)
        names = dealer.cast(template)
        left = n_couple - sum(1 for s in samples if s["scenario"] == "couple")
        episode, segment = 1, 0
        for _ in range(min(left, rng.randint(2, 7))):
            if segment and rng.random() < 0.35:
                episode, segment = episode + rng.randint(1, 2), 0
            segment += 1
            sample_id = f"couple_{unit_no:04d}/{episode:03d}_synthetic_segment{segment:02d}"
            options = {"participants": rng.choice(["AB", "BA"]),
                       "ie_order": "ipe" if rng.random() < 0.1 else "pei"}
            samples.append(_render(sample_id, template, _pick_scenes(pools[template], "couple", rng), names,
                                   options, seed=str(seed)))

    family_no = 0
    while family_no < n_family:
        template = rng.choice(family_units)
        names = dealer.cast(template)
        keys = list(_UNITS[template]["roles"])
        for _ in range(min(n_family - family_no, rng.randint(1, 3))):
            family_no += 1
            sample_id = f"family_therapy/{family_no:03d}/merged"
            options = {"participants": "".join(rng.sample(keys, len(keys))),
                       "ie_order": "ipe" if rng.random() < 0.2 else "pei"}
            samples.append(_render(sample_id, template, _pick_scenes(pools[template], "family", rng), names,
                                   options, seed=str(seed)))

    rng.shuffle(samples)
    return samples


def write_jsonl(samples: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write one ``json.dumps(sample, ensure_ascii=False)`` line per sample (UTF-8, ``\\n`` endings)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for sample in samples:
            fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
    return path
