"""``rescue-train stats``: what the task rules make of a benchmark, beside the paper's Table 6."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

from . import paper
from .data import Sample, load_benchmark
from .tasks import BuildOptions, DataConfig
from .data.splits import assign_units
from .provenance import versions
from .settings import meaning
from .tasks import TASKS, build
from .tasks.context import PromptSizer
from .tasks.rpp import DEFINITIONS


def compute_stats(samples: Sequence[Sample], options: BuildOptions | None = None) -> dict[str, Any]:
    options = options or BuildOptions()
    units = assign_units(samples)
    stats: dict[str, Any] = {
        "samples": dict(Counter(s.scenario for s in samples)),
        "rows": dict(Counter(s.scenario for s in samples for _ in s.rows)),
        "units": {sc: len({units[s.sample_id] for s in samples if s.scenario == sc}) for sc in ("couple", "family")},
        "tasks": {},
        "rpp_definitions": {},
    }
    sizer = PromptSizer("dialogue")  # the size of the user message render(instance) makes
    for name, task in TASKS.items():
        result = build(name, samples, options, units)
        paper_counts = paper.TABLE6.get(name, {})  # tasks beyond the paper have no published counts
        per_scenario: dict[str, Any] = {}
        for scenario in ("couple", "family"):
            chosen = [i for i in result.instances if i.scenario == scenario]
            labels = Counter(task.stats_label(i) for i in chosen)
            labels.pop(None, None)
            # prompt sizes (dialogue mode) help choose max_length / max_model_len: about 4 characters a token
            lengths = sorted(sizer.context_chars(i) + 2 + len(TASKS[name].instruction(i, "label")) for i in chosen)
            per_scenario[scenario] = {
                "instances": len(chosen),
                "prompt_chars": {"median": lengths[len(lengths) // 2], "max": lengths[-1]} if lengths else None,
                "samples": len({i.sample_id for i in chosen}),
                "labels": dict(labels.most_common()),
                "excluded": {reason: n for (sc, reason), n in sorted(result.excluded.items()) if sc == scenario},
                "paper_instances": paper_counts.get(f"{scenario}_instances"),
                "paper_samples": paper_counts.get(f"{scenario}_samples"),
            }
        stats["tasks"][name] = per_scenario
    for definition in DEFINITIONS:
        result = build("rpp", samples, replace(options, rpp_definition=definition), units)
        stats["rpp_definitions"][definition] = {
            sc: {"instances": sum(i.scenario == sc for i in result.instances),
                 "samples": len({i.sample_id for i in result.instances if i.scenario == sc})}
            for sc in ("couple", "family")
        }
    return stats


def format_stats(stats: dict[str, Any]) -> str:
    lines = [f"samples: {stats['samples']}  rows: {stats['rows']}  split units: {stats['units']}", ""]
    lines.append(f"{'task':<5} {'scenario':<8} {'instances':>9} {'paper':>6} {'samples':>8} {'paper':>6} "
                 f"{'prompt chars (median / max)':>28}")
    for name, per in stats["tasks"].items():
        for scenario, s in per.items():
            size = f"{s['prompt_chars']['median']} / {s['prompt_chars']['max']}" if s["prompt_chars"] else "-"
            paper_instances, paper_samples = (("-" if v is None else v) for v in (s["paper_instances"],
                                                                                  s["paper_samples"]))
            lines.append(f"{name:<5} {scenario:<8} {s['instances']:>9} {paper_instances:>6} "
                         f"{s['samples']:>8} {paper_samples:>6} {size:>28}")
    lines += ["", "RPP instances (samples) under each gold definition; paper: "
              f"{paper.TABLE6['rpp']['couple_instances']} couple / {paper.TABLE6['rpp']['family_instances']} family"]
    for definition, per in stats["rpp_definitions"].items():
        cells = "  ".join(f"{sc} {v['instances']} ({v['samples']})" for sc, v in per.items())
        lines.append(f"  {definition:<3} {cells}")
    for name, per in stats["tasks"].items():
        for scenario, s in per.items():
            if not (s["labels"] or s["excluded"]):
                continue
            lines += ["", f"{name} / {scenario}"]
            if s["labels"]:
                total = max(1, s["instances"])
                lines.append("  labels: " + ", ".join(f"{k} {v} ({100 * v / total:.1f}%)" for k, v in s["labels"].items()))
            for reason, n in s["excluded"].items():
                lines.append(f"  excluded {n:>5}  {reason}")
    if stats.get("load_notes"):
        lines += ["", *(f"note: {note}" for note in stats["load_notes"])]
    return "\n".join(lines)


@dataclass
class StatsConfig:
    data: DataConfig = field(default_factory=DataConfig)
    json: bool = field(default=False, metadata=meaning("print JSON instead of text"))


def stats_report(config: StatsConfig) -> str:
    """The counts of ``config.data``'s benchmark and build options, as text (or JSON)."""
    options = config.data.build_options()
    bench = load_benchmark(config.data.source)
    stats = compute_stats(bench.samples, options)
    stats["source"] = bench.source
    stats["source_fingerprint"] = bench.fingerprint
    stats["load_notes"] = bench.notes
    stats["options"] = asdict(options)
    stats["versions"] = versions()
    return json.dumps(stats, indent=2, ensure_ascii=False) if config.json else format_stats(stats)
