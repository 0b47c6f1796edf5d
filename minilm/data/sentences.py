"""A rule-based sentence splitter, good enough to build next-sentence / sentence-order pairs from novels.

A sentence ends at ``.``, ``!``, ``?`` or an ellipsis (``...``, ``…``), plus any closing quotes or brackets
right after it, when the next word starts with a capital letter or a digit (possibly behind an opening quote
or bracket). So ``"Why?" she asked.`` stays one sentence, and ``"Stop!" He ran.`` is two. A full stop does
not end a sentence after a title (``Mr.``, ``Dr.``, ``St.``, ...), a Latin abbreviation (``e.g.``, ``i.e.``,
``etc.``, ...), a dotted abbreviation (``U.S.``) or a single-capital initial (``J. K. Rowling``; ``I.`` is
taken as the pronoun and does end a sentence).
"""

from __future__ import annotations

import re

TITLES = frozenset(
    "Mr Mrs Ms Messrs Mme Mlle Dr Prof Rev Revd St Mt Jr Sr Capt Col Gen Lt Sgt Maj Adm Gov Hon Sen Rep".split()
)
LATIN = frozenset("e.g i.e etc viz cf vs al ca".split())  # compared in lower case

_END = re.compile(r"(?:\.{3}|…|[.!?])+[\"'”’)\]]*")
_NEXT_STARTS = re.compile(r"\s+[\"'“‘(\[]*[A-Z0-9]")
_WORD_BEFORE = re.compile(r"[^\s\"'“‘(\[]*\Z")
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_INITIAL = re.compile(r"[A-HJ-Z]")


def _keeps_going(text: str, end: re.Match[str]) -> bool:
    """True if the full stop matched by ``end`` belongs to an abbreviation or initial."""
    if end.group().rstrip("\"'”’)]") != ".":
        return False
    word = _WORD_BEFORE.search(text, 0, end.start()).group()
    return word in TITLES or word.lower() in LATIN or bool(_DOTTED.fullmatch(word) or _INITIAL.fullmatch(word))


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, in order, with runs of whitespace (newlines included) collapsed to a space."""
    sentences, start = [], 0
    for end in _END.finditer(text):
        if _NEXT_STARTS.match(text, end.end()) and not _keeps_going(text, end):
            sentences.append(text[start : end.end()])
            start = end.end()
    sentences.append(text[start:])
    return [s for s in (" ".join(part.split()) for part in sentences) if s]
