"""One base for every command: how arguments are read, help and ``--cfg`` printed, warnings and errors shown.

Arguments, in any order:

* ``key=value`` sets a key of the command's schema (OmegaConf dot-list syntax: ``train.lr=1e-4``,
  ``tasks=[itp,rpp]``, ``judge.model=gpt-5.4``); a leading ``+`` is accepted;
* ``--key value``, ``--key=value`` and, for a true/false key, ``--key`` / ``--no-key`` say the same: dashes stand
  for underscores, a key may be named by its last part when that is unique (``--split-seed`` is
  ``data.split_seed``) and shortened while it stays unambiguous (``--out`` is ``--output-dir``); a list key takes
  the words that follow it (``--tasks itp rpp``);
* other words are the command's inputs (a benchmark file, results folders, ...);
* ``--help`` prints the usage and every key with its type, default and meaning, all from the schema; ``--cfg``
  prints the resolved settings and stops.

Warnings print as ``warning: message`` lines; a bad setting, bad input or a stopping error prints one
``rescue-train COMMAND: error: ...`` line and exits with status 2, never a traceback; Ctrl-C one
``rescue-train COMMAND: interrupted ...`` line and status 130.
"""

from __future__ import annotations

import difflib
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..console import shown_err
from ..data.fields import DataError
from ..data.splits import LeakageError
from ..inference import BackendError
from ..settings import ConfigError, by_meaning, describe, keys, section_type, to_yaml, type_name

ERRORS = (ConfigError, ValueError, DataError, LeakageError, BackendError, OSError)
HELP = ("-h", "--help", "help")


@dataclass
class Command:
    name: str
    usage: str | Callable[[], str]  # what --help prints above the keys
    load: Callable[[list[str], list[str]], Any]  # (inputs, key=value overrides) -> the typed settings
    run: Callable[[Any], int | None]  # the settings -> exit status (None: 0)
    schema: type | None = None  # the settings' dataclass (keys for --help and --flags)
    schema_for: Callable[[list[str]], type] | None = None  # where the schema depends on the arguments (train)
    extra_keys: tuple[str, ...] = ()  # keys beyond the schema (recipe=, config groups such as model=)
    inputs: bool = False  # whether bare words are inputs
    labelled_inputs: bool = False  # NAME=PATH is an input (a label and a path) when PATH exists
    flags: dict[str, str] = field(default_factory=dict)  # flags that are not keys, e.g. {"--dry-run": "dry_run=true"}
    raw: bool = False  # the arguments go to ``load`` as they are (launch: accelerate's own options)


