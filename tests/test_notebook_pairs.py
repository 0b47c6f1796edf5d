"""The pairing check catches drift between a .py and its .ipynb, unexecuted cells and a wrong kernel."""

import importlib.util
from pathlib import Path

import jupytext
import pytest

spec = importlib.util.spec_from_file_location("notebooks", Path(__file__).parents[1] / "tools" / "notebooks.py")
notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notebooks)

SOURCE = '# %% [markdown]\n# # Title\n\n# %% tags=["keep"]\nx = 1 + 1\nprint(x)\n'


@pytest.fixture()
def pair(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "REPO", tmp_path)
    py = tmp_path / "ch.py"
    py.write_text(SOURCE)
    notebooks.execute(py)
    return py


def test_an_executed_pair_is_clean(pair):
    assert notebooks.problems(pair) == []
    nb = jupytext.read(pair.with_suffix(".ipynb"))
    assert nb.cells[1].outputs[0]["text"] == "2\n"
    assert nb.cells[1].metadata["tags"] == ["keep"]
    assert "execution" not in nb.cells[1].metadata  # no timing noise in diffs


def test_editing_one_side_is_drift(pair):
    pair.write_text(pair.read_text().replace("1 + 1", "1 + 2"))
    assert any("differ from cell 1" in p for p in notebooks.problems(pair))


def test_changed_tags_are_drift(pair):
    pair.write_text(pair.read_text().replace('tags=["keep"]', 'tags=["other"]'))
    assert notebooks.problems(pair)


def test_unexecuted_cells_and_wrong_kernel_are_reported(pair):
    ipynb = pair.with_suffix(".ipynb")
    nb = jupytext.read(ipynb)
    nb.cells[1].execution_count, nb.cells[1].outputs = None, []
    nb.metadata["kernelspec"]["name"] = "other"
    jupytext.write(nb, ipynb)
    found = " ".join(notebooks.problems(pair))
    assert "no stored output" in found and "not 'python3'" in found


def test_a_missing_notebook_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "REPO", tmp_path)
    py = tmp_path / "alone.py"
    py.write_text(SOURCE)
    assert "is missing" in notebooks.problems(py)[0]


def test_re_executing_keeps_the_ids_of_unchanged_cells(tmp_path):
    ipynb = tmp_path / "x.ipynb"
    old = jupytext.reads("# %%\nx = 1\n\n# %%\nx = 1\n\n# %%\nprint(x)\n", fmt="py:percent")
    jupytext.write(old, ipynb)
    new = jupytext.reads("# %%\nx = 1\n\n# %%\nx = 1\n\n# %%\nprint(x + 1)\n", fmt="py:percent")
    notebooks.keep_cell_ids(new, ipynb)
    assert [c.id for c in new.cells[:2]] == [c.id for c in old.cells[:2]]  # twins keep their ids, in order
    assert new.cells[2].id != old.cells[2].id  # an edited cell is a new cell


def test_an_edit_made_while_it_runs_is_kept_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "REPO", tmp_path)
    py = tmp_path / "busy.py"
    # the running notebook stands in for an author saving the .py mid-run (the kernel runs in the .py's folder)
    cell = 'from pathlib import Path\n\nme = Path("busy.py")\n_ = me.write_text(me.read_text() + "1\\n")\n'
    py.write_text("# %%\n" + cell)
    with pytest.raises(SystemExit, match="changed while it ran"):
        notebooks.execute(py)
    assert py.read_text().endswith("1\n") and not py.with_suffix(".ipynb").exists()
