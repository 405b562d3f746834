"""Typed ``key=value`` configuration shared by every command, and the one composition engine of recipes.

A schema is a dataclass whose fields carry their meaning as ``field(..., metadata=meaning("one line"))``: the one
place a key's default and help are written, and what ``--help`` prints. Nested dataclasses are sections
(``train.lr``), ``Dict``/``Any`` fields take free sub-keys. Values are read with OmegaConf: errors name the key,
unknown keys are refused with a suggestion.

Composition (:func:`compose`), lowest to highest: the schema's defaults, the config blocks a command's groups
select (``model=qwen2.5-7b-instruct`` merges ``configs/model/qwen2.5-7b-instruct.yaml``), the recipe
(``recipe=NAME``: a shipped YAML, or the path to the user's own), then the ``key=value`` overrides. A recipe says
its kind (``kind: lora``); a block is a partial config of any sections. Shipped recipes live in ``recipes/``, blocks
in ``configs/<group>/``: at the top of the checkout, and inside the wheel as ``rescue_train/recipes`` and
``rescue_train/configs``.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

class ConfigError(ValueError):
    """A bad setting; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric key takes: ``low``/``high`` inclusive, ``above``/``below`` exclusive bounds, ``also``
    values outside them that mean something (``max_steps=-1``: train by epochs)."""

    low: float | None = None
    high: float | None = None
    above: float | None = None
    below: float | None = None
    also: tuple = ()

    def admits(self, value: float) -> bool:
        return value in self.also or all(bound is None or holds for bound, holds in (
            (self.low, self.low is not None and value >= self.low), (self.high, self.high is not None and value <= self.high),
            (self.above, self.above is not None and value > self.above),
            (self.below, self.below is not None and value < self.below)))

    def __str__(self) -> str:
        bounds = [f"{sign} {bound:g}" for sign, bound in ((">=", self.low), (">", self.above), ("<=", self.high),
                                                           ("<", self.below)) if bound is not None]
        return " or ".join([*(f"{v:g}" for v in self.also), " and ".join(bounds)])


def meaning(help_text: str, *, low: float | None = None, high: float | None = None, above: float | None = None,
            below: float | None = None, also: Sequence[float] = (), choices: Any = None,
            **extra: Any) -> dict[str, Any]:
    """Field metadata: ``field(default=..., metadata=meaning("one line", low=1))``. A numeric key says its range
    (``low``/``high`` inclusive, ``above``/``below`` exclusive, ``also``: values beyond them that mean something),
    a key of a few values its ``choices`` (any container: a registry's dict stays current); ``load`` checks both
    before any work and ``--help`` shows the range."""
    if (low, high, above, below) != (None,) * 4:
        extra["range"] = Range(low, high, above, below, tuple(also))
    if choices is not None:
        extra["choices"] = choices
    return {"help": help_text, **extra}


def refusal(key: str, value: Any, metadata: Mapping[str, Any]) -> str | None:
    """Why ``value`` is not a value of ``key`` (None when it is): outside its ``choices`` (with the nearest one)
    or its range (a list key's range applies to each element)."""
    choices = metadata.get("choices")
    if choices is not None and value is not None and value not in choices:
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"{key}: expected one of {', '.join(map(str, choices))}, got {value!r}{hint}"
    bounds = metadata.get("range")
    if bounds is None or value is None:
        return None
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, (int, float)) and not isinstance(item, bool) and not bounds.admits(item):
            return f"{key}={value}: expected {bounds}"
    return None


def check_ranges(schema: type, tree: Mapping[str, Any], prefix: str = "") -> None:
    """Every key of ``tree`` (a schema's values, nested sections included) within its choices and range, before
    the schema's own checks run."""
    hints = _hints(schema)
    for f in dataclasses.fields(schema):
        value = tree.get(f.name)
        kind = _unwrap(hints[f.name])
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            if isinstance(value, Mapping):
                check_ranges(kind, value, f"{prefix}{f.name}.")
            continue
        problem = refusal(prefix + f.name, value, f.metadata)
        if problem:
            raise ConfigError(problem)


def check_values(instance: Any, prefix: str = "") -> None:
    """The same checks on a dataclass instance's own fields (one built in code, not read by ``load``)."""
    for f in dataclasses.fields(instance):
        problem = refusal(prefix + f.name, getattr(instance, f.name), f.metadata)
        if problem:
            raise ConfigError(problem)


def identity(config: Any, *, exact: bool = True) -> dict[str, Any]:
    """What decides a run's result, as ``dataclasses.asdict`` gives it: every field but those declared
    ``hashed=False`` (how fast or where it runs, where it writes), nested sections likewise. ``hashed="exact"``
    marks a key that changes only the floating-point numerics of local inference (device, engine layout): part of
    the identity unless ``exact=False`` (a judge's cached verdicts are reused across them). Its
    ``provenance.config_hash`` is the config's identity hash."""
    import copy

    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        hashed = f.metadata.get("hashed", True)
        if hashed is False or (hashed == "exact" and not exact):
            continue
        value = getattr(config, f.name)
        out[f.name] = identity(value, exact=exact) if dataclasses.is_dataclass(value) and not isinstance(value, type) \
            else copy.deepcopy(value)
    return out


def unhashed(schema: type) -> set[str]:
    """The top-level keys of ``schema`` declared ``hashed=False``, its sections aside."""
    return {f.name for f in dataclasses.fields(schema) if f.metadata.get("hashed", True) is False
            and not dataclasses.is_dataclass(_unwrap(_hints(schema)[f.name]))}


# ------------------------------------------------------------------------------------------ schema walking

def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def _unwrap(tp: Any) -> Any:
    """Optional[X] -> X."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Union and len(args) == 1:
        return args[0]
    return tp


def section_type(schema: type, dotted: str) -> Any:
    """The declared type of ``dotted`` (a section's dataclass, a field's type), or None when the key is not in
    the schema. Keys below a Dict/Any field are free and return Any."""
    current: Any = schema
    for part in dotted.split("."):
        if not (isinstance(current, type) and dataclasses.is_dataclass(current)):
            return Any if current in (Any,) or typing.get_origin(current) in (dict, list) else None
        names = {f.name for f in dataclasses.fields(current)}
        if part not in names:
            return None
        current = _unwrap(_hints(current)[part])
    return current


def keys(schema: type, prefix: str = "") -> list[str]:
    """Every leaf key of ``schema`` in dotted form."""
    out = []
    for f in dataclasses.fields(schema):
        tp = _unwrap(_hints(schema)[f.name])
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            out += keys(tp, f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def type_name(tp: Any) -> str:
    optional = typing.get_origin(tp) is typing.Union and type(None) in typing.get_args(tp)
    tp = _unwrap(tp)
    name = {int: "int", float: "float", bool: "bool", str: "str"}.get(tp)
    if name is None:
        origin = typing.get_origin(tp)
        name = "list" if origin is list else "mapping" if origin is dict else "any"
    return f"{name} or null" if optional else name


def _article(name: str) -> str:
    return ("an " if name[0] in "aeiou" else "a ") + name


# ------------------------------------------------------------------------------------------ trees

def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def as_list(value: Any) -> list[str]:
    """A list setting given as a list, a comma-separated string or nothing."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


# ------------------------------------------------------------------------------------------ loading

# What other tools (transformers' TrainingArguments, trl, peft, LLaMA-Factory, lm-eval) call our keys: an unknown
# key's last part -> the last part (or the whole dotted key) of ours that means the same, for the suggestion.
ALIASES = {
    "learning_rate": "lr", "num_train_epochs": "epochs", "epoch": "epochs", "num_epochs": "epochs",
    "batch": "batch_size", "bs": "batch_size", "per_device_train_batch_size": "batch_size",
    "train_batch_size": "batch_size", "gradient_accumulation_steps": "grad_accum",
    "gradient_accumulation": "grad_accum", "warmup_steps": "warmup", "warmup_ratio": "warmup",
    "lr_scheduler_type": "scheduler", "max_seq_length": "max_length", "cutoff_len": "max_length",
    "max_seq_len": "max_length", "output": "output_dir", "out": "output_dir", "output_path": "output_dir",
    "lora_r": "lora.r", "lora_rank": "lora.r", "rank": "lora.r", "lora_alpha": "lora.alpha",
    "lora_dropout": "lora.dropout", "lora_target": "lora.target_modules", "target_modules": "lora.target_modules",
    "model_name_or_path": "model.path", "pretrained": "model", "adapter_name_or_path": "adapter",
    "peft": "adapter", "task": "tasks", "num_fewshot": "protocol", "fold": "data.test_fold",
    "test_fold": "data.test_fold", "dataset": "data.source", "max_tokens": "max_new_tokens",
    "max_gen_toks": "max_new_tokens", "bf16": "train.precision", "fp16": "train.precision",
}


def by_meaning(key: str, known: Sequence[str]) -> str | None:
    """The key of ours that an unknown ``key`` means: its last part in another tool's words (ALIASES) or in another
    section (``epochs`` -> ``train.epochs``), preferring ``key``'s own section (``train.learning_rate`` ->
    ``train.lr``)."""
    section, _, last = key.rpartition(".")
    alias = ALIASES.get(last, last)
    matches = [k for k in known if k != key and (k == alias or k.endswith("." + alias))]
    return next((k for k in matches if k.rpartition(".")[0] == section), matches[0] if matches else None)


def check_keys(schema: type, given: Iterable[str], what: str) -> None:
    """Refuse keys the schema does not have, suggesting the one that means the same (ALIASES), else the
    nearest known one in spelling."""
    known = keys(schema)
    sections = {k.rsplit(".", 1)[0] for k in known if "." in k}
    for key in given:
        if section_type(schema, key) is None:
            close = [by_meaning(key, known)] if by_meaning(key, known) else \
                difflib.get_close_matches(key, known + sorted(sections), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else f" (see rescue-train {what} --help)"
            raise ConfigError(f"unknown key {key}{hint}")


def friendly(exc: Exception, schema: type, what: str) -> ConfigError:
    """An OmegaConf error rewritten to ``key: expected a float, got 'abc'`` / ``unknown key ...``."""
    key = str(getattr(exc, "full_key", "") or "")
    first = str(getattr(exc, "msg", exc)).splitlines()[0]
    if key and section_type(schema, key) is None:
        try:
            check_keys(schema, [key], what)
        except ConfigError as named:
            return named
    if key and hasattr(exc, "value"):
        expected = section_type(schema, key)
        if expected is not None and expected is not Any:
            return ConfigError(f"{key}: expected {_article(type_name(expected))}, got {getattr(exc, 'value')!r}")
    return ConfigError(f"{key}: {first}" if key else f"bad {what} setting: {first}")


def load(schema: type, layers: Sequence[Any], what: str):
    """Schema defaults <- each layer (a mapping or DictConfig) in turn, as an instance of ``schema``."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    merged = OmegaConf.structured(schema)
    try:
        for layer in layers:
            plain = layer if isinstance(layer, Mapping) else OmegaConf.to_container(layer)
            check_keys(schema, flatten(plain).keys(), what)
            merged = OmegaConf.merge(merged, layer)
        check_ranges(schema, OmegaConf.to_container(merged))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise friendly(exc, schema, what) from None


def dotlist(overrides: Sequence[str], what: str) -> dict:
    """``key=value`` arguments (OmegaConf dot-list syntax; a leading '+' is accepted) as a nested mapping."""
    from omegaconf import OmegaConf

    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise ConfigError(f"arguments must be key=value, got {bad[0]!r} (see rescue-train {what} --help)")
    return OmegaConf.to_container(OmegaConf.from_dotlist([a.lstrip("+") for a in overrides]))


def to_yaml(config: Any) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(config))


# ------------------------------------------------------------------------------------------ --help

def describe(schema: type, prefix: str = "", skip: Sequence[str] = (), instance: Any = None,
             width: int | None = None) -> list[str]:
    """One entry per key: ``name  type = default  meaning`` (defaults from ``instance``, else the schema's), wrapped
    to ``width`` (the terminal's). The schema's own keys come first, then those it inherits (eval's engine and API
    keys), so that a command's main keys lead."""
    import shutil
    import textwrap

    width = width or shutil.get_terminal_size((120, 24)).columns  # COLUMNS, the terminal, else 120
    lines = []
    instance = schema() if instance is None else instance
    hints = _hints(schema)
    own = set(schema.__dict__.get("__annotations__", {}))
    fields = dataclasses.fields(schema)
    for f in [f for f in fields if f.name in own] + [f for f in fields if f.name not in own]:
        key = prefix + f.name
        if key in skip:
            continue
        tp = hints[f.name]
        inner = _unwrap(tp)
        default = getattr(instance, f.name)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            lines += describe(inner, f"{key}.", skip, default, width)
            continue
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else repr(default) \
            if isinstance(default, str) else str(default)
        text = f.metadata.get("help", "")
        if "range" in f.metadata:
            text = f"{text} [{f.metadata['range']}]".lstrip()
        line = f"  {key:<30} {type_name(tp):<12} = {shown:<12} {text}".rstrip()
        # continued under the meaning where a terminal leaves it room, else just indented
        indent = 61 if width >= 100 else 6
        lines.append(textwrap.fill(line, width=max(width, 60), subsequent_indent=" " * indent,
                                   break_long_words=False, break_on_hyphens=False))
    return lines


# ------------------------------------------------------------------------------------------ shipped files

PACKAGE = Path(__file__).resolve().parent


def shipped(folder: str) -> Path:
    """A shipped folder (``recipes``, ``configs/model``, ...): inside the installed package, else at the top of
    the checkout this package runs from."""
    for root in (PACKAGE, PACKAGE.parent):
        if (root / folder).is_dir():
            return root / folder
    raise ConfigError(f"the shipped folder {folder}/ is missing from this installation ({PACKAGE})")


def names_in(folder: str) -> list[str]:
    return sorted(p.stem for p in shipped(folder).glob("*.yaml"))


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML file of settings as a mapping; a file that cannot be read or parsed is an error naming it."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(path)
    try:
        tree = OmegaConf.to_container(OmegaConf.load(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (OmegaConfBaseException, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"{path}: not a YAML mapping of settings ({str(exc).splitlines()[0]})") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(tree).__name__}")
    return tree


def find_yaml(name: str, folder: str, what: str) -> Path:
    """``name`` as a shipped file of ``folder`` (``ssp_lora``) or a path to the user's own (``my.yaml``,
    ``dir/r.yml``)."""
    given = Path(name).expanduser()
    if given.suffix in (".yaml", ".yml") or given.parent != Path("."):
        if not given.is_file():
            raise ConfigError(f"{what} file {given} does not exist")
        return given.resolve()
    found = shipped(folder) / f"{name}.yaml"
    if found.is_file():
        return found
    known = names_in(folder)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ConfigError(f"unknown {what} {name!r}{hint} (shipped: {', '.join(known) or 'none'}; or a path to a .yaml)")


RECIPE_KINDS = ("lora", "classifier")
OFF = ("none", "null", "off", "false")  # what `section=none` may be spelt as
DEFAULT_KIND = "lora"  # a recipe that names no kind trains LoRA adapters (the shipped ones all say theirs)


def recipe_names(kind: str | None = None) -> list[str]:
    """The shipped recipes (``recipes/*.yaml``), of one kind or all."""
    return [n for n in names_in("recipes") if kind is None or recipe_kind(read_recipe(n)[1]) == kind]


def read_recipe(name: str) -> tuple[Path, dict[str, Any]]:
    path = find_yaml(name, "recipes", "recipe")
    return path, read_yaml(path)


def recipe_kind(tree: dict[str, Any]) -> str:
    kind = tree.get("kind", DEFAULT_KIND)
    if kind not in RECIPE_KINDS:
        raise ConfigError(f"kind: expected one of {', '.join(RECIPE_KINDS)}, got {kind!r}")
    return kind


def compose(schema: type, overrides: Sequence[str], what: str, *, base: dict[str, Any] | Sequence[dict] = (),
            groups: Mapping[str, str] = {}, shorthand: Mapping[str, str] = {}, off: Mapping[str, dict] = {}):
    """An instance of ``schema``: its defaults <- the blocks ``groups`` select <- ``base`` (a recipe's body, what a
    command's inputs set; one mapping or several, in order) <- ``overrides``.

    ``groups`` maps a key to the folder of its blocks (``{"model": "configs/model"}``): ``model=NAME`` on the command
    line, or ``model: NAME`` in ``base``, merges that block (the command line's choice wins). ``shorthand`` maps a
    group key to the key a value that names no block stands for (``{"data": "data.source"}``: ``data=PATH`` is
    ``data.source=PATH``). ``off`` maps a section to what ``section: none`` (or ``section=none``) stands for in any
    layer (``{"judge": {"backend": "none"}}``)."""
    # A group choice is taken out before the dot-list is read: `model=any model.path=X` would read as model.path only.
    picks = {key: value for key, _, value in (a.lstrip("+").partition("=") for a in overrides) if key in groups}
    words = []
    for arg in overrides:
        key, _, value = arg.lstrip("+").partition("=")
        if key in groups:
            continue
        if key in off and value.lower() in OFF:  # `judge=none judge.x=1` must still mean judge.backend=none
            words += [f"{key}.{k}={v}" for k, v in off[key].items()]
        else:
            words.append(arg)
    cli = dotlist(words, what)
    bases = [dict(base)] if isinstance(base, Mapping) else [dict(b) for b in base]
    layers: list[dict[str, Any]] = []
    for layer in bases:
        for section, replacement in off.items():
            if section in layer and (layer[section] is None or str(layer[section]).lower() in OFF):
                layer[section] = dict(replacement)
    for key, folder in groups.items():
        chosen = [layer.pop(key) for layer in bases if isinstance(layer.get(key), str)]
        chosen += [picks[key]] if key in picks else []
        if not chosen:
            continue
        value = chosen[-1]
        if value in names_in(folder):
            layers.append(read_yaml(shipped(folder) / f"{value}.yaml"))
        elif key in shorthand:
            *parents, leaf = shorthand[key].split(".")
            node = cli
            for parent in parents:
                node = node.setdefault(parent, {})
            node.setdefault(leaf, value)
        else:
            close = difflib.get_close_matches(value, names_in(folder), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"{key}={value}: no such {key} block{hint} (shipped: {', '.join(names_in(folder))})")
    return load(schema, [*layers, *bases, cli], what)
