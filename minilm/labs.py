"""Instructor tools for the labs: build the student version, grade a submission, check a lab end to end.

A lab is a jupytext pair (``labs/labNN_*.py`` + ``.ipynb``) holding the instructor's solution. It uses nbgrader's
conventions, so it also works with nbgrader itself:

- ``### BEGIN SOLUTION`` / ``### END SOLUTION`` surround the solution inside a code cell; the student version
  replaces the region by ``raise NotImplementedError()`` at the marker's indentation.
- ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` surround tests the student never sees; grading puts
  them back.
- A graded test cell carries nbgrader metadata, ``# %% nbgrader={"grade": true, "grade_id": "q1", "points": 2}``;
  it earns its points when it runs without an error.
- A cell tagged ``instructor`` (``# %% tags=["instructor"]``) is dropped from the student version.

Commands (``python -m minilm.labs --help``)::

    build LAB [--out DIR]           write the student version (.ipynb and .py) of LAB
    grade LAB SUBMISSION [--json F] run SUBMISSION with LAB's tests put back; print a per-question report
    check [LAB ...]                 the solution scores full marks, the untouched student version scores zero
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*(\n|$)", re.M | re.S)
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[^\n]*\n.*?^[ \t]*### END HIDDEN TESTS[^\n]*(\n|$)", re.M | re.S)
MARKDOWN_ANSWER = "YOUR ANSWER HERE\n"
LABS_DIR = Path(__file__).resolve().parents[1] / "labs"


# ---------------------------------------------------------------------------------------------- reading


def read_notebook(path: str | Path):
    """Read a lab or a submission, from .ipynb or from a jupytext .py."""
    import jupytext

    return jupytext.read(Path(path))


def _grade_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_graded(cell) -> bool:
    return cell.cell_type == "code" and bool(_grade_meta(cell).get("grade"))


def _points(cell) -> float:
    return float(_grade_meta(cell).get("points", 1))


# ---------------------------------------------------------------------------------------------- build


def strip_solutions(source: str, cell_type: str = "code") -> str:
    """Replace each solution region by ``raise NotImplementedError()`` (code) or a prompt (markdown)."""
    if cell_type == "markdown":
        return SOLUTION.sub(MARKDOWN_ANSWER, source)
    return SOLUTION.sub(lambda m: f"{m.group(1)}raise NotImplementedError(){m.group(2)}", source)


def strip_hidden_tests(source: str) -> str:
    return HIDDEN.sub("", source)


def student_version(nb):
    """The notebook a student receives: no solutions, no hidden tests, no instructor cells, no outputs."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        if "instructor" in cell.get("metadata", {}).get("tags", []):
            continue
        cell.source = strip_hidden_tests(strip_solutions(cell.source, cell.cell_type)).rstrip("\n")
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    nb.cells = cells
    return nb


