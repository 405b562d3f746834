"""Reading one field of a raw record: the value checked for its type (text, names, a label, a finite number), or
a :class:`DataError` that names where it happened (file, line, sample, row, field) and what was expected."""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class HugeNumber(str):
    """The digits of a JSON integer longer than Python converts (4300 digits), kept as text so the field
    check that meets it can say where it is."""


class Location(NamedTuple):
    """Where a value came from, for error messages (one is made per row, so it is a cheap tuple)."""

    file: str | None = None
    line: int | None = None
    sample_id: str | None = None
    row_index: int | None = None
    field: str | None = None

    def at(self, **changes: Any) -> "Location":
        return self._replace(**changes)

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file + (f":{self.line}" if self.line is not None else ""))
        elif self.line is not None:
            parts.append(f"line {self.line}")
        if self.sample_id:
            parts.append(f"sample {self.sample_id!r}")
        if self.row_index is not None:
            parts.append(f"row {self.row_index}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts) or "<input>"


class DataError(ValueError):
    """Malformed benchmark input; the message starts with the location."""

    def __init__(self, where: Location, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


def describe(value: Any) -> str:
    if isinstance(value, HugeNumber):
        return f"a number with {len(value.lstrip('-'))} digits"
    try:
        text = repr(value)
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


Name = str | tuple[str, int, str]  # a field, or (list field, item number, key) inside a list item


def bad_field(where: Location, name: Name, expected: str, value: Any) -> DataError:
    """``name`` is a field, or (list field, item number, key) for a value inside a list item: formatted here,
    on the error path only."""
    if isinstance(name, tuple):
        name = f"{name[0]}[{name[1]}].{name[2]}"
    return DataError(where.at(field=name), f"expected {expected}, got {describe(value)}")


# Field readers: inline type tests (they run for every value of every row); a Location is built only when
# something is wrong.
def text_field(value: Any, where: Location, name: Name) -> str:
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise bad_field(where, name, "a string", value)


def stripped_field(value: Any, where: Location, name: Name) -> str:
    return text_field(value, where, name).strip()


def names_field(value: Any, where: Location, name: Name) -> tuple[str, ...]:
    """null reads as empty; a bare string is an error (one name, or several joined? it is ambiguous)."""
    if type(value) is list and all(type(v) is str for v in value):
        return tuple(v.strip() for v in value if v.strip())
    if value is None:
        return ()
    raise bad_field(where, name, "a list of names", value)


def label_field(value: Any, where: Location, name: Name) -> str | None:
    if type(value) is str:
        return value.strip()
    if value is None:
        return None
    raise bad_field(where, name, 'a string label, "" or null', value)


def number_field(value: Any, where: Location, name: Name) -> float | None:
    """A finite number, a numeric string, or null. Infinity, NaN and integers beyond a float's range are
    errors: none is a time or an intensity, and each would break arithmetic further on."""
    if type(value) is float:
        if math.isfinite(value):
            return value
        raise bad_field(where, name, "a finite number", value)
    if value is None:
        return None
    if type(value) is int or type(value) is str:
        try:
            number = float(value.strip() if type(value) is str else value)
        except ValueError:
            raise bad_field(where, name, "a number", value) from None
        except OverflowError:
            raise bad_field(where, name, "a number within a float's range", value) from None
        if math.isfinite(number):
            return number
        raise bad_field(where, name, "a finite number", value)
    if isinstance(value, HugeNumber):
        raise bad_field(where, name, "a number within a float's range", value)
    raise bad_field(where, name, "a number", value)