def _quote(value: str) -> str:
    """A flag's value as a dot-list value: left as it is when the dot-list reads it back unchanged."""
    if value and not any(c in value for c in " =,[]{}:'\"\\$") and value == value.strip():
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class ArgumentReader:
    """Turns a command line into (inputs, key=value overrides) against a schema."""

    def __init__(self, command: Command, schema: type | None):
        self.command = command
        self.schema = schema
        self.keys = (keys(schema) if schema else []) + list(command.extra_keys)
        sections = {k.rsplit(".", 1)[0] for k in self.keys if "." in k}
        self.known = set(self.keys) | sections

    def resolve(self, flag: str) -> str:
        """The key a ``--flag`` names (dashes as underscores; its last part or an unambiguous start)."""
        name = flag.lstrip("-").replace("-", "_")
        if name in self.known:
            return name
        for matches in ([k for k in self.keys if k.rsplit(".", 1)[-1] == name],
                        [k for k in self.keys if k.startswith(name) or k.rsplit(".", 1)[-1].startswith(name)]):
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise ConfigError(f"option {flag} is ambiguous: it could be " +
                                  ", ".join("--" + m.replace("_", "-") for m in sorted(matches)[:6]))
        close = [by_meaning(name, self.keys)] if by_meaning(name, self.keys) else \
            difflib.get_close_matches(name, self.keys, n=1, cutoff=0.6)
        hint = f"; did you mean --{close[0].replace('_', '-')}?" if close else ""
        raise ConfigError(f"unknown option {flag}{hint} (see rescue-train {self.command.name} --help)")

    def kind(self, key: str) -> str:
        tp = section_type(self.schema, key) if self.schema and key in self.keys else None
        name = type_name(tp) if tp is not None else "any"
        return "bool" if name.startswith("bool") else "list" if name.startswith("list") else "value"

    def names_key(self, word: str) -> bool:
        """Whether ``word`` is ``key=value`` for a key of this command."""
        key, sep, _ = word.lstrip("+").partition("=")
        return bool(sep) and key.split(".")[0] in self.known

    def is_override(self, word: str) -> bool:
        key, _, value = word.lstrip("+").partition("=")
        if not self.command.labelled_inputs:
            return True
        return key.split(".")[0] in self.known or not Path(value).expanduser().exists()

    def read(self, argv: Sequence[str]) -> tuple[list[str], list[str]]:
        inputs: list[str] = []
        overrides: list[str] = []
        words = list(argv)
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if word in self.command.flags:
                overrides.append(self.command.flags[word])
            elif word.startswith("--") and len(word) > 2:
                name, sep, value = word.partition("=")
                negated = not sep and name.startswith("--no-") and self.kind(self._try(name[5:])) == "bool"
                key = self.resolve("--" + name[5:] if negated else name)
                kind = self.kind(key)
                if sep:
                    overrides.append(f"{key}={_quote(value)}")
                elif kind == "bool":
                    overrides.append(f"{key}={'false' if negated else 'true'}")
                elif kind == "list":
                    taken = []
                    while i < len(words) and not words[i].startswith("-") and not self.names_key(words[i]) \
                            and not ("=" in words[i] and not self.is_override(words[i])):
                        taken.append(words[i])
                        i += 1
                    if not taken:
                        raise ConfigError(f"option {name} needs one or more values")
                    overrides.append(f"{key}=[{','.join(_quote(v) for v in taken)}]")
                else:
                    if i >= len(words):
                        raise ConfigError(f"option {name} needs a value")
                    overrides.append(f"{key}={_quote(words[i])}")
                    i += 1
            elif "=" in word and self.is_override(word):
                overrides.append(word.lstrip("+"))
            elif word.startswith("-") and word != "-":
                raise ConfigError(f"unknown option {word} (see rescue-train {self.command.name} --help)")
            else:
                inputs.append(word)
        if inputs and not self.command.inputs:
            raise ConfigError(f"arguments must be key=value or --key value, got {inputs[0]!r} "
                              f"(see rescue-train {self.command.name} --help)")
        return inputs, overrides

    def _try(self, flag: str) -> str:
        try:
            return self.resolve(flag)
        except ConfigError:
            return ""


def _one_line(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"warning: {message}", file=shown_err() if file is None else file)  # on the console, even while quiet


def help_text(command: Command, schema: type | None, settings: Any = None) -> str:
    """The usage and every key; the values are those of ``settings`` (what the other arguments, a recipe, give)
    where they could be read, else the defaults."""
    parts = [(command.usage() if callable(command.usage) else command.usage).rstrip()]
    if schema is not None:
        given = settings if isinstance(settings, schema) else None
        parts.append(f"keys (key  type = {'value' if given else 'default'}  meaning):\n" +
                     "\n".join(describe(schema, instance=given)))
    return "\n\n".join(parts)


def settings_for_help(command: Command, schema: type | None, argv: list[str]) -> Any:
    """The settings the rest of ``argv`` (``recipe=ssp_lora``, keys) makes, for --help to show, or None where they
    do not load (help is shown all the same)."""
    rest = [a for a in argv if a not in HELP and a != "--cfg"]
    if not rest or schema is None:
        return None
    try:
        return command.load(*ArgumentReader(command, schema).read(rest))
    except ERRORS:
        return None


def execute(command: Command, argv: Sequence[str]) -> int:
    """Run ``command`` on ``argv``: the exit status (0 done, 2 a bad setting, bad input or stopping error)."""
    argv = list(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line
        try:
            if command.raw:
                if argv[:1] and argv[0] in HELP:
                    print(help_text(command, None))
                    return 0
                return int(command.run(command.load(argv, [])) or 0)
            schema = command.schema_for(argv) if command.schema_for else command.schema
            if any(a in HELP for a in argv):
                print(help_text(command, schema, settings_for_help(command, schema, argv)))
                return 0
            reader = ArgumentReader(command, schema)
            inputs, overrides = reader.read([a for a in argv if a != "--cfg"])
            settings = command.load(inputs, overrides)
            if "--cfg" in argv:
                print(to_yaml(settings).rstrip())
                return 0
            return int(command.run(settings) or 0)
        except BrokenPipeError:  # the reader stopped early (`| head`): not an error; keep Python quiet at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except ERRORS as exc:
            print(f"rescue-train {command.name}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as stop:  # one line, as a shell reports Ctrl-C (128 + SIGINT), not a traceback
            print(f"rescue-train {command.name}: {stop.args[0] if stop.args else 'interrupted'}", file=sys.stderr)
            return 130
