"""Build the course as a book: a static HTML site of the whole course, from the committed, executed notebooks.

    python tools/book.py                   # -> book/_build/html/index.html
    python tools/book.py --out DIR         # -> DIR/html/index.html
    python tools/book.py --repo-url URL    # chapter pages link to URL/chapters/NN_name.ipynb (and .py)

Nothing is executed: the chapters are shown with the outputs committed in ``chapters/*.ipynb``. The command gathers
the pages into ``OUT/src`` and runs Sphinx (MyST-NB, ``book/conf.py``) on them, with every warning an error:

- ``book/*.md``: the front page (``book/index.md``, which shows the README's first part) and the guides. A link
  ``../X`` in them means the repository's file ``X`` (so they also read right on a code host); it becomes the link to
  X's page on the site (a chapter, a lab, the benchmarks, the contributors' guide), and an ``{include}`` of ``../X``
  includes the repository's file.
- ``chapters/NN_name.ipynb``: each chapter page says where its notebook and ``.py`` source are and how to open them
  in JupyterLab; an explorer's widget (there is no kernel on the site) gives way to a note saying the notebook has
  the interactive version, beside the static figure the chapter draws for it.
- ``labs/labNN_*.py``: each lab's student version, made by ``minilm.labs.build`` (no solutions, no hidden tests, no
  instructor cells) into ``OUT/src/_student``, is the lab's page and its download. The solutions never enter the site.
- ``benchmarks/README.md``: the benchmarks page.

Without ``--repo-url``, the links to the notebooks and sources are relative paths from the HTML into this checkout.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
DEFAULT_OUT = BOOK / "_build"
WIDGET = "application/vnd.jupyter.widget-view+json"
REPO_FILES = {"README.md": "_repo/README.md", "CONTRIBUTING.md": "_repo/CONTRIBUTING.md"}
REPO_FILES["data/README.md"] = "_repo/data/README.md"
PAGES_OF_FILES = {"benchmarks/README.md": "benchmarks.md"}  # repository files that are pages of their own
# The page that shows each repository file a book page links to
LINKED_PAGES = {**PAGES_OF_FILES, "CONTRIBUTING.md": "contributors.md", "data/README.md": "data.md"}


def chapters() -> list[Path]:
    return sorted(REPO.glob("chapters/[0-9][0-9]_*.ipynb"))


def labs() -> list[Path]:
    return sorted(REPO.glob("labs/lab*.py"))


# ---------------------------------------------------------------------------------------------- pages


def site_links(text: str, depth: int = 0) -> str:
    """Turn a book page's links into the repository (``../chapters/00_transformer.py``) into links to the site's
    pages (``chapters/00_transformer.ipynb``); ``depth`` is how deep the page sits below the site's root."""
    up = "../" * depth

    def page(match: re.Match) -> str:
        folder, stem = match.group(1), match.group(2)
        return f"]({up}{folder}/{stem}.ipynb{match.group(4) or ''})"

    text = re.sub(r"\]\(\.\./(chapters|labs)/([\w-]+)\.(py|ipynb)(#[\w-]+)?\)", page, text)
    for path, target in LINKED_PAGES.items():
        text = text.replace(f"](../{path}", f"]({up}{target}")
    for path, target in REPO_FILES.items():
        text = re.sub(rf"(```\{{include\}}\s+)\.\./{re.escape(path)}", rf"\g<1>{target}", text)
    return text


def explorer_note(path: str) -> dict:
    import nbformat

    return nbformat.v4.new_markdown_cell(
        '<div class="minilm-explorer-note">\n\n'
        f"**Interactive explorer.** The site has no kernel, so the explorer's sliders appear only in the notebook: "
        f"open `{path}` in JupyterLab to use it. Its static figure is on this page, beside it.\n\n</div>"
    )


def source_box(path: str, base: str) -> str:
    """The note under a chapter's title: where its notebook and source are, and how to open it."""
    stem = path.removesuffix(".ipynb")
    return (
        "\n\n````{admonition} Run this chapter\n:class: tip\n"
        f"This page is the notebook `{stem}.ipynb` as committed, with its outputs; building the site ran nothing. "
        f'Its files in the repository: <a href="{base}/{stem}.ipynb">{stem}.ipynb</a> (the notebook, executed) and '
        f'<a href="{base}/{stem}.py">{stem}.py</a> (its percent-format source, what you read and edit; '
        "jupytext pairs the two). To run it, set up the course as [the front page](../index.md) says, then from "
        "the repository's root:\n\n"
        f"```bash\n. .venv/bin/activate && jupyter lab {stem}.ipynb\n```\n````\n\n"
    )


def lab_box(lab: Path) -> str:
    name = lab.stem
    return (
        "\n\n````{admonition} This is the student version\n:class: tip\n"
        f"The lab as a student receives it, made by `python -m minilm.labs build labs/{name}.py` (it writes "
        f"`labs/release/{name}.ipynb` and `.py`): the solutions, hidden tests and instructor cells are left out. "
        f"Download it here, {{download}}`{name}.ipynb <../_student/{name}.ipynb>` or "
        f"{{download}}`{name}.py <../_student/{name}.py>`, and open it in JupyterLab from the repository's root, "
        "after the set-up on [the front page](../index.md):\n\n"
        f"```bash\n. .venv/bin/activate && jupyter lab labs/release/{name}.ipynb\n```\n\n"
        "Each cell that says `raise NotImplementedError()` is yours to write; the test cells below it check your "
        "answer ([the instructors' guide](../instructors.md) says how labs are graded).\n````\n\n"
    )


