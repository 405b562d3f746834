"""Shared parts of the two generation tasks (ER, VP): checkpoint selection and JSON answers."""

from __future__ import annotations

import json
from typing import Any

from .base import Instance, Task


class GenerationTask(Task):
    kind = "generation"
    closed_set = False
    default_context = 3

    def answer(self, inst: Instance, fmt: str, value: Any = None) -> str:
        return json.dumps(self.answer_payload(inst.gold if value is None else value, fmt), ensure_ascii=False)

    def answer_payload(self, value: Any, fmt: str) -> dict[str, Any]:
        raise NotImplementedError


def first_value(payload: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in payload:
            return payload[key]
    return None