def build(lab: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the student version of ``lab`` as ``OUT/<name>.ipynb`` and ``OUT/<name>.py``; return the .ipynb."""
    import jupytext

    lab = Path(lab)
    out_dir = Path(out_dir) if out_dir else lab.parent / "release"
    out_dir.mkdir(parents=True, exist_ok=True)
    nb = student_version(read_notebook(lab))
    target = out_dir / f"{lab.stem}.ipynb"
    jupytext.write(nb, target)
    jupytext.write(nb, out_dir / f"{lab.stem}.py", fmt="py:percent")
    return target


# ---------------------------------------------------------------------------------------------- grade


@dataclass
class QuestionResult:
    grade_id: str
    points: float
    earned: float
    status: str  # "passed", "failed: <error>", "timeout", "missing", "not run"


@dataclass
class GradeReport:
    submission: str
    results: list[QuestionResult]
    note: str = ""

    @property
    def earned(self) -> float:
        return sum(r.earned for r in self.results)

    @property
    def total(self) -> float:
        return sum(r.points for r in self.results)

    def format(self) -> str:
        width = max([len(r.grade_id) for r in self.results] + [8])
        lines = [f"Grade report for {self.submission}"]
        if self.note:
            lines.append(f"note: {self.note}")
        lines.append(f"{'question':<{width}}  points  status")
        for r in self.results:
            lines.append(f"{r.grade_id:<{width}}  {r.earned:>2g}/{r.points:<3g}  {r.status}")
        lines.append(f"{'total':<{width}}  {self.earned:>2g}/{self.total:<3g}")
        return "\n".join(lines)


def merge_tests(lab_nb, submission_nb):
    """The submission with every graded cell replaced by the lab's own (hidden tests included).

    Students cannot weaken a test by editing it; a graded cell the student deleted is appended at the end.
    """
    merged = copy.deepcopy(submission_nb)
    originals = {_grade_meta(c)["grade_id"]: c for c in lab_nb.cells if is_graded(c)}
    seen = set()
    for i, cell in enumerate(merged.cells):
        grade_id = _grade_meta(cell).get("grade_id")
        if cell.cell_type == "code" and grade_id in originals:
            merged.cells[i] = copy.deepcopy(originals[grade_id])
            seen.add(grade_id)
    for grade_id, cell in originals.items():
        if grade_id not in seen:
            merged.cells.append(copy.deepcopy(cell))
    return merged


def _error_summary(cell) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename', 'Error')}: {out.get('evalue', '')}".strip().rstrip(":")
    return None


def _execute(nb, cwd: Path, timeout: int):
    """Run every cell, carrying on after errors; interrupt a cell that runs past ``timeout`` seconds."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    client = NotebookClient(
        nb,
        timeout=timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    try:
        client.execute()
    except DeadKernelError as err:
        return f"the kernel died ({err}); cells after it were not run"
    return ""


def grade(lab: str | Path, submission: str | Path, timeout: int = 120) -> GradeReport:
    """Grade ``submission`` against ``lab``. Never raises on a broken submission: it scores what ran."""
    lab_nb = read_notebook(lab)
    questions = [c for c in lab_nb.cells if is_graded(c)]
    zero = [QuestionResult(_grade_meta(c)["grade_id"], _points(c), 0.0, "not run") for c in questions]
    try:
        submission_nb = read_notebook(submission)
    except Exception as err:  # unreadable JSON, wrong format, missing file: all score zero
        return GradeReport(str(submission), zero, note=f"could not read the submission: {err}")
    merged = merge_tests(lab_nb, submission_nb)
    for cell in merged.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    note = _execute(merged, Path(lab).resolve().parent, timeout)
    results = []
    by_id = {_grade_meta(c).get("grade_id"): c for c in merged.cells if is_graded(c)}
    for question in questions:
        grade_id, points = _grade_meta(question)["grade_id"], _points(question)
        cell = by_id[grade_id]
        error = _error_summary(cell)
        if cell.get("execution_count") is None and not cell.get("outputs"):
            status = "not run"
        elif error is None:
            status = "passed"
        elif error.startswith("KeyboardInterrupt"):
            status = f"timeout (over {timeout} s)"
        else:
            status = f"failed: {error[:120]}"
        results.append(QuestionResult(grade_id, points, points if status == "passed" else 0.0, status))
    return GradeReport(str(submission), results, note=note)


# ---------------------------------------------------------------------------------------------- check


def all_labs() -> list[Path]:
    return sorted(p for p in LABS_DIR.glob("lab*.py"))


def check(lab: str | Path, timeout: int = 120) -> tuple[GradeReport, GradeReport]:
    """Prove the tests can fail: the solution scores full marks and the untouched student version zero."""
    with tempfile.TemporaryDirectory() as tmp:
        student = build(lab, tmp)
        solved = grade(lab, lab, timeout)
        untouched = grade(lab, student, timeout)
    return solved, untouched


# ---------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minilm.labs", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="write the student version of a lab")
    p_build.add_argument("lab", help="the instructor's lab (.py or .ipynb)")
    p_build.add_argument("--out", help="output folder (default: labs/release/)")
    p_grade = sub.add_parser("grade", help="grade a submitted notebook against a lab")
    p_grade.add_argument("lab", help="the instructor's lab (.py or .ipynb)")
    p_grade.add_argument("submission", help="the student's notebook (.ipynb or .py)")
    p_grade.add_argument("--timeout", type=int, default=120, help="seconds one cell may run (default 120)")
    p_grade.add_argument("--json", help="also write the report as JSON to this file")
    p_check = sub.add_parser("check", help="solution scores full marks, student version zero")
    p_check.add_argument("labs", nargs="*", help="labs to check (default: every labs/lab*.py)")
    p_check.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args(argv)

    if args.command == "build":
        print(build(args.lab, args.out))
        return 0
    if args.command == "grade":
        report = grade(args.lab, args.submission, args.timeout)
        print(report.format())
        if args.json:
            payload = {**asdict(report), "earned": report.earned, "total": report.total}
            Path(args.json).write_text(json.dumps(payload, indent=2))
        return 0
    failures = 0
    for lab in args.labs or all_labs():
        solved, untouched = check(lab, args.timeout)
        ok = solved.earned == solved.total > 0 and untouched.earned == 0
        failures += not ok
        print(
            f"{'ok  ' if ok else 'FAIL'} {lab}: solution {solved.earned:g}/{solved.total:g}, "
            f"student version {untouched.earned:g}/{untouched.total:g}"
        )
        if not ok:
            print(solved.format(), untouched.format(), sep="\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