def under_title(nb, box: str):
    """Put ``box`` right under the notebook's ``# Title`` line (its first cell)."""
    first = nb.cells[0]
    if first.cell_type != "markdown" or not first.source.startswith("# "):
        raise ValueError("a chapter or lab must open with a markdown cell holding its '# Title'")
    title, _, rest = first.source.partition("\n")
    first.source = title + box + rest.lstrip("\n")
    return nb


def one_line_math(markdown: str) -> str:
    """Put each ``$$...$$`` on one line. JupyterLab takes the math out before it reads the Markdown; MyST reads the
    Markdown first, so a formula line that starts with ``+ `` or ``- `` would become a list item there."""
    return re.sub(r"\$\$(.+?)\$\$", lambda m: "$$" + " ".join(m.group(1).split("\n")) + "$$", markdown, flags=re.S)


def chapter_page(ipynb: Path, base: str):
    """The chapter as the site shows it: widgets out (a note in their place), the source box under the title."""
    import nbformat

    nb = nbformat.read(ipynb, as_version=4)
    nb.metadata.pop("widgets", None)
    rel = ipynb.relative_to(REPO).as_posix()
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = one_line_math(site_links(cell.source, depth=1).replace("](../chapters/", "]("))
        cells.append(cell)
        if cell.cell_type == "code" and any(WIDGET in out.get("data", {}) for out in cell.outputs):
            cell.outputs = [out for out in cell.outputs if WIDGET not in out.get("data", {})]
            cells.append(explorer_note(rel))
    nb.cells = cells
    return under_title(nb, source_box(rel, base))


# ---------------------------------------------------------------------------------------------- staging


class Stage:
    """Writes the site's sources into ``src``, touching only files whose content changed (so a rebuild re-reads only
    what changed), and removes what is no longer part of the site."""

    def __init__(self, src: Path):
        self.src, self.written = src, set()

    def write(self, rel: str, data: str | bytes) -> None:
        path = self.src / rel
        data = data.encode() if isinstance(data, str) else data
        self.written.add(path)
        if path.exists() and path.read_bytes() == data:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def prune(self) -> None:
        for path in sorted(self.src.rglob("*"), reverse=True):
            if path.is_file() and path not in self.written:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def stage(src: Path, html: Path, repo_url: str | None = None) -> Stage:
    """Gather every page of the site into ``src`` (the HTML will be written to ``html``)."""
    import nbformat

    sys.path.insert(0, str(REPO))
    from minilm.labs import build as build_student_version

    out = Stage(src)
    for page in sorted(BOOK.glob("*.md")):
        out.write(page.name, site_links(page.read_text(encoding="utf-8")))
    for path, rel in REPO_FILES.items():
        out.write(rel, (REPO / path).read_bytes())
    for path, rel in PAGES_OF_FILES.items():
        out.write(rel, site_links((REPO / path).read_text(encoding="utf-8")))

    base = repo_url.rstrip("/") if repo_url else os.path.relpath(REPO, html / "chapters").replace(os.sep, "/")
    for ipynb in chapters():
        out.write(f"chapters/{ipynb.name}", nbformat.writes(chapter_page(ipynb, base)))

    with tempfile.TemporaryDirectory() as tmp:
        for lab in labs():
            student = build_student_version(lab, tmp)  # minilm.labs' own builder: .ipynb and .py
            for made in (student, student.with_suffix(".py")):
                out.write(f"_student/{made.name}", made.read_bytes())
            nb = under_title(nbformat.read(student, as_version=4), lab_box(lab))
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = one_line_math(site_links(cell.source, depth=1).replace("](../labs/", "]("))
            out.write(f"labs/{student.name}", nbformat.writes(nb))
    out.prune()
    return out


def build(out: Path = DEFAULT_OUT, repo_url: str | None = None, quiet: bool = True) -> Path:
    """Stage the pages into ``out/src`` and build the site into ``out/html``; return its ``index.html``. Raises
    ``RuntimeError`` when Sphinx reports any warning (a broken link or reference, a missing page, ...)."""
    from sphinx.cmd.build import build_main

    out = Path(out).resolve()
    src, html = out / "src", out / "html"
    stage(src, html, repo_url)
    args = ["-b", "html", "-c", str(BOOK), "-d", str(out / "doctrees"), "-W", "--keep-going", "-j", "auto"]
    status = build_main([*args, *(["-q"] if quiet else []), str(src), str(html)])
    if status:
        raise RuntimeError(f"the book did not build cleanly (sphinx exit status {status}); see the warnings above")
    return html / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/book.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="build folder (default: book/_build)")
    parser.add_argument("--repo-url", help="base URL of the repository's files (default: relative links)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Sphinx's progress")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        index = build(args.out, args.repo_url, quiet=not args.verbose)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"built in {time.perf_counter() - start:.0f} s: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
