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
Scenes are written in scripts/synthetic_scenes.txt in a small line format (one row per line, fields separated by `` | ``) with role
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

from rescue_train.data.schema import GROUP_LABEL, THERAPIST

__all__ = ["BUNDLED_PATH", "mini_benchmark", "scaled_benchmark", "write_jsonl"]

BUNDLED_PATH = Path(__file__).resolve().parents[1] / "rescue_train" / "data" / "sample" / "mini_benchmark.jsonl"

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

def _read_scenes(path: Path) -> dict[str, str]:
    """``=== name`` starts a scene; its lines follow; ``#`` lines are comments."""
    scenes: dict[str, str] = {}
    name = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("=== "):
            name = line[4:].strip()
            scenes[name] = ""
        elif name is not None and line.strip() and not line.startswith("#"):
            scenes[name] += line + "\n"
    return scenes


_SCENES = _read_scenes(Path(__file__).with_name("synthetic_scenes.txt"))


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
