"""A GLUE-style markdown table over fine-tuning runs: a row per model and split, a column per task, its metrics.

Scores are shown x100 with one decimal, several metrics of a task joined by "/" (MRPC F1/acc, STS-B
Pearson/Spearman, SQuAD EM/F1, whose metrics are already percentages). A multi-task run fills a cell for each of its
tasks.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

from minilm.data.tasks import TASKS
from minilm.train.config import ConfigError

RESULTS_FILE = "results.json"
TITLES = {
    "sst2": "SST-2",
    "cola": "CoLA",
    "stsb": "STS-B",
    "mrpc": "MRPC",
    "rte": "RTE",
    "snli": "SNLI",
    "wnut17": "WNUT-17",
    "ud_pos": "UD POS",
    "squad2": "SQuAD 2.0",
    "copa": "COPA",
}
ABBREVIATIONS = {
    "accuracy": "acc",
    "f1": "F1",
    "macro_f1": "macro-F1",
    "matthews": "MCC",
    "pearson": "Pearson",
    "spearman": "Spearman",
    "entity_f1": "F1",
    "squad_em": "EM",
    "squad_f1": "F1",
}
PERCENT_METRICS = {"squad_em", "squad_f1"}  # the official SQuAD script reports percents


def find_results(paths: list[str]) -> list[dict]:
    """The results of each run directory given, or of every run directly inside a directory of runs."""
    results = []
    for path in map(Path, paths):
        files = [path / RESULTS_FILE] if (path / RESULTS_FILE).is_file() else sorted(path.glob(f"*/{RESULTS_FILE}"))
        if not files:
            raise ConfigError(f"{path} holds no {RESULTS_FILE}: give finished fine-tuning run directories")
        results += [r for r in map(_read_results, files) if r is not None]
    if not results:
        raise ConfigError(f"no readable {RESULTS_FILE} in {', '.join(paths)}: give finished fine-tuning runs")
    return results


def _read_results(file: Path) -> dict | None:
    """The results a run wrote, or None (with a warning) when the file is torn or is not a run's results."""
    try:
        results = json.loads(file.read_text(encoding="utf-8"))
        if isinstance(results, dict) and {"name", "split", "task", "metrics"} <= results.keys():
            return results
        problem = "it is not a fine-tuning run's results"
    except (ValueError, OSError) as err:
        problem = f"it is torn or unreadable ({err})"
    warnings.warn(f"{file} left out of the table: {problem}; rerun that fine-tuning run to score it", stacklevel=3)
    return None


def task_metrics(results: dict) -> dict[str, dict[str, float]]:
    """{task: its metrics} of a run's results: its one task's, or each task's of a multi-task run."""
    return results["metrics"] if "tasks" in results else {results["task"]: results["metrics"]}


def average(metrics: dict[str, dict[str, float]]) -> float:
    """One score for several tasks, as the GLUE average (and T5's): each task's metrics averaged into one score, x100
    (SQuAD's are percents already), then the tasks averaged; NaN if any score is (an undefined correlation)."""
    scores = [
        sum(v * (1 if name in PERCENT_METRICS else 100) for name, v in task.items()) / len(task)
        for task in metrics.values()
    ]
    return sum(scores) / len(scores)


def _cell(task: str, metrics: dict) -> str:
    values = []
    for name in TASKS[task].metrics if task in TASKS else metrics:
        value = metrics.get(name, math.nan)
        values.append("nan" if math.isnan(value) else f"{value * (1 if name in PERCENT_METRICS else 100):.1f}")
    return "/".join(values)


def _header(task: str) -> str:
    names = TASKS[task].metrics if task in TASKS else ()
    return f"{TITLES.get(task, task)} {'/'.join(ABBREVIATIONS.get(n, n) for n in names)}".strip()


def glue_table(results: list[dict]) -> str:
    """Markdown: one row per model (``name`` in results.json) and split scored, one column per task present, in
    registry order. When a model has several runs of one task on one split, the last one listed fills the cell.
    """
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for r in results:
        for task, metrics in task_metrics(r).items():
            rows.setdefault((r["name"], r["split"]), {})[task] = _cell(task, metrics)
    present = {task for r in results for task in task_metrics(r)}
    tasks = [t for t in TASKS if t in present] + sorted(present - TASKS.keys())
    lines = [
        "| model | split | " + " | ".join(_header(t) for t in tasks) + " |",
        "|---|---|" + "---:|" * len(tasks),
    ]
    for (name, split), cells in rows.items():
        lines.append(f"| {name} | {split} | " + " | ".join(cells.get(t, "-") for t in tasks) + " |")
    return "\n".join(lines)
