"""Recorded results of the course's experiments: ``experiments/results/<name>.json``, found from anywhere.

    recorded = recorded_results("ch02_gpt")
    print(recorded.describe())          # command, the commit whose code produced them, date, machine
    curve = recorded.results["zero_shot"]

An experiment script (``experiments/<name>.py``) writes the file: its results and their provenance (command, commit,
machine, date; see ``experiments/common.py``). A record made from code that was never committed as it ran also says
which commit's code it matches (``matches_commit``), or, when no single commit holds what ran, which commit each part
of the code comes from (``code``), and why (``note``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path("experiments") / "results"  # relative to the repository root


@dataclass(frozen=True)
class Recorded:
    path: Path  # the JSON file
    provenance: dict  # command, commit, machine, date (and matches_commit or code, note)
    results: dict  # what the experiment measured

    def describe(self) -> str:
        """The provenance in three lines: the command, the code (commit) and date, the machine."""
        p = self.provenance
        code = f"commit {p['commit']}"
        if p.get("matches_commit"):
            code = f"commit {p['matches_commit']} (recorded as {p['commit']})"
        elif "code" in p:  # parts of the code from different commits: no single commit holds what ran
            code = ", ".join(f"{part} of {commit}" for part, commit in p["code"].items()) + " (see the record's note)"
        return f"command: {p['command']}\ncode:    {code} | {p['date']}\nmachine: {p['machine']}"


def recorded_results(name: str, start: str | Path | None = None) -> Recorded:
    """The record ``experiments/results/<name>.json`` of the repository that holds ``start`` (default: the current
    folder, e.g. ``chapters/``), else of the repository this ``minilm`` was imported from."""
    start = Path.cwd() if start is None else Path(start)
    folders = [*dict.fromkeys([start.resolve(), *start.resolve().parents, Path(__file__).resolve().parents[2]])]
    candidates = [folder / RESULTS / f"{name}.json" for folder in folders]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        looked = "\n  ".join(str(c) for c in candidates)
        raise FileNotFoundError(
            f"no recorded results named {name!r}; looked in\n  {looked}\nrun from inside the minilm repository, or "
            f"record them first: python experiments/{name}.py"
        )
    recorded = json.loads(path.read_text(encoding="utf-8"))
    return Recorded(path, recorded["provenance"], recorded["results"])
