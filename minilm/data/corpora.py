"""Plain-text corpora for language-model pre-training: Gutenberg novels, WikiText-2 and Tiny Shakespeare."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from minilm.data._files import read_text
from minilm.data.registry import get_dataset
from minilm.data.sentences import split_sentences


@dataclass(frozen=True)
class Document:
    """A titled text made of paragraphs; sentences never cross a paragraph boundary."""

    title: str
    paragraphs: list[str]

    @property
    def text(self) -> str:
        """The paragraphs joined by blank lines."""
        return "\n\n".join(self.paragraphs)

    def sentences(self) -> list[str]:
        """All sentences, paragraph by paragraph (see ``split_sentences``)."""
        return [s for p in self.paragraphs for s in split_sentences(p)]


# ---- Project Gutenberg -------------------------------------------------------------------------------------

_PG_START = re.compile(r"^\s*\*+\s*START OF\b.*PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE)
_PG_END = re.compile(r"^\s*\*+\s*END OF\b.*PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE)
# Credits and notes that sit just inside the markers ("Produced by ...", "End of the Project Gutenberg EBook").
_PG_CREDIT = re.compile(r"(produced by|transcribed from|\[?project gutenberg|end of (the )?project gutenberg)", re.I)
_CREDIT_WINDOW = 5  # how many paragraphs at each end may be credits


def _gutenberg_title(filename: str) -> str:
    """``Alice-s-Adventures-in-Wonderland_11.txt`` -> ``Alice's Adventures in Wonderland``."""
    stem = filename.rsplit("_", 1)[0]
    return stem.replace("--", "; ").replace("-s-", "'s-").replace("-", " ")


def _gutenberg_paragraphs(raw: str) -> list[str]:
    """The book's paragraphs: text between the licence markers, minus credits, lines joined, spaces collapsed."""
    start, end = _PG_START.search(raw), _PG_END.search(raw)
    body = raw[start.end() if start else 0 : end.start() if end else len(raw)]
    paragraphs = [" ".join(block.split()) for block in re.split(r"\n\s*\n", body)]
    paragraphs = [p for p in paragraphs if p]
    n = len(paragraphs)
    at_ends = lambda i: i < _CREDIT_WINDOW or i >= n - _CREDIT_WINDOW
    return [p for i, p in enumerate(paragraphs) if not (at_ends(i) and _PG_CREDIT.match(p))]


@cache
def _gutenberg_books() -> dict[str, str]:
    """Title -> file name for every book in the registry."""
    files = get_dataset("gutenberg").files
    return {_gutenberg_title(name): name for name in sorted(files)}


@cache
def _gutenberg_book(filename: str) -> Document:
    return Document(_gutenberg_title(filename), _gutenberg_paragraphs(read_text("gutenberg", filename)))


def load_gutenberg(titles: list[str] | None = None) -> list[Document]:
    """One ``Document`` per novel (all 17 by default, sorted by title; else in the order of ``titles``).

    The Project Gutenberg header and footer (``*** START OF ...`` / ``*** END OF ...`` and the production
    credits just inside them) are removed; paragraphs are the blank-line separated blocks with their line
    breaks joined by spaces. Titles come from the file names, e.g. ``"Pride and Prejudice"``. Parsed books
    are cached per process; each call returns fresh paragraph lists the caller may modify.
    """
    books = _gutenberg_books()
    lower = {t.lower(): t for t in books}
    wanted = list(books) if titles is None else titles
    unknown = [t for t in wanted if t.lower() not in lower]
    if unknown:
        raise KeyError(f"unknown Gutenberg titles {unknown}; known titles: {', '.join(books)}")
    docs = [_gutenberg_book(books[lower[t.lower()]]) for t in wanted]
    return [Document(d.title, list(d.paragraphs)) for d in docs]


# ---- WikiText-2 ------------------------------------------------------------------------------------------------

_WIKI_TITLE = re.compile(r"^ = (?!=)(.*) = $")
WIKITEXT_FILES = {"valid": "valid.txt", "test": "test.txt"}


@cache
def _wikitext(split: str) -> tuple[Document, ...]:
    docs: list[Document] = []
    for line in read_text("wikitext-2", WIKITEXT_FILES[split]).split("\n"):
        if title := _WIKI_TITLE.match(line):
            docs.append(Document(title.group(1), []))
        elif line.strip() and docs:
            docs[-1].paragraphs.append(line.strip())
    return tuple(docs)


def load_wikitext(split: str = "valid") -> list[Document]:
    """WikiText-2 articles (``"valid"``: 60, ``"test"``: 62; the mirror has no train split).

    An article starts at a level-1 heading `` = Title = ``; each following non-empty line is a paragraph,
    section headings such as ``= = History = =`` included, so the text keeps the corpus's own token stream
    (already tokenized, rare words as ``<unk>``). Cached like ``load_gutenberg``.
    """
    if split not in WIKITEXT_FILES:
        raise ValueError(f"unknown WikiText-2 split {split!r}; splits: {', '.join(WIKITEXT_FILES)}")
    return [Document(d.title, list(d.paragraphs)) for d in _wikitext(split)]


# ---- Tiny Shakespeare ------------------------------------------------------------------------------------------


def load_tiny_shakespeare() -> Document:
    """Tiny Shakespeare as one ``Document``; each paragraph is one speech (speaker line + verse lines).

    A ``Document`` rather than a ``str`` so it works like the other corpora; line breaks inside a speech are
    kept because a character-level model learns the verse layout. ``.text`` is the file without its final
    newline and with the two triple line breaks between plays shortened to blank lines.
    """
    raw = read_text("tinyshakespeare", "input.txt")
    return Document("Tiny Shakespeare", [p.strip("\n") for p in re.split(r"\n\s*\n", raw) if p.strip()])
