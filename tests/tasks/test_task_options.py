"""A task option is one field in its task's module: the data configuration, its ``data.<option>`` key, help,
checks and the prompt-affecting set are composed from the registered tasks' own option classes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from rescue_train.data import load_samples
from rescue_train.settings import ConfigError, describe, load
from rescue_train.tasks import TASKS, BuildResult, DataConfig, Instance
from rescue_train.tasks.options import build_options, data_config, option
from rescue_train.tasks.task import ClosedSetTask
from rescue_train.tasks.types import instance_id


@dataclass(frozen=True)
class ToyOptions:
    toy_rows: int = option(2, "rows of the sample the toy asks about", low=1, prompt=True)
    toy_side: str = option("therapist", "whose rows the toy asks about", choices=("therapist", "client"))


class FirstRows(ClosedSetTask):
    """Toy task: one instance for each of the first ``toy_rows`` rows of ``toy_side``."""

    name = "toy_rows"
    options = ToyOptions

    def build(self, samples, units, options):
        result = BuildResult([])
        for sample in samples:
            rows = [r for r in sample.rows if r.is_therapist == (options.toy_side == "therapist")]
            for row in rows[:options.toy_rows]:
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, row.row_index), task=self.name,
                    sample_id=sample.sample_id, unit=units[sample.sample_id], scenario=sample.scenario,
                    row_index=row.row_index, context=range(0), current=row.row_index, candidates=("a", "b"),
                    gold="a", sample=sample))
        return result


@pytest.fixture(scope="module")
def composed():
    tasks = [*TASKS.values(), FirstRows()]
    build = build_options(tasks)
    return data_config(tasks, build), build


def test_the_shipped_keys_are_those_of_the_tasks():
    assert [f.name for f in dataclasses.fields(DataConfig)] == [
        "source", "context", "rpp_definition", "rpp_include_current", "stp_targets", "ssp_target_emotion",
        "rsg_condition", "rsg_min_words", "rsg_per_sample", "mode", "answer_format", "split", "folds", "split_seed",
        "test_fold", "manifest"]
    assert DataConfig.PROMPT_KEYS == ("source", "context", "rpp_definition", "rpp_include_current", "stp_targets",
                                      "ssp_target_emotion", "rsg_condition", "mode", "answer_format")
    assert DataConfig().build_options().er_discard_fraction == 0.3  # fixed by the paper: no data.* key


def test_a_toy_option_is_a_key_with_help_checks_and_prompt_flag(composed):
    data, build = composed
    assert "toy_rows" in data.PROMPT_KEYS and "toy_side" not in data.PROMPT_KEYS
    help_lines = [line for line in describe(data, "data.") if "toy_" in line]
    assert help_lines == [
        "  data.toy_rows                  int          = 2            rows of the sample the toy asks about [>= 1]",
        "  data.toy_side                  str          = 'therapist'  whose rows the toy asks about"]
    command = dataclasses.make_dataclass("Command", [("data", data, dataclasses.field(default_factory=data))])
    with pytest.raises(ConfigError, match=r"^data.toy_side: expected one of therapist, client, got 'clients'; "
                                          r"did you mean client\?$"):
        load(command, [{"data": {"toy_side": "clients"}}], "toy")
    with pytest.raises(ConfigError, match=r"^data.toy_rows=0: expected >= 1$"):
        load(command, [{"data": {"toy_rows": 0}}], "toy")

    samples = load_samples("bundled")[:2]
    options = load(command, [{"data": {"toy_rows": 3, "toy_side": "client"}}], "toy").data.build_options()
    assert isinstance(options, build) and (options.toy_rows, options.rpp_definition) == (3, "D")
    built = FirstRows().build(samples, {s.sample_id: s.sample_id for s in samples}, options).instances
    clients = [[r.row_index for r in s.rows if not r.is_therapist][:3] for s in samples]
    assert [i.row_index for i in built] == [row for rows in clients for row in rows] and len(built) == 6


def test_one_name_is_one_option():
    @dataclass(frozen=True)
    class Clash:
        rpp_definition: str = option("D", "another task's key")

    clash = FirstRows()
    clash.options = Clash
    with pytest.raises(TypeError, match="task toy_rows: build option rpp_definition is declared by another task"):
        build_options([*TASKS.values(), clash])
