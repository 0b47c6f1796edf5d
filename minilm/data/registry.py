"""The datasets the course uses: for each file its download URL, size and sha256, and each dataset's licence.

The metadata lives in ``registry.json`` next to this module (generated from the data mirror's
``MANIFEST.json``). It is read on first use, so importing this module costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class DataFile:
    """One downloadable file: where it comes from and what it must hash to."""

    dataset: str
    name: str
    url: str
    sha256: str
    bytes: int


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset: its licence and its files, keyed by file name."""

    name: str
    licence: str
    files: Mapping[str, DataFile]


@cache
def _load() -> dict[str, DatasetInfo]:
    raw = json.loads(resources.files(__package__).joinpath("registry.json").read_text(encoding="utf-8"))
    return {
        name: DatasetInfo(
            name=name,
            licence=entry["licence"],
            files={fname: DataFile(dataset=name, name=fname, **meta) for fname, meta in entry["files"].items()},
        )
        for name, entry in raw["datasets"].items()
    }


class _Registry(Mapping[str, DatasetInfo]):
    """A read-only mapping that loads ``registry.json`` on first access."""

    def __getitem__(self, name: str) -> DatasetInfo:
        return _load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_load())

    def __len__(self) -> int:
        return len(_load())

    def __repr__(self) -> str:
        return f"DATASETS({', '.join(self)})"


DATASETS: Mapping[str, DatasetInfo] = _Registry()


def list_datasets() -> list[str]:
    """The names of all registered datasets, sorted."""
    return sorted(DATASETS)


def get_dataset(name: str) -> DatasetInfo:
    """The dataset called ``name``; a ``KeyError`` listing the known names if there is none."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(list_datasets())}") from None


def get_file(dataset: str, filename: str) -> DataFile:
    """The registry entry for ``<dataset>/<filename>``; a ``KeyError`` listing the dataset's files if absent."""
    files = get_dataset(dataset).files
    try:
        return files[filename]
    except KeyError:
        known = ", ".join(sorted(files))
        raise KeyError(f"dataset {dataset!r} has no file {filename!r}; its files: {known}") from None
