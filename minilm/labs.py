"""Instructor tools for the labs: build the student version, grade a submission, check a lab end to end.

A lab is a jupytext pair (``labs/labNN_*.py`` + ``.ipynb``) holding the instructor's solution, in nbgrader's format
(markers and cell metadata), so nbgrader itself can release and autograde it too (see below); this module does the
same without nbgrader's database and server parts:

- ``### BEGIN SOLUTION`` / ``### END SOLUTION`` surround the solution inside a solution cell,
  ``# %% nbgrader={"grade": false, "grade_id": "answer_f", "locked": false, "schema_version": 3, "solution": true}``;
  the student version replaces the region by ``raise NotImplementedError()`` at the marker's indentation.
- ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` surround tests the student never sees; grading puts
  them back.
- A graded test cell carries ``# %% nbgrader={"grade": true, "grade_id": "q1", "locked": true, "points": 2,
  "schema_version": 3, "solution": false}``; it earns its points when it runs without an error.
- A cell tagged ``instructor`` (``# %% tags=["instructor"]``) is dropped from the student version.
- A set-up cell (no solution region, not graded, using nothing a solution cell defines) must run: if it fails,
  the report names it as the cause and ``grade`` exits 1.
- ``labs/mistakes/<lab>.toml`` lists known-wrong answers (``[[mistake]]``: ``name``, ``right``, ``wrong``,
  ``breaks``); ``check`` grades each and requires it to lose exactly the points of the questions in ``breaks``.

Commands (``python -m minilm.labs --help``)::

    build LAB [--out DIR]           write the student version (.ipynb and .py) of LAB
    grade LAB SUBMISSION [--json F] run SUBMISSION with LAB's tests put back; print a per-question report
    check [LAB ...] [--no-mistakes] the solution scores full marks, the untouched student version zero, and every
                                    known-wrong answer loses exactly its questions' points

With nbgrader (0.9, in the ``dev`` extra): in a course directory whose ``nbgrader_config.py`` reads
``from minilm.labs import configure_nbgrader; c = get_config(); configure_nbgrader(c)``, copy
``labs/labNN_*.ipynb`` to ``source/<assignment>/``, then run ``nbgrader generate_assignment <assignment> --create``
and, on the collected ``submitted/<student>/<assignment>/``, ``nbgrader autograde <assignment> --create``.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*(\n|$)", re.M | re.S)
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[^\n]*\n.*?^[ \t]*### END HIDDEN TESTS[^\n]*(\n|$)", re.M | re.S)
MARKDOWN_ANSWER = "YOUR ANSWER HERE\n"
LABS_DIR = Path(__file__).resolve().parents[1] / "labs"
MISTAKE_ERRORS = ("AssertionError", "RuntimeError")  # how a known-wrong answer may fail unless it says otherwise


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


def is_solution(cell) -> bool:
    """A cell the student writes: it holds a solution region (or nbgrader calls it a solution cell)."""
    return bool(_grade_meta(cell).get("solution")) or bool(SOLUTION.search(cell.source))


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError:  # a broken cell (or IPython magic): it defines and uses nothing we can see
        return ast.Module(body=[], type_ignores=[])


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds, at any depth (functions, classes, imports, assignments, loop and comprehension
    variables). Erring towards too many names only makes fewer cells count as set-up."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _free_names(tree: ast.AST) -> set[str]:
    """The names the code reads without binding them itself (a comprehension's variable is not a use)."""
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loads - _bound_names(tree)


def setup_sources(lab_nb) -> set[str]:
    """The lab's set-up cells: code the student neither writes nor runs. A cell is set-up unless it holds a solution
    region, is graded, or uses a name that such a cell (or a cell depending on one) defines. If a set-up cell fails,
    the questions below it cannot run, whoever submitted."""
    dependent, sources = set(), set()
    for cell in lab_nb.cells:
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        tree = _parse(cell.source)
        if is_graded(cell) or is_solution(cell) or _free_names(tree) & dependent:
            dependent |= _bound_names(tree)
        else:
            sources.add(cell.source.strip())
    return sources


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
    setup_error: str = ""  # "set-up cell N failed: ..." when a cell of the lab's own set-up failed

    @property
    def earned(self) -> float:
        return sum(r.earned for r in self.results)

    @property
    def total(self) -> float:
        return sum(r.points for r in self.results)

    def format(self) -> str:
        width = max([len(r.grade_id) for r in self.results] + [8])
        lines = [f"Grade report for {self.submission}"]
        if self.setup_error:
            lines.append(f"error: {self.setup_error}")
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
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="minilm-kernel-") as sockets:
        client = NotebookClient(
            nb,
            timeout=timeout,
            allow_errors=True,
            interrupt_on_timeout=True,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(cwd)}},
            # IPC sockets (files only this user can open; an absolute path, as the kernel runs in ``cwd``) instead of
            # TCP on localhost: the kernel then has no reason to warn "Kernel is running over TCP without encryption"
            # on every grade, and its other messages still show.
            config=Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "kernel")}}),
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
    setup = setup_sources(lab_nb)
    setup_error = ""
    for i, cell in enumerate(merged.cells):
        error = _error_summary(cell) if cell.cell_type == "code" and cell.source.strip() in setup else None
        if error:
            first_line = cell.source.strip().splitlines()[0][:60]
            setup_error = (
                f"set-up cell {i + 1} ({first_line!r}) failed: {error[:200]} — the questions below could not run"
            )
            break
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
    return GradeReport(str(submission), results, note=note, setup_error=setup_error)


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


