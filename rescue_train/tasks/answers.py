"""Reading a model's answer text: reasoning blocks and code fences removed, the first JSON value found, labels
matched onto candidates, text made safe to encode. Every function here never raises on any input."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable, Sequence

WORD = re.compile(r"[A-Za-z0-9']+")


PREDICTION_CHARS = 2000  # a predicted field longer than this is cut in a judge prompt (cost bound)


def shown(value: Any) -> str:
    """A predicted value as a judge prompt shows it: encodable, and cut at ``PREDICTION_CHARS``."""
    text = clean_text(str(value))
    return text if len(text) <= PREDICTION_CHARS else text[:PREDICTION_CHARS] + " [...]"


def text_field(item: Any, key: str) -> str:
    """A string field of a parsed answer ('' for anything else), safe for a tokenizer."""
    value = item.get(key) if isinstance(item, dict) else None
    return clean_text(value).strip() if isinstance(value, str) else ""


def word_count(text: str) -> int:
    return len(WORD.findall(text))



_JSON_START = re.compile(r"[\[{]")
_JSON_ATTEMPTS = 256  # start positions tried: bounds the time on megabytes of brackets
_MAX_INT_DIGITS = 64


def _number(text: str, convert) -> Any:
    """JSON numbers a parser can use: NaN, +-Infinity and integers of more than 64 digits read as null."""
    if convert is int and len(text.lstrip("-")) > _MAX_INT_DIGITS:
        return None
    value = convert(text)
    return value if convert is int or math.isfinite(value) else None


_DECODER = json.JSONDecoder(parse_int=lambda t: _number(t, int), parse_float=lambda t: _number(t, float),
                            parse_constant=lambda _: None)


def find_json(text: str) -> Any:
    """The first JSON object or list inside ``text`` (code fences and chatter around it allowed). Never
    raises: nesting too deep to decode ends the search, non-finite or huge numbers are null."""
    for attempt, match in enumerate(_JSON_START.finditer(text)):
        if attempt == _JSON_ATTEMPTS:
            break
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:  # JSONDecodeError is one
            continue
        except RecursionError:  # nested deeper than any answer: the brackets after it are no better
            return None
        return value
    return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_THINK_TAG = re.compile(r"<(/?)think(?:ing)?>", re.I)


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (from escaped JSON such as "\\ud800") replaced by U+FFFD, so it can be
    encoded as UTF-8 for a request, a tokenizer or a file."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _reasoning_end(text: str) -> tuple[int, bool]:
    """The end of the last ``</think>`` (0 when absent) and whether a ``<think>`` opened after it never closes."""
    end, unfinished = 0, False
    for match in _THINK_TAG.finditer(text):
        unfinished = not match.group(1)
        end = match.end() if match.group(1) else end
    return end, unfinished


def unfinished_reasoning(text: str) -> bool:
    """True when a ``<think>`` block is opened and never closed: the answer was cut while reasoning."""
    return _reasoning_end(text)[1]


def answer_text(text: str) -> str:
    """What a model answered, for the parsers: the text after its reasoning (after the last ``</think>``;
    nothing when a ``<think>`` never closes) and inside the first markdown code fence, if there is one."""
    end, unfinished = _reasoning_end(text)
    if unfinished:
        return ""
    text = text[end:]
    start = text.find("```")
    if start >= 0:
        line_end, close = text.find("\n", start), text.find("```", start + 3)
        if close >= 0 and (line_end < 0 or close < line_end):  # ```label``` on one line
            text = text[start + 3:close]
        else:  # the body starts after the fence line (```json)
            body = len(text) if line_end < 0 else line_end + 1
            close = text.find("```", body)
            text = text[body:close if close >= 0 else len(text)]
    return text.strip()


def _norm(label: str) -> str:
    return re.sub(r"[\s\-]+", "_", label.strip().strip("\"'`.,;:*").lower())


def match_labels(values: Iterable[Any], candidates: Sequence[str]) -> list[str]:
    """Map answer strings onto candidate labels (case, quotes and '-'/' ' vs '_' ignored), keeping first
    occurrences in order; strings that name no candidate are dropped (the raw answer stays in the record)."""
    index = {_norm(c): c for c in candidates}
    ranking: list[str] = []
    for value in values:
        if not isinstance(value, str):
            continue
        label = index.get(_norm(value))
        if label is not None and label not in ranking:
            ranking.append(label)
    return ranking


def labels_in_text(text: str, candidates: Sequence[str]) -> list[str]:
    """Candidate labels named in free text, in order of first mention (longest label wins on overlap)."""
    found: list[tuple[int, str]] = []
    lowered = text.lower()
    for label in sorted(candidates, key=len, reverse=True):
        pattern = r"(?<![\w])" + re.escape(label.lower()).replace(r"_", r"[_\s\-]") + r"(?![\w])"
        match = re.search(pattern, lowered)
        if match and not any(s <= match.start() < s + len(lbl) for s, lbl in found):
            found.append((match.start(), label))
    return [label for _, label in sorted(found)]

