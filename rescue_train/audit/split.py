"""Sentence splitting for the audit, in two modes.

``relate`` follows the splitter of the RELATE paper as its public record describes it (our own code):

* a sentence ends at ``.``, ``?`` or ``!`` when the next character is a space (the character ``" "``, not a
  newline) or the end of the text; end punctuation followed by more punctuation (``?!``) stays together;
* end punctuation directly followed by a closing quote defers the end to just after the quote;
* quotes: a curly opening double quote always opens a quotation; a straight ``"`` opens one only at the
  start of the text or after whitespace or one of ``, ; : — – - (``. Inside a quotation end punctuation does
  not split. A closing quote that directly follows or precedes end punctuation closes the quotation and ends
  the sentence right after the quote (so ``say, "I miss you." and see`` leaves ``and see`` on its own);
  any other closing quote just closes the quotation;
* the rest of the text is the last sentence; pieces are stripped and empty ones dropped.

Its known quirks are kept on purpose: newlines are not boundaries (paragraphs merge), abbreviations split
(``Dr.`` becomes a sentence), fragments have no minimum length.

``default`` is the same with four fixes:

* end punctuation followed by any whitespace (a newline too) ends a sentence, and a blank line always does;
* a period ending one of :data:`ABBREVIATIONS` does not end a sentence;
* a quotation closed on end punctuation ends the sentence only when the next word does not start in lower
  case (``say, "I miss you." and see`` stays one sentence);
* a quotation closed just before end punctuation leaves the end to that punctuation (``say "fine"?`` keeps
  its question mark).
"""

from __future__ import annotations

import re

MODES = ("default", "relate")
END = ".?!"
CURLY_OPEN = "\u201c"
CLOSING = "\"\u201d"
OPENS_STRAIGHT_QUOTE = " \t\n\r,;:\u2014\u2013-("
ABBREVIATIONS = ("Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St.", "Jr.", "Sr.", "vs.", "e.g.", "i.e.", "a.m.", "p.m.")
_ABBREVIATION_END = re.compile(r"(?:^|(?<=[^\w.]))(?:" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")$")


def split_sentences(text: str, mode: str = "default") -> list[str]:
    """The sentences of one turn, in order."""
    if mode not in MODES:
        raise ValueError(f"splitter must be one of {', '.join(MODES)}, got {mode!r}")
    fixed = mode == "default"
    pieces: list[str] = []
    start = 0
    in_quote = False
    defer_to_quote = False  # end punctuation was followed by a quote: the sentence ends after that quote
    n = len(text)

    def cut(end: int) -> None:
        nonlocal start
        pieces.append(text[start:end])
        start = end

    def boundary_after(i: int) -> bool:
        """Whether the character after position ``i`` lets a sentence end there."""
        if i + 1 >= n:
            return True
        nxt = text[i + 1]
        return nxt.isspace() if fixed else nxt == " "

    def next_word_is_lower(i: int) -> bool:
        rest = text[i + 1:].lstrip()
        return bool(rest) and rest[0].islower()

    for i, ch in enumerate(text):
        if in_quote:
            if ch in CLOSING:
                in_quote = False
                after_end = i > 0 and text[i - 1] in END
                before_end = i + 1 < n and text[i + 1] in END and not fixed  # fixed: the mark after ends it
                if (after_end or before_end) and not (fixed and next_word_is_lower(i)):
                    cut(i + 1)
            continue
        if defer_to_quote:
            defer_to_quote = False
            if ch in CLOSING:
                if not (fixed and next_word_is_lower(i)):
                    cut(i + 1)
                continue
        if ch == CURLY_OPEN or (ch == '"' and (i == 0 or text[i - 1] in OPENS_STRAIGHT_QUOTE)):
            in_quote = True
        elif ch in END:
            if i + 1 < n and text[i + 1] in CLOSING:
                defer_to_quote = True
            elif boundary_after(i) and not (fixed and ch == "." and _ABBREVIATION_END.search(text[start:i + 1])):
                cut(i + 1)
        elif fixed and ch == "\n" and re.match(r"\n[ \t]*\n", text[i:]):
            cut(i)
    cut(n)
    return [p.strip() for p in pieces if p.strip()]
