"""Reading fetched files: text with BOM and CRLF removed, and tab-separated rows with line numbers."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from minilm.data.download import fetch
from minilm.data.errors import DataError


def malformed(dataset: str, filename: str, line: int, why: str) -> DataError:
    """The error for a bad line: names the file and the 1-based line number."""
    return DataError(f"{dataset}/{filename}, line {line}: {why}")


def read_text(dataset: str, filename: str) -> str:
    """The file decoded as UTF-8, without a BOM, with ``\\n`` line ends."""
    with open(fetch(dataset, filename), encoding="utf-8-sig", newline="") as f:
        return f.read().replace("\r\n", "\n").replace("\r", "\n")


def read_lines(dataset: str, filename: str) -> list[str]:
    """The file's lines, without line ends (a final newline does not make an extra empty line)."""
    text = read_text(dataset, filename)
    return text.removesuffix("\n").split("\n") if text else []


def tsv_rows(
    dataset: str, filename: str, columns: int, *, header: bool, extra_ok: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` for each non-empty line of a tab-separated file, quotes taken literally.

    Every line must have ``columns`` fields (at least that many if ``extra_ok``), else a ``DataError``.
    """
    with open(fetch(dataset, filename), encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if header:
            next(reader, None)
        for fields in reader:
            if not fields:
                continue
            if len(fields) != columns and not (extra_ok and len(fields) > columns):
                expected = f"at least {columns}" if extra_ok else str(columns)
                raise malformed(
                    dataset, filename, reader.line_num, f"expected {expected} tab-separated fields, got {len(fields)}"
                )
            yield reader.line_num, fields