@dataclass(frozen=True)
class Mistake:
    """A known-wrong answer: the lab's solution with ``right`` (found exactly once in the lab's .py) replaced by
    ``wrong``. Graded, it must score 0 on exactly the questions ``breaks`` and keep every other question's points,
    each broken question failing with one of ``errors`` (a test's assertion, or the mistake's own crash; not a typo's
    NameError or SyntaxError)."""

    name: str
    right: str
    wrong: str
    breaks: frozenset[str]
    errors: tuple[str, ...] = MISTAKE_ERRORS


def mistakes_file(lab: str | Path) -> Path:
    """Where ``lab``'s known-wrong answers live: ``labs/mistakes/<lab name>.toml``."""
    lab = Path(lab)
    return lab.parent / "mistakes" / f"{lab.stem}.toml"


def load_mistakes(lab: str | Path) -> list[Mistake]:
    """``lab``'s known-wrong answers, from ``mistakes_file(lab)``: ``[[mistake]]`` tables with ``name``, ``right``,
    ``wrong``, ``breaks`` (a list of grade_ids) and optionally ``errors``. No file: no mistakes."""
    path = mistakes_file(lab)
    if not path.exists():
        return []
    try:
        entries = tomllib.loads(path.read_text())["mistake"]
    except (tomllib.TOMLDecodeError, KeyError) as err:
        raise ValueError(f"{path}: not a list of [[mistake]] tables ({err})") from err
    mistakes, keys = [], {"name", "right", "wrong", "breaks", "errors"}
    for i, entry in enumerate(entries):
        missing, unknown = {"name", "right", "wrong", "breaks"} - set(entry), set(entry) - keys
        if missing or unknown or not entry.get("breaks"):
            raise ValueError(
                f"{path}: mistake {i + 1} ({entry.get('name', '?')!r}) needs name, right, wrong and a non-empty "
                f"breaks list (missing {sorted(missing)}, unknown {sorted(unknown)})"
            )
        errors = tuple(entry.get("errors", MISTAKE_ERRORS))
        mistakes.append(Mistake(entry["name"], entry["right"], entry["wrong"], frozenset(entry["breaks"]), errors))
    names = [m.name for m in mistakes]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: two mistakes share a name; names must be unique")
    return mistakes


