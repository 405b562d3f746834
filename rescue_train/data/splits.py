"""Leak-free splits: grouped k-fold, holdout, or none (the whole benchmark as test, as the paper does).

A unit is what must never straddle two splits. Samples are joined into one unit when they share the
sample id's folder (a couple's segments) or a participant name (the family samples are episodes of what
looks like one family under a shared ``family_therapy/`` folder, and two couples may share a first name).
Units never mix scenarios. The manifest (unit -> fold, seed, content hash) is written once, reused, and
stored with every model and result.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from .schema import Sample

SCHEMES = ("kfold", "holdout", "none")


def assign_units(samples: Sequence[Sample]) -> dict[str, str]:
    """sample_id -> unit name (the sorted folders of the connected component, joined with '+')."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for s in samples:
        node = f"sample:{s.sample_id}"
        union(node, f"folder:{s.scenario}:{s.folder}")
        for name in s.participants:
            union(node, f"person:{s.scenario}:{name}")
    folders: dict[str, set[str]] = {}
    for s in samples:
        folders.setdefault(find(f"sample:{s.sample_id}"), set()).add(s.folder)
    return {s.sample_id: "+".join(sorted(folders[find(f"sample:{s.sample_id}")])) for s in samples}


def units_text(n: int) -> str:
    """``1 unit``, ``3 units``: how reports count split units."""
    return f"{n} unit" + ("" if n == 1 else "s")


class LeakageError(RuntimeError):
    pass


