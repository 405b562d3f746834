"""Stats measures prompt sizes without rendering them (linear in a sample's length): the measure must equal
the rendered length for every instance, task, context window and input mode."""

import pytest

from rescue_train.data import load_samples
from rescue_train.data.config import MODES
from rescue_train.tasks import BuildOptions
from rescue_train.tasks import TASKS, build, render
from rescue_train.tasks.context import PromptSizer, render_context


@pytest.mark.parametrize("mode", MODES)
def test_prompt_sizer_gives_the_rendered_length_of_every_bundled_instance(mode):
    samples = load_samples("bundled")
    sizer = PromptSizer(mode)
    for task in TASKS:
        for options in (BuildOptions(), BuildOptions(context=-1), BuildOptions(context=0)):
            for inst in build(task, samples, options).instances:
                assert sizer.context_chars(inst) == len(render_context(inst, mode)), inst.id


def test_stats_prompt_sizes_are_those_of_the_rendered_prompts():
    from rescue_train.stats import compute_stats

    samples = load_samples("bundled")
    stats = compute_stats(samples)
    for task in TASKS:
        for scenario in ("couple", "family"):
            lengths = sorted(len(render(i)[1]["content"]) for i in build(task, samples).instances
                             if i.scenario == scenario)
            expected = {"median": lengths[len(lengths) // 2], "max": lengths[-1]} if lengths else None
            assert stats["tasks"][task][scenario]["prompt_chars"] == expected, (task, scenario)
