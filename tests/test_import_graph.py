"""No module of minilm imports one that imports it back (tools/import_graph.py finds the cycles)."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
import_graph = importlib.util.module_from_spec(spec)
sys.modules["import_graph"] = import_graph
spec.loader.exec_module(import_graph)


def test_minilm_has_no_import_cycle():
    assert import_graph.cycles(import_graph.graph()) == []


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    package = tmp_path / "minilm"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "__init__.py").write_text("from .a import A\n")
    (package / "models" / "a.py").write_text("def load():\n    from minilm.models.b import helper\n")
    (package / "models" / "b.py").write_text("from minilm.models import a\n")
    (package / "models" / "c.py").write_text("from . import b\n")  # imports b, nothing imports it back
    edges = import_graph.graph(tmp_path)
    assert edges["minilm.models.c"] == {"minilm.models.b"}
    assert import_graph.cycles(edges) == [["minilm.models.a", "minilm.models.b"]]