@dataclass
class MistakeResult:
    mistake: Mistake
    ok: bool
    summary: str
    report: GradeReport | None = field(default=None, repr=False)


def check_mistake(lab: str | Path, mistake: Mistake, timeout: int = 120) -> MistakeResult:
    """Grade the solution with ``mistake`` put in; ok when it loses exactly the points of ``mistake.breaks``."""
    lab = Path(lab).with_suffix(".py")
    source = lab.read_text()
    count = source.count(mistake.right)
    if count != 1:
        return MistakeResult(mistake, False, f"its right text occurs {count} times in {lab.name}, not once: update it")
    questions = {_grade_meta(c)["grade_id"]: _points(c) for c in read_notebook(lab).cells if is_graded(c)}
    if not mistake.breaks <= set(questions):
        return MistakeResult(mistake, False, f"breaks unknown questions {sorted(mistake.breaks - set(questions))}")
    with tempfile.TemporaryDirectory() as tmp:
        submission = Path(tmp) / lab.name
        submission.write_text(source.replace(mistake.right, mistake.wrong))
        report = grade(lab, submission, timeout)
    lost = {r.grade_id for r in report.results if r.earned == 0}
    expected_loss = sum(questions[q] for q in mistake.breaks)
    wrong_error = [
        r.grade_id
        for r in report.results
        if r.grade_id in mistake.breaks and not r.status.startswith(tuple(f"failed: {e}" for e in mistake.errors))
    ]
    summary = f"loses {', '.join(sorted(lost)) or 'nothing'}: {report.earned:g}/{report.total:g}"
    if report.setup_error or report.note:
        return MistakeResult(mistake, False, f"{summary} ({report.setup_error or report.note})", report)
    if lost != mistake.breaks or report.total - report.earned != expected_loss:
        return MistakeResult(mistake, False, f"{summary}, expected to lose {', '.join(sorted(mistake.breaks))}", report)
    if wrong_error:
        return MistakeResult(
            mistake, False, f"{summary}, but {wrong_error} failed on another error than {mistake.errors}", report
        )
    return MistakeResult(mistake, True, summary, report)


def configure_nbgrader(c) -> None:
    """Settings for nbgrader's own ``nbgrader_config.py`` (``configure_nbgrader(get_config())``): cells tagged
    ``instructor`` are dropped from the released version, as ``build`` drops them."""
    from nbconvert.preprocessors import TagRemovePreprocessor
    from nbgrader.converters import GenerateAssignment

    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_cell_tags = {"instructor"}
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    c.GenerateAssignment.preprocessors = [TagRemovePreprocessor, *default]


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
    p_check.add_argument(
        "--no-mistakes", action="store_true", help="skip the known-wrong answers of labs/mistakes/ (a quicker check)"
    )
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
        return 1 if report.setup_error else 0
    failures = 0
    for lab in args.labs or all_labs():
        solved, untouched = check(lab, args.timeout)
        ok = solved.earned == solved.total > 0 and untouched.earned == 0
        failures += not ok
        print(
            f"{'ok  ' if ok else 'FAIL'} {lab}: solution {solved.earned:g}/{solved.total:g}, "
            f"student version {untouched.earned:g}/{untouched.total:g}",
            flush=True,
        )
        if not ok:
            print(solved.format(), untouched.format(), sep="\n")
        if args.no_mistakes:
            continue
        mistakes = load_mistakes(lab)
        if not mistakes:
            failures += 1
            print(f"FAIL {lab}: no known-wrong answers in {mistakes_file(lab)}")
        for mistake in mistakes:
            result = check_mistake(lab, mistake, args.timeout)
            failures += not result.ok
            print(f"  {'ok  ' if result.ok else 'FAIL'} mistake {mistake.name!r}: {result.summary}", flush=True)
            if not result.ok and result.report is not None:
                print(result.report.format())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