@dataclass
class SplitManifest:
    """unit -> fold (kfold), or unit -> split name (holdout/none). ``samples`` maps sample_id -> unit."""

    scheme: str
    seed: int
    k: int
    assignment: dict[str, int | str]
    samples: dict[str, str]
    scenarios: dict[str, str]
    notes: list[str] = field(default_factory=list)

    @property
    def hash(self) -> str:
        body = json.dumps({"scheme": self.scheme, "seed": self.seed, "k": self.k, "assignment": self.assignment,
                           "samples": self.samples}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def roles(self, test_fold: int = 0, val_fold: int | None = None) -> dict[str, str]:
        """unit -> 'train' | 'validation' | 'test'. For k-fold the test fold is ``test_fold`` and the
        validation fold the next one (cyclically); the rest trains."""
        if self.scheme != "kfold":
            return {u: str(v) for u, v in self.assignment.items()}
        if not 0 <= test_fold < self.k:
            raise ValueError(f"test_fold must be in 0..{self.k - 1}, got {test_fold}")
        val_fold = (test_fold + 1) % self.k if val_fold is None else val_fold
        return {u: "test" if f == test_fold else "validation" if f == val_fold else "train"
                for u, f in self.assignment.items()}

    def split_of(self, sample_id: str, test_fold: int = 0) -> str:
        return self.roles(test_fold)[self.samples[sample_id]]

    def to_json(self) -> dict:
        return {"scheme": self.scheme, "seed": self.seed, "k": self.k, "hash": self.hash,
                "assignment": self.assignment, "samples": self.samples, "scenarios": self.scenarios,
                "notes": self.notes}

    def save(self, path: str | Path) -> None:
        from ..io import write_json_atomic

        write_json_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> "SplitManifest":
        from ..io import read_json

        data = read_json(path, {"scheme": str, "seed": int, "k": int, "assignment": dict, "samples": dict,
                                "scenarios": dict}, "a split manifest")
        manifest = cls(data["scheme"], data["seed"], data["k"], data["assignment"], data["samples"],
                       data["scenarios"], data.get("notes", []))
        if data.get("hash") != manifest.hash:
            raise ValueError(f"{path}: manifest hash {data.get('hash')} does not match its content ({manifest.hash})")
        return manifest


def make_manifest(samples: Sequence[Sample], scheme: str = "kfold", k: int = 5, seed: int = 0,
                  holdout: tuple[float, float] = (0.2, 0.2)) -> SplitManifest:
    """Assign units to folds: k-fold grouped by unit and stratified by scenario (each scenario's units are
    shuffled with ``seed`` and dealt to folds largest first, so fold sizes in instances stay even)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    units = assign_units(samples)
    scenario_of = {units[s.sample_id]: s.scenario for s in samples}
    size: dict[str, int] = {}
    for s in samples:
        size[units[s.sample_id]] = size.get(units[s.sample_id], 0) + len(s.rows)
    notes: list[str] = []
    for scenario in sorted(set(scenario_of.values())):
        n_units = sum(1 for sc in scenario_of.values() if sc == scenario)
        if scheme != "none" and n_units < (k if scheme == "kfold" else 3):
            notes.append(f"{scenario}: only {n_units} unit(s) after grouping by shared folder and people, so its "
                         f"samples fill {n_units} fold(s) and the other folds have no {scenario} data")
    if scheme == "none":
        assignment: dict[str, int | str] = {u: "test" for u in sorted(scenario_of)}
        return SplitManifest(scheme, seed, 1, assignment, dict(units), scenario_of, notes)
    import random

    rng = random.Random(seed)
    assignment = {}
    for scenario in sorted(set(scenario_of.values())):
        members = sorted(u for u, sc in scenario_of.items() if sc == scenario)
        rng.shuffle(members)
        if scheme == "kfold":
            load = [0] * k
            for unit in sorted(members, key=lambda u: -size[u]):  # stable: ties keep the shuffled order
                fold = min(range(k), key=lambda f: (load[f], f))
                assignment[unit] = fold
                load[fold] += size[unit]
        else:
            n = len(members)
            n_test = max(1, round(holdout[0] * n)) if n >= 3 else 0
            n_val = max(1, round(holdout[1] * n)) if n >= 3 else 0
            for i, unit in enumerate(members):
                assignment[unit] = "test" if i < n_test else "validation" if i < n_test + n_val else "train"
    manifest = SplitManifest(scheme, seed, k if scheme == "kfold" else 1, assignment, dict(units), scenario_of, notes)
    check_leakage(samples, manifest)
    return manifest


def check_leakage(samples: Sequence[Sample], manifest: SplitManifest) -> None:
    """Fail loudly if a unit or a participant name lands in two splits (for k-fold: two folds)."""
    where: dict[str, set] = {}
    for s in samples:
        unit = manifest.samples.get(s.sample_id)
        if unit is None:
            raise LeakageError(f"sample {s.sample_id!r} is not in the split manifest {manifest.hash}")
        if unit not in manifest.assignment:
            raise LeakageError(f"unit {unit!r} of sample {s.sample_id!r} has no fold in manifest {manifest.hash}")
        place = manifest.assignment[unit]
        for key in [f"unit {unit}", *(f"person {s.scenario}:{p}" for p in s.participants)]:
            where.setdefault(key, set()).add(place)
    leaks = sorted(k for k, places in where.items() if len(places) > 1)
    if leaks:
        raise LeakageError("split leak: " + "; ".join(f"{k} in {sorted(map(str, where[k]))}" for k in leaks[:10]))


def load_or_make_manifest(samples: Sequence[Sample], keep: Path | None, scheme: str, k: int, seed: int,
                          given: str | Path | None = None) -> SplitManifest:
    """The split manifest of ``samples``, by the one rule of every command:

    * ``given`` (``data.manifest``) when that file exists: that manifest as it is, checked against the samples
      (every sample in it, no unit or person in two folds);
    * else the one at ``keep`` (a command's own ``OUT/split_manifest.json``) when it was made for these samples
      with this scheme, k and seed (one made otherwise is refused);
    * else a new one (``scheme``, ``k``, ``seed``).

    It is saved at ``keep`` unless it came from there, and at ``given`` when that file is absent ("made and saved
    there when absent")."""
    given = Path(given) if given else None
    if given is not None and given.exists():
        manifest = SplitManifest.load(given)
        check_leakage(samples, manifest)
    elif keep is not None and keep.exists():
        manifest = SplitManifest.load(keep)
        if (manifest.scheme, manifest.seed) != (scheme, seed) or (scheme == "kfold" and manifest.k != k) \
                or set(manifest.samples) != {s.sample_id for s in samples}:
            raise ValueError(f"{keep} was made for other samples or another scheme/k/seed ({manifest.scheme}, "
                             f"k={manifest.k}, seed={manifest.seed}); remove it or choose another output_dir")
        check_leakage(samples, manifest)
        return manifest
    else:
        manifest = make_manifest(samples, scheme, k, seed)
    for path in (keep, given):
        if path is not None and (path == keep or not path.exists()):
            manifest.save(path)
    return manifest



def fold_notes(manifest: SplitManifest, folds: int | Sequence[int], instances_per_unit: Mapping[str, int]) -> list[str]:
    """What the test fold(s) ``folds`` hold, said for each scenario whose test instances come from a fold that has
    none of its training instances, or that has no test instances at all (the real family samples are one unit,
    so one fold holds all of them): what its scores then measure, and how to choose otherwise.
    ``instances_per_unit`` counts the instances a command uses, by unit. Every command that trains or scores on
    folds says these notes (train, eval, compare, cv: console, results, report, model card)."""
    if manifest.scheme != "kfold":
        return []
    folds = [folds] if isinstance(folds, int) else sorted(folds)
    scenarios = sorted({manifest.scenarios[u] for u, n in instances_per_unit.items() if n})
    notes = []
    for scenario in scenarios:
        mine = {u: n for u, n in instances_per_unit.items() if n and manifest.scenarios[u] == scenario}
        homes = sorted({int(manifest.assignment[u]) for u in mine})
        others = "+".join(s for s in scenarios if s != scenario) or "other"

        def count(fold: int, role: str) -> int:
            roles = manifest.roles(fold)
            return sum(n for u, n in mine.items() if roles[u] == role)

        if len(folds) == 1:  # the wording: where the data is, by its role in this run
            role = {folds[0]: "test", (folds[0] + 1) % manifest.k: "validation"}  # as ``roles``; the rest trains
            where = " and ".join(f"{role.get(f, 'training')} fold {f}" for f in homes)
        else:
            where = "fold" + "s" * (len(homes) > 1) + " " + ", ".join(map(str, homes))
        held = f"{'all ' if len(homes) == 1 else ''}{scenario} data is in {where}"
        free = [f for f in range(manifest.k) if f not in homes]
        blind = [f for f in folds if count(f, "test") and not count(f, "train")]
        if blind:
            tested = sum(count(f, "test") for f in folds)
            which = "" if len(folds) == 1 else (
                f" in the run{'s' * (len(blind) > 1)} of test fold{'s' * (len(blind) > 1)} "
                f"{', '.join(map(str, blind))}, which test{'s' * (len(blind) == 1)} "
                f"{sum(count(f, 'test') for f in blind)} of the {tested} pooled {scenario} instances")
            choice = (f"To train on {scenario} data choose another data.test_fold ({', '.join(map(str, free))}; then "
                      f"no {scenario} instance is tested), or data.split=none to test every {scenario} instance with "
                      f"an untrained model" if len(folds) == 1 and free else
                      f"While all {scenario} data is in one fold, no fold both trains on and tests it"
                      if len(homes) == 1 else "")
            notes.append(f"{scenario}: 0 training instances{which} ({held}): {scenario} scores measure "
                         f"{others}-to-{scenario} transfer" + (f". {choice}" if choice else ""))
        if not any(count(f, "test") for f in folds):
            trained = any(count(f, "train") for f in folds)
            free = [f for f in free if f not in folds]
            notes.append(f"{scenario}: 0 {'' if trained else 'training and 0 '}test instances ({held}): no {scenario} "
                         f"scores{'' if trained else f' and no {scenario} training'}. Choose data.test_fold="
                         f"{homes[0]} to score {scenario}" + ("" if trained or not free else
                                                            f", or another ({', '.join(map(str, free))}) to train on it"))
    return notes


def spread_sample(items: Sequence, n: int, seed: int) -> list:
    """``n`` of ``items`` (anything with a ``unit``) spread over their units, in their order: the units are
    shuffled with ``seed`` and taken in turn, one item of each (drawn with the same seed) per round, so that a
    small sample holds as many units, and couples and families alike, as it can (``limit`` takes the first ``n``:
    often one unit)."""
    import random

    if n >= len(items):
        return list(items)
    draw = random.Random(seed)
    by_unit: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_unit.setdefault(item.unit, []).append(index)
    units = sorted(by_unit)
    draw.shuffle(units)
    for indices in by_unit.values():
        draw.shuffle(indices)
    chosen: list[int] = []
    while len(chosen) < n:
        for unit in units:
            if by_unit[unit] and len(chosen) < n:
                chosen.append(by_unit[unit].pop())
    return [items[i] for i in sorted(chosen)]
