"""Typed ``key=value`` configuration shared by every command: dataclass schemas read with OmegaConf, errors
that name the key, unknown keys refused with a suggestion, old spellings renamed with a warning, ``--help``
text written from the schema, and one resolver for shipped and user recipes.

A schema is a dataclass whose fields carry their meaning as ``field(..., metadata=meaning("one line"))``: the one
place a key's help is written, and what ``--help`` prints. Nested dataclasses are sections (``train.lr``),
``Dict``/``Any`` fields take free sub-keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

CONF_DIR = Path(__file__).resolve().parent / "conf"  # shipped recipes/ and configs/ (package data)


class ConfigError(ValueError):
    """A bad setting; the message names the key."""


def meaning(help_text: str, **extra: Any) -> dict[str, Any]:
    """Field metadata: ``field(default=..., metadata=meaning("one line"))``."""
    return {"help": help_text, **extra}


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


# ------------------------------------------------------------------------------------------ renamed keys

class RenamedWarning(FutureWarning):
    """An old spelling was used; the message names the new one."""


def deprecated(message: str) -> None:
    warnings.warn(message, RenamedWarning, stacklevel=3)


def plain_warnings() -> None:
    """Command-line warnings as ``warning: message`` lines (not Python's file:line form)."""
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"

def rename(overrides: Sequence[str], renamed: Mapping[str, str], quiet: bool = False) -> list[str]:
    """``old.key=v`` -> ``new.key=v`` for every renamed key (a FutureWarning names the new spelling)."""
    out = []
    for arg in overrides:
        plus = "+" if arg.startswith("+") else ""
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key in renamed:
            if not quiet:
                deprecated(f"{key}= is deprecated; use {renamed[key]}=")
            key = renamed[key]
        out.append(f"{plus}{key}{sep}{value}")
    return out


def rename_in(tree: Mapping[str, Any], renamed: Mapping[str, str], where: str, quiet: bool = False) -> dict:
    """The same renaming inside a nested mapping (a recipe file or a saved config)."""
    flat = flatten(tree)
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key in renamed:
            if not quiet:
                deprecated(f"{where}: {key} is deprecated; use {renamed[key]}")
            key = renamed[key]
        out[key] = value
    return unflatten(out)


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def as_list(value: Any) -> list[str]:
    """A list setting given as a list, a comma-separated string or nothing."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


# ------------------------------------------------------------------------------------------ loading

def check_keys(schema: type, given: Iterable[str], what: str) -> None:
    """Refuse keys the schema does not have, suggesting the nearest known one."""
    known = keys(schema)
    sections = {k.rsplit(".", 1)[0] for k in known if "." in k}
    for key in given:
        if section_type(schema, key) is None:
            close = difflib.get_close_matches(key, known + sorted(sections), n=1, cutoff=0.6)
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

def describe(schema: type, prefix: str = "", skip: Sequence[str] = (), instance: Any = None) -> list[str]:
    """One line per key: ``name  type = default  meaning`` (defaults from ``instance``, else the schema's)."""
    lines = []
    instance = schema() if instance is None else instance
    hints = _hints(schema)
    for f in dataclasses.fields(schema):
        key = prefix + f.name
        if key in skip:
            continue
        tp = hints[f.name]
        inner = _unwrap(tp)
        default = getattr(instance, f.name)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            lines += describe(inner, f"{key}.", skip, default)
            continue
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else repr(default) \
            if isinstance(default, str) else str(default)
        text = f.metadata.get("help", "")
        lines.append(f"  {key:<30} {type_name(tp):<12} = {shown:<12} {text}".rstrip())
    return lines


# ------------------------------------------------------------------------------------------ recipes

def recipe_names(kind: str = "recipes") -> list[str]:
    """The shipped recipes: ``recipes`` (train, compare) or ``eval``."""
    return sorted(p.stem for p in (CONF_DIR / kind).glob("*.yaml"))


def recipe_path(name: str, kind: str = "recipes") -> Path:
    """A shipped recipe by name (``ssp_lora``; ``kind`` eval: ``vllm_gpu``) or the user's own YAML file
    (``my.yaml``, ``path/to/r.yml``)."""
    given = Path(name).expanduser()
    if given.suffix in (".yaml", ".yml") or given.parent != Path("."):
        if not given.is_file():
            raise ConfigError(f"recipe file {given} does not exist")
        return given.resolve()
    shipped = CONF_DIR / kind / f"{name}.yaml"
    if shipped.is_file():
        return shipped
    close = difflib.get_close_matches(name, recipe_names(kind), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ConfigError(f"unknown recipe {name!r}{hint} (shipped: {', '.join(recipe_names(kind))}; or a path to a "
                      ".yaml)")
