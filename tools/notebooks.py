"""Keep every chapter and lab a faithful jupytext pair.

    python tools/notebooks.py check              # CI: every pair in sync, every code cell executed, kernel python3
    python tools/notebooks.py execute FILE.py    # run the .py and write its .ipynb with outputs (no timing noise)
    python tools/notebooks.py execute --all      # the same for every chapter and lab

Why not ``jupytext --sync``/``--test``: ``--sync`` picks the newer file by modification time and can silently revert
an edit; ``--test`` passes on out-of-sync pairs. Here the .py is the source of truth and the .ipynb must match it
cell by cell (type, source, tags and nbgrader metadata).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIRS = ("chapters", "labs")
KEPT_METADATA = ("tags", "nbgrader")


def paired_sources() -> list[Path]:
    return sorted(p for d in NOTEBOOK_DIRS for p in (REPO / d).glob("*.py") if not p.name.startswith("_"))


def _cell_key(cell) -> tuple:
    meta = {k: cell.get("metadata", {}).get(k) for k in KEPT_METADATA}
    return cell.cell_type, cell.source.strip(), repr(sorted((k, repr(v)) for k, v in meta.items() if v))


def problems(py: Path) -> list[str]:
    """What is wrong with the pair ``py`` + ``py.with_suffix('.ipynb')``; empty when all is well."""
    import jupytext

    ipynb = py.with_suffix(".ipynb")
    if not ipynb.exists():
        return [f"{ipynb.relative_to(REPO)} is missing: run `python tools/notebooks.py execute {py.relative_to(REPO)}`"]
    text_nb, json_nb = jupytext.read(py), jupytext.read(ipynb)
    found = []
    kernel = json_nb.metadata.get("kernelspec", {}).get("name")
    if kernel != "python3":
        found.append(f"{ipynb.name}: kernelspec is {kernel!r}, not 'python3'")
    text_cells, json_cells = [_cell_key(c) for c in text_nb.cells], [_cell_key(c) for c in json_nb.cells]
    if text_cells != json_cells:
        where = next(
            (i for i, (a, b) in enumerate(zip(text_cells, json_cells, strict=False)) if a != b),
            min(len(text_cells), len(json_cells)),
        )
        found.append(f"{py.name} and {ipynb.name} differ from cell {where}: re-execute and sync the pair")
    for i, cell in enumerate(json_nb.cells):
        if cell.cell_type == "code" and cell.source.strip() and cell.get("execution_count") is None:
            found.append(f"{ipynb.name}: code cell {i} has no stored output (never executed)")
    return found


def keep_cell_ids(nb, ipynb: Path) -> None:
    """Give ``nb``'s cells the ids their twins (same type and source) have in ``ipynb``, so that re-executing a
    notebook changes only what changed; jupytext draws new random ids each time it reads a .py."""
    import jupytext

    if not ipynb.exists():
        return
    old_ids: dict[tuple[str, str], list[str]] = {}
    for cell in jupytext.read(ipynb).cells:
        if cell.get("id"):
            old_ids.setdefault((cell.cell_type, cell.source), []).append(cell.id)
    for cell in nb.cells:
        twins = old_ids.get((cell.cell_type, cell.source))
        if twins:
            cell.id = twins.pop(0)


def execute(py: Path, timeout: int = 600) -> float:
    """Run ``py`` top to bottom in a fresh python3 kernel and write the paired .ipynb; return the seconds taken."""
    import jupytext
    from nbclient import NotebookClient

    source = py.read_text()
    nb = jupytext.reads(source, fmt="py:percent")
    keep_cell_ids(nb, py.with_suffix(".ipynb"))
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    start = time.perf_counter()
    resources = {"metadata": {"path": str(py.parent)}}
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False, resources=resources).execute()
    if py.read_text() != source:  # edited while it ran: writing would undo the edit and pair stale outputs with it
        raise SystemExit(f"{py.name} changed while it ran; nothing written: execute it again")
    jupytext.write(nb, py.with_suffix(".ipynb"))
    jupytext.write(nb, py, fmt="py:percent")  # normalise the header so both files carry the same metadata
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="fail when a pair is out of sync, unexecuted, or not on the python3 kernel")
    p_exec = sub.add_parser("execute", help="execute .py files and write their .ipynb")
    p_exec.add_argument("files", nargs="*", type=Path)
    p_exec.add_argument("--all", action="store_true", help="every chapter and lab")
    args = parser.parse_args(argv)

    if args.command == "execute":
        for py in paired_sources() if args.all else [f.resolve() for f in args.files]:
            print(f"{py.relative_to(REPO)}: executed in {execute(py):.1f} s", flush=True)
        return 0
    sources = paired_sources()
    found = [msg for py in sources for msg in problems(py)]
    print("\n".join(found) if found else f"{len(sources)} notebook pairs in sync, executed, on kernel python3")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
