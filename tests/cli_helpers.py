"""Commands as the tests call them: exactly the ``rescue-train`` entry point, one command name bound."""

from __future__ import annotations

from typing import Callable, Sequence

from rescue_train.cli import main


def command(name: str) -> Callable[[Sequence[str]], int]:
    """``command("train")(argv)`` is ``rescue-train train ARGV``: the exit status."""
    return lambda argv: main([name, *argv])
