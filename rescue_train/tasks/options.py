"""Build options, owned by the tasks: each task declares the settings its ``build`` reads as a small frozen
dataclass (``Task.options``) whose fields say their default, help, allowed values and whether they change the
text a model sees (``option(...)``). From the registered tasks come the one :class:`BuildOptions` every builder
receives and the ``data.<option>`` keys of :class:`DataConfig`, with their help and validation: a new option is
one field in its task's module.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Iterable, Optional

from ..data.config import DataFields, validate
from ..settings import check_values, load, meaning


def option(default: Any, help_text: str = "", *, prompt: bool = False, key: bool = True, **bounds: Any):
    """A task's build option: ``data.<name>`` on the commands (``key=False``: fixed by the paper's protocol, read
    only by the builder), its help, ``choices`` or range (``low=0``...) checked on every build, and whether it
    changes what a model is shown (``prompt=True``: a change makes the prompts differ from training)."""
    return dataclasses.field(default=default, metadata=meaning(help_text, prompt=prompt, key=key, **bounds))


@dataclasses.dataclass(frozen=True)
class Options:
    """What every task reads. ``context`` None means each task's own default window."""

    context: Optional[int] = dataclasses.field(default=None, metadata=meaning(
        "rows of context: -1 all prior rows, 0 none, k the last k; null: each task's default", low=-1, prompt=True))

    def __post_init__(self):
        check_values(self, "")


def _fields(kind: type) -> list[tuple[str, Any, dataclasses.Field]]:
    """``kind``'s fields as ``make_dataclass`` takes them (resolved types, fresh Field objects)."""
    hints = typing.get_type_hints(kind)
    return [(f.name, hints[f.name], dataclasses.field(default=f.default, default_factory=f.default_factory,
                                                      metadata=f.metadata)) for f in dataclasses.fields(kind)]


def task_fields(tasks: Iterable[Any]) -> list[tuple[str, Any, dataclasses.Field]]:
    """Every task's option fields, in registration order (the first declaration's place); two tasks may
    share an option by inheritance (ER and VP: ``checkpoints_per_sample``), never declare one name twice."""
    declared: dict[str, dataclasses.Field] = {}
    out: dict[str, tuple[str, Any, dataclasses.Field]] = {}
    for task in tasks:
        if task.options is None:
            continue
        for original, entry in zip(dataclasses.fields(task.options), _fields(task.options)):
            if declared.setdefault(original.name, original) is not original:
                raise TypeError(f"task {task.name}: build option {original.name} is declared by another task too")
            out.setdefault(original.name, entry)
    return list(out.values())


def build_options(tasks: Iterable[Any]) -> type:
    """The frozen dataclass of ``context`` and every task's options that ``Task.build`` receives."""
    return dataclasses.make_dataclass("BuildOptions", task_fields(tasks), bases=(Options,), frozen=True,
                                      namespace={"__module__": __name__})


class _DataMethods:
    def __post_init__(self):
        validate(self)

    def build_options(self):
        """The build options this configuration sets (those not keys keep the paper's values)."""
        mine = {f.name for f in dataclasses.fields(self)}
        return self.BUILD(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self.BUILD) if f.name in mine})

    @classmethod
    def own(cls, data: Any):
        """Only this class's fields of ``data`` (a command's subclass may add its own)."""
        return cls(**{f.name: getattr(data, f.name) for f in dataclasses.fields(cls)})

    @classmethod
    def from_mapping(cls, tree: Any):
        """A saved ``data`` section (of a run's config.yaml); keys of a command's own subclass (a classifier
        run's ``converted``) are left out."""
        known = {f.name for f in dataclasses.fields(cls)}
        return load(cls, [{k: v for k, v in dict(tree or {}).items() if k in known}], "data")


def data_config(tasks: Iterable[Any], build: type) -> type:
    """The data configuration: ``source``, then ``context`` and each task's keyed options in the order the tasks
    are registered, then the data layer's other keys (mode, answer format, split, ...)."""
    base = _fields(DataFields)
    keyed = [entry for entry in task_fields(tasks) if entry[2].metadata.get("key", True)]
    fields = [base[0], *_fields(Options), *keyed, *base[1:]]
    prompt = tuple(name for name, _, spec in fields if spec.metadata.get("prompt"))
    return dataclasses.make_dataclass("DataConfig", fields, bases=(_DataMethods,), namespace={
        "__module__": __name__, "BUILD": build, "PROMPT_KEYS": prompt,
        "__doc__": "Where the benchmark comes from, how instances are built and shown, how samples are split."})
